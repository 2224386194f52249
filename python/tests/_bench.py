"""A script of bench/ loaded as a module, for the tests of its pure parts."""
import importlib.util
import os

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")


def load_bench(name):
    """bench/<name>.py, executed as module `name`."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCH, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
