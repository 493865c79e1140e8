#!/usr/bin/env python3
# fakepython.py - stands in for the GPU machine's python3 in the tests of
# scripts/gpu-validate: answers its torch probe as if a GPU were there and
# "runs" scripts/torch/*.py by printing their output conventions (and,
# under VMEM_TRACE, writing a synthetic trace), so the plumbing (runs,
# comparisons, trace summaries, report, archive) is tested without a GPU.
# FAKE_DIFFER=SUBSTRING makes the vmem runs whose environment or
# arguments contain SUBSTRING print a different last loss; FAKE_NONDET=1
# makes the transformer's losses change from run to run.
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
	if len(sys.argv) > 2 and sys.argv[1] == '-c':
		print(json.dumps({'torch': '2.11.0+fake', 'cuda': '13.0', 'cudnn': 91000,
				  'available': True, 'gpu': 'Fake GPU'}))
		return 0
	script = os.path.basename(sys.argv[1])
	args = sys.argv[2:]
	if script in ('bandwidth.py', 'vmm_cost.py'):
		print('%s: fake measurement' % script)
		print(json.dumps({'fake': True}))
		return 0
	under_vmem = 'VMEM_POLICY' in os.environ
	losses = [6.9, 6.8, 6.7, 6.6]
	differ = os.environ.get('FAKE_DIFFER')
	if under_vmem and differ and (differ in ' '.join(args) or
				       any(differ in '%s=%s' % kv for kv in os.environ.items()
						   if kv[0] != 'FAKE_DIFFER')):
		losses[-1] = 6.600000000000001
	if os.environ.get('FAKE_NONDET') and script == 'transformer_block.py':
		losses[0] += os.getpid() * 1e-12   # an oracle that does not repeat itself
	if os.environ.get('VMEM_TRACE'):
		import tracegen
		tracegen.vgg16_trace(os.environ['VMEM_TRACE'], iters=3)
	for i, v in enumerate(losses):
		print('iter %d loss %r hex %s ms 10.0' % (i, v, v.hex()))
	print(json.dumps({'losses': losses, 'loss_hex': [v.hex() for v in losses],
			  'checksum_hex': (1.5).hex(), 'items_per_s': 100.0,
			  'iter_ms': [12.0, 10.0, 10.0, 10.0] + [10.0] * 11,
			  'max_memory_allocated': 3 << 30, 'max_memory_reserved': 4 << 30,
			  'error': None, 'env': {k: v for k, v in os.environ.items() if k.startswith('VMEM_')}}))
	return 0


if __name__ == '__main__':
	sys.exit(main())
