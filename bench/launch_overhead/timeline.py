#!/usr/bin/env python3
"""Where a launch's time goes, as the launcher itself tells it: runs `ACC_LAUNCH --nproc_per_node N
--no_python /bin/true` with ACC_TIMELINE=1, reads its timeline line (output/timeline.h: each
step's time since main()) and prints the median of each step over the runs, and of the whole run
from spawn to exit, whose difference with the last step is the exec up to main() and the exit
(and the timing's own cost: /bin/true alone, timed the same way, is printed beside it).
Needs no tracer (phases.py needs strace), so it runs on any machine acc-launch runs on.

Usage: timeline.py ACC_LAUNCH [--runs N] [--nproc N] [--timeout S]
"""
import argparse
import os
import re
import statistics
import sys
import tempfile
import time

from bench import BenchError, run  # the same timing as the start-up bench

LINE = re.compile(r"acc-launch: timeline \(ms since main\): (.*)")


def one_run(cmd, timeout):
    """`cmd`'s wall time (ms, timed as bench.py times a launch) and its stderr, with
    ACC_TIMELINE=1."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        code = run(cmd, timeout, stderr=err, env=dict(os.environ, ACC_TIMELINE="1"))
        wall = (time.perf_counter() - start) * 1e3
        err.seek(0)
        text = err.read().decode(errors="replace")
    if code != 0:
        raise BenchError(f"exit code {code}: {' '.join(cmd)}\n{text}")
    return wall, text


def steps_of(text, acc_launch):
    """The timeline line's steps: (name, ms since main) in order."""
    found = LINE.search(text)
    if not found:
        raise BenchError(f"no timeline line from {acc_launch} (older than the timeline?)\n{text}")
    steps = []
    for item in found.group(1).split(","):
        name, value = item.strip().rsplit(" ", 1)
        steps.append((name, float(value)))
    return steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("acc_launch")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--nproc", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=30)
    args = parser.parse_args()
    steps = {}
    walls = []
    alone = []  # one exec of /bin/true the same way: what the timing itself and an exec cost
    if not os.access(args.acc_launch, os.X_OK):
        sys.exit(f"timeline: no acc-launch at {args.acc_launch}")
    launch = [args.acc_launch, "--nproc_per_node", str(args.nproc), "--no_python", "/bin/true"]
    try:
        for _ in range(args.runs):
            wall, text = one_run(launch, args.timeout)
            for name, value in steps_of(text, args.acc_launch):
                steps.setdefault(name, []).append(value)
            walls.append(wall)
            time.sleep(0.05)
            alone.append(one_run(["/bin/true"], args.timeout)[0])
            time.sleep(0.05)
    except BenchError as e:
        sys.exit(f"timeline: {e}")
    medians = {name: statistics.median(values) for name, values in steps.items()}
    wall = statistics.median(walls)
    last = max(medians.values())
    print(f"launch timeline, {args.nproc} x /bin/true, median of {args.runs} runs "
          f"(ms since main(); load average {os.getloadavg()[0]:.2f})")
    print("  " + ", ".join(f"{name} {value:.2f}" for name, value in medians.items()))
    print(f"  whole run {wall:.2f} ms, of which before main() and after the last step "
          f"{wall - last:.2f} ms; /bin/true alone, timed the same way, {statistics.median(alone):.2f} ms")


if __name__ == "__main__":
    main()
