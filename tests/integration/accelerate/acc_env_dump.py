"""env_dump.sh as a Python module, for the cases that start `python -m MODULE` (--module):
writes the worker's environment and its arguments into $ACC_ENV_DUMP/rank<RANK>."""
import os
import sys

out = os.path.join(os.environ["ACC_ENV_DUMP"], "rank" + os.environ.get("RANK", "none"))
with open(out + ".argv", "wb") as f:
    f.write(b"".join(os.fsencode(a) + b"\0" for a in ["-m", __spec__.name] + sys.argv[1:]))
with open(out + ".env", "wb") as f:
    f.write(b"".join(os.fsencode(k) + b"=" + os.fsencode(v) + b"\0" for k, v in os.environ.items()))
