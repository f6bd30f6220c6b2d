"""A synchronous job with one slow rank: STEPS steps of 0.05 s of work and a Gloo all_reduce,
where rank SLOW works SLOW_SECONDS per step instead. Ends 0.
Usage: straggler.py STEPS SLOW SLOW_SECONDS"""
import sys
import time

import torch
import torch.distributed as dist


def compute(seconds):
    time.sleep(seconds)  # the step's work: its length is what counts, not its CPU


def main():
    steps, slow, slow_seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    for step in range(steps):
        compute(slow_seconds if rank == slow else 0.05)
        dist.all_reduce(torch.ones(4))
        if step % 10 == 0:
            print(f"step {step}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
