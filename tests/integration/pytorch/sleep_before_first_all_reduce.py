"""Rank STUCK sleeps before its first all_reduce, in which the others wait: a hang right after
start-up (no line printed while importing torch). Rank 0 prints 'entering all_reduce' just before
it. Usage: sleep_before_first_all_reduce.py STUCK MARKER"""
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
if rank == int(sys.argv[1]):
    time.sleep(3600)  # the stuck rank
if rank == 0:
    print("entering all_reduce", flush=True)
dist.all_reduce(torch.ones(1))  # the others wait here
