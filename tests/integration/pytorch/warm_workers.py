"""A plain PyTorch DDP script under warm workers: every worker of every attempt prints one line,
'WORKER {json}', of what it found at its start, and the last rank fails in attempts 0 and 1, so
that attempt 0's workers are standbys handed their workers at once, and attempts 1 and 2's their
heirs. Where WARM_METRICS names the launcher's /metrics, the failing rank first waits until it
shows every standby ready (torch imported): a standby still importing is not used. warm_workers.sh reads the lines."""
import time

started = time.monotonic()
import sys  # noqa: E402

preloaded = "torch" in sys.modules  # a standby imported it before the script began

import json  # noqa: E402
import os  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402


def nice_values():
    """The nice value of every thread of this process."""
    values = set()
    for task in os.listdir("/proc/self/task"):
        try:
            values.add(os.getpriority(os.PRIO_PROCESS, int(task)))
        except OSError:
            pass
    return sorted(values)


def wait_for_standbys(count, limit=60):
    url = os.environ.get("WARM_METRICS")
    if not url:
        return
    import urllib.request
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        with direct.open(url, timeout=10) as page:
            metrics = [line for line in page.read().decode().splitlines()
                       if line.startswith("acc_warm_workers")]
        if any(line.startswith("acc_warm_workers_ready{") and float(line.split()[-1]) >= count
               for line in metrics):
            return
        time.sleep(0.2)
    print("the standbys were not ready after %d s: %s" % (limit, metrics), file=sys.stderr,
          flush=True)


def main():
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = DistributedDataParallel(torch.nn.Linear(4, 1))
    model(torch.ones(2, 4)).sum().backward()
    total = torch.ones(1)
    dist.all_reduce(total)
    seconds = time.monotonic() - started
    with open("/proc/self/cmdline", "rb") as cmdline:
        command = [arg.decode() for arg in cmdline.read().split(b"\0")[:-1]]
    stack_file = os.path.join(os.environ["ACC_STACK_DIR"], "python_stacks.%d.txt" % os.getpid())
    facts = {
        "attempt": attempt, "rank": rank, "world": world, "sum": total.item(),
        "preloaded": preloaded, "main": __name__, "argv": sys.argv, "path0": sys.path[0],
        "cwd": os.getcwd(), "command": command, "standby_fd": "ACC_STANDBY_FD" in os.environ,
        "nice": nice_values(), "recorded": getattr(dist, "_acc_recorded", False),
        "stack_file": os.path.exists(stack_file), "progress": os.environ["ACC_PROGRESS_FILE"],
        "stdout_tty": sys.stdout.isatty(), "seconds": round(seconds, 3), "ppid": os.getppid(),
    }
    print("WORKER " + json.dumps(facts), flush=True)
    if attempt < 2 and rank == world - 1:
        wait_for_standbys(int(os.environ["LOCAL_WORLD_SIZE"]))
        sys.exit(1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
