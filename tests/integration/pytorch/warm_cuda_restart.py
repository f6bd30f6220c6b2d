"""Warm workers on a GPU (scripts/gpu-check.sh): one rank, NCCL, a DDP step on cuda:LOCAL_RANK.
Attempts 0 and 1 fail once the launcher's standby is ready (WARM_METRICS, its /metrics); attempt 0
runs in a standby handed its worker at once, attempts 1 and 2 in heirs (the forks the last
attempt's worker left before its script began): torch imported before the script began, CUDA not
initialised (no standby touches CUDA), and then the same DDP step on the GPU. Prints
'WARM_CUDA ...' each attempt."""
import time

started = time.monotonic()
import sys  # noqa: E402

preloaded = "torch" in sys.modules
import os  # noqa: E402
import urllib.request  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402


def standby_ready(limit=120):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        with urllib.request.urlopen(os.environ["WARM_METRICS"]) as page:
            for line in page.read().decode().splitlines():
                if line.startswith("acc_warm_workers_ready{") and float(line.split()[-1]) >= 1:
                    return True
        time.sleep(0.2)
    return False


def main():
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    cuda_before = torch.cuda.is_initialized()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
    dist.init_process_group("nccl")
    model = DistributedDataParallel(torch.nn.Linear(64, 8).to(device), device_ids=[device.index])
    model(torch.ones(16, 64, device=device)).sum().backward()
    total = torch.ones(1, device=device)
    dist.all_reduce(total)
    torch.cuda.synchronize()
    seconds = time.monotonic() - started
    print(f"WARM_CUDA attempt={attempt} preloaded={preloaded} cuda_initialised_at_start="
          f"{cuda_before} sum={total.item()} seconds_to_first_all_reduce={seconds:.3f}", flush=True)
    if attempt < 2:
        if not standby_ready():
            print("the standby was not ready after 120 s", flush=True)
        sys.exit(1)
    dist.destroy_process_group()
    sys.exit(0 if preloaded and not cuda_before and total.item() == 1 else 3)


if __name__ == "__main__":
    main()
