#!/usr/bin/env python3
"""Goodput: the time a process failure costs a PyTorch DDP job, acc-launch against torchrun of
PyTorch 2.x, side by side in one invocation.

The job (train.py): 2 ranks (Gloo, CPU), about 150 MB of model and Adam state, STEPS steps, on
two launchers on loopback meeting at a c10d rendezvous (a rank each; --nodes 1: one launcher
with both). Under acc-launch (warm workers, --max_restarts) it saves with acc_launch.checkpoint
every step; under torchrun it saves with dcp.save every K steps, K chosen as users do, so that
checkpointing costs about 5% of the step time (a calibration run measures both). Each launcher
runs the job without failures, with rank 1 SIGKILLing itself at each of FAIL_STEPS, and (two
launchers) with rank 1's whole node SIGKILLed at LOSE_NODE_STEP and started again, as a scheduler
replaces a lost node: reported on a line of its own.
Where a launcher's restart fails (its job exits non-zero), the bench launches the job again from
its last checkpoint in storage, as a scheduler's requeue would, and counts that time.

  time lost per failure = (wall time with failures - wall time without) / failures
  time lost per node lost = wall time with the node lost - wall time without

Also printed: each launcher's step time, the checkpoint's cost in the step against the in-memory
copy floor (every state tensor cloned, measured in the same process), and the load average.
Each launcher runs each job REPEATS times (default 3), alternating; the medians count.

Usage: bench.py ACC_LAUNCH [--torch2-python PY] [--steps N] [--fail-steps a,b,c]
                [--lose-node-step N|-] [--nodes 1|2] [--repeats N] [--baseline ACC_LAUNCH]
"""
import argparse
import json
import math
import os
import shutil
import signal
import socket
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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Launch:
    """One launch of the job: a launcher per node, node 0's first (it serves the rendezvous
    store), their stdout read as it comes, their stderr in LOGS.node<i>.err."""

    def __init__(self, commands, work, logs, env):
        self.commands, self.work, self.logs, self.env = commands, work, logs, env
        self.out, self.done_at, self.nodes = [], [], []
        for i in range(len(commands)):
            self.nodes.append(self.start(i))
            if i == 0 and len(commands) > 1:
                time.sleep(0.5)

    def start(self, i):
        with open("%s.node%d.err" % (self.logs, i), "a") as err:
            process = subprocess.Popen(self.commands[i], cwd=self.work, env=self.env,
                                       stdout=subprocess.PIPE, stderr=err, text=True,
                                       start_new_session=True)
        threading.Thread(target=self.read, args=(process,), daemon=True).start()
        return process

    def read(self, process):
        for line in process.stdout:
            self.out.append(line)
            if "TIMES " in line:
                self.done_at.append(time.monotonic())

    def replace_node_of(self, pid):
        """The node whose launcher runs `pid`, SIGKILLed with all its processes and started
        again, as a scheduler replaces a lost node. False where no node runs it."""
        for i, process in enumerate(self.nodes):
            if process.poll() is None and pid in descendants(process.pid):
                stop(process)
                self.nodes[i] = self.start(i)
                return True
        return False

    def stop(self):
        for process in self.nodes:
            stop(process)

    def stderr(self):
        text = ""
        for i in range(len(self.commands)):
            with open("%s.node%d.err" % (self.logs, i)) as f:
                text += f.read()
        return text


def launch(commands, work, logs, env):
    """One launch: (exit status, seconds, stdout, stderr, hung at exit, stalled). A launch whose
    rank 0 has printed its TIMES (every step done) but has not exited 30 s later hangs at exit
    (PyTorch 2.11's Gloo teardown, bench/README.md): it is stopped, and its time ends at the
    TIMES line. A launch with no step for STALL seconds (a restart whose ranks never meet) is
    stopped as a failed launch (status -1), its time ending at its last step: the scheduler's
    requeue that follows is counted, the time it would take to notice the stall is not. Where
    rank 1 has asked for its node to be lost (WORK/lose-node), that node is replaced once."""
    start = time.monotonic()
    job = Launch(commands, work, logs, env)
    lose_node, replaced = os.path.join(work, "lose-node"), False
    while True:
        time.sleep(0.05)
        if not replaced and os.path.exists(lose_node):
            replaced = job.replace_node_of(int(open(lose_node).read()))
        statuses = [process.poll() for process in job.nodes]
        failed = [code for code in statuses if code not in (None, 0)]
        if failed or all(code == 0 for code in statuses):
            job.stop()
            return (failed[0] if failed else 0, time.monotonic() - start, "".join(job.out),
                    job.stderr(), False, False)
        if job.done_at and time.monotonic() - job.done_at[0] > 30:
            job.stop()
            return 0, job.done_at[0] - start, "".join(job.out), "", True, False
        stepped = max(start, last_step_at(work, start))
        if not job.done_at and time.monotonic() - stepped > STALL:
            job.stop()
            return -1, stepped - start, "".join(job.out), "(stalled)", False, True


