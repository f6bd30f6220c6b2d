#!/usr/bin/env python3
"""Launch overhead: acc-launch against torchrun of PyTorch 2.x (a virtual environment's) and of
PyTorch 1.13 (Debian's python3-torch, patched for Python 3.11), and against the spawn floor, side
by side in one invocation.

  start-up : `LAUNCHER --nproc_per_node 8 --no_python /bin/true`, wall time to exit; the runs of
             every launcher are interleaved (one of each in turn), so a change of load on the
             machine falls on all of them alike. The floor row times `spawn_floor 8 /bin/true`
             (posix_spawn and wait, no launcher): the start-up no launcher can beat here. On a
             GPU host a second floor row, `spawn_floor --nvml`, makes NVML's calls of
             acc-launch's GPU health pre-flight first: the floor of a launcher that checks.
  teardown : one of 8 workers exits 1 while the others sleep; time from that exit to the
             launcher's own exit

A peer that is not there (no interpreter, no script) is one line and is left out. Every run has a
time limit (--timeout): a run that passes it, or fails, is one line naming its command, and the
bench exits 1.

Usage: bench.py ACC_LAUNCH [--runs N] [--torch2-python PY] [--torch1-python PY]
                [--torchrun1 SCRIPT] [--floor PATH] [--intervals 0.1,5] [--timeout S]
                [--settle S] [--no-teardown] [--no-torchrun] [--baseline ACC_LAUNCH]...
"""
import argparse
import os
import select
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "..", "..")
DEFAULT_TORCH2_PYTHON = os.environ.get("ACC_TORCH2_PYTHON") or "/opt/acc-launch/peers-venv/bin/python"
DEFAULT_TORCH1_PYTHON = "/usr/bin/python3"
DEFAULT_TORCHRUN1 = os.path.join(REPO, "..", "shared", "peers", "torchrun_debian.py")
DEFAULT_FLOOR = os.path.join(REPO, "build", "bench", "launch_overhead", "spawn_floor")
WORKERS = ["--nproc_per_node", "8", "--no_python", "/bin/true"]


class BenchError(Exception):
    """A run that failed or passed its time limit: one line, then exit 1."""


# torchrun's store takes a port of the kernel's choosing (its workers, /bin/true, never use it),
# so that no port is picked here and released for torchrun to take later.
TORCHRUN_PORT = ["--master_port", "0"]


def run(cmd, timeout, **popen):
    """Runs `cmd` (in a session of its own, so that a timeout kills what it started too; its
    output to /dev/null unless `popen` says otherwise: stderr=, env=); returns its exit code.
    Raises BenchError when it passes `timeout` seconds.

    The exit is awaited on a pidfd, which becomes readable the moment the process ends. Not
    `Popen.wait(timeout)`: it polls, sleeping 1, 2, 4, 8, 16 ms between looks, so a run that
    ends at 4.5 ms is seen at 7 ms and one that ends at 8 ms at 15 ms, and a ratio of two such
    times says which polling step each fell in (this bench measured 2.0x for 1.7x that way)."""
    popen = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, **popen}
    proc = subprocess.Popen(cmd, start_new_session=True, **popen)
    pidfd = os.pidfd_open(proc.pid)
    try:
        ended, _, _ = select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    if not ended:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise BenchError(f"timed out after {timeout:g} s: {shlex.join(cmd)}")
    return proc.wait()


def timed(cmd, timeout, env=None):
    start = time.perf_counter()
    code = run(cmd, timeout, env=env)
    elapsed = time.perf_counter() - start
    if code != 0:
        raise BenchError(f"exit code {code}: {shlex.join(cmd)}")
    return elapsed


def startup(cmds, runs, timeout, settle):
    """Median wall time of each (command, environment or None) in `cmds`, their runs
    interleaved. Each run starts `settle` seconds after the one before: what a torchrun leaves
    the kernel to do after its exit (its interpreter's hundreds of MiB to free, its workers' ends)
    otherwise lands on the next command's time (seen here: acc-launch 75 ms right after a
    torchrun, 14 ms alone). Round r starts at command r (mod their number), so that no command
    always follows the same one: in a fixed order acc-launch always came right after the slowest
    torchrun."""
    times = [[] for _ in cmds]
    for round_index in range(runs):
        first = round_index % len(cmds)
        for index in list(range(first, len(cmds))) + list(range(first)):
            time.sleep(settle)
            cmd, env = cmds[index]
            times[index].append(timed(cmd, timeout, env))
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


