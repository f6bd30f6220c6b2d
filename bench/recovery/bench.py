#!/usr/bin/env python3
"""Recovery: the time from a worker's failure to the next attempt's last worker, acc-launch
against torchrun of PyTorch 2.x, side by side in one invocation (runs interleaved, median of N).

Each scenario runs the job with --max_restarts 1. In attempt 0 every worker appends its start to
a shared file, and rank 1 fails (exit 1) once every worker has started; the other workers sleep
until they are stopped. The figure is the time from rank 1's failure (stamped just before its
exit) to the start of the last worker of the next attempt (stamped as its first act), so it holds
what the launchers do between the two: seeing the exit, stopping the workers of every node, the
new round, spawning.

  one node        : --nproc_per_node 4, shell workers
  2 nodes static  : two launchers on loopback, --nnodes 2 --node_rank R --master_addr 127.0.0.1
                    (acc-launch only: torchrun's static rendezvous restarts the failing node
                    alone, so there is no second node's stop to time)
  2 nodes c10d    : two launchers on loopback, --nnodes 2 --nproc_per_node 2 --rdzv_backend c10d
  3 nodes c10d    : three such launchers (6 workers)
  2 nodes c10d netns : two launchers in network namespaces of their own, joined by a veth pair
                    (10.231.9.1 and .2, --local_addr each); needs root
  2 nodes etcd    : two launchers, --nnodes 2 --nproc_per_node 2 --rdzv_backend etcd-v2, meeting
                    on a single-member etcd (Debian's etcd-server) the bench starts on loopback
                    for each run (torchrun's etcd-v2 backend needs python-etcd in its Python,
                    and etcd's v2 API: where python-etcd is missing the row says so)
  node lost       : two launchers, --nnodes 1:2 --rdzv_backend c10d, keep-alive 1 s x 3: once
                    every worker runs, the bench SIGKILLs node 1's launcher with its workers (its
                    whole session: the node is gone); the figure runs from the kill to the last
                    worker of the surviving node's next attempt, and is bounded below by the
                    keep-alive window (3 s) by design: a silent node is only known as gone then
  node lost py    : the same with Python workers of PyTorch 2.x in a training loop (a gloo
                    all_reduce every 10 ms): the survivors' collective fails when node 1 goes, so
                    both launchers restart on their workers' failure; the figure ends when the
                    last rank of the next attempt is past its first all_reduce
  2 nodes c10d py : the same as 2 nodes c10d with Python workers of PyTorch 2.x that init_process_group (gloo)
                    and all_reduce: the figure ends when the last rank of the next attempt is
                    past its first all_reduce, so it holds the workers' start-up too, whose
                    parts (interpreter, import torch, init_process_group, first all_reduce) are
                    printed beside it

With ACC_TIMELINE=1 in acc-launch's environment its phases (joined, started, exited, ...) are in
its stderr; --phases prints them for the last run of each scenario, and each node's own recovery
line split into the phases: detection (the figure less what the launcher counts from the
failure it saw), stop, rendezvous, spawn.

Usage: bench.py ACC_LAUNCH [--runs N] [--torch2-python PY] [--timeout S] [--scenarios a,b]
"""
import argparse
import glob
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

DEFAULT_TORCH2_PYTHON = os.environ.get("ACC_TORCH2_PYTHON") or "/opt/acc-launch/peers-venv/bin/python"

# Appends its start, fails once as rank 1 when every worker of attempt 0 is up, else sleeps until
# stopped (attempt 0) or ends (the next attempt). `exec`: a stop signal reaches the sleep itself.
SHELL_WORKER = r"""
d=$1; n=$2
echo "$(date +%s%N) $RANK" >> "$d/starts"
if [ -e "$d/failed_at" ]; then exit 0; fi
if [ "$RANK" = 1 ] && mkdir "$d/failing" 2>/dev/null; then
  while [ "$(wc -l < "$d/starts")" -lt "$n" ]; do sleep 0.05; done
  sleep 0.3
  date +%s%N > "$d/failed_at"
  exit 1
fi
exec sleep 120
"""

