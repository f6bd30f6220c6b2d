"""Every torchrun command line of torchrun 2.x's own documentation (the Usage section of
torch/distributed/run.py's docstring) and a line for each flag of its --help, run under the real
torchrun of this Python and under acc-launch: both accept it, and the workers get the same
torchrun contract (ranks, sizes, role, restarts, run id, agent store, OMP_NUM_THREADS, argv).
Lines that start a rendezvous also meet in a Gloo process group and all_reduce through it.

Usage: python torchrun_doc_lines.py ACC_LAUNCH [CASE...]   (exit 77: this Python has no torch)
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

WORKER = r'''
import json, os, sys
out = os.environ["DOC_LINES_OUT"]
record = {key: os.environ.get(key) for key in (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE",
    "OMP_NUM_THREADS")}
record["argv"] = sys.argv[1:]
if "--meet" in sys.argv:
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    value = torch.ones(1)
    dist.all_reduce(value)
    record["all_reduce"] = int(value.item())
    dist.destroy_process_group()
with open(os.path.join(out, "rank%s.json" % os.environ["RANK"]), "w") as f:
    json.dump(record, f)
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cases(work, script, python):
    """(name, torchrun flags, program and its arguments). $NUM_TRAINERS is 2, $NUM_NODES 1,
    $HOST_NODE_ADDR a free port on 127.0.0.1 (one machine)."""
    port = free_port()
    meet = [script, "--meet", "--arg1", "x"]
    plain = [script, "--arg1", "x"]
    return [
        # The Usage section of torch/distributed/run.py, line for line.
        ("single-node multi-worker",
         ["--standalone", "--nnodes=1", "--nproc-per-node=2"], meet),
        ("stacked single-node multi-worker (a free port)",
         ["--rdzv-backend=c10d", "--rdzv-endpoint=localhost:0", "--nnodes=1",
          "--nproc-per-node=2"], meet),
        ("fault tolerant",
         ["--nnodes=1", "--nproc-per-node=2", "--max-restarts=3", "--rdzv-id=job7",
          "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:%d" % port], meet),
        ("elastic",
         ["--nnodes=1:4", "--nproc-per-node=2", "--max-restarts=3", "--rdzv-id=job8",
          "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:%d" % free_port(),
          "--rdzv-conf=last_call_timeout=1"], meet),
        # A line for each flag of torchrun --help (beside those above).
        ("static master (--master-addr --master-port --node-rank)",
         ["--nnodes=1", "--node-rank=0", "--master-addr=127.0.0.1",
          "--master-port=%d" % free_port(), "--nproc-per-node=2"], meet),
        ("nproc-per-node cpu", ["--nproc-per-node=cpu", "--standalone"], plain),
        ("module (-m)", ["--nproc-per-node=2", "-m", "doc_lines_worker", "--arg1", "x"], []),
        ("no-python", ["--nproc-per-node=2", "--no-python", python] + plain, []),
        ("run-path", ["--nproc-per-node=2", "--run-path"] + plain, []),
        ("role, restarts, monitor interval, start method",
         ["--nproc-per-node=2", "--role=trainer", "--max-restarts=2", "--monitor-interval=0.5",
          "--start-method=fork"], plain),
        ("logs: log dir, redirects, tee, local ranks filter",
         ["--nproc-per-node=2", "--log-dir=%s/logs" % work, "-r", "1", "-t", "0:2",
          "--local-ranks-filter=0"], plain),
        ("signals to handle", ["--nproc-per-node=2", "--signals-to-handle=SIGTERM,SIGINT"],
         plain),
        ("virtual local rank", ["--nproc-per-node=2", "--virtual-local-rank"], plain),
        ("local addr", ["--standalone", "--nproc-per-node=2", "--local-addr=127.0.0.1"], plain),
        ("event log handler", ["--nproc-per-node=2", "--event-log-handler=null"], plain),
        ("underscore spellings",
         ["--nproc_per_node=2", "--max_restarts=0", "--rdzv_backend=static",
          "--master_addr=127.0.0.1", "--master_port=%d" % free_port()], plain),
    ]


def run(command, work, name):
    out = tempfile.mkdtemp(dir=work, prefix="out-")
    env = dict(os.environ, DOC_LINES_OUT=out, PYTHONPATH=work)
    for key in list(env):
        if key.startswith(("PET_", "TORCHELASTIC_", "SLURM_")) or key in ("MASTER_ADDR",
                                                                          "MASTER_PORT"):
            del env[key]
    try:
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                              timeout=180)
    except subprocess.TimeoutExpired:
        return None, {}, "timed out"
    ranks = {}
    for entry in sorted(os.listdir(out)):
        with open(os.path.join(out, entry)) as f:
            ranks[entry] = json.load(f)
    return done.returncode, ranks, done.stderr[-3000:]


def main():
    acc_launch = os.path.abspath(sys.argv[1])
    wanted = sys.argv[2:]
    python = sys.executable
    try:
        import torch.distributed  # noqa: F401
    except ImportError:
        print("SKIP: %s has no torch.distributed" % python)
        return 77
    torchrun = [python, "-m", "torch.distributed.run"]
    work = tempfile.mkdtemp(prefix="doc-lines-")
    failures = []
    try:
        script = os.path.join(work, "doc_lines_worker.py")
        with open(script, "w") as f:
            f.write(WORKER)
        for name, flags, program in cases(work, script, python):
            if wanted and name not in wanted:
                continue
            theirs = run(torchrun + flags + program, work, name)
            ours = run([acc_launch, "--python", python] + flags + program, work, name)
            problems = compare(name, flags, theirs, ours)
            print("%-55s %s" % (name, "same" if not problems else "DIFFERENT"))
            for problem in problems:
                print("    " + problem)
            failures += problems
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("%d difference(s)" % len(failures))
    return 1 if failures else 0


def compare(name, flags, theirs, ours):
    (their_code, their_ranks, their_err), (our_code, our_ranks, our_err) = theirs, ours
    problems = []
    if their_code != 0:
        problems.append("torchrun exited %s: %s" % (their_code, their_err.strip()[-800:]))
    if our_code != 0:
        problems.append("acc-launch exited %s: %s" % (our_code, our_err.strip()[-800:]))
    if problems:
        return problems
    if sorted(their_ranks) != sorted(our_ranks):
        return ["ranks differ: torchrun %s, acc-launch %s" % (sorted(their_ranks),
                                                              sorted(our_ranks))]
    standalone = "--standalone" in flags
    for rank in sorted(their_ranks):
        a, b = their_ranks[rank], our_ranks[rank]
        for key in sorted(set(a) | set(b)):
            x, y = a.get(key), b.get(key)
            if key == "TORCHELASTIC_RUN_ID" and standalone:
                # Both make one up for a standalone job.
                x, y = x not in (None, "none"), y not in (None, "none")
            if x != y:
                problems.append("%s %s: torchrun %r, acc-launch %r" % (rank, key, x, y))
    return problems


if __name__ == "__main__":
    sys.exit(main())
