"""Every case of launch_flags.tsv and every config file of Accelerate's repository, launched by
the real `accelerate launch` and by acc-launch with the same arguments: each starts env_dump.sh
(or acc_env_dump.py for --module) as its worker, and the workers' environments and arguments
must agree, rank by rank, except for the differences listed below with their reasons. The exit
statuses must agree in kind (both start the workers, or both refuse). The TSV's own expectations
are checked against Accelerate's worker too, so that the table acc-launch is tested against
(accelerate_flags_test.cc) stays what the real program does.

Usage: against_accelerate_launch.py ACC_LAUNCH [--shard K/N] [--jobs J] [--case NAME ...]
Run it with the Python that has Accelerate (ACC_TORCH2_PYTHON); exits 77 where that Python
cannot import it.

How Accelerate runs here. One process imports Accelerate (and torch) once; each case then runs
in a child forked from it, which calls accelerate.commands.accelerate_cli.main() with
sys.argv = ["accelerate", "launch", ARGS...]: the `accelerate` console script less its imports,
so the launch goes through the real argparse parser, _validate_launch_command(), the real
prepare_*_env() and the real launcher (subprocess for the simple launcher, torch's elastic agent
for torchrun's), which starts the worker. Two package probes are answered yes, so that the code
path can run on a machine without the packages: is_fp8_available() (FP8 needs Transformer
Engine, MS-AMP or torchao) and is_deepspeed_available() with an empty `deepspeed.launcher.runner`
module (DeepSpeed's launcher imports one constant from it; on one machine it then runs torchrun
like the others). acc-launch does not probe packages either (docs/config.md, Divergences).
Nothing else needs a GPU: --multi_gpu, fp16 and bf16, FSDP, Megatron-LM and --gpu_ids only set
variables at launch (CUDA_VISIBLE_DEVICES included), and torch's agent starts CPU workers as
well as GPU ones; the cases one machine cannot run are NOT_RUNNABLE below.
Each case runs in its own network namespace where it can have one (root, or unprivileged user
namespaces): Accelerate's default port 29500 is then free for every case at once, as on a quiet
machine (elsewhere a busy 29500 sends Accelerate to another rendezvous: MASTER_ADDR, MASTER_PORT
and TORCHELASTIC_RUN_ID change), and a case of several machines runs them all, machine 0's
address added to the namespace's loopback; without one, the cases run one at a time and those of
several machines are not run.
"""
import argparse
import ctypes
import fcntl
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
DUMPER = os.path.join(HERE, "env_dump.sh")
CONFIGS = os.path.normpath(os.path.join(HERE, "../../../../shared/accelerate-configs"))
TIMEOUT_S = 60

# Cases the real `accelerate launch` cannot run on this one machine, and why. accelerate_flags_test
# and real_configs_test still check acc-launch's side of them through launch_flags.tsv's
# expectations and the config table (its dry run).
NOT_RUNNABLE = {
    "mpirun_hostfile": "Accelerate runs mpirun over the hostfile's hosts (acc-launch starts the "
    "workers itself: Divergences, 'MULTI_CPU starts its workers itself')",
    "config:docs__source__usage_guides__intel_cpu.md__L106-L123.yaml": "MULTI_CPU over mpirun: "
    "Accelerate runs mpirun over /home/user/hostfile, which is not here (acc-launch starts the "
    "workers itself)",
    "config:tests__test_configs__0_28_0_mpi.yaml": "MULTI_CPU over mpirun: Accelerate runs mpirun "
    "over /home/user/hostfile, which is not here (acc-launch starts the workers itself)",
}

# Deliberate differences (docs/config.md, "Divergences"), per case: what differs (variables;
# "*exit": the exit status; "*workers": the processes started) and the point of the docs. An entry
# whose case agrees after all fails the test, so that the list stays true.
_TPU_SAGEMAKER = ("TPU and SageMaker flags are refused: without --tpu or a SageMaker config "
                  "Accelerate ignores them and starts one local process")
