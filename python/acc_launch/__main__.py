"""`python -m acc_launch ARGS...`: runs the acc-launch binary the wheel installed with ARGS.

The process becomes the binary (exec), so its exit status, signals and start-up are the
launcher's own; Python is only the way in.
"""
import os
import shutil
import sys
import sysconfig


def _binary():
    """The acc-launch of this installation: the scripts directory beside the site-packages that
    holds this package (<prefix>/lib/pythonX.Y/site-packages -> <prefix>/bin, the same for a
    venv, the system and --user), then the interpreter's own scripts directories, then PATH."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "..", "..", "..", "..", "bin", "acc-launch"),
                  os.path.join(sysconfig.get_path("scripts"), "acc-launch")]
    try:
        candidates.append(os.path.join(sysconfig.get_path("scripts", os.name + "_user"),
                                       "acc-launch"))
    except KeyError:
        pass
    candidates.append(shutil.which("acc-launch") or "")
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK) and os.path.isfile(candidate):
            return os.path.realpath(candidate)
    return None


def main():
    binary = _binary()
    if binary is None:
        sys.stderr.write("python -m acc_launch: the acc-launch binary of this installation is "
                         "missing; reinstall the wheel (pip install --force-reinstall "
                         "acc-launch)\n")
        return 1
    os.execv(binary, [binary] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
