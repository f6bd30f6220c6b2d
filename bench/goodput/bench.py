#!/usr/bin/env python3
"""Goodput: the time a process failure costs a PyTorch DDP job, acc-launch against torchrun of
PyTorch 2.x, side by side in one invocation.

The job (train.py): 2 ranks on one node (Gloo, CPU), about 150 MB of model and Adam state, STEPS
steps. Under acc-launch (warm workers, --max_restarts) it saves with acc_launch.checkpoint every
step; under torchrun it saves with dcp.save every K steps, K chosen as users do, so that
checkpointing costs about 5% of the step time (a calibration run measures both). Each launcher
runs the job without failures and with rank 1 SIGKILLing itself at each of FAIL_STEPS.
Where a launcher's restart fails (its job exits non-zero), the bench launches the job again from
its last checkpoint in storage, as a scheduler's requeue would, and counts that time.

  time lost per failure = (wall time with failures - wall time without) / failures

Also printed: each launcher's step time, the checkpoint's cost in the step against the in-memory
copy floor (every state tensor cloned, measured in the same process), and the load average.
Not yet here: two launchers on loopback and a whole node lost.

Each launcher runs each job REPEATS times (default 3), alternating; the medians count.

Usage: bench.py ACC_LAUNCH [--torch2-python PY] [--steps N] [--fail-steps a,b,c] [--repeats N]
"""
import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "train.py")
STALL = 60  # seconds without a step: the launch is stopped as failed


def load():
    return open("/proc/loadavg").read().split()[0]