DIVERGENT = {
    "num_processes": ({"*workers"}, "--num_processes N with distributed_type NO starts N "
                      "workers (Accelerate's simple launcher starts one)"),
    "fp8_backend_upper": ({"*exit"}, "Flag choices in any case: --fp8_backend TE is taken "
                          "(argparse refuses it)"),
    "zero_stage_out_of_range": ({"*exit"}, "Validation at load: --zero_stage 5 is refused "
                                "(Accelerate passes it on, DeepSpeed fails later)"),
    "use_parallelism_config_fsdp1": ({"*exit"}, "Validation at load: FSDP 1 with "
                                     "--use_parallelism_config is refused, as Accelerate's check "
                                     "says (it compares the string '1' with 1)"),
    "config:tests__test_configs__0_34_0_fp8.yaml": (
        {"ACCELERATE_FP8_OVERRIDE_FPROP", "ACCELERATE_FP8_OVERRIDE_DGRAD",
         "ACCELERATE_FP8_OVERRIDE_WGRAD"},
        "YAML read as meant: the string '(false, false, false)' is the tuple (Accelerate exports "
        "its characters '(', 'f', 'a')"),
}
for _name in ("tpu_cluster", "no_tpu_cluster", "tpu_use_sudo", "vm", "env", "aws_access_key_id",
              "aws_secret_access_key"):
    DIVERGENT[_name] = ({"*exit"}, _TPU_SAGEMAKER)

# acc-launch's own variables, which `accelerate launch` does not set (each is set only where the
# user has not set it): ACC_* (the progress file and the stack hook), PYTHONFAULTHANDLER (the
# stack hook's tracebacks; its directory in PYTHONPATH: ours_pythonpath), PyTorch's Flight
# Recorder (the hang report), the pre-2.2 name of TORCH_NCCL_ASYNC_ERROR_HANDLING, torchelastic's
# file timer (the sections' deadlines), and, for the one process of the simple launcher, what
# acc-launch gives every worker it starts (its error file, NCCL's error handling).
OURS_ONLY = {
    "PYTHONFAULTHANDLER",
    "TORCH_NCCL_TRACE_BUFFER_SIZE",
    "TORCH_FR_BUFFER_SIZE",
    "TORCH_NCCL_DUMP_ON_TIMEOUT",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
    "TORCH_FR_DUMP_TEMP_FILE",
    "TORCH_NCCL_DEBUG_INFO_PIPE_FILE",
    "NCCL_ASYNC_ERROR_HANDLING",
    "TORCHELASTIC_ERROR_FILE",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "TORCHELASTIC_TIMER_FILE",
}
# torchrun-internal: the agent puts its own signal list into its own environment (for its
# PContext), and the workers inherit it; nothing reads it in a worker.
THEIRS_ONLY = {"TORCHELASTIC_SIGNALS_TO_HANDLE"}
# Set by both, to a value of each launcher's making (a path under its run directory).
ANY_VALUE = {"TORCHELASTIC_ERROR_FILE"}
# Not the launchers': the test's own, and the shell's.
IGNORED = {"ACC_ENV_DUMP", "PWD", "OLDPWD", "SHLVL", "_"}


def load_tsv(path):
    cases = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            name, args, expectations = line.split("\t")
            cases.append({"name": name, "args": args.split(), "expect": expectations.split()})
    return cases


def config_cases(directory):
    cases = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        cases.append({
            "name": "config:" + name,
            "args": ["--config_file", path, "--no_python", "/bin/true"],
            # As real_configs_test.cc runs them.
            "expect": ["$OMP_NUM_THREADS=3"],
            "config": path,
        })
    return cases


def expand(text, case_dir):
    return (text.replace("{data}", HERE).replace("{cwd}", case_dir)
            .replace("{tmp}", os.path.join(case_dir, "tmp")))


def case_environment(case, case_dir, import_env):
    """What both launchers start with: a clean environment, Accelerate's import-time additions,
    an empty HF_HOME (no default config file), the test's own temporary directory (where the run
    directories that --tee keeps go, and go with it), and the case's $NAME=VALUE."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/"),
           "LANG": "C.UTF-8", "HF_HOME": os.path.join(case_dir, "hf_home"),
           "TMPDIR": tempfile.gettempdir()}
    env.update(import_env)
    for e in case["expect"]:
        if e.startswith("$"):
            key, _, value = e[1:].partition("=")
            if value:
                env[key] = expand(value, case_dir)
            else:
                env.pop(key, None)
    return env


def launch_args(case, case_dir, ours):
    args = []
    module = False
    for i, a in enumerate(case["args"]):
        a = expand(a, case_dir)
        if a == "/bin/true":
            a = DUMPER
        elif a == "json.tool" and i > 0 and case["args"][i - 1] in ("-m", "--module"):
            a, module = "acc_env_dump", True
        args.append(a)
    if ours and module:
        # acc-launch's interpreter for `python -m`: the one Accelerate uses (sys.executable).
        args = ["--python", sys.executable] + args
    return args


# --- Running the two launchers -----------------------------------------------------------------

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000


def private_network():
    """Moves this process into a network namespace of its own with loopback up; False where it
    cannot."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWNET) != 0:
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
            return False
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {gid} 1")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
        flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH", b"lo", 0)))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP))
    return True


