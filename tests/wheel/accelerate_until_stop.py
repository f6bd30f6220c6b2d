"""An unmodified Accelerate script (nothing of acc-launch in it): Accelerator, a prepared model and
optimizer, accelerator.backward, and accelerator.reduce to agree on the file STOP (rank 0 looks)
each step, until it exists or MAX_STEPS. The main process prints RESULT.
Usage: accelerate_until_stop.py STOP MAX_STEPS"""
import os
import sys
import time

import torch
from accelerate import Accelerator


def main():
    stop, max_steps = sys.argv[1], int(sys.argv[2])
    accelerator = Accelerator()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer = accelerator.prepare(model, optimizer)
    steps = 0
    for steps in range(1, max_steps + 1):
        x = torch.full((4, 8), float(accelerator.process_index + 1), device=accelerator.device)
        optimizer.zero_grad()
        accelerator.backward(model(x).sum())
        optimizer.step()
        seen = 1.0 if accelerator.is_main_process and os.path.exists(stop) else 0.0
        done = accelerator.reduce(torch.tensor([seen], device=accelerator.device), "sum")
        if done.item() > 0:
            break
        time.sleep(0.02)
    if accelerator.is_main_process:
        print("RESULT processes=%d type=%s steps=%d" % (
            accelerator.num_processes, accelerator.distributed_type, steps))
    accelerator.end_training()


if __name__ == "__main__":
    main()
