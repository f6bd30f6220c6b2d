"""A rank busy on its GPU while its CPU sleeps: SECONDS of GPU kernels (torch.cuda._sleep), waited
for with a blocking event (the CPU sleeps in the driver instead of spinning), printing nothing.
Under acc-launch --stall_timeout shorter than SECONDS this is no hang: the launcher sees the rank's
kernels through NVML, and the job finishes (scripts/gpu-check.sh). Prints 'done' at the end."""
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 12
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    value = torch.ones(1, device="cuda")
    dist.all_reduce(value)
    # Calibrate: how many cycles of _sleep make 0.2 s on this GPU.
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(100_000_000)
    end.record()
    end.synchronize()
    cycles_per_s = 100_000_000 / (start.elapsed_time(end) / 1000)
    done = torch.cuda.Event(blocking=True)
    began = time.monotonic()
    for _ in range(int(seconds / 0.2)):
        torch.cuda._sleep(int(cycles_per_s * 0.2))
    done.record()
    done.synchronize()
    dist.all_reduce(value)
    torch.cuda.synchronize()
    print(f"done: {time.monotonic() - began:.1f} s on the GPU", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
