"""A worker that imports the acc_launch package and beats: one beat per 0.05 s step until the file
STOP exists or MAX_STEPS. No PyTorch (the Debian 12 root has none). Prints its rank and steps.
Usage: beat_until_stop.py STOP MAX_STEPS"""
import os
import sys
import time

import acc_launch


def main():
    stop, max_steps = sys.argv[1], int(sys.argv[2])
    steps = 0
    for steps in range(1, max_steps + 1):
        time.sleep(0.05)
        acc_launch.beat()
        if os.path.exists(stop):
            break
    print("rank %s beat %d times" % (os.environ["RANK"], steps))


if __name__ == "__main__":
    main()
