# scriptmod.py - loads one of scripts/ (files without a .py suffix) as a
# module, for the tests that call its functions directly.
import importlib.machinery
import importlib.util


def load_script(path, name):
	"""The script at `path`, executed as module `name` (its main() not run:
	the scripts guard it with __name__ == '__main__')."""
	loader = importlib.machinery.SourceFileLoader(name, path)
	spec = importlib.util.spec_from_loader(name, loader)
	mod = importlib.util.module_from_spec(spec)
	loader.exec_module(mod)
	return mod
