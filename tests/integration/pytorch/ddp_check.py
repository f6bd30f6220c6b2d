"""An unmodified PyTorch DDP script: Gloo, init_process_group with env://, a few training steps,
an all_reduce check. Prints one RESULT line on rank 0 that is identical under any correct
launcher (torchrun, acc-launch) for the same world size."""
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel


def main():
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(1234)
    data = torch.randn(64, 8, generator=generator)
    target = data.sum(dim=1, keepdim=True)
    inputs, targets = data[rank::world], target[rank::world]
    for _ in range(5):
        optimizer.zero_grad()
        loss = F.mse_loss(ddp(inputs), targets)
        loss.backward()
        optimizer.step()

    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    assert total.item() == world * (world + 1) / 2, total

    checksum = torch.tensor([sum(p.double().sum().item() for p in model.parameters())],
                            dtype=torch.float64)
    everyone = [torch.zeros_like(checksum) for _ in range(world)]
    dist.all_gather(everyone, checksum)
    assert all(torch.equal(c, checksum) for c in everyone), everyone
    if rank == 0:
        print(f"RESULT world={world} all_reduce={total.item():g} "
              f"checksum={checksum.item():.12f} loss={loss.item():.8f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
