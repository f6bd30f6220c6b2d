"""Every rank computes silently for SECONDS (no line, no beat, no collective), then one
all_reduce: a long step, not a hang. Usage: silent_compute.py SECONDS"""
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
end = time.monotonic() + float(sys.argv[1])
total = 0
while time.monotonic() < end:
    total += sum(range(10000))
value = torch.ones(1)
dist.all_reduce(value)
print(f"sum {value.item():.0f}", flush=True)
dist.destroy_process_group()
