"""A synchronous job that beats: steps of 0.05 s of work and a Gloo all_reduce, each ended with
acc_launch.beat(), where rank SLOW works SLOW_SECONDS per step instead, until the file STOP
exists (rank 0 looks, and the ranks agree at each step) or after MAX_STEPS. Ends 0.
Usage: beating_job.py STOP SLOW SLOW_SECONDS MAX_STEPS"""
import os
import sys
import time

import acc_launch
import torch
import torch.distributed as dist


def main():
    stop, slow = sys.argv[1], int(sys.argv[2])
    slow_seconds, max_steps = float(sys.argv[3]), int(sys.argv[4])
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    for _ in range(max_steps):
        time.sleep(slow_seconds if rank == slow else 0.05)  # the step's work
        done = torch.tensor([1.0 if rank == 0 and os.path.exists(stop) else 0.0])
        dist.all_reduce(done)
        acc_launch.beat()
        if done.item() > 0:
            break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
