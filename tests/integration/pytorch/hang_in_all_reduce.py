"""A PyTorch job where one rank hangs: every rank does STEPS Gloo all_reduces printing 'step N',
then rank STUCK sleeps for an hour while the others wait in the next all_reduce. STUCK -1: no
rank sleeps and the job ends, once the file RELEASE exists if one is named (the time for
`acc-launch stacks` to look at it). Usage: hang_in_all_reduce.py STEPS STUCK [RELEASE]

Until the hang, a child process prints 'loading' every 0.2 s into the worker's output: importing
torch on a loaded CI machine can take longer than the test's stall timeout (with the GIL held, so
a thread could not talk), and a silent import is not the hang under test."""
import os
import select
import sys
import time

stop_talking, tell_talker = os.pipe()
talker = os.fork()
if talker == 0:
    os.close(tell_talker)
    while not select.select([stop_talking], [], [], 0.2)[0]:
        print("loading", flush=True)
    os._exit(0)
os.close(stop_talking)

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
    os.close(tell_talker)
    os.waitpid(talker, 0)
    if rank == stuck:
        time.sleep(3600)  # the stuck rank
    while stuck < 0 and len(sys.argv) > 3 and not os.path.exists(sys.argv[3]):
        time.sleep(0.05)
    step(torch.tensor([1.0]))
    print("done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
