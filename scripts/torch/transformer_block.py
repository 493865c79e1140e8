#!/usr/bin/env python3
# scripts/torch/transformer_block.py - a small pre-norm transformer (token
# embedding, N blocks of attention + MLP, a vocabulary head) trained on
# seeded synthetic tokens with SGD.  Plain PyTorch, no vmem code; same
# output conventions as train_vision.py (per-iteration loss in full
# precision, tokens/s, max_memory_allocated, --json).
#
#   python3 transformer_block.py --layers 4 --batch 8 --seq 512 [--dtype bf16] [--json]
"""Train a small transformer on synthetic tokens (plain PyTorch)."""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (sets CUBLAS_WORKSPACE_CONFIG before torch loads)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Block(nn.Module):
	"""Pre-norm block: x + attn(ln(x)), then x + mlp(ln(x)), causal."""

	def __init__(self, d, heads, ff, attention):
		super().__init__()
		self.heads = heads
		self.attention = attention
		self.ln1 = nn.LayerNorm(d)
		self.qkv = nn.Linear(d, 3 * d)
		self.proj = nn.Linear(d, d)
		self.ln2 = nn.LayerNorm(d)
		self.fc1 = nn.Linear(d, ff)
		self.fc2 = nn.Linear(ff, d)

	def attend(self, x):
		b, s, d = x.shape
		q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
		if self.attention == 'sdpa':
			o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
		else:
			att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
			mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
			att = att.masked_fill(mask, float('-inf')).softmax(-1)
			o = att @ v
		return self.proj(o.transpose(1, 2).reshape(b, s, d))

	def forward(self, x):
		x = x + self.attend(self.ln1(x))
		return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Model(nn.Module):
	def __init__(self, vocab, d, heads, ff, layers, seq, attention):
		super().__init__()
		self.tok = nn.Embedding(vocab, d)
		self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
		self.blocks = nn.ModuleList(Block(d, heads, ff, attention) for _ in range(layers))
		self.ln = nn.LayerNorm(d)
		self.head = nn.Linear(d, vocab)

	def embed(self, tokens):
		return self.tok(tokens) + self.pos[:tokens.shape[1]]

	def forward(self, tokens):
		x = self.embed(tokens)
		for b in self.blocks:
			x = b(x)
		return self.head(self.ln(x))


def main():
	p = common.parser('Train a small transformer on seeded synthetic tokens '
			  '(plain PyTorch; put vmem under it with vmem-run).')
	p.add_argument('--layers', type=int, default=4)
	p.add_argument('--d-model', type=int, default=1024)
	p.add_argument('--heads', type=int, default=16)
	p.add_argument('--ff', type=int, default=4096)
	p.add_argument('--seq', type=int, default=512)
	p.add_argument('--vocab', type=int, default=32000)
	p.add_argument('--attention', choices=['sdpa', 'math'], default=None,
		       help='sdpa (F.scaled_dot_product_attention, the default where it exists) '
			    'or math (explicit matmul + softmax)')
	common.add_common_args(p, batch=8, iters=5)
	args = p.parse_args()
	if args.d_model % args.heads:
		sys.exit('transformer_block: error: --d-model %d is not a multiple of --heads %d'
			 % (args.d_model, args.heads))
	if args.attention is None:
		args.attention = 'sdpa' if hasattr(F, 'scaled_dot_product_attention') else 'math'
	dev = common.setup(args)

	model = Model(args.vocab, args.d_model, args.heads, args.ff, args.layers, args.seq,
		      args.attention).to(dev)
	model.train()
	g = torch.Generator().manual_seed(args.seed + 1)
	batches = []
	for _ in range(2):
		t = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=g)
		batches.append((t[:, :-1].contiguous().to(dev), t[:, 1:].contiguous().to(dev)))

	def step_loss(m, x, y):
		if args.checkpoint:
			h = common.checkpoint_sequential(list(m.blocks), args.checkpoint_segments, m.embed(x))
			logits = m.head(m.ln(h))
		else:
			logits = m(x)
		return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))

	extra = {'model': 'transformer', 'layers': args.layers, 'd_model': args.d_model,
		 'seq': args.seq, 'attention': args.attention, 'unit': 'tokens',
		 'params': sum(q.numel() for q in model.parameters())}
	return common.train(args, dev, model, batches, step_loss, args.batch * args.seq,
			    'transformer_block', extra)


if __name__ == '__main__':
	sys.exit(main())