def answer_package_probes_yes():
    import accelerate.commands.launch as launch
    import accelerate.utils.launch as utils_launch

    utils_launch.is_fp8_available = lambda: True
    launch.is_deepspeed_available = lambda: True
    runner = types.ModuleType("deepspeed.launcher.runner")
    runner.DEEPSPEED_ENVIRONMENT_NAME = ".deepspeed_env"
    for name in ("deepspeed", "deepspeed.launcher"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["deepspeed.launcher.runner"] = runner


def wait_group(pid, deadline):
    """Waits for child `pid` (a process-group leader) until `deadline`; kills its group then."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.02)


def start_accelerate(args, env, case_dir, out_dir, log):
    from accelerate.commands.accelerate_cli import main

    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setpgid(0, 0)
            os.chdir(case_dir)
            for fd, name in ((1, log + ".out"), (2, log + ".err")):
                os.dup2(os.open(os.path.join(case_dir, name), os.O_WRONLY | os.O_CREAT, 0o644), fd)
            os.environ.clear()
            os.environ.update(env, ACC_ENV_DUMP=out_dir)
            answer_package_probes_yes()
            sys.argv = ["accelerate", "launch"] + args
            try:
                main()
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    return pid


def start_ours(acc_launch, args, env, case_dir, out_dir, log):
    with open(os.path.join(case_dir, log + ".out"), "wb") as out, \
         open(os.path.join(case_dir, log + ".err"), "wb") as err:
        return subprocess.Popen([acc_launch] + args, cwd=case_dir,
                                env=dict(env, ACC_ENV_DUMP=out_dir), stdout=out, stderr=err,
                                start_new_session=True)


def run_machines(start, machines, log):
    """Starts one launcher per machine's arguments, all at once, and waits for them: the exit
    status of the case's own machine (the first), "timeout", or the others' when they fail."""
    deadline = time.monotonic() + TIMEOUT_S
    started = [start(args, log if i == 0 else f"{log}.machine{i}")
               for i, args in enumerate(machines)]
    codes = []
    for child in started:  # a pid, or a Popen kept alive so that subprocess never reaps it
        codes.append(wait_group(getattr(child, "pid", child), deadline))
        if hasattr(child, "returncode"):
            child.returncode = codes[-1]
    if "timeout" in codes:
        return "timeout"
    return codes[0] if codes[0] != 0 or all(c == 0 for c in codes) else f"others: {codes[1:]}"


def arg_value(args, flag):
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
    return None


def config_of(case):
    if "config" not in case:
        return {}
    import yaml

    with open(case["config"]) as f:
        config = yaml.safe_load(f)
    return config if isinstance(config, dict) else {}


def machines_of(case, args):
    """A case on machine R of N (--num_machines and --machine_rank, or the config file's): its
    own arguments first, then the other machines', which differ in --machine_rank only; and the
    address of machine 0."""
    config = config_of(case)
    n = int(arg_value(args, "--num_machines") or config.get("num_machines") or 1)
    ip = arg_value(args, "--main_process_ip") or str(config.get("main_process_ip"))
    if n == 1:
        return [args], ip
    if "--machine_rank" not in args:
        args = ["--machine_rank", str(config.get("machine_rank", 0))] + args
    rank = arg_value(args, "--machine_rank")
    at = args.index("--machine_rank") + 1
    return [args] + [args[:at] + [str(r)] + args[at + 1:] for r in range(n) if str(r) != rank], ip


def add_loopback_address(ip):
    """Gives this namespace's loopback the other machines' address too (`ip addr add` as an
    ioctl on an alias, lo:1), so that they can all run here."""
    SIOCSIFADDR, SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8916, 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        address = struct.pack("HH4s8x", socket.AF_INET, 0, socket.inet_aton(ip))
        fcntl.ioctl(s, SIOCSIFADDR, struct.pack("16s16s", b"lo:1", address))
        flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH", b"lo:1", 0)))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", b"lo:1", flags | IFF_UP))


def load_dumps(directory):
    dumps = {}
    for name in os.listdir(directory):
        rank, kind = name.split(".")
        with open(os.path.join(directory, name), "rb") as f:
            items = [os.fsdecode(x) for x in f.read().split(b"\0")[:-1]]
        dumps.setdefault(rank, {})[kind] = (
            dict(i.split("=", 1) for i in items) if kind == "env" else items)
    return dumps


# --- Comparing them ----------------------------------------------------------------------------

def port_given(case):
    if any(a.split("=")[0] in ("--main_process_port", "--main-process-port") for a in case["args"]):
        return True
    return config_of(case).get("main_process_port") is not None


def ours_pythonpath(env):
    """PYTHONPATH less the directory of acc-launch's stack hook: `python` in the run directory,
    which holds the worker's own directory (ACC_STACK_DIR)."""
    value = env.get("PYTHONPATH")
    if value is None or "ACC_STACK_DIR" not in env:
        return value
    worker_dir = env["ACC_STACK_DIR"]
    rest = [p for p in value.split(":") if not (
        os.path.basename(p) == "python" and worker_dir.startswith(os.path.dirname(p) + "/"))]
    return ":".join(rest) if rest else None


def compare_worker(case, rank, theirs, ours, base):
    """The differences of one rank's worker, as (what, message)."""
    problems = []
    t_env, o_env = theirs["env"], dict(ours["env"])
    o_env["PYTHONPATH"] = ours_pythonpath(o_env)
    if o_env["PYTHONPATH"] is None:
        del o_env["PYTHONPATH"]
    keys = {k for k in set(t_env) | set(o_env)
            if k not in IGNORED and (t_env.get(k) != base.get(k) or o_env.get(k) != base.get(k))}
    for key in sorted(keys):
        t, o = t_env.get(key), o_env.get(key)
        if t == o:
            continue
        if t is None and (key in OURS_ONLY or key.startswith("ACC_")):
            continue
        if o is None and key in THEIRS_ONLY:
            continue
        if t is not None and o is not None and key in ANY_VALUE:
            continue
        if key == "MASTER_PORT" and t is not None and o is not None and not port_given(case):
            continue  # Divergences: "No port given, one machine: a free port is chosen"
        problems.append((key, f"{rank}: {key}: accelerate launch: {t!r}, acc-launch: {o!r}"))
    if theirs["argv"] != ours["argv"]:
        problems.append(("*argv", f"{rank}: arguments: accelerate launch: {theirs['argv']}, "
                         f"acc-launch: {ours['argv']}"))
    return problems


def check_tsv_expectations(case, case_dir, rc, dumps, allowed):
    """The TSV's expectations (written from Accelerate's code) against Accelerate's worker. A
    divergent case's expectations are acc-launch's (the TSV says so), and are left out."""
    problems = []
    if allowed:
        return problems
    # The first worker of the case's machine.
    machine = arg_value(case["args"], "--machine_rank") or "0"
    first = next((d for d in dumps.values() if d["env"].get("GROUP_RANK") == machine
                  and d["env"].get("LOCAL_RANK") == "0"), dumps.get("ranknone"))
    if rc != 0 and not any(e.startswith("exit=") for e in case["expect"]):
        problems.append(f"TSV says exit=0 (by default); accelerate launch exits {rc}")
    for raw in case["expect"]:
        e = expand(raw, case_dir)
        if e.startswith("$") or e.startswith("stderr~"):
            continue
        if e.startswith("exit="):
            if (int(e[5:]) == 0) != (rc == 0):
                problems.append(f"TSV says {e}; accelerate launch exits {rc}")
            continue
        if rc != 0 or first is None:
            continue
        if e.startswith("@"):
            word = {"/bin/true": DUMPER, "json.tool": "acc_env_dump"}.get(e[1:], e[1:])
            if word not in first["argv"]:
                problems.append(f"TSV says {e}; accelerate launch's worker has {first['argv']}")
        elif e.startswith("!"):
            if e[1:] in first["env"]:
                problems.append(f"TSV says {e}; accelerate launch sets "
                                f"{e[1:]}={first['env'][e[1:]]!r}")
        else:
            key, _, value = e.partition("=")
            got = first["env"].get(key)
            if got != value and not (key in ANY_VALUE and got is not None):
                problems.append(f"TSV says {e}; accelerate launch gives {key}={got!r}")
    return problems


def flags_without_a_case(tsv_cases):
    """Every option of the real `accelerate launch` parser has a case in launch_flags.tsv (its
    `-`-spelled twins and -h aside): a flag a new Accelerate adds shows up here."""
    from accelerate.commands.launch import launch_command_parser

    options = set()
    for action in launch_command_parser()._actions:
        names = set(action.option_strings)
        options |= {o for o in names if o != "-h" and not (
            o.startswith("--") and "-" in o[2:] and "--" + o[2:].replace("-", "_") in names)}
    used = {a.split("=")[0] for c in tsv_cases for a in c["args"] if a.startswith("-")}
    used |= {"--" + u[2:].replace("-", "_") for u in used if u.startswith("--")}
    return sorted(options - used)


def wait_for_port(port, seconds):
    """Without a network namespace: waits until nothing listens on `port` (another test's)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) != 0:
                return
        time.sleep(0.2)


def run_case(case, acc_launch, root, import_env, isolated):
    case_dir = os.path.join(root, case["name"].replace(":", "_"))
    for sub in ("theirs", "ours", "hf_home", "tmp"):
        os.makedirs(os.path.join(case_dir, sub))
    shutil.copy(os.path.join(HERE, "acc_env_dump.py"), case_dir)
    env = case_environment(case, case_dir, import_env)
    allowed, reason = DIVERGENT.get(case["name"], (set(), ""))
    if not isolated:
        wait_for_port(29500, 30)
    theirs_dir, ours_dir = os.path.join(case_dir, "theirs"), os.path.join(case_dir, "ours")
    theirs_args, ip = machines_of(case, launch_args(case, case_dir, False))
    ours_args, _ = machines_of(case, launch_args(case, case_dir, True))
    if len(theirs_args) > 1:
        add_loopback_address(socket.gethostbyname(ip))
    started = time.monotonic()
    rc_theirs = run_machines(lambda args, log: start_accelerate(args, env, case_dir, theirs_dir,
                                                                log), theirs_args, "accelerate")
    middle = time.monotonic()
    rc_ours = run_machines(lambda args, log: start_ours(acc_launch, args, env, case_dir, ours_dir,
                                                        log), ours_args, "acc-launch")
    result = {"name": case["name"], "rc": [rc_theirs, rc_ours], "problems": [],
              "seconds": [round(middle - started, 2), round(time.monotonic() - middle, 2)]}
    problems = result["problems"]
    theirs, ours = load_dumps(theirs_dir), load_dumps(ours_dir)
    differences = []
    if "timeout" in (rc_theirs, rc_ours):
        problems.append(f"timed out after {TIMEOUT_S} s (accelerate launch: {rc_theirs}, "
                        f"acc-launch: {rc_ours})")
    elif (rc_theirs == 0) != (rc_ours == 0):
        differences.append(("*exit", f"exit status: accelerate launch {rc_theirs}, "
                            f"acc-launch {rc_ours}"))
    elif rc_theirs == 0 and rc_ours == 0:
        if sorted(theirs) != sorted(ours):
            differences.append(("*workers", f"workers: accelerate launch {sorted(theirs)}, "
                                f"acc-launch {sorted(ours)}"))
        elif not theirs and "--help" not in case["args"]:
            problems.append("no worker started under either launcher")
        for rank in sorted(set(theirs) & set(ours)):
            differences += compare_worker(case, rank, theirs[rank], ours[rank], env)
    if "*workers" in allowed:
        differences = [d for d in differences if d[0] == "*workers"]
    problems += [message for what, message in differences if what not in allowed]
    if allowed and not any(what in allowed for what, _ in differences) and not problems:
        problems.append(f"listed in DIVERGENT ({reason}) but agrees: take it off the list")
    if "config" not in case:
        problems += check_tsv_expectations(case, case_dir, rc_theirs, theirs, allowed)
    if problems:
        for name in ("accelerate.err", "acc-launch.err"):
            with open(os.path.join(case_dir, name), errors="replace") as f:
                tail = f.read()[-1500:]
            if tail.strip():
                result.setdefault("stderr", {})[name] = tail
    return result


def run_all(cases, jobs, acc_launch, root, import_env, isolated):
    """Runs the cases, `jobs` at once, each in a child of this process (in a network namespace of
    its own when `isolated`); returns their results."""
    running = {}
    results = []
    pending = list(cases)
    while pending or running:
        while pending and len(running) < jobs:
            case = pending.pop(0)
            result_file = os.path.join(root, case["name"].replace(":", "_") + ".json")
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    if isolated:
                        private_network()
                    result = run_case(case, acc_launch, root, import_env, isolated)
                    with open(result_file, "w") as f:
                        json.dump(result, f)
                    code = 0
                except BaseException:
                    traceback.print_exc()
                finally:
                    os._exit(code)
            running[pid] = (case, result_file)
        pid, status = os.wait()
        case, result_file = running.pop(pid)
        if os.path.exists(result_file):
            with open(result_file) as f:
                results.append(json.load(f))
        else:
            results.append({"name": case["name"], "rc": [None, None], "seconds": [0, 0],
                            "problems": [f"the case's process failed ({status})"]})
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("acc_launch")
    parser.add_argument("--shard", default="0/1", help="K/N: the K-th of N slices of the cases")
    parser.add_argument("--jobs", type=int, default=4, help="cases at once")
    parser.add_argument("--case", action="append", help="only this case (repeatable)")
    parser.add_argument("--keep", action="store_true", help="keep the cases' directories")
    options = parser.parse_args()
    options.acc_launch = os.path.abspath(options.acc_launch)

    before = dict(os.environ)
    try:
        import accelerate
        import accelerate.commands.accelerate_cli  # noqa: F401 (the console script's imports)
    except ImportError as e:
        print(f"SKIP: {sys.executable} cannot import accelerate: {e}")
        return 77
    import_env = {k: v for k, v in os.environ.items() if before.get(k) != v}

    cases = load_tsv(os.path.join(HERE, "launch_flags.tsv"))
    missing = flags_without_a_case(cases)
    if os.path.isdir(CONFIGS):
        cases += config_cases(CONFIGS)
    else:
        print(f"no {CONFIGS}: the flag cases only")
    names = {c["name"] for c in cases}
    missing += [f"{name}: in NOT_RUNNABLE or DIVERGENT, but no such case"
                for name in sorted(set(NOT_RUNNABLE) | set(DIVERGENT)) if name not in names]
    k, n = (int(x) for x in options.shard.split("/"))
    cases = [c for i, c in enumerate(cases) if i % n == k]
    if options.case:
        cases = [c for c in cases if c["name"] in options.case]
    skipped = [c for c in cases if c["name"] in NOT_RUNNABLE]
    cases = [c for c in cases if c["name"] not in NOT_RUNNABLE]

    root = tempfile.mkdtemp(prefix="acc-vs-accelerate-")
    # One probe child says whether the cases can have network namespaces of their own.
    probe = os.fork()
    if probe == 0:
        try:
            os._exit(0 if private_network() else 1)
        except BaseException:
            os._exit(1)
    isolated = os.waitpid(probe, 0)[1] == 0
    if not isolated:
        # Several machines need machine 0's address on loopback, in a namespace of their own.
        several = [c for c in cases if len(machines_of(c, c["args"])[0]) > 1]
        for c in several:
            NOT_RUNNABLE[c["name"]] = "several machines: needs a network namespace"
        skipped += several
        cases = [c for c in cases if c not in several]
    jobs = options.jobs if isolated else 1
    print(f"accelerate {accelerate.__version__} ({sys.executable}) against {options.acc_launch}: "
          f"{len(cases)} case(s), {jobs} at once"
          + ("" if isolated else " (no network namespace here: one at a time)"), flush=True)

    started = time.monotonic()
    results = run_all(cases, jobs, options.acc_launch, root, import_env, isolated)
    wall = time.monotonic() - started

    if k == 0 and not options.case:
        results.append({"name": "parser: every flag of accelerate launch has a case", "rc": [0, 0],
                        "seconds": [0, 0], "problems": [
                            m if ":" in m else f"{m}: no case in launch_flags.tsv"
                            for m in missing]})
    failed = [r for r in results if r["problems"]]
    for r in sorted(results, key=lambda r: r["name"]):
        print(f"{'FAIL' if r['problems'] else 'ok  '} {r['name']}: exit {r['rc'][0]} / {r['rc'][1]}"
              f" in {r['seconds'][0]} / {r['seconds'][1]} s")
        for p in r["problems"]:
            print("     " + p)
        for name, tail in r.get("stderr", {}).items():
            print(f"     {name}: " + tail.replace("\n", "\n       "))
    for c in skipped:
        print(f"skip {c['name']}: {NOT_RUNNABLE[c['name']]}")
    cpu = os.times()
    print(f"{len(results) - len(failed)} of {len(results)} case(s) agree, {len(skipped)} not "
          f"runnable here; {wall:.1f} s wall, {cpu.children_user + cpu.children_system:.1f} s CPU "
          f"in the cases")
    if not options.keep:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print("kept " + root)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
