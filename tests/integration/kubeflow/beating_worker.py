"""A worker that beats STEPS times, SECONDS apart, and gives the run's total: rank 0 says TOTAL,
any other rank 999 (so a post with 999 would come from a node other than 0). Before its beat
number WAIT_AT, rank 0 waits (up to 60 s) for the file GO. No torch.
The step and the total go in through acc_launch.beat(step=, total=).
Usage: beating_worker.py STEPS TOTAL SECONDS WAIT_AT GO"""
import os
import sys
import time

import acc_launch


def main():
    steps, total, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    wait_at, go = int(sys.argv[4]), sys.argv[5]
    rank = int(os.environ["RANK"])
    for step in range(1, steps + 1):
        if rank == 0 and step == wait_at:
            deadline = time.monotonic() + 60
            while not os.path.exists(go) and time.monotonic() < deadline:
                time.sleep(0.05)
        time.sleep(seconds)
        acc_launch.beat(step=step, total=total if rank == 0 else 999)


if __name__ == "__main__":
    main()
