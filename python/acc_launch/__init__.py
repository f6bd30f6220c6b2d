"""acc-launch's Python package: the hook's public API and checkpoints in the launcher's memory.

  import acc_launch
  acc_launch.beat()                                   # a sign of life, e.g. once per step
  with acc_launch.section("checkpoint", timeout=600): # a named section with its own deadline
      save(...)
  acc_launch.checkpoint.save(state_dict, checkpoint_id=PATH)   # torch.distributed.checkpoint's
  acc_launch.checkpoint.load(state_dict, checkpoint_id=PATH)   # save and load, in memory

The same files are the wheel's package and what the launcher installs into each run directory,
first on its Python workers' PYTHONPATH (so a worker imports the launcher's own copy):
  _hook.py       beat, section, the recorder of torch.distributed's calls, the warm workers'
                 standby; under acc-launch it writes the worker's progress file
  checkpoint.py  save and load (docs/checkpoints.md)
The wheel has one more module, not installed into run directories:
  torchx.py      acc_launch.torchx.ddp, TorchX's dist.ddp run by acc-launch (docs/clusters.md)
Outside acc-launch (plain python, torchrun, a notebook) beat and section do nothing and
checkpoint's calls are torch.distributed.checkpoint's own, so a script runs unchanged under any
launcher.

`python -m acc_launch ...` runs the acc-launch command the wheel installed.
"""
from acc_launch._hook import *  # noqa: F401,F403 (the hook's __all__ is the public API)
from acc_launch._hook import __all__
try:
    from acc_launch._version import __version__  # the wheel's and the run directory's
except ImportError:
    __version__ = "0+source"  # the source tree (python/), as the package's tests import it

__all__ = __all__ + ["checkpoint"]


def __getattr__(name):
    """acc_launch.checkpoint, imported at its first use (not by every worker's hook)."""
    if name == "checkpoint":
        import importlib
        return importlib.import_module("acc_launch.checkpoint")
    raise AttributeError("module 'acc_launch' has no attribute %r" % name)
