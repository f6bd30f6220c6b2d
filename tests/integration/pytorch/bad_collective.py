"""Rank 1 calls all_reduce with a bad argument (a list, not a tensor) after joining a Gloo group;
the error comes from inside torch.distributed, through acc-launch's recorder when it is on."""
import os

import torch.distributed as dist


def reduce_the_wrong_thing():
    dist.all_reduce([1, 2, 3])  # the user's line a traceback must show


def main():
    dist.init_process_group("gloo")
    if os.environ["RANK"] == "1":
        reduce_the_wrong_thing()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
