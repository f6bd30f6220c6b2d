"""A 2-rank Gloo job for the TorchX component's test: each rank all_reduces rank+1 and prints
'rank R of W: all_reduce S, launcher L', L being 'acc-launch' where the launcher gave the worker
ACC_PROGRESS_FILE (acc-launch does for every worker, torchrun never) and the worker's parent
process is acc-launch itself, else what the parent is. Rank $EXIT_RANK, if set, then raises
ValueError in a function under torch.distributed.elastic's @record (its error file)."""
import os

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    total = torch.tensor([rank + 1.0])
    dist.all_reduce(total)
    with open("/proc/%d/comm" % os.getppid()) as f:
        parent = f.read().strip()
    launcher = "acc-launch" if os.environ.get("ACC_PROGRESS_FILE") and parent == "acc-launch" else (
        "parent %s, ACC_PROGRESS_FILE %s" % (parent, os.environ.get("ACC_PROGRESS_FILE", "unset")))
    print("rank %d of %d: all_reduce %g, launcher %s" % (rank, world, total.item(), launcher),
          flush=True)
    dist.destroy_process_group()
    if os.environ.get("EXIT_RANK") == str(rank):
        raise ValueError("rank %d gives up on purpose" % rank)


main()
