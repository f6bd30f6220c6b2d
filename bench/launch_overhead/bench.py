#!/usr/bin/env python3
"""Launch overhead: acc-launch against torchrun (Debian's python3-torch 1.13.1, patched for
Python 3.11), side by side in one invocation.

  start-up : `LAUNCHER --nproc_per_node 8 --no_python /bin/true`, wall time to exit; the runs of
             the launchers are interleaved (one of each in turn), so a change of load on the
             machine falls on all of them alike. A floor row times `spawn_floor 8 /bin/true`
             (posix_spawn and wait, no launcher): the start-up no launcher can beat here.
  teardown : one of 8 workers exits 1 while the others sleep; time from that exit to the
             launcher's own exit

Usage: bench.py ACC_LAUNCH [--runs N] [--torchrun PATH] [--floor PATH]
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TORCHRUN = os.path.join(HERE, "..", "..", "..", "shared", "peers", "torchrun_debian.py")
DEFAULT_FLOOR = os.path.join(HERE, "..", "..", "build", "bench", "launch_overhead", "spawn_floor")
PYTHON = "/usr/bin/python3"


def free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def timed(cmd, env=None):
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start, proc.returncode


def startup(cmds, runs):
    """Median wall time of each command in `cmds`, their runs interleaved."""
    times = [[] for _ in cmds]
    for _ in range(runs):
        for cmd, samples in zip(cmds, times):
            elapsed, code = timed(cmd)
            assert code == 0, (cmd, code)
            samples.append(elapsed)
    return [statistics.median(samples) for samples in times]


FAILING_WORKER = """
import os, sys, time
if os.environ["LOCAL_RANK"] == "3":
    time.sleep(0.5)
    with open(sys.argv[1], "w") as f:
        f.write(repr(time.time()))
    sys.exit(1)
time.sleep(120)
"""


def teardown(cmd, runs):
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "worker.py")
        with open(script, "w") as f:
            f.write(FAILING_WORKER)
        for i in range(runs):
            stamp = os.path.join(tmp, f"failed-{i}")
            subprocess.run(cmd + ["--nproc_per_node", "8", "--no_python", PYTHON, script, stamp],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            exited = time.time()
            with open(stamp) as f:
                times.append(exited - float(f.read()))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("acc_launch")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--torchrun", default=DEFAULT_TORCHRUN)
    parser.add_argument("--floor", default=DEFAULT_FLOOR, help="spawn_floor binary (optional)")
    args = parser.parse_args()

    ours = [args.acc_launch, "--quiet"]
    peer = lambda interval: [PYTHON, args.torchrun, "--master_port", str(free_port()),
                             "--monitor_interval", str(interval)]
    workers = ["--nproc_per_node", "8", "--no_python", "/bin/true"]
    names = ["acc-launch"] + [f"torchrun --monitor_interval {i}" for i in (5, 0.1)]
    cmds = [ours + workers] + [peer(i) + workers for i in (5, 0.1)]
    if os.path.exists(args.floor):
        names.append("floor: spawn_floor, no launcher")
        cmds.append([args.floor, "8", "/bin/true"])
    medians = startup(cmds, args.runs)
    acc_start = medians[0]
    rows = [("start-up, 8 x /bin/true", name, t, None if i == 0 else t / acc_start)
            for i, (name, t) in enumerate(zip(names, medians))]
    if len(medians) > 3:
        rows.append(("start-up, 8 x /bin/true", "torchrun 0.1 / floor: best possible", medians[2],
                     medians[2] / medians[3]))
    acc_down = teardown(ours, args.runs)
    rows.append(("teardown after 1 of 8 fails", "acc-launch", acc_down, None))
    t = teardown(peer(0.1), args.runs)
    rows.append(("teardown after 1 of 8 fails", "torchrun --monitor_interval 0.1", t,
                 t / acc_down))

    print(f"launch_overhead: median of {args.runs} runs each, same machine, same invocation")
    print(f"{'measure':<30} {'launcher':<34} {'median':>10} {'peer/ours':>10}")
    for measure, who, seconds, ratio in rows:
        ratio_text = f"{ratio:.1f}x" if ratio else ""
        print(f"{measure:<30} {who:<34} {seconds * 1000:>8.1f}ms {ratio_text:>10}")


if __name__ == "__main__":
    sys.exit(main())
