"""A PyTorch job that keeps its ranks talking: STEPS Gloo all_reduces, one every 20 ms, with
rank 0 printing 'step N'. Prints RESULT on rank 0 when every step agreed.
  allreduce_loop.py [STEPS [STEPS_AFTER_RESTART]]
STEPS_AFTER_RESTART (default STEPS) is the count once the launcher restarted the workers
(TORCHELASTIC_RESTART_COUNT > 0): a test can keep the first attempt going until it ends it."""
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    if int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0 and len(sys.argv) > 2:
        steps = int(sys.argv[2])
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    for step in range(steps):
        value = torch.tensor([float(rank + step)])
        dist.all_reduce(value)
        expected = sum(r + step for r in range(world))
        assert value.item() == expected, (step, value.item(), expected)
        if rank == 0:
            print(f"step {step}", flush=True)
        time.sleep(0.02)
    if rank == 0:
        print(f"RESULT world={world} steps={steps}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
