#!/usr/bin/env python3
"""A plain PyTorch DDP script (gloo, env://) that runs unchanged under acc-launch or torchrun:

    acc-launch --nproc_per_node 2 --python /usr/bin/python3 examples/python/ddp_train.py --steps 20
    /usr/bin/python3 -m torch.distributed.run --nproc_per_node 2 examples/python/ddp_train.py

(--python names an interpreter that has torch; on Debian that is /usr/bin/python3.)

It trains a small MLP on synthetic data and prints, on rank 0, the final loss and a checksum of
the parameters (identical on every rank, which it checks).
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=16, help="samples per process and step")
    args = parser.parse_args()

    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(args.steps * args.batch * world, 8, generator=gen)
    y = x.sum(dim=1, keepdim=True).sin()

    loss = torch.tensor(0.0)
    for step in range(args.steps):
        start = (step * world + rank) * args.batch
        xb, yb = x[start:start + args.batch], y[start:start + args.batch]
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(xb), yb)
        loss.backward()
        opt.step()

    checksum = torch.stack([p.detach().sum() for p in model.parameters()]).sum()
    sums = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(sums, checksum.reshape(1))
    assert all(torch.equal(s, sums[0]) for s in sums), "ranks disagree on the parameters"
    if rank == 0:
        print(f"world {world} local_rank {local_rank}: final loss {loss.item():.6f} "
              f"param checksum {checksum.item():.6f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
