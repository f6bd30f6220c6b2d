"""scripts/gpu-check.sh's cuda_checkpoint: acc_launch.checkpoint with CUDA tensors. One rank
(NCCL) trains a model on the GPU and saves every step; in attempt 0 it writes step 3's weights
(their sum, from the GPU) to WORK/at3 and SIGKILLs itself. Attempt 1 loads PATH (the launcher's
memory), checks the step and the weights on the GPU against WORK/at3, and trains to step 6. It
prints 'attempt=N step=S weights=W device=D'; it fails where the save's slot was not page-locked
(the copies from the GPU then go through a staging buffer). Usage: cuda_checkpoint.py PATH WORK"""
import os
import signal
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import acc_launch


def main():
    path, work = sys.argv[1], sys.argv[2]
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    model = DistributedDataParallel(torch.nn.Linear(256, 256).cuda(), device_ids=[local_rank])
    optimizer = torch.optim.Adam(model.parameters())
    state = {"model": model.state_dict(), "optim": optimizer.state_dict(), "step": 0}
    step = 0
    if os.path.exists(path):
        model(torch.zeros(1, 256, device="cuda")).sum().backward()  # Adam's state exists
        optimizer.step()
        state = {"model": model.state_dict(), "optim": optimizer.state_dict(), "step": 0}
        acc_launch.checkpoint.load(state, checkpoint_id=path)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optim"])
        step = state["step"]
        weights = sum(p.detach().double().sum().item() for p in model.parameters())
        expected = open(os.path.join(work, "at3")).read().split()
        device = next(model.parameters()).device
        print("attempt=%d loaded step=%d weights=%r device=%s" % (attempt, step, weights, device),
              flush=True)
        if step != int(expected[0]) or weights != float(expected[1]) or device.type != "cuda":
            print("FAIL: expected step %s weights %s" % tuple(expected), flush=True)
            sys.exit(1)
    while step < 6:
        optimizer.zero_grad()
        model(torch.randn(32, 256, device="cuda")).square().mean().backward()
        optimizer.step()
        step += 1
        state = {"model": model.state_dict(), "optim": optimizer.state_dict(), "step": step}
        acc_launch.checkpoint.save(state, checkpoint_id=path)
        if step == 1 and not acc_launch.checkpoint._Shard.page_locked():
            print("FAIL: the save's slot is not page-locked for CUDA", flush=True)
            sys.exit(1)
        if attempt == 0 and step == 3:
            weights = sum(p.detach().double().sum().item() for p in model.parameters())
            with open(os.path.join(work, "at3"), "w") as f:
                f.write("%d %r\n" % (step, weights))
            os.kill(os.getpid(), signal.SIGKILL)
    weights = sum(p.detach().double().sum().item() for p in model.parameters())
    print("attempt=%d step=%d weights=%r" % (attempt, step, weights), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
