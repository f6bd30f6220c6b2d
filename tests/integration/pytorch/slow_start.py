"""A start-up longer than the stall timeout, silent: import torch (seconds with four ranks on a
few cores), then a pause as a model loading from a slow file system would make, then a few
all_reduces. Not a hang: the stall clock starts at a rank's first progress."""
import time

import torch
import torch.distributed as dist

time.sleep(4)  # longer than the test's --stall_timeout 3, whatever the import took
dist.init_process_group("gloo")
value = torch.ones(1)
for _ in range(3):
    dist.all_reduce(value)
print(f"sum {value.item():.0f}", flush=True)
dist.destroy_process_group()
