"""A synchronous job with slow ranks: STEPS steps of 0.05 s of work and a Gloo all_reduce, where
the ranks in SLOW (one rank, or a comma list: the ranks of a slow node) work SLOW_SECONDS per step
instead. Ends 0.
Usage: straggler.py STEPS SLOW SLOW_SECONDS"""
import sys
import time

import torch
import torch.distributed as dist


def compute(seconds):
    time.sleep(seconds)  # the step's work: its length is what counts, not its CPU


def main():
    steps, slow_seconds = int(sys.argv[1]), float(sys.argv[3])
    slow = {int(rank) for rank in sys.argv[2].split(",")}
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    for step in range(steps):
        compute(slow_seconds if rank in slow else 0.05)
        dist.all_reduce(torch.ones(4))
        if step % 10 == 0:
            print(f"step {step}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
