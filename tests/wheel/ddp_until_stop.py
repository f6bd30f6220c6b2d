"""An unmodified DDP training script (nothing of acc-launch in it): a small model on CPU with
Gloo, one DDP step after another (each an all_reduce of the gradients) until the file STOP exists
(rank 0 looks; the ranks agree each step) or MAX_STEPS. Prints RESULT with the world size, the
steps and a checksum of rank 0's parameters. Usage: ddp_until_stop.py STOP MAX_STEPS"""
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main():
    stop, max_steps = sys.argv[1], int(sys.argv[2])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = 0
    for steps in range(1, max_steps + 1):
        x = torch.full((4, 8), float(rank + 1))
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
        done = torch.tensor([1.0 if rank == 0 and os.path.exists(stop) else 0.0])
        dist.all_reduce(done)
        if done.item() > 0:
            break
        time.sleep(0.02)
    checksum = sum(p.sum().item() for p in model.parameters())
    if rank == 0:
        print("RESULT world=%d steps=%d checksum=%.4f torch=%s" % (
            dist.get_world_size(), steps, checksum, torch.__version__.split("+")[0]))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