def run(commands, work, logs, env=None):
    """Runs the job until it ends 0, launching it again after each non-zero exit (a requeue);
    returns (wall seconds, launches, hangs at exit, stalls, the TIMES of the last launch's
    rank 0). `commands` makes each launch's commands (a fresh rendezvous port each); the
    launchers' stderr goes to LOGS.<launch>.node<i>.err."""
    wall, launches, hangs, stalls = 0.0, 0, 0, 0
    while True:
        launches += 1
        status, seconds, stdout, stderr, hung, stalled = launch(
            commands(), work, "%s.%d" % (logs, launches), env)
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


def job(launcher, mode, args, path, steps, save_every, fails, work, lose="-", binary=None,
        flags=()):
    """The commands of one launch, one per node: 2 ranks in all, on one launcher or on two
    (c10d on loopback, one rank each). `binary`: the acc-launch to run (default ACC_LAUNCH), with
    `flags` besides."""
    binary = binary or args.acc_launch
    script = [TRAIN, mode, path, str(steps), str(save_every), fails, work, lose]
    python = args.torch2_python
    restarts = str(len(args.fail_steps.split(",")) + 2)  # every failure, and a node lost

    def commands():
        if args.nodes == 1:
            if launcher == "torchrun":
                return [[python, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                         "--max-restarts", restarts] + script]
            return [[binary, "--nproc_per_node", "2", "--max_restarts", restarts,
                     "--python", python] + list(flags) + script]
        endpoint = "127.0.0.1:%d" % free_port()
        if launcher == "torchrun":
            node = [python, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node",
                    "1", "--max-restarts", restarts, "--rdzv-backend", "c10d", "--rdzv-endpoint",
                    endpoint, "--rdzv-id", "goodput"] + script
        else:
            node = [binary, "--nnodes", "2", "--nproc_per_node", "1", "--max_restarts",
                    restarts, "--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint, "--rdzv_id",
                    "goodput", "--python", python] + list(flags) + script
        return [node, node]

    return commands


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
    # Every 10 steps: torchrun's failures fall at every phase of its checkpoint interval (it
    # redoes half of one on average, as users do), and the spread of the wall times is shared
    # among five failures.
    parser.add_argument("--fail-steps", default="10,20,30,40,50")
    parser.add_argument("--lose-node-step", default="30",
                        help="the step at which rank 1's node is lost and replaced (- for none)")
    parser.add_argument("--nodes", type=int, choices=(1, 2), default=2,
                        help="2: two launchers on loopback, a rank each; 1: one, both ranks")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of each job per launcher (their medians count)")
    parser.add_argument("--logs", help="keep the launchers' stderr in this directory")
    parser.add_argument("--baseline", metavar="ACC_LAUNCH",
                        help="another acc-launch (main before a change) run the same way, beside")
    parser.add_argument("--replica", action="store_true",
                        help="acc-launch with --checkpoint_replica too, beside (2 nodes)")
    args = parser.parse_args()
    args.acc_launch = os.path.abspath(args.acc_launch)  # the jobs run in a directory of their own
    failures = len(args.fail_steps.split(","))
    work = tempfile.mkdtemp(prefix="acc-goodput-")
    logs = args.logs or tempfile.mkdtemp(prefix="acc-goodput-logs-")
    os.makedirs(logs, exist_ok=True)
    path = os.path.join(work, "ckpt")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    jobs = [("-", "free"), (args.fail_steps, "failed")]
    if args.nodes == 2 and args.lose_node_step != "-":
        jobs.append(("-", "node lost"))
    try:
        print("== goodput: %d steps on %d launcher(s), rank 1 SIGKILLed at steps %s%s, load %s"
              % (args.steps, args.nodes, args.fail_steps,
                 "; in another run rank 1's node lost at step %s and replaced"
                 % args.lose_node_step if len(jobs) == 3 else "", load()))
        # torchrun's K: dcp.save's time against 5% of a step, from 6 steps saving each.
        _, _, _, _, calibration = run(job("torchrun", "dcp", args, path, 6, 1, "-", work), work,
                                      os.path.join(logs, "calibration"), env)
        step = statistics.median(calibration["steps"])
        save = statistics.median(calibration["saves"][1:])
        k = max(1, math.ceil(save / (0.05 * step)))
        print("calibration: step %.3f s, dcp.save %.3f s: torchrun saves every %d steps"
              % (step, save, k))
        lost, node_lost = {}, {}
        runs = [("acc-launch", "acc", 1, args.acc_launch, ())]
        if args.replica:
            runs.append(("+replica", "acc", 1, args.acc_launch, ("--checkpoint_replica",)))
        if args.baseline:
            runs.append(("baseline", "acc", 1, os.path.abspath(args.baseline), ()))
        for launcher, mode, every, binary, flags in runs + [("torchrun", "dcp", k, None, ())]:
            walls_of = {kind: [] for _, kind in jobs}
            steps, saves, hangs, stalls, launches = [], [], 0, 0, 0
            for repeat in range(args.repeats):
                for fails, kind in jobs:
                    fresh(work)
                    lose = args.lose_node_step if kind == "node lost" else "-"
                    wall, n, hung, stalled, times = run(
                        job(launcher, mode, args, path, args.steps, every, fails, work, lose,
                            binary, flags),
                        work, os.path.join(logs, "%s.%s.%d" % (launcher, kind.replace(" ", "-"),
                                                               repeat)), env)
                    walls_of[kind].append(wall)
                    hangs, stalls, launches = hangs + hung, stalls + stalled, launches + n
                    if kind == "free":
                        steps += times["steps"]
                        saves += [s for i, s in enumerate(times["saves"])
                                  if mode == "acc" or (i + 1) % every == 0]
                        floor = times["floor"]
            free = statistics.median(walls_of["free"])
            lost[launcher] = (statistics.median(walls_of["failed"]) - free) / failures
            print("%-10s: without failures %s s, with %d failures %s s (median of %d each): "
                  "%.2f s lost per failure; step %.3f s; checkpoint %.3f s every %d step(s) "
                  "(in-memory copy floor %.3f s, %.1fx); hung at exit %d, stalled %d, of %d "
                  "launches; load %s"
                  % (launcher, walls(walls_of["free"]), failures, walls(walls_of["failed"]),
                     args.repeats, lost[launcher], statistics.median(steps),
                     statistics.median(saves), every, floor, statistics.median(saves) / floor,
                     hangs, stalls, launches, load()))
            if "node lost" in walls_of:
                node_lost[launcher] = statistics.median(walls_of["node lost"]) - free
                print("%-10s: a node lost and replaced: %s s, %.2f s lost"
                      % (launcher, walls(walls_of["node lost"]), node_lost[launcher]))
        if node_lost:
            print("time lost per node lost: acc-launch %.2f s, torchrun 2.x %.2f s%s"
                  % (node_lost["acc-launch"], node_lost["torchrun"],
                     ", baseline %.2f s" % node_lost["baseline"] if args.baseline else ""))
        if args.baseline:
            print("time lost per failure: acc-launch %.2f s, baseline %.2f s"
                  % (lost["acc-launch"], lost["baseline"]))
        if args.replica:
            print("time lost per failure: acc-launch %.2f s, with --checkpoint_replica %.2f s"
                  % (lost["acc-launch"], lost["+replica"]))
        ratio = ("%.1fx" % (lost["torchrun"] / lost["acc-launch"]) if lost["acc-launch"] > 0
                 else "acc-launch's loss is within the noise")
        print("time lost per failure: acc-launch %.2f s, torchrun 2.x %.2f s (%s)"
              % (lost["acc-launch"], lost["torchrun"], ratio))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if not args.logs:
            shutil.rmtree(logs, ignore_errors=True)


if __name__ == "__main__":
    main()
