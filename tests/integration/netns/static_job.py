"""A worker of a static job for the fail-fast tests (static_fail_fast.sh). Every rank first
prints 'rank R restart_count C' (TORCHELASTIC_RESTART_COUNT). Then:
  loop STEPS [FAIL_RANK FAIL_STEP FAIL_CODE [FAIL_ATTEMPT]]
      STEPS Gloo all_reduces, one every 20 ms, rank 0 printing 'step N' and, when every step
      agreed, 'RESULT world=W steps=S'; rank FAIL_RANK exits FAIL_CODE at step FAIL_STEP (in
      attempt FAIL_ATTEMPT only, when given).
  sleep SECONDS [FAIL_RANK FAIL_AFTER FAIL_CODE]
      no communication at all (as ranks stuck in an NCCL collective would be): sleeps, except
      rank FAIL_RANK, which exits FAIL_CODE after FAIL_AFTER seconds.
The failing rank prints 'failing at T' (time.time()) just before it exits."""
import os
import sys
import time


def fail(code):
    print(f"failing at {time.time():.3f}", flush=True)
    os._exit(code)


def main():
    mode, args = sys.argv[1], [float(a) for a in sys.argv[2:]]
    rank = int(os.environ["RANK"])
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    print(f"rank {rank} restart_count {attempt}", flush=True)
    fail_rank = int(args[1]) if len(args) > 1 else -1
    if mode == "sleep":
        if rank == fail_rank:
            time.sleep(args[2])
            fail(int(args[3]))
        time.sleep(args[0])
        return
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method="env://")
    world = dist.get_world_size()
    steps = int(args[0])
    fails_now = rank == fail_rank and (len(args) < 5 or attempt == int(args[4]))
    for step in range(steps):
        if fails_now and step == int(args[2]):
            fail(int(args[3]))
        value = torch.tensor([float(rank + step)])
        dist.all_reduce(value)
        assert value.item() == sum(r + step for r in range(world)), (step, value.item())
        if rank == 0:
            print(f"step {step}", flush=True)
        time.sleep(0.02)
    if rank == 0:
        print(f"RESULT world={world} steps={steps}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
