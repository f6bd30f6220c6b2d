"""A PyTorch job where one rank hangs: every rank does STEPS Gloo all_reduces printing 'step N',
then rank STUCK sleeps for an hour while the others wait in the next all_reduce. STUCK -1: no
rank sleeps and the job ends. Usage: hang_in_all_reduce.py STEPS STUCK

Until the hang, a thread prints 'loading' every 0.2 s: importing torch on a loaded CI machine can
take longer than the test's stall timeout, and a silent import is not the hang under test."""
import sys
import threading
import time

started = threading.Event()


def keep_talking():
    while not started.wait(0.2):
        print("loading", flush=True)


talker = threading.Thread(target=keep_talking)
talker.start()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def step(value):
    dist.all_reduce(value)  # the waiting ranks' stacks end here


def main():
    steps, stuck = int(sys.argv[1]), int(sys.argv[2])
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    for n in range(steps):
        step(torch.tensor([float(n)]))
        print(f"step {n}", flush=True)
    started.set()
    talker.join()
    if rank == stuck:
        time.sleep(3600)  # the stuck rank
    step(torch.tensor([1.0]))
    print("done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
