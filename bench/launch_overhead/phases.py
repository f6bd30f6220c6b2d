#!/usr/bin/env python3
"""Where a launch's wall time goes: runs `ACC_LAUNCH --nproc_per_node N --no_python /bin/true`
under strace (seccomp-filtered to a handful of system calls, so the rest run untraced) and splits
each run at those calls. Prints the median of each phase over the runs.

  start-up  execve -> first uname       loading, static initialisers, parsing the command line
  plan      uname -> watchdog clone     detect_host (/proc, /sys), scheduler facts, config, plan
  prepare   watchdog clone -> 1st vfork watchdog, run directory, the workers' store server
  spawn     1st vfork -> last vfork     per worker: directory, environment, pipes, vfork+exec
  run       last vfork -> last exit     the workers themselves (/bin/true)
  teardown  last worker exit -> exit    reaping, run directory removal, store and watchdog stop

Usage: phases.py ACC_LAUNCH [--runs N] [--nproc N] [--timeout S]
"""
import argparse
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

PHASES = ["start-up", "plan", "prepare", "spawn", "run", "teardown", "total"]


class PhaseError(Exception):
    """A run that failed or passed its time limit: one line, then exit 1."""


def one_run(acc_launch, nproc, timeout):
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as trace:
        cmd = ["strace", "-f", "--seccomp-bpf", "-ttt", "-o", trace.name,
               "-e", "trace=execve,uname,clone,clone3,vfork,exit_group",
               acc_launch, "--quiet", "--nproc_per_node", str(nproc), "--no_python", "/bin/true"]
        try:
            code = subprocess.run(cmd, stdout=subprocess.DEVNULL, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            raise PhaseError(f"timed out after {timeout:g} s: {shlex.join(cmd)}")
        if code != 0:
            raise PhaseError(f"exit code {code}: {shlex.join(cmd)}")
        lines = trace.read().splitlines()
    main = lines[0].split()[0]
    at = lambda line: float(line.split()[1])
    mine = [l for l in lines if l.split()[0] == main]
    start = at(mine[0])
    uname = next(at(l) for l in mine if " uname(" in l)
    fork = next(at(l) for l in mine if re.search(r" clone\(", l))
    vforks = [at(l) for l in mine if " vfork(" in l]
    last_vfork = [at(l) for l in mine if "vfork resumed" in l or re.search(r"vfork\(\) += \d", l)]
    workers = {l.split()[0] for l in lines if 'execve("/bin/true"' in l}
    worker_exits = [at(l) for l in lines if l.split()[0] in workers and "+++ exited" in l]
    end = at(next(l for l in mine if "+++ exited" in l))
    spawned = max(last_vfork) if last_vfork else max(vforks)
    return dict(zip(PHASES, [uname - start, fork - uname, vforks[0] - fork, spawned - vforks[0],
                             max(worker_exits) - spawned, end - max(worker_exits), end - start]))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("acc_launch")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--nproc", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=60, help="seconds one run may take")
    args = parser.parse_args()
    try:
        runs = [one_run(args.acc_launch, args.nproc, args.timeout) for _ in range(args.runs)]
    except PhaseError as e:
        print(f"phases.py: {e}", file=sys.stderr)
        return 1
    print(f"launch phases, {args.nproc} x /bin/true, median of {args.runs} runs (strace -f "
          f"--seccomp-bpf, so each phase carries a little tracing cost)")
    for phase in PHASES:
        print(f"  {phase:<9} {statistics.median(r[phase] for r in runs) * 1000:7.1f} ms")


if __name__ == "__main__":
    sys.exit(main())
