"""A rank that hangs after its NCCL collectives: a few all_reduces on its GPU, then a sleep that
never ends (no CPU, no GPU work). Under acc-launch --stall_timeout the stall watch must take it for
a hang, ask PyTorch's Flight Recorder for its dump through the pipe, wait for the dump, and stop
it (scripts/gpu-check.sh)."""
import os
import time

import torch
import torch.distributed as dist


def main():
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    value = torch.ones(1024, device="cuda")
    for _ in range(5):
        dist.all_reduce(value)
    torch.cuda.synchronize()
    print(f"rank {dist.get_rank()}: 5 all_reduces done, now hanging", flush=True)
    time.sleep(3600)


if __name__ == "__main__":
    main()
