"""A PyTorch DDP script that checkpoints as torch.distributed.checkpoint's tutorial does, with
`dcp.` changed to `acc_launch.checkpoint.`: an app state (Stateful) of model, Adam and the step,
saved after every step to PATH, loaded where PATH exists. In attempt 0, once every rank has
saved step KILL_AT (a barrier), rank 1 SIGKILLs itself. WIDTH sets the model's size (two
WIDTH x WIDTH layers). Every rank prints 'STEP {json}' after each step (the weights'
sum) and 'LOADED {json}' after a load; checkpoints.sh reads them. $STEP_SECONDS (default 0)
is slept after each step. KILL_AT 0: no rank kills itself.
Usage: checkpoints.py PATH STEPS KILL_AT [WIDTH]"""
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.stateful import Stateful
from torch.nn.parallel import DistributedDataParallel

import acc_launch


class AppState(Stateful):
    def __init__(self, model, optimizer):
        self.model, self.optimizer, self.step = model, optimizer, 0

    def state_dict(self):
        model, optimizer = get_state_dict(self.model, self.optimizer)
        return {"model": model, "optim": optimizer, "step": self.step}

    def load_state_dict(self, state):
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])
        self.step = state["step"]


def say(what, app):
    weights = sum(p.detach().double().sum().item() for p in app.model.parameters())
    print(what + " " + json.dumps({"attempt": int(os.environ["TORCHELASTIC_RESTART_COUNT"]),
                                   "rank": dist.get_rank(), "step": app.step,
                                   "weights": weights}), flush=True)


def main():
    path, steps, kill_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    width = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(width, width),
                                                        torch.nn.Linear(width, width)))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    app = AppState(model, optimizer)
    if dist.get_rank() == 0:
        print("ACC_CHECKPOINT_MEMORY=%s" % os.environ.get("ACC_CHECKPOINT_MEMORY"), flush=True)
    if os.path.exists(path):
        acc_launch.checkpoint.load({"app": app}, checkpoint_id=path)
        say("LOADED", app)
    generator = torch.Generator().manual_seed(dist.get_rank())
    while app.step < steps:
        optimizer.zero_grad()
        model(torch.randn(16, width, generator=generator)).square().mean().backward()
        optimizer.step()
        app.step += 1
        acc_launch.checkpoint.save({"app": app}, checkpoint_id=path)
        say("STEP", app)
        time.sleep(float(os.environ.get("STEP_SECONDS", "0")))
        if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0" and app.step == kill_at:
            dist.barrier()
            if dist.get_rank() == 1:
                os.kill(os.getpid(), signal.SIGKILL)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
