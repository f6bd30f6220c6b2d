"""Rank 1 opens a "checkpoint" section with a 2 s timeout and never leaves it; the other ranks
wait for it in an all_reduce. Usage: section_overrun.py MARKER (a word for the test to find the
processes by)."""
import time

import acc_launch
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 1:
    with acc_launch.section("checkpoint", timeout=2):
        time.sleep(3600)  # the checkpoint that never ends
dist.all_reduce(torch.ones(1))
