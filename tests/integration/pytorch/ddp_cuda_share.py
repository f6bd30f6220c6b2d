"""A 1-rank NCCL DDP job on the GPU (scripts/gpu-check.sh): DDP's gradient all_reduces, made by its
C++ Reducer, are counted in the rank's time in collectives from DDP's own CUDA timing, at the
iterations PyTorch samples (the first ten, then one in 100). Reads its own progress file at the
end and prints what it holds."""
import mmap
import os
import struct

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("nccl")
torch.cuda.set_device(0)
model = DistributedDataParallel(torch.nn.Sequential(
    *[torch.nn.Linear(2048, 2048) for _ in range(4)]).cuda(), device_ids=[0])
optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
x = torch.randn(256, 2048, device="cuda")
for _ in range(150):
    model(x).square().mean().backward()
    optimizer.step()
    optimizer.zero_grad()
torch.cuda.synchronize()
with open(os.environ["ACC_PROGRESS_FILE"], "rb") as f:
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
started, in_collective = struct.unpack_from("<Q", m, 32)[0], struct.unpack_from("<q", m, 72)[0]
ops = [m[256 + i * 128 + 64:256 + i * 128 + 80].rstrip(b"\0") for i in range(min(started, 512))]
records = ops.count(b"ddp_all_reduce")
print("ddp_all_reduce records %d, in collectives %.3f s" % (records, in_collective / 1e9),
      flush=True)
assert records >= 10 and in_collective > 0, (records, in_collective)
dist.destroy_process_group()
