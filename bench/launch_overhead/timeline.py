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
import select
import signal
import statistics
import sys
import tempfile
import time

LINE = re.compile(r"acc-launch: timeline \(ms since main\): (.*)")


def one_run(acc_launch, nproc, timeout, cmd=None):
    """The steps' times (ms since main) and the whole run's wall time (ms) of one launch, timed
    from posix_spawn to the pidfd's wake (stderr to a file: no pipe for the launcher to wait on).
    With `cmd`, that command's wall time alone (no steps)."""
    env = dict(os.environ, ACC_TIMELINE="1")
    timed_only = cmd is not None
    cmd = cmd or [acc_launch, "--nproc_per_node", str(nproc), "--no_python", "/bin/true"]
    with tempfile.TemporaryFile() as err, open(os.devnull, "wb") as null:
        start = time.perf_counter()
        pid = os.posix_spawn(cmd[0], cmd, env, file_actions=[
            (os.POSIX_SPAWN_DUP2, null.fileno(), 1), (os.POSIX_SPAWN_DUP2, err.fileno(), 2)])
        pidfd = os.pidfd_open(pid)
        try:
            ended, _, _ = select.select([pidfd], [], [], timeout)
        finally:
            os.close(pidfd)
        wall = (time.perf_counter() - start) * 1e3
        if not ended:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        err.seek(0)
        text = err.read().decode(errors="replace")
    if not ended:
        sys.exit(f"timeline: timed out after {timeout:g} s: {' '.join(cmd)}")
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"timeline: exit code {os.waitstatus_to_exitcode(status)}: {' '.join(cmd)}\n{text}")
    if timed_only:
        return [], wall
    found = LINE.search(text)
    if not found:
        sys.exit(f"timeline: no timeline line from {acc_launch} (older than the timeline?)\n{text}")
    steps = []
    for item in found.group(1).split(","):
        name, value = item.strip().rsplit(" ", 1)
        steps.append((name, float(value)))
    return steps, wall


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
    for _ in range(args.runs):
        run, wall = one_run(args.acc_launch, args.nproc, args.timeout)
        for name, value in run:
            steps.setdefault(name, []).append(value)
        walls.append(wall)
        time.sleep(0.05)
        alone.append(one_run(None, 0, args.timeout, ["/bin/true"])[1])
        time.sleep(0.05)
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