# Both Python workers' start: the times of the interpreter, `import torch`, init_process_group and
# the first all_reduce appended to "starts"; in the attempt after the failure (the bench stamped
# it) the worker ends there.
PYTHON_WORKER_START = r"""
import os, sys, time
t0 = time.time_ns()
d = sys.argv[1]
import torch
import torch.distributed as dist
t1 = time.time_ns()
dist.init_process_group("gloo")
t2 = time.time_ns()
x = torch.ones(1)
dist.all_reduce(x)
t3 = time.time_ns()
with open(os.path.join(d, "starts"), "a") as f:
    f.write(f"{t0} {os.environ['RANK']} {t1} {t2} {t3}\n")
if os.path.exists(os.path.join(d, "failed_at")):
    dist.destroy_process_group()
    sys.exit(0)
"""

# Warm workers: the failure comes once every launcher's standbys are ready (WARM_METRICS, their
# /metrics), as it would in a job that has run a while.
WAIT_FOR_STANDBYS = r"""
def wait_for_standbys(env, limit=120):
    import urllib.request
    deadline = time.monotonic() + limit
    for url in filter(None, env.get("WARM_METRICS", "").split(",")):
        while time.monotonic() < deadline:
            with urllib.request.urlopen(url) as page:
                text = page.read().decode()
            if any(l.startswith("acc_warm_workers_ready{") and float(l.split()[-1]) >= 2
                   for l in text.splitlines()):
                break
            time.sleep(0.1)
"""

PYTHON_WORKER = PYTHON_WORKER_START + WAIT_FOR_STANDBYS + r"""
if os.environ["RANK"] == "1":
    wait_for_standbys(os.environ)
    os.mkdir(os.path.join(d, "failing"))
    time.sleep(0.5)
    with open(os.path.join(d, "failed_at"), "w") as f:
        f.write(str(time.time_ns()))
    os._exit(1)
time.sleep(120)
"""


# The worker of "node lost": appends its start; in the next attempt (the bench stamped the kill)
# it ends, else it sleeps until stopped.
LOST_WORKER = r"""
d=$1
echo "$(date +%s%N) $RANK" >> "$d/starts"
if [ -e "$d/failed_at" ]; then exit 0; fi
exec sleep 120
"""

# "node lost py": the next attempt's ranks end past their first all_reduce; attempt 0's train
# until a collective fails (node 1 killed) and exit 1 with its error.
LOST_PY_WORKER = PYTHON_WORKER_START + r"""
while True:
    dist.all_reduce(x)
    time.sleep(0.01)
"""

exec(WAIT_FOR_STANDBYS)  # the bench's own wait_for_standbys, before it kills a node

KEEP_ALIVE = "keep_alive_interval=1,keep_alive_max_attempt=3"
KEEP_ALIVE_WINDOW_MS = 3000
LOST_WAIT_S = 15  # five keep-alive windows

# acc-launch's own line: "attempt 2 started 9.5 ms after the failure was seen (stop 0.9 ms,
# rendezvous 3.0 ms, spawn 5.6 ms)".
RECOVERY_LINE = re.compile(r"attempt (\d+) started ([\d.]+) ms after the failure was seen "
                           r"\(stop ([\d.]+) ms, rendezvous ([\d.]+) ms, spawn ([\d.]+) ms\)")


