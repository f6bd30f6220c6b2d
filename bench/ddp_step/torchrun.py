#!/usr/bin/python3
"""torchrun (torch.distributed.run) as the Python DDP peer of the bench, runnable on Debian's
python3-torch 1.13 under Python 3.11.

There, Std.from_str converts a redirect value by iterating over the Std IntFlag, and Python 3.11
iterates a flag's canonical (one-bit) members only, skipping NONE (0) and ALL (3): the default
`--redirects 0` becomes None and torchrun dies in to_map with "'NoneType' object has no
attribute 'get'". Where that is so, the values are converted with Std(int) instead; a torch that
parses them right runs unpatched."""
import re
import sys

from torch.distributed.elastic.multiprocessing import api
from torch.distributed.run import main


def _std_from_str(cls, value):
    if re.match(api._VALUE_REGEX, value):
        return cls(int(value))
    if re.match(api._MAPPING_REGEX, value):
        pairs = (item.split(":") for item in value.split(","))
        return {int(rank): cls(int(std)) for rank, std in pairs}
    return _original_from_str(cls, value)  # raises the ValueError naming the expected forms


_original_from_str = api.Std.from_str.__func__
if api.Std.from_str("0") is None:
    api.Std.from_str = classmethod(_std_from_str)

if __name__ == "__main__":
    sys.exit(main())
