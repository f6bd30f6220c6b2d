"""A plain PyTorch DDP script that a launcher must restart: Gloo, init_process_group with env://,
a DDP model trained for 8 steps. In every attempt before the last (TORCHELASTIC_RESTART_COUNT
below FAILING_ATTEMPTS, the first argument), the last rank exits 1 at step 5, as a crashed worker
would. The attempt that does not fail prints, on rank 0, 'RESULT attempt=N world=W' and ends as
a user's script ends: destroy_process_group(), then a normal interpreter exit."""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel


def main():
    failing_attempts = int(sys.argv[1])
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.randn(16, 4, generator=torch.Generator().manual_seed(rank))
    for step in range(8):
        if step == 5 and rank == world - 1 and attempt < failing_attempts:
            print(f"rank {rank} fails in attempt {attempt}", flush=True)
            sys.exit(1)
        optimizer.zero_grad()
        F.mse_loss(model(data), data.sum(dim=1, keepdim=True)).backward()
        optimizer.step()
    total = torch.tensor([1.0])
    dist.all_reduce(total)
    assert total.item() == world, total
    if rank == 0:
        print(f"RESULT attempt={attempt} world={world}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
