"""acc-launch's Python package, from its wheel: the hook's public API, importable anywhere.

  import acc_launch
  acc_launch.beat()                                   # a sign of life, e.g. once per step
  with acc_launch.section("checkpoint", timeout=600): # a named section with its own deadline
      save(...)

Under acc-launch, the hook the launcher puts on the workers' PYTHONPATH (its run directory's
acc_launch.py) is imported instead of this package, and writes the worker's progress file. Anywhere
else (plain python, torchrun, a notebook) every function here does nothing, so a script that beats
runs unchanged under any launcher. The implementation is that same hook, copied into the wheel as
acc_launch/_hook.py when the wheel is built (python/acc_build_backend.py): one API, never two.

`python -m acc_launch ...` runs the acc-launch command the wheel installed.
"""
from acc_launch._hook import *  # noqa: F401,F403 (the hook's __all__ is the public API)
from acc_launch._hook import __all__
from acc_launch._version import __version__