class BenchError(Exception):
    """A run that failed or passed its time limit: one line, then exit 1."""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Etcd:
    """A single-member etcd on loopback for one run, in `d`; killed at the end."""

    def __init__(self, d):
        self.d = d
        self.client = f"127.0.0.1:{free_port()}"
        self.proc = None

    def __enter__(self):
        peer = f"http://127.0.0.1:{free_port()}"
        client = "http://" + self.client
        log = open(os.path.join(self.d, "etcd.log"), "w")
        self.proc = subprocess.Popen(
            ["etcd", "--name", "m", "--data-dir", os.path.join(self.d, "m.etcd"),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", "m=" + peer], stdout=log, stderr=log, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with open(os.path.join(self.d, "etcd.log")) as f:
                if "serving insecure client requests on" in f.read():
                    return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)  # the bench's own start-up, outside any timed span
        self.__exit__()
        raise BenchError("etcd did not start (Debian's etcd-server is needed for this row)")

    def __exit__(self, *_):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def load_average():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def launch(cmds, timeout, envs, stderr_paths):
    """Starts every command (one per node) in a session of its own, waits for all; raises
    BenchError on a timeout or a failure."""
    procs = []
    for cmd, env, err in zip(cmds, envs, stderr_paths):
        with open(err, "w") as f:
            procs.append(subprocess.Popen(cmd, start_new_session=True, env=env,
                                          stdout=subprocess.DEVNULL, stderr=f))
    deadline = time.monotonic() + timeout
    codes = []
    for p, cmd in zip(procs, cmds):
        try:
            codes.append(p.wait(max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            for q in procs:
                # torchrun 2.x starts each worker in a session of its own: those too.
                for pid in descendants(q.pid) if q.poll() is None else []:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                try:
                    os.killpg(q.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                q.wait()
            tails = ""
            for err in stderr_paths:
                with open(err) as f:
                    tails += f.read()[-3000:]
            raise BenchError(f"timed out after {timeout:g} s: {shlex.join(cmd)}\n{tails}")
    for code, cmd, err in zip(codes, cmds, stderr_paths):
        if code != 0:
            with open(err) as f:
                tail = f.read()[-4000:]
            raise BenchError(f"exit code {code}: {shlex.join(cmd)}\n{tail}")


def measure(d, workers):
    """(ms from the failure to the last start of the next attempt, the next attempt's rows)."""
    with open(os.path.join(d, "failed_at")) as f:
        failed = int(f.read())
    with open(os.path.join(d, "starts")) as f:
        rows = [[int(x) for x in line.split()] for line in f if line.strip()]
    after = [r for r in rows if r[0] > failed]
    if len(after) < workers:
        raise BenchError(f"{len(after)} of {workers} workers started after the failure in {d}")
    after.sort()
    after = after[:workers]
    # A shell row: its start, its rank; a Python row's last field: past its first all_reduce.
    last = max(r[4] if len(r) == 5 else r[0] for r in after)
    return (last - failed) / 1e6, after, failed


def commands(launcher, scenario, d, script, torch_python, port, etcd=None):
    """One command per node."""
    acc = launcher == "acc-launch"
    python = scenario.endswith("py")
    if python:
        prog = [torch_python, script, d]
        worker_flags = [] if acc else []
    else:
        prog = ["/bin/sh", script, d]
    if scenario == "one node":
        return [[*LAUNCHERS[launcher], "--nproc_per_node", "4", "--max_restarts", "1",
                 "--no_python", *prog, "4"]]
    if scenario == "2 nodes static":
        return [[*LAUNCHERS[launcher], "--nnodes", "2", "--node_rank", str(r), "--nproc_per_node",
                 "2", "--master_addr", "127.0.0.1", "--master_port", str(port),
                 "--max_restarts", "1", "--no_python", *prog, "4"] for r in range(2)]
    if scenario == "2 nodes etcd":
        return [[*LAUNCHERS[launcher], "--nnodes", "2", "--nproc_per_node", "2",
                 "--rdzv_backend", "etcd-v2", "--rdzv_endpoint", etcd, "--rdzv_id",
                 f"bench{os.getpid()}", "--max_restarts", "1", "--no_python", *prog, "4"]
                for _ in range(2)]
    if scenario.startswith("node lost"):
        prog = [torch_python, script, d] if python else ["/bin/sh", script, d]
        return [[*LAUNCHERS[launcher], "--nnodes", "1:2", "--nproc_per_node", "2",
                 "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id",
                 "bench", "--rdzv_conf", f"{KEEP_ALIVE},last_call_timeout=1,is_host={1 - i}",
                 "--max_restarts", "1", "--no_python", *prog] for i in range(2)]
    nodes = nodes_of(scenario)
    if scenario.endswith("netns"):
        # Node i in namespace i at 10.231.9.(i+1), the rendezvous at node 0's address.
        return [["ip", "netns", "exec", netns_name(i), *LAUNCHERS[launcher], "--nnodes",
                 str(nodes), "--nproc_per_node", "2", "--rdzv_backend", "c10d",
                 "--rdzv_endpoint", "10.231.9.1:29531", "--rdzv_id", "bench", "--local_addr",
                 f"10.231.9.{i + 1}", "--max_restarts", "1", "--no_python", *prog,
                 str(2 * nodes)] for i in range(nodes)]
    return [[*LAUNCHERS[launcher], "--nnodes", str(nodes), "--nproc_per_node", "2",
             "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id",
             "bench", "--max_restarts", "1", "--no_python", *prog, str(2 * nodes)]
            for _ in range(nodes)]


def netns_name(i):
    return f"accrec{os.getpid()}n{i}"


class Namespaces:
    """Two network namespaces joined by a veth pair (10.231.9.1 and .2), for one run; removed
    with whatever still runs in them."""

    def __enter__(self):
        names = [netns_name(0), netns_name(1)]
        veth = [f"ar{os.getpid()}a"[:15], f"ar{os.getpid()}b"[:15]]
        steps = [["ip", "netns", "add", names[0]], ["ip", "netns", "add", names[1]],
                 ["ip", "link", "add", veth[0], "netns", names[0], "type", "veth", "peer",
                  "name", veth[1], "netns", names[1]]]
        for i in range(2):
            steps += [["ip", "-n", names[i], "addr", "add", f"10.231.9.{i + 1}/24", "dev",
                       veth[i]],
                      ["ip", "-n", names[i], "link", "set", "lo", "up"],
                      ["ip", "-n", names[i], "link", "set", veth[i], "up"]]
        for step in steps:
            if subprocess.run(step, stderr=subprocess.DEVNULL).returncode != 0:
                self.__exit__()
                raise BenchError(f"cannot make the network namespaces ({shlex.join(step)}): "
                                 "run as root, or leave the netns scenario out")
        return self

    def __exit__(self, *_):
        for i in range(2):
            pids = subprocess.run(["ip", "netns", "pids", netns_name(i)], capture_output=True,
                                  text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", netns_name(i)], stderr=subprocess.DEVNULL)


def nodes_of(scenario):
    if scenario.startswith("node lost"):
        return 2
    return 1 if scenario == "one node" else int(scenario.split()[0])


def workers_of(scenario):
    if scenario.startswith("node lost"):
        return 2  # the surviving node's, in the next attempt
    return 4 if scenario == "one node" else 2 * nodes_of(scenario)


def descendants(pid):
    """Every process under `pid` now (children, theirs, ...), from /proc."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def lose_a_node(cmds, timeout, env, errs, d, wait_s):
    """Both nodes at once, node 0 serving the c10d store (is_host=1: the node lost must not be
    that one); once all 4 workers run, node 1's session is SIGKILLed (stamped just before). Node
    0 must then run its next attempt and end with 0 within LOST_WAIT_S."""
    procs = []
    try:
        for cmd, err in zip(cmds, errs):
            with open(err, "w") as f:
                procs.append(subprocess.Popen(cmd, start_new_session=True, env=env,
                                              stdout=subprocess.DEVNULL, stderr=f))
        deadline = time.monotonic() + timeout
        starts = os.path.join(d, "starts")
        while time.monotonic() < deadline:
            if os.path.exists(starts):
                with open(starts) as f:
                    if len(f.readlines()) >= 4:
                        break
            if any(p.poll() is not None for p in procs):
                break
            time.sleep(0.02)  # set-up, outside the timed span
        else:
            raise BenchError("the 4 workers of attempt 0 did not start")
        time.sleep(0.3)
        wait_for_standbys(env)
        # The launcher's session and every process under it (torchrun 2.x starts each worker in
        # a session of its own): the whole node goes at once.
        doomed = descendants(procs[1].pid)
        with open(os.path.join(d, "failed_at"), "w") as f:
            f.write(str(time.time_ns()))
        os.killpg(procs[1].pid, signal.SIGKILL)
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        procs[1].wait()
        try:
            code = procs[0].wait(wait_s)
        except subprocess.TimeoutExpired:
            raise BenchError(f"node 0 had not ended its next attempt {wait_s:g} s after node 1 "
                             "was killed (its workers kept running)")
        if code != 0:
            with open(errs[0]) as f:
                raise BenchError(f"exit code {code}: {shlex.join(cmds[0])}\n{f.read()[-4000:]}")
    finally:
        for p in procs:
            if p.poll() is None:
                for pid in descendants(p.pid):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()


LAUNCHERS = {}


# Where acc-launch makes its run directories (docs/launch.md, "The run directory"); the launcher a
# "node lost" run SIGKILLs cannot remove its own.
RUN_DIRS = "/dev/shm/acc-launch-bench_*"


def one_run(launcher, scenario, args, env):
    before = set(glob.glob(RUN_DIRS))
    try:
        return run_in_temporary_dir(launcher, scenario, args, env)
    finally:
        for left in set(glob.glob(RUN_DIRS)) - before:
            shutil.rmtree(left, ignore_errors=True)


def with_status_ports(cmds, ports, python):
    """acc-launch's command on each node with --status_port, and told that the workers are Python
    (--python PY script instead of --no_python PY script): only those get warm workers."""
    if not ports:
        return cmds
    cmds = [[cmd[0], "--status_port", str(port), *cmd[1:]] for cmd, port in zip(cmds, ports)]
    for cmd in cmds:
        at = cmd.index("--no_python")
        cmd[at:at + 2] = ["--python", python]
    return cmds


def run_in_temporary_dir(launcher, scenario, args, env):
    with tempfile.TemporaryDirectory(prefix="recovery-") as d:
        python = scenario.endswith("py")
        script = os.path.join(d, "worker.py" if python else "worker.sh")
        with open(script, "w") as f:
            f.write(LOST_PY_WORKER if scenario == "node lost py" else
                    PYTHON_WORKER if python else
                    LOST_WORKER if scenario == "node lost" else SHELL_WORKER)
        errs = [os.path.join(d, f"stderr-{i}") for i in range(nodes_of(scenario))]
        if launcher == "acc-launch" and python:
            # Warm workers (on by default): each launcher's /metrics says when its standbys are
            # ready; the failure waits for them.
            ports = [free_port() for _ in errs]
            env = dict(env, WARM_METRICS=",".join(f"http://127.0.0.1:{p}/metrics" for p in ports))
        else:
            ports = []
        if scenario == "2 nodes etcd":
            with Etcd(d) as etcd:
                cmds = commands(launcher, scenario, d, script, args.torch2_python, free_port(),
                                etcd.client)
                launch(cmds, args.timeout, [env] * len(cmds), errs)
        elif scenario.startswith("node lost"):
            cmds = with_status_ports(
                commands(launcher, scenario, d, script, args.torch2_python, free_port()), ports,
                args.torch2_python)
            lose_a_node(cmds, args.timeout, env, errs, d,
                        args.timeout if python else min(args.timeout, LOST_WAIT_S))
        elif scenario.endswith("netns"):
            cmds = commands(launcher, scenario, d, script, args.torch2_python, free_port())
            with Namespaces():
                launch(cmds, args.timeout, [env] * len(cmds), errs)
        else:
            cmds = with_status_ports(
                commands(launcher, scenario, d, script, args.torch2_python, free_port()), ports,
                args.torch2_python)
            launch(cmds, args.timeout, [env] * len(cmds), errs)
        ms, rows, failed = measure(d, workers_of(scenario))
        # The last worker's spawn (a Python row's figure also holds its start-up).
        last_start = (max(r[0] for r in rows) - failed) / 1e6
        phases = []
        for i, e in enumerate(errs):
            with open(e) as f:
                for line in f:
                    if "timeline" in line.lower():
                        phases.append(line.rstrip())
                    elif (m := RECOVERY_LINE.search(line)) and not any(
                            p.startswith(f"node {i}: ") for p in phases):
                        # (once per node: the job-end summary repeats the line)
                        x, stop, rdzv, spawn = (float(m.group(k)) for k in range(2, 6))
                        phases.append(f"node {i}: detection {last_start - x:.1f} ms (the last "
                                      f"worker's start less the launcher's {x:.1f} ms), stop "
                                      f"{stop:.1f} ms, "
                                      f"rendezvous {rdzv:.1f} ms, spawn {spawn:.1f} ms")
        return ms, rows, failed, phases


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("acc_launch")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--torch2-python", default=DEFAULT_TORCH2_PYTHON)
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--scenarios", default="one node,2 nodes static,2 nodes c10d,"
                        "3 nodes c10d,2 nodes etcd,node lost,2 nodes c10d netns,2 nodes c10d py,node lost py")
    parser.add_argument("--no-torchrun", action="store_true")
    parser.add_argument("--phases", action="store_true",
                        help="print acc-launch's ACC_TIMELINE line of the last run per scenario")
    args = parser.parse_args()
    LAUNCHERS["acc-launch"] = [args.acc_launch]
    LAUNCHERS["acc-launch cold"] = [args.acc_launch, "--no_warm_workers"]
    LAUNCHERS["torchrun"] = [args.torch2_python, "-m", "torch.distributed.run"]
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    try:
        with tempfile.TemporaryDirectory(prefix="recovery-torchrun-") as tmp:
            peer_env = dict(os.environ, TMPDIR=tmp, LOGLEVEL="WARNING")
            ours_env = dict(os.environ, ACC_TIMELINE="1")
            print(f"recovery: median of {args.runs} runs each, interleaved; load average before: "
                  f"{load_average()}")
            print(f"{'scenario':<18} {'acc-launch ms':>14} {'torchrun ms':>12}  torchrun / acc-launch")
            for scenario in scenarios:
                launchers = ["acc-launch"]
                if scenario.endswith("py"):
                    launchers.append("acc-launch cold")  # --no_warm_workers
                if not (args.no_torchrun or scenario == "2 nodes static"):
                    launchers.append("torchrun")
                if "torchrun" in launchers and scenario == "2 nodes etcd" and subprocess.run(
                        [args.torch2_python, "-c", "import etcd"],
                        capture_output=True).returncode != 0:
                    launchers.remove("torchrun")
                    print(f"  (torchrun: no python-etcd in {args.torch2_python}, which its "
                          "etcd-v2 backend imports; not installed for the bench)")
                times = {name: [] for name in launchers}
                broken = {}
                parts = {name: [] for name in launchers}
                last_phases = []
                for i in range(args.runs):
                    order = launchers if i % 2 == 0 else launchers[::-1]
                    for name in order:
                        # A peer that failed once is tried again where its failure is a race
                        # (the Python rows), not where it fails the same way every time.
                        if name in broken and not scenario.endswith("py"):
                            continue
                        try:
                            ms, rows, failed, phases = one_run(
                                name, scenario, args,
                                ours_env if name.startswith("acc-launch") else peer_env)
                        except BenchError as e:
                            if name.startswith("acc-launch"):
                                raise
                            # A peer that does not recover is a result, not a bench failure.
                            lines = str(e).splitlines()
                            # The workers' own error rather than torchrun's ChildFailedError.
                            errors = [l for l in lines if ("Error" in l or "had not" in l) and
                                      "ChildFailedError" not in l and "raise " not in l]
                            broken.setdefault(name, []).append(
                                lines[0] if len(lines) == 1 else
                                (lines[0][:60] + " ... " + (errors[-1][:200] if errors else "")))
                            continue
                        times[name].append(ms)
                        if len(rows[0]) == 5:
                            # interpreter start to import done, init_process_group, all_reduce
                            # row: start, rank, imported, initialised, past the all_reduce
                            parts[name].append([statistics.median((r[b] - r[a]) / 1e6
                                                                  for r in rows)
                                                for a, b in ((0, 2), (2, 3), (3, 4))] +
                                               [(max(r[0] for r in rows) - failed) / 1e6])
                        if name == "acc-launch":
                            last_phases = phases
                ours = statistics.median(times["acc-launch"])
                theirs = statistics.median(times["torchrun"]) if times.get("torchrun") else None
                row = f"{scenario:<18} {ours:>14.1f} "
                row += f"{theirs:>12.1f}  {theirs / ours:.1f}x" if theirs else f"{'-':>12}"
                print(row + "   (runs: " + ", ".join(
                    f"{n} " + " ".join(f"{t:.0f}" for t in times[n])
                    for n in launchers if times[n]) + ")")
                if times.get("acc-launch cold"):
                    cold = statistics.median(times["acc-launch cold"])
                    print(f"  acc-launch --no_warm_workers: {cold:.1f} ms, {cold / ours:.1f}x the "
                          "warm workers' figure above" +
                          (f"; torchrun / it {theirs / cold:.1f}x" if theirs else ""))
                for name, whys in broken.items():
                    tried = len(whys) + len(times[name])
                    print(f"  {name} did not recover in {len(whys)} of {tried} runs: {whys[-1]}")
                if scenario == "node lost py":
                    print("  (detected by the survivors' failing all_reduce, then the last call "
                          "of a round below --nnodes' maximum, 1000 ms)")
                elif scenario == "node lost":
                    print(f"  (by design at least the keep-alive window, {KEEP_ALIVE_WINDOW_MS} ms "
                          f"({KEEP_ALIVE}), up to one interval more to the next look, and the "
                          "last call of a round below --nnodes' maximum, 1000 ms)")
                for name in launchers:
                    if parts[name]:
                        med = [statistics.median(p[k] for p in parts[name]) for k in range(4)]
                        print(f"  {name}: last spawn {med[3]:.0f} ms after the failure; each "
                              f"worker: import torch {med[0]:.0f} ms, init_process_group "
                              f"{med[1]:.0f} ms, first all_reduce {med[2]:.0f} ms (medians)")
                if args.phases:
                    for line in last_phases:
                        print("  " + line)
            print(f"load average after: {load_average()}")
    except BenchError as e:
        print(f"bench.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
