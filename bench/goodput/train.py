"""The goodput bench's job (bench/goodput/bench.py): a PyTorch DDP script (Gloo, CPU) with about
150 MB of model and Adam state that checkpoints as its launcher allows:
  acc  acc_launch.checkpoint.save every step (the launcher's memory)
  dcp  torch.distributed.checkpoint.save every SAVE_EVERY steps (storage)
Both load PATH where it exists. Rank 0 touches WORK/progress after each step (the bench's sign
of progress). Rank 1 SIGKILLs itself the first time it reaches each step of FAIL_STEPS (a file
per failure in WORK remembers it across restarts and relaunches). At LOSE_NODE_STEP, rank 1
writes its pid to WORK/lose-node (once) and waits: the bench then SIGKILLs its whole node. Rank 0
prints 'TIMES {json}': per step, the step's time and the checkpoint's; and the in-memory copy
floor (every state tensor cloned), measured in the same process.
Usage: train.py acc|dcp PATH STEPS SAVE_EVERY FAIL_STEPS(comma-separated or -) WORK
                [LOSE_NODE_STEP or -]"""
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.stateful import Stateful
from torch.nn.parallel import DistributedDataParallel

WIDTH = 2048  # three WIDTH x WIDTH layers: 12.6 M parameters, 151 MB with Adam's two moments


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


def floor_seconds(app):
    """The in-memory copy: every tensor of the state copied into memory already there (the
    median of 3)."""
    tensors = []

    def walk(value):
        if isinstance(value, torch.Tensor):
            tensors.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)

    walk(app.state_dict())
    copies = [t.clone() for t in tensors]
    times = []
    for _ in range(3):
        start = time.perf_counter()
        for copy, tensor in zip(copies, tensors):
            copy.copy_(tensor)
        times.append(time.perf_counter() - start)
    return sorted(times)[1]


def main():
    mode, path, steps, save_every, fails, work = sys.argv[1:7]
    steps, save_every = int(steps), int(save_every)
    fails = [] if fails == "-" else [int(s) for s in fails.split(",")]
    lose_node = sys.argv[7] if len(sys.argv) > 7 else "-"
    lose_node = None if lose_node == "-" else int(lose_node)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    layers = [torch.nn.Linear(WIDTH, WIDTH) for _ in range(3)]
    model = DistributedDataParallel(torch.nn.Sequential(*layers))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    app = AppState(model, optimizer)
    checkpoint = __import__("acc_launch").checkpoint if mode == "acc" else dcp
    model(torch.zeros(1, WIDTH)).sum().backward()  # Adam's state exists before a load
    optimizer.step()
    optimizer.zero_grad()
    if os.path.exists(path):
        checkpoint.load({"app": app}, checkpoint_id=path)
    # The floor where no failure came before (a restarted process does not pay for it).
    times = {"floor": floor_seconds(app) if rank == 0 and app.step == 0 else 0, "steps": [],
             "saves": [], "first_step": app.step}
    generator = torch.Generator().manual_seed(rank)
    while app.step < steps:
        start = time.perf_counter()
        optimizer.zero_grad()
        model(torch.randn(8, WIDTH, generator=generator)).square().mean().backward()
        optimizer.step()
        app.step += 1
        stepped = time.perf_counter()
        if mode == "acc" or app.step % save_every == 0 or app.step == steps:
            checkpoint.save({"app": app}, checkpoint_id=path)
        saved = time.perf_counter()
        if rank == 0:  # the bench's sign of progress
            open(os.path.join(work, "progress"), "w").close()
        times["steps"].append(stepped - start)
        times["saves"].append(saved - stepped)
        marker = os.path.join(work, "failed-at-%d" % app.step)
        if rank == 1 and app.step in fails and not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        lost = os.path.join(work, "lose-node")
        if rank == 1 and app.step == lose_node and not os.path.exists(lost):
            with open(lost + ".tmp", "w") as f:
                f.write("%d\n" % os.getpid())
            os.rename(lost + ".tmp", lost)
            time.sleep(600)  # until the bench kills this node
    if rank == 0:
        print("TIMES " + json.dumps(times), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
