"""Collective faults as a user's program makes them, for the hang report's stuck-collective match
(tests/integration/collective_report_test.cc). Every rank runs STEPS Gloo all_reduces, printing
'step N', then waits for the file RELEASE (which never comes), so that whatever hangs stays hung.
Usage: collective_faults.py FAULT RANK STEPS RELEASE, where FAULT is
  sleep_first  RANK sleeps before its first all_reduce (the others wait in all_reduce #1);
  skip         RANK skips the all_reduce of step 2 (it issues one fewer: the others wait in the
               last one, which it never issued);
  mismatch     RANK calls broadcast where the others call all_reduce, at step 2;
  loader       RANK's DataLoader worker sleeps in __getitem__ (a grandchild of the launcher).

Until the process group is up, a child process prints 'loading' every 0.2 s: importing torch on a
loaded machine can take longer than the test's stall timeout, and a silent import is not the hang
under test."""
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


class SlowDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, index):
        time.sleep(3600)  # the DataLoader worker's line in the report
        return torch.zeros(1)


def main():
    fault, odd, steps, release = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    os.close(tell_talker)
    os.waitpid(talker, 0)
    if fault == "sleep_first" and rank == odd:
        time.sleep(3600)
    if fault == "loader" and rank == odd:
        next(iter(torch.utils.data.DataLoader(SlowDataset(), num_workers=1)))
    for step in range(steps):
        value = torch.ones(4)
        if fault == "skip" and rank == odd and step == 2:
            continue
        if fault == "mismatch" and rank == odd and step == 2:
            dist.broadcast(value, src=0)
        else:
            dist.all_reduce(value)
        print(f"step {step}", flush=True)
    while not os.path.exists(release):
        time.sleep(0.1)


if __name__ == "__main__":
    main()