def teardown(cmd, runs, timeout, env=None):
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "worker.py")
        with open(script, "w") as f:
            f.write(FAILING_WORKER)
        for i in range(runs):
            stamp = os.path.join(tmp, f"failed-{i}")
            full = cmd + ["--nproc_per_node", "8", "--no_python", DEFAULT_TORCH1_PYTHON, script, stamp]
            run(full, timeout, env=env)
            exited = time.time()
            if not os.path.exists(stamp):
                raise BenchError(f"rank 3 never failed: {shlex.join(full)}")
            with open(stamp) as f:
                times.append(exited - float(f.read()))
    return statistics.median(times)


def torch_version(python, timeout):
    """The version of torch `python` imports, or None (one line says why)."""
    if not os.access(python, os.X_OK):
        print(f"peer left out: no interpreter at {python}")
        return None
    try:
        out = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BenchError(f"timed out after {timeout:g} s: {python} -c 'import torch'")
    if out.returncode != 0:
        print(f"peer left out: {python} cannot import torch")
        return None
    return out.stdout.strip()


def peers(args):
    """(name, command prefix) of each torchrun that is there."""
    found = []
    version = torch_version(args.torch2_python, args.timeout)
    if version is not None:
        found.append((f"torchrun {version}", [args.torch2_python, "-m", "torch.distributed.run"]))
    if not os.path.exists(args.torchrun1):
        print(f"peer left out: no torchrun 1.13 script at {args.torchrun1}")
    else:
        version = torch_version(args.torch1_python, args.timeout)
        if version is not None:
            found.append((f"torchrun {version}", [args.torch1_python, args.torchrun1]))
    return found


def load_average():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("acc_launch")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--torch2-python", default=DEFAULT_TORCH2_PYTHON,
                        help="interpreter with PyTorch 2.x (default $ACC_TORCH2_PYTHON, else "
                             "the peers' virtual environment)")
    parser.add_argument("--torch1-python", default=DEFAULT_TORCH1_PYTHON,
                        help="interpreter with Debian's PyTorch 1.13")
    parser.add_argument("--torchrun1", default=DEFAULT_TORCHRUN1,
                        help="torchrun of PyTorch 1.13 (../shared/peers/torchrun_debian.py)")
    # Kept for the command lines of earlier figures: the same as --torchrun1.
    parser.add_argument("--torchrun", dest="torchrun1", help=argparse.SUPPRESS)
    parser.add_argument("--floor", default=DEFAULT_FLOOR, help="spawn_floor binary")
    parser.add_argument("--intervals", default="0.1,5",
                        help="torchrun's --monitor_interval values, comma-separated")
    parser.add_argument("--timeout", type=float, default=120,
                        help="seconds one run may take before the bench gives up on it")
    parser.add_argument("--settle", type=float, default=0.3,
                        help="seconds of rest before each start-up run")
    parser.add_argument("--no-teardown", action="store_true", help="start-up only")
    parser.add_argument("--no-torchrun", action="store_true",
                        help="acc-launch and the floor only (with --baseline: before and after)")
    parser.add_argument("--baseline", action="append", default=[], metavar="ACC_LAUNCH",
                        help="another acc-launch build in the same start-up runs (repeatable)")
    args = parser.parse_args()
    try:
        # torchrun makes a torchelastic_* directory in $TMPDIR at each run and never removes it:
        # its runs get a TMPDIR of their own, removed at the end. acc-launch keeps the machine's
        # (a TMPDIR the user names is where its run directory goes, on whatever file system).
        with tempfile.TemporaryDirectory(prefix="launch-overhead-") as tmp:
            return bench(args, peer_env=dict(os.environ, TMPDIR=tmp))
    except BenchError as e:
        print(f"bench.py: {e}", file=sys.stderr)
        return 1


