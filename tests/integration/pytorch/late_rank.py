"""A plain PyTorch DDP start whose last rank is late: it sleeps LATE seconds before
init_process_group (a slow import, a slow disk), while the others wait there for it. Then one
all_reduce; rank 0 prints RESULT. Usage: late_rank.py LATE"""
import os
import sys
import time

import torch
import torch.distributed as dist

if int(os.environ["RANK"]) == int(os.environ["WORLD_SIZE"]) - 1:
    time.sleep(float(sys.argv[1]))
dist.init_process_group("gloo")
total = torch.tensor([1.0])
dist.all_reduce(total)
if dist.get_rank() == 0:
    print(f"RESULT world={dist.get_world_size()} sum={total.item():g}", flush=True)
dist.destroy_process_group()
