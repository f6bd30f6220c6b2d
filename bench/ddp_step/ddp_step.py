"""One DDP training step of BasicNet with PyTorch's Python DDP (Gloo on CPU, NCCL with --device
cuda), timed as ddp_step.cc does.
Run under torchrun; prints on rank 0 the line ddp_step.cc prints, with impl=python:
"ddp_step impl=python steps=N median_ms=X forward_ms=F backward_ms=B wait_ms=W optimizer_ms=O",
the medians of the step and of its phases on the rank whose median step is the slowest."""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class BasicNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = torch.flatten(self.dropout1(F.max_pool2d(x, 2)), 1)
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args()
    cuda = args.device == "cuda"
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", init_method="env://")
    torch.manual_seed(0)
    model = DDP(BasicNet().to(device))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch, 1, 28, 28).to(device)
    y = torch.randint(0, 10, (args.batch,)).to(device)

    last_grad = [0.0]

    def hook(grad):
        last_grad[0] = max(last_grad[0], time.perf_counter())
        return grad

    for p in model.parameters():
        p.register_hook(hook)

    # Per phase, in the order of the printed line: step, forward, backward, wait, optimizer.
    phase_ms = [[] for _ in range(5)]
    for i in range(args.warmup + args.steps):
        dist.barrier()
        start = time.perf_counter()
        loss = F.nll_loss(model(x), y)
        forward_end = time.perf_counter()
        last_grad[0] = 0.0
        loss.backward()
        backward_end = time.perf_counter()
        opt.step()
        opt.zero_grad()
        if cuda:
            torch.cuda.synchronize()
        end = time.perf_counter()
        if i >= args.warmup:
            last = last_grad[0]
            phases = (end - start, forward_end - start, last - forward_end, backward_end - last,
                      end - backward_end)
            for samples, seconds in zip(phase_ms, phases):
                samples.append(seconds * 1e3)
    medians = torch.tensor([statistics.median(p) for p in phase_ms], dtype=torch.double,
                           device=device)
    out = [torch.zeros_like(medians) for _ in range(dist.get_world_size())]
    dist.all_gather(out, medians)
    if dist.get_rank() == 0:
        per_rank = torch.stack(out).cpu()
        m = per_rank[per_rank[:, 0].argmax()].tolist()
        print(f"ddp_step impl=python steps={args.steps} median_ms={m[0]:.2f} "
              f"forward_ms={m[1]:.2f} backward_ms={m[2]:.2f} wait_ms={m[3]:.2f} "
              f"optimizer_ms={m[4]:.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