def bench(args, peer_env):
    """Runs the benches and prints their table; `peer_env` is the torchruns' environment."""
    if not os.access(args.acc_launch, os.X_OK):
        raise BenchError(f"no acc-launch at {args.acc_launch}")
    intervals = [float(i) for i in args.intervals.split(",") if i]
    found = [] if args.no_torchrun else peers(args)
    floor = os.path.exists(args.floor)
    if not floor:
        print(f"floor left out: no spawn_floor at {args.floor}")

    ours = [args.acc_launch, "--quiet"]
    names, cmds = ["acc-launch"], [(ours + WORKERS, None)]
    if floor:
        names.append("floor: spawn_floor, no launcher")
        cmds.append(([args.floor, "8", "/bin/true"], None))
        # On a GPU host acc-launch asks NVML about the GPUs before it starts workers: the floor
        # of a launcher that does (spawn_floor --nvml makes the same calls first).
        if subprocess.run([args.floor, "--nvml", "1", "/bin/true"],
                          stderr=subprocess.DEVNULL).returncode == 0:
            names.append("floor + NVML pre-flight: spawn_floor --nvml")
            cmds.append(([args.floor, "--nvml", "8", "/bin/true"], None))
        # The floor of a launcher that spawns from several threads at once (acc-launch spawns
        # from one): what a host with more CPUs than workers would allow.
        threads = min(8, len(os.sched_getaffinity(0)))
        if threads > 1 and subprocess.run([args.floor, "--threads", "2", "1", "/bin/true"],
                                          stderr=subprocess.DEVNULL).returncode == 0:
            names.append(f"floor + parallel spawn: spawn_floor --threads {threads}")
            cmds.append(([args.floor, "--threads", str(threads), "8", "/bin/true"], None))
    for other in args.baseline:
        if not os.access(other, os.X_OK):
            raise BenchError(f"no acc-launch at {other}")
        names.append(f"baseline: {other}")
        cmds.append(([other, "--quiet"] + WORKERS, None))
    for name, prefix in found:
        for interval in intervals:
            names.append(f"{name} --monitor_interval {interval:g}")
            cmds.append((prefix + TORCHRUN_PORT + ["--monitor_interval", f"{interval:g}"] + WORKERS,
                         peer_env))
    before = load_average()
    medians = startup(cmds, args.runs, args.timeout, args.settle)
    ours_start = medians[0]
    rows = []
    for name, seconds in zip(names, medians):
        if name == "acc-launch":
            ratio = ""
        elif name.startswith("floor +"):
            ratio = f"acc-launch is {ours_start / seconds:.2f}x this floor"
        elif name.startswith("floor"):
            ratio = f"acc-launch is {ours_start / seconds:.2f}x the floor"
        elif name.startswith("baseline"):
            ratio = f"{seconds / ours_start:.2f}x acc-launch"
            if floor:
                ratio += f", {seconds / medians[1]:.2f}x the floor"
        else:
            ratio = f"{seconds / ours_start:.1f}x acc-launch"
            if floor:
                ratio += f", {seconds / medians[1]:.1f}x the floor"
        rows.append(("start-up, 8 x /bin/true", name, seconds, ratio))

    if not args.no_teardown:
        ours_down = teardown(ours, args.runs, args.timeout)
        rows.append(("teardown after 1 of 8 fails", "acc-launch", ours_down, ""))
        for name, prefix in found:
            seconds = teardown(prefix + TORCHRUN_PORT + ["--monitor_interval", "0.1"], args.runs,
                               args.timeout, env=peer_env)
            rows.append(("teardown after 1 of 8 fails", f"{name} --monitor_interval 0.1",
                         seconds, f"{seconds / ours_down:.1f}x acc-launch"))

    print(f"launch_overhead: median of {args.runs} runs each, interleaved, same machine "
          f"({os.cpu_count()} CPUs); load average {before} before, {load_average()} after")
    for name, prefix in found:
        print(f"  {name}: {shlex.join(prefix)}")
    print(f"{'measure':<30} {'launcher':<38} {'median':>10}  ratio")
    for measure, who, seconds, ratio in rows:
        print(f"{measure:<30} {who:<46} {seconds * 1000:>8.1f}ms  {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