def descendants(pid):
    """Every process below `pid`, from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open("/proc/%s/stat" % entry).read()
                parents.setdefault(int(stat.rpartition(")")[2].split()[1]), []).append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def stop(process):
    for pid in [process.pid] + descendants(process.pid):  # torchrun's are in sessions of their own
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    process.wait()


def last_step_at(work, start):
    """When rank 0 last finished a step (train.py touches WORK/progress), on the monotonic clock."""
    try:
        return time.monotonic() - (time.time() - os.stat(os.path.join(work, "progress")).st_mtime)
    except OSError:
        return start


def launch(command, work, env):
    """One launch: (exit status, seconds, stdout, stderr, hung at exit, stalled). A launch whose
    rank 0 has printed its TIMES (every step done) but has not exited 30 s later hangs at exit
    (PyTorch 2.11's Gloo teardown, bench/README.md): it is stopped, and its time ends at the
    TIMES line. A launch with no step for STALL seconds (a restart whose ranks never meet) is
    stopped as a failed launch (status -1), its time ending at its last step: the scheduler's
    requeue that follows is counted, the time it would take to notice the stall is not."""
    start = time.monotonic()
    process = subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    out, done_at = [], []

    def read():
        for line in process.stdout:
            out.append(line)
            if "TIMES " in line:
                done_at.append(time.monotonic())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    while process.poll() is None:
        time.sleep(0.05)
        if done_at and time.monotonic() - done_at[0] > 30:
            stop(process)
            reader.join(5)
            return 0, done_at[0] - start, "".join(out), "", True, False
        stepped = max(start, last_step_at(work, start))
        if not done_at and time.monotonic() - stepped > STALL:
            stop(process)
            reader.join(5)
            return -1, stepped - start, "".join(out), "(stalled)", False, True
    reader.join()
    return (process.returncode, time.monotonic() - start, "".join(out), process.stderr.read(),
            False, False)


def run(command, work, env=None):
    """Runs the job until it ends 0, launching it again after each non-zero exit (a requeue);
    returns (wall seconds, launches, hangs at exit, stalls, the TIMES of the last launch's
    rank 0)."""
    wall, launches, hangs, stalls = 0.0, 0, 0, 0
    while True:
        launches += 1
        status, seconds, stdout, stderr, hung, stalled = launch(command, work, env)
        wall += seconds
        hangs += hung
        stalls += stalled
        if status == 0:
            break
        if launches >= 10:
            sys.exit("the job failed 10 times:\n" + stderr[-3000:])
    times = [json.loads(line.split("TIMES ", 1)[1]) for line in stdout.splitlines()
             if "TIMES " in line]
    return wall, launches, hangs, stalls, times[-1]


def job(launcher, mode, args, python, path, steps, save_every, fails, work):
    script = [TRAIN, mode, path, str(steps), str(save_every), fails, work]
    if launcher == "torchrun":
        return [python, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                "--max-restarts", "3"] + script
    return [args.acc_launch, "--nproc_per_node", "2", "--max_restarts", "3", "--python",
            python] + script


def walls(seconds):
    return "/".join("%.1f" % s for s in seconds)


def fresh(work):
    for name in os.listdir(work):
        target = os.path.join(work, name)
        shutil.rmtree(target) if os.path.isdir(target) else os.unlink(target)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("acc_launch")
    parser.add_argument("--torch2-python", default=os.environ.get("ACC_TORCH2_PYTHON")
                        or "/opt/acc-launch/peers-venv/bin/python")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--fail-steps", default="20,40")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs with and without failures per launcher (their medians count)")
    args = parser.parse_args()
    python = args.torch2_python
    failures = len(args.fail_steps.split(","))
    work = tempfile.mkdtemp(prefix="acc-goodput-")
    path = os.path.join(work, "ckpt")
    # The standbys import torch at nice 0 (docs/goodput.md: ACC_WARM_WORKERS_NICE), not 19: two
    # ranks of CPU-bound training fill a small machine's cores, and a standby at the lowest
    # priority would not be ready by the first failure. Runs with and without failures pay that
    # import alike; after the first restart the standbys are forks (heirs) and import nothing.
    env = dict(os.environ, OMP_NUM_THREADS="1", ACC_WARM_WORKERS_NICE="0")
    try:
        print("== goodput: %d steps, rank 1 SIGKILLed at steps %s, load %s"
              % (args.steps, args.fail_steps, load()))
        # torchrun's K: dcp.save's time against 5% of a step, from 6 steps saving each.
        _, _, _, _, calibration = run(job("torchrun", "dcp", args, python, path, 6, 1, "-", work),
                                work, env)
        step = statistics.median(calibration["steps"])
        save = statistics.median(calibration["saves"][1:])
        k = max(1, math.ceil(save / (0.05 * step)))
        print("calibration: step %.3f s, dcp.save %.3f s: torchrun saves every %d steps"
              % (step, save, k))
        lost = {}
        for launcher, mode, every in (("acc-launch", "acc", 1), ("torchrun", "dcp", k)):
            free, failed, steps, saves, hangs, stalls, launches = [], [], [], [], 0, 0, 0
            for _ in range(args.repeats):
                for fails in ("-", args.fail_steps):
                    fresh(work)
                    wall, n, hung, stalled, times = run(job(launcher, mode, args, python, path,
                                                            args.steps, every, fails, work),
                                                        work, env)
                    (free if fails == "-" else failed).append(wall)
                    hangs, stalls, launches = hangs + hung, stalls + stalled, launches + n
                    if fails == "-":
                        steps += times["steps"]
                        saves += [s for i, s in enumerate(times["saves"])
                                  if mode == "acc" or (i + 1) % every == 0]
                        floor = times["floor"]
            lost[launcher] = (statistics.median(failed) - statistics.median(free)) / failures
            print("%-10s: without failures %s s, with %d failures %s s (median of %d each): "
                  "%.2f s lost per failure; step %.3f s; checkpoint %.3f s every %d step(s) "
                  "(in-memory copy floor %.3f s, %.1fx); hung at exit %d, stalled %d, of %d "
                  "launches; load %s"
                  % (launcher, walls(free), failures, walls(failed), args.repeats,
                     lost[launcher], statistics.median(steps), statistics.median(saves), every,
                     floor, statistics.median(saves) / floor, hangs, stalls, launches, load()))
        ratio = ("%.1fx" % (lost["torchrun"] / lost["acc-launch"]) if lost["acc-launch"] > 0
                 else "acc-launch's loss is within the noise")
        print("time lost per failure: acc-launch %.2f s, torchrun 2.x %.2f s (%s)"
              % (lost["acc-launch"], lost["torchrun"], ratio))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
