#!/usr/bin/env python3
# Tests of scripts/vmem-run: the environment a command sees (VMEM_* and
# LD_PRELOAD, checked by running `env` through it), option validation,
# where libvmem.so is looked for, and exit statuses.
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.environ.get('VMEM_SCRIPTS_DIR') or os.path.join(HERE, '..', '..', '..', 'scripts')
VMEM_RUN = os.path.join(SCRIPTS, 'vmem-run')


def make_stub(directory):
	"""An empty shared library to preload: the one meson built, else one
	compiled here, else an empty file (ld.so then warns but runs)."""
	built = os.environ.get('VMEM_TEST_STUB_LIB')
	path = os.path.join(directory, 'libstub.so')
	if built and os.path.isfile(built):
		shutil.copy(built, path)
		return path
	cc = shutil.which('cc')
	if cc and subprocess.call([cc, '-shared', '-fPIC', '-o', path, '-x', 'c', os.devnull],
				  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
		return path
	open(path, 'wb').close()
	return path


class VmemRunCase(unittest.TestCase):
	def setUp(self):
		self.tmp = tempfile.TemporaryDirectory()
		self.dir = self.tmp.name
		self.stub = make_stub(self.dir)
		self.env = {k: v for k, v in os.environ.items()
			    if not k.startswith('VMEM_') and k != 'LD_PRELOAD'}

	def tearDown(self):
		self.tmp.cleanup()

	def run_tool(self, args, script=VMEM_RUN, env=None, cwd=None):
		p = subprocess.run([sys.executable, script] + list(args), stdout=subprocess.PIPE,
				   stderr=subprocess.PIPE, universal_newlines=True,
				   env=self.env if env is None else env, cwd=cwd or self.dir)
		self.assertNotIn('Traceback', p.stderr)
		return p.returncode, p.stdout, p.stderr

	def env_of(self, args, **kw):
		rc, out, err = self.run_tool(list(args) + ['--', 'env'], **kw)
		self.assertEqual(rc, 0, 'vmem-run %s: exit %d\n%s' % (args, rc, err))
		return dict(line.split('=', 1) for line in out.splitlines() if '=' in line)

	def assertUsageError(self, args, *fragments):
		rc, out, err = self.run_tool(args)
		self.assertEqual(rc, 2, 'vmem-run %s: expected exit 2, got %d\nstderr:\n%s' % (args, rc, err))
		for f in fragments:
			self.assertIn(f, err)


class EnvironmentTest(VmemRunCase):
	def test_options_set_vmem_variables_and_preload(self):
		env = self.env_of(['--lib', self.stub, '--policy', 'all', '--device-limit', '2G',
				   '--host-limit', '512M', '--trace', 'run.jsonl', '--stats',
				   '--log', 'info', '--conv-algo', 'perf', '--workspace', 'wd',
				   '--workspace-limit', '64M', '--microbatch', 'pow2', '--cache', 'c.txt',
				   '--liveness', 'eager', '--prefetch', 'timed', '--dyn-trials', '2',
				   '--wr-slack', '5'])
		want = {
			'VMEM_POLICY': 'all',
			'VMEM_DYN_TRIALS': '2',
			'VMEM_WR_SLACK': '5',
			'VMEM_LIVENESS': 'eager',
			'VMEM_PREFETCH': 'timed',
			'VMEM_DEVICE_LIMIT': str(2 << 30),
			'VMEM_HOST_LIMIT': str(512 << 20),
			'VMEM_TRACE': os.path.join(os.path.realpath(self.dir), 'run.jsonl'),
			'VMEM_STATS': '1',
			'VMEM_LOG': 'info',
			'VMEM_CONV_ALGO': 'perf',
			'VMEM_WORKSPACE': 'wd',
			'VMEM_WORKSPACE_LIMIT': str(64 << 20),
			'VMEM_MICROBATCH': 'pow2',
			'VMEM_CACHE': os.path.join(os.path.realpath(self.dir), 'c.txt'),
			'LD_PRELOAD': os.path.abspath(self.stub),
		}
		got = {k: env.get(k) for k in want}
		got['VMEM_TRACE'] = got['VMEM_TRACE'] and os.path.realpath(got['VMEM_TRACE'])
		got['VMEM_CACHE'] = got['VMEM_CACHE'] and os.path.realpath(got['VMEM_CACHE'])
		self.assertEqual(got, want)

	def test_options_not_given_leave_the_environment_alone(self):
		self.env['VMEM_POLICY'] = 'conv'
		env = self.env_of(['--lib', self.stub])
		self.assertEqual(env.get('VMEM_POLICY'), 'conv')
		self.assertNotIn('VMEM_DEVICE_LIMIT', env)
		self.assertNotIn('VMEM_STATS', env)

	def test_libvmem_goes_first_in_an_existing_preload(self):
		other = make_stub(tempfile.mkdtemp(dir=self.dir))
		self.env['LD_PRELOAD'] = other
		env = self.env_of(['--lib', self.stub])
		self.assertEqual(env['LD_PRELOAD'], '%s:%s' % (os.path.abspath(self.stub), other))
		self.env['LD_PRELOAD'] = self.stub
		env = self.env_of(['--lib', self.stub])
		self.assertEqual(env['LD_PRELOAD'], os.path.abspath(self.stub), 'listed twice')

	def test_sizes_accept_binary_suffixes(self):
		cases = {'100': 100, '64K': 64 << 10, '64k': 64 << 10, '1.5G': 3 << 29,
			 '8GiB': 8 << 30, '2T': 2 << 40, '512MB': 512 << 20, '4096B': 4096}
		for text, value in cases.items():
			env = self.env_of(['--lib', self.stub, '--device-limit', text])
			self.assertEqual(env['VMEM_DEVICE_LIMIT'], str(value), text)

	def test_exit_status_is_the_commands(self):
		rc, _, _ = self.run_tool(['--lib', self.stub, 'sh', '-c', 'exit 7'])
		self.assertEqual(rc, 7)
		rc, out, _ = self.run_tool(['--lib', self.stub, '--', 'sh', '-c', 'echo "$0 $1"', 'a', '--policy'])
		self.assertEqual((rc, out), (0, 'a --policy\n'), 'arguments after the command are its own')

	def test_print_env_does_not_run_the_command(self):
		rc, out, _ = self.run_tool(['--lib', self.stub, '--policy', 'none', '--print-env',
					    'sh', '-c', 'exit 9'])
		self.assertEqual(rc, 0)
		self.assertIn('VMEM_POLICY=none\n', out)
		self.assertIn('command: sh -c exit 9', out)


class ValidationTest(VmemRunCase):
	def test_bad_policy_names_the_value(self):
		self.assertUsageError(['--lib', self.stub, '--policy', 'fast', 'true'],
				      "--policy: 'fast' is not one of none, all, conv, dyn")

	def test_bad_sizes_name_the_value(self):
		for bad in ('12Q', '-1G', 'G', '1.5.2G', '8iB', '', '0'):
			rc, _, err = self.run_tool(['--lib', self.stub, '--device-limit=' + bad, 'true'])
			self.assertEqual(rc, 2, bad)
			self.assertIn('--device-limit', err)
			self.assertIn(repr(bad), err)
		self.assertUsageError(['--lib', self.stub, '--host-limit', 'lots', 'true'],
				      "--host-limit: 'lots' is not a size")

	def test_bad_log_level_and_choices(self):
		self.assertUsageError(['--lib', self.stub, '--log', 'verbose', 'true'],
				      "'verbose' is not one of error, warn, info, debug")
		self.assertUsageError(['--lib', self.stub, '--workspace', 'on', 'true'],
				      "'on' is not one of default, off, wr, wd")

	def test_bad_dyn_trials_name_the_value(self):
		for bad in ('-1', '101', 'two', '1.5'):
			self.assertUsageError(['--lib', self.stub, '--dyn-trials', bad, 'true'],
					      "--dyn-trials: %r: give a count of iterations from 0 to 100" % bad)

	def test_bad_wr_slack_names_the_value(self):
		for bad in ('-1', '101', 'one', '0.5'):
			self.assertUsageError(['--lib', self.stub, '--wr-slack', bad, 'true'],
					      "--wr-slack: %r: give a whole percentage from 0 to 100" % bad)

	def test_missing_command(self):
		self.assertUsageError(['--lib', self.stub], 'no command given')
		self.assertUsageError(['--lib', self.stub, '--'], 'no command given')

	def test_command_not_found_is_127(self):
		rc, _, err = self.run_tool(['--lib', self.stub, 'no-such-command-vmem'])
		self.assertEqual(rc, 127)
		self.assertIn('no-such-command-vmem: command not found', err)

	def test_trace_into_missing_directory(self):
		self.assertUsageError(['--lib', self.stub, '--trace', 'nodir/t.jsonl', 'true'],
				      'does not exist')

	def test_help_documents_every_option(self):
		rc, out, _ = self.run_tool(['--help'])
		self.assertEqual(rc, 0)
		for opt in ('--policy', '--device-limit', '--host-limit', '--trace', '--stats', '--log',
			    '--lib', '--conv-algo', '--workspace', '--workspace-limit', '--microbatch',
			    '--cache', '--print-env', 'VMEM_LIB', 'Exit status'):
			self.assertIn(opt, out)


class LibrarySearchTest(VmemRunCase):
	def layout(self, script_rel, lib_rel):
		"""A copy of vmem-run at ROOT/script_rel and the stub at ROOT/lib_rel."""
		root = tempfile.mkdtemp(dir=self.dir)
		script = os.path.join(root, script_rel)
		os.makedirs(os.path.dirname(script), exist_ok=True)
		shutil.copy(VMEM_RUN, script)
		lib = None
		if lib_rel:
			lib = os.path.join(root, lib_rel)
			os.makedirs(os.path.dirname(lib), exist_ok=True)
			shutil.copy(self.stub, lib)
		return script, lib

	def test_installed_layout_finds_lib_next_to_bindir(self):
		script, lib = self.layout('bin/vmem-run', 'lib/x86_64-linux-gnu/libvmem.so')
		env = self.env_of([], script=script)
		self.assertEqual(env['LD_PRELOAD'], lib)

	def test_source_tree_finds_lib_in_meson_build_dir(self):
		script, lib = self.layout('scripts/vmem-run', 'build-rel/interpose/libvmem.so')
		env = self.env_of([], script=script)
		self.assertEqual(env['LD_PRELOAD'], lib)

	def test_vmem_lib_and_lib_option(self):
		script, _ = self.layout('scripts/vmem-run', None)
		self.env['VMEM_LIB'] = self.stub
		self.assertEqual(self.env_of([], script=script)['LD_PRELOAD'], os.path.abspath(self.stub))
		d = tempfile.mkdtemp(dir=self.dir)
		shutil.copy(self.stub, os.path.join(d, 'libvmem.so'))
		self.assertEqual(self.env_of(['--lib', d], script=script)['LD_PRELOAD'],
				 os.path.join(d, 'libvmem.so'), '--lib DIR wins over VMEM_LIB')

	def test_not_found_says_how_to_point_at_it(self):
		script, _ = self.layout('scripts/vmem-run', None)
		rc, _, err = self.run_tool(['true'], script=script)
		self.assertEqual(rc, 2, err)
		for f in ('libvmem.so not found', '--lib PATH', 'VMEM_LIB=PATH', 'ninja -C build'):
			self.assertIn(f, err)
		self.assertEqual(len(err.strip().splitlines()), 1, err)

	def test_lib_option_that_does_not_exist(self):
		self.assertUsageError(['--lib', '/nonexistent/libvmem.so', 'true'],
				      '--lib /nonexistent/libvmem.so: no such file')


if __name__ == '__main__':
	unittest.main()
