"""acc-launch's Python side, installed by the launcher into the run directory (on the workers'
PYTHONPATH). Two uses:

  import acc_launch
  acc_launch.beat()                                   # a sign of life, e.g. once per step
  with acc_launch.section("checkpoint", timeout=600): # a named section with its own deadline
      save(...)

and, without any change to the program, a record of every torch.distributed collective and
point-to-point call: sitecustomize.py calls _start(), which patches torch.distributed when the
program imports it (importing torch here would cost seconds at every start).

Everything goes into the worker's progress file (ACC_PROGRESS_FILE), byte for byte the layout of
common/include/acc/common/progress_file.h, which the launcher's stall watch and hang report read.
Only the process that claimed the file writes it: the first Python process of the worker. Its
children (DataLoader workers, subprocesses) inherit the variable and stay silent. Outside
acc-launch every function here does nothing.
"""
import mmap as _mmap
import os as _os
import struct as _struct
import sys as _sys
import time as _time

__all__ = ["beat", "section"]

_MAGIC = b"ACCPROG1"
_VERSION = 1
_CAPACITY = 512
_HEADER_SIZE = 256
_RECORD_SIZE = 128
_FILE_SIZE = _HEADER_SIZE + _CAPACITY * _RECORD_SIZE
# Header offsets (progress_file.h).
_PID, _BEATS, _STARTED, _COMPLETED, _LAST = 16, 24, 32, 40, 48
_SECTION_STARTED, _SECTION_DEADLINE, _IN_COLLECTIVE, _SECTION = 56, 64, 72, 80
_SECTION_SIZE = 48
_STEP, _TOTAL_STEPS = 128, 136  # the program's step and the run's total (0: not given)
# A record: seq, start_ns, end_ns, numel, group size, peer, group, op, dtype, where.
_RECORD = _struct.Struct("<QqqQii24s16s8s40s")
_END = 16
_U64 = _struct.Struct("<Q")
_I64 = _struct.Struct("<q")

_now = _time.monotonic_ns  # CLOCK_MONOTONIC, as the launcher's steady_clock


def _drop_own_frame(error):
    """Takes the calling wrapper's frame off `error`'s traceback, so that the bare `raise` that
    follows shows the user's frame calling torch's, as without acc-launch: Python >= 3.11
    re-raises with the traceback as it is then, without adding the frame again. (Earlier
    Pythons re-raise the traceback they caught, wrapper frame included.)"""
    tb = error.__traceback__
    if tb is not None and tb.tb_next is not None and tb.tb_frame is _sys._getframe(1):
        error.__traceback__ = tb.tb_next


def _text(value, size):
    return value.encode("utf-8", "replace")[: size - 1]


class _File:
    """The mapped progress file of this worker, or None when this process does not own it."""

    def __init__(self, memory):
        self.m = memory
        self.sections = []  # open sections, innermost last: (name, started_ns, deadline_ns)

    def add(self, offset, n):
        value = _U64.unpack_from(self.m, offset)[0] + n
        _U64.pack_into(self.m, offset, value)
        return value

    def set(self, offset, value):
        _I64.pack_into(self.m, offset, value)

    def beat(self, step=None, total=None):
        # The total before the step, the step before the beat: a reader that sees the beat sees
        # both.
        if total is not None:
            _U64.pack_into(self.m, _TOTAL_STEPS, total)
        if step is not None:
            _U64.pack_into(self.m, _STEP, step)
        self.add(_BEATS, 1)
        self.set(_LAST, _now())

    def alive(self):
        """Progress in time only: not a beat, which stands for work done (a step)."""
        self.set(_LAST, _now())

    def begin(self, group, seq, op, numel, dtype, group_size, peer, where):
        slot = _U64.unpack_from(self.m, _STARTED)[0]
        _RECORD.pack_into(self.m, _HEADER_SIZE + (slot % _CAPACITY) * _RECORD_SIZE, seq, _now(),
                          0, numel, group_size, peer, _text(group, 24), _text(op, 16),
                          _text(dtype, 8), _text(where, 40))
        _U64.pack_into(self.m, _STARTED, slot + 1)  # publishes the record
        return slot

    def end(self, slot):
        now = _now()
        if _U64.unpack_from(self.m, _STARTED)[0] - slot <= _CAPACITY:
            offset = _HEADER_SIZE + (slot % _CAPACITY) * _RECORD_SIZE
            start = _I64.unpack_from(self.m, offset + 8)[0]
            self.set(offset + _END, now)
            self.set(_IN_COLLECTIVE, _I64.unpack_from(self.m, _IN_COLLECTIVE)[0] + now - start)
        self.set(_LAST, now)
        self.add(_COMPLETED, 1)

    def add_done(self, group, seq, op, numel, dtype, group_size, where, start, end, counted_ns,
                 calls):
        """A collective that ran past the wrapped calls, seen once it ended: one finished record
        (start..end), `counted_ns` added to the time in collectives and `calls` to the count."""
        slot = _U64.unpack_from(self.m, _STARTED)[0]
        _RECORD.pack_into(self.m, _HEADER_SIZE + (slot % _CAPACITY) * _RECORD_SIZE, seq, start,
                          end, numel, group_size, -1, _text(group, 24), _text(op, 16),
                          _text(dtype, 8), _text(where, 40))
        _U64.pack_into(self.m, _STARTED, slot + 1)
        self.set(_IN_COLLECTIVE, _I64.unpack_from(self.m, _IN_COLLECTIVE)[0] + counted_ns)
        self.set(_LAST, _now())
        self.add(_COMPLETED, calls)

    def show_section(self):
        name, started, deadline = self.sections[-1] if self.sections else ("", 0, 0)
        self.set(_SECTION_DEADLINE, 0)  # no deadline while the name changes
        self.m[_SECTION:_SECTION + _SECTION_SIZE] = _text(name, _SECTION_SIZE).ljust(
            _SECTION_SIZE, b"\0")
        self.set(_SECTION_STARTED, started)
        self.set(_SECTION_DEADLINE, deadline)
        self.set(_LAST, _now())


_file = None
_opened = False


def _open():
    """Maps ACC_PROGRESS_FILE and claims it for this process when nobody did; None otherwise."""
    global _file, _opened
    if _opened:
        return _file if _file is not None and _owner == _os.getpid() else None
    _opened = True
    path = _os.environ.get("ACC_PROGRESS_FILE")
    if not path:
        return None
    try:
        fd = _os.open(path, _os.O_RDWR | getattr(_os, "O_CLOEXEC", 0))
        try:
            memory = _mmap.mmap(fd, _FILE_SIZE, _mmap.MAP_SHARED,
                                _mmap.PROT_READ | _mmap.PROT_WRITE)
        finally:
            _os.close(fd)
    except (OSError, ValueError):
        return None
    if memory[:8] != _MAGIC or _struct.unpack_from("<II", memory, 8) != (_VERSION, _CAPACITY):
        return None
    _claim(memory)
    _file = _File(memory)
    return _file if _owner == _os.getpid() else None


_owner = 0


def _claim(memory):
    global _owner
    pid = _I64.unpack_from(memory, _PID)[0]
    if pid == 0:
        _I64.pack_into(memory, _PID, _os.getpid())
        pid = _os.getpid()
    _owner = pid


def _count(value):
    """`value` as a step count for the progress file (an int, or a tensor's item), else None."""
    if value is None:
        return None
    try:
        value = int(value)
    except (TypeError, ValueError, OverflowError, RuntimeError):
        return None
    return value if 0 <= value < 2 ** 64 else None


def beat(step=None, total=None):
    """A sign of life that is not a collective: call it once per step (it costs a few memory
    writes). The launcher's stall watch counts it as progress. `step`, the steps done so far (a
    resumed run's global step), and `total`, the steps the whole run makes, let the launcher
    report how far the run is and how long it has left (Kubeflow Trainer's TrainJob status,
    docs/clusters.md); give them on every beat or on some, or not at all (then the launcher
    counts the beats, and knows no total). Never raises."""
    f = _open()
    if f is not None:
        f.beat(_count(step), _count(total))


class section:
    """`with acc_launch.section("checkpoint", timeout=600): ...` names what the program is doing
    and, with a timeout (seconds), when it must be done: past it, the launcher reports the
    section by name and stops the job as for a stall (--stall_action). Sections nest; the inner
    one is shown while it is open. Entering and leaving count as progress."""

    def __init__(self, name, timeout=None):
        self.name = str(name)
        self.timeout = timeout

    def __enter__(self):
        f = _open()
        if f is not None:
            now = _now()
            deadline = now + int(self.timeout * 1e9) if self.timeout else 0
            f.sections.append((self.name, now, deadline))
            f.show_section()
        return self

    def __exit__(self, *exc):
        f = _open()
        if f is not None and f.sections:
            f.sections.pop()
            f.show_section()
        return False


# --- the collective recorder ------------------------------------------------------------------

# Collectives: (name, parameter that holds the group). Point-to-point: (name, peer parameter).
_COLLECTIVES = ("all_reduce", "all_reduce_coalesced", "all_reduce_multigpu", "broadcast",
                "broadcast_multigpu", "reduce", "reduce_multigpu", "all_gather",
                "all_gather_multigpu", "all_gather_into_tensor", "_all_gather_base",
                "all_gather_coalesced", "all_gather_object", "gather", "gather_object",
                "scatter", "scatter_object_list", "broadcast_object_list", "reduce_scatter",
                "reduce_scatter_multigpu", "reduce_scatter_tensor", "_reduce_scatter_base",
                "all_to_all", "all_to_all_single", "barrier", "monitored_barrier")
_POINT_TO_POINT = {"send": "dst", "isend": "dst", "recv": "src", "irecv": "src"}
_SHORT_NAMES = {"all_gather_into_tensor": "all_gather_base", "_all_gather_base": "all_gather_base",
                "reduce_scatter_tensor": "reduce_scatter_base",
                "_reduce_scatter_base": "reduce_scatter_base",
                "all_reduce_coalesced": "all_reduce_coal", "all_gather_coalesced": "all_gather_coal",
                "scatter_object_list": "scatter_object", "broadcast_object_list": "broadcast_object",
                "batch_isend_irecv": "batch_p2p", "all_gather_object": "all_gather_obj", "reduce_scatter_multigpu": "reduce_scatter_mg",
                "all_gather_multigpu": "all_gather_mg", "all_reduce_multigpu": "all_reduce_mg",
                "broadcast_multigpu": "broadcast_mg"}


class _Recorder:
    def __init__(self, dist, c10d, f):
        import inspect
        import threading
        self.dist, self.c10d, self.f = dist, c10d, f
        self.inspect = inspect
        self.local = threading.local()  # depth: calls inside a recorded call are not recorded
        self.seqs = {}  # group name, or (group name, peer) for point-to-point: the last number
        self.tensor_type = _sys.modules["torch"].Tensor
        self.here = _os.path.abspath(__file__)
        self.pid = _os.getpid()

    def group_of(self, group):
        if group is None or group is self.dist.GroupMember.WORLD:
            return "default", self.dist.get_world_size()
        try:
            if group is self.c10d._get_default_group():
                return "default", self.dist.get_world_size()
            name = self.c10d._pg_names.get(group, "?")
            return name, group.size()
        except Exception:
            return "?", 0

    def tensors(self, value, out, depth=0):
        if isinstance(value, self.tensor_type):
            out.append(value)
        elif isinstance(value, (list, tuple)) and depth < 2:
            for item in value:
                self.tensors(item, out, depth + 1)
        elif hasattr(value, "tensor") and hasattr(value, "peer"):  # a P2POp
            out.append(value.tensor)

    def where(self):
        frame = _sys._getframe(2)
        while frame is not None:
            path = frame.f_code.co_filename
            if ("/torch/" not in path and _os.path.abspath(path) != self.here
                    and not path.startswith("<")):
                return "%s:%d" % (_os.path.basename(path), frame.f_lineno)
            frame = frame.f_back
        return "?"

    def wrap(self, name, fn, peer_param):
        try:
            params = list(self.inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            return fn
        group_at = params.index("group") if "group" in params else None
        peer_at = params.index(peer_param) if peer_param in params else None
        op = _SHORT_NAMES.get(name, name)
        recorder = self

        def recorded(*args, **kwargs):
            local = recorder.local
            if getattr(local, "depth", 0) or _os.getpid() != recorder.pid:
                try:
                    return fn(*args, **kwargs)
                except BaseException as error:
                    _drop_own_frame(error)
                    raise
            try:
                slot = recorder.begin(op, args, kwargs, group_at, peer_at, peer_param)
            except Exception:
                slot = None
            local.depth = 1
            try:
                result = fn(*args, **kwargs)
            except BaseException as error:
                local.depth = 0
                if slot is not None:
                    recorder.f.end(slot)
                _drop_own_frame(error)
                raise
            local.depth = 0
            if slot is None:
                return result
            return recorder.finish(slot, result)

        recorded.__name__ = getattr(fn, "__name__", name)
        recorded.__qualname__ = getattr(fn, "__qualname__", name)
        recorded.__doc__ = getattr(fn, "__doc__", None)
        recorded.__wrapped__ = fn
        recorded._acc_recorded = True
        return recorded

    def begin(self, op, args, kwargs, group_at, peer_at, peer_param):
        group = kwargs.get("group") if "group" in kwargs else (
            args[group_at] if group_at is not None and group_at < len(args) else None)
        if op == "batch_p2p" and args and args[0]:
            group = getattr(args[0][0], "group", None)
        group_name, size = self.group_of(group)
        peer = -1
        if peer_param is not None:
            value = kwargs.get(peer_param) if peer_param in kwargs else (
                args[peer_at] if peer_at is not None and peer_at < len(args) else None)
            peer = int(value) if value is not None else -1
        tensors = []
        for value in args:
            self.tensors(value, tensors)
        for key, value in kwargs.items():
            if key != "group":
                self.tensors(value, tensors)
        numel = sum(t.numel() for t in tensors)
        dtype = str(tensors[0].dtype).replace("torch.", "") if tensors else (
            "object" if "object" in op else "")
        key = group_name if peer_param is None else (group_name, peer)
        seq = self.seqs.get(key, 0) + 1
        self.seqs[key] = seq
        return self.f.begin(group_name, seq, op, numel, dtype, size, peer, self.where())

    def finish(self, slot, result):
        """Ends the record now, or when the asynchronous work it returned completes."""
        works = result if isinstance(result, list) else [result]
        works = [w for w in works if hasattr(w, "wait")]
        if not works:
            self.f.end(slot)
            return result
        remaining = [len(works)]
        f = self.f

        def one_done(*_):
            remaining[0] -= 1
            if remaining[0] == 0:
                f.end(slot)

        wrapped = []
        for work in works:
            try:
                work.get_future().then(one_done)
                wrapped.append(work)
            except Exception:  # no future (Gloo's send/recv): the record ends at wait()
                wrapped.append(_WaitedWork(work, one_done))
        if isinstance(result, list):
            return wrapped
        return wrapped[0]

    def init_done(self, fn):
        def init_process_group(*args, **kwargs):
            del _retired_groups[:]
            try:
                result = fn(*args, **kwargs)
            except BaseException as error:
                _drop_own_frame(error)
                raise
            # Start-up is over: the stall clock runs from here. Not a beat: an attempt that fails
            # after init_process_group and before its first step made no progress
            # (--max_no_progress_restarts).
            self.f.alive()
            try:
                self.watch_ddp()
            except Exception:
                pass
            return result
        init_process_group.__wrapped__ = fn
        init_process_group.__doc__ = fn.__doc__
        init_process_group._acc_recorded = True
        return init_process_group


    def watch_ddp(self):
        """DDP's gradient all_reduces: its Reducer launches them from C++ during backward, past
        the wrapped calls, and a comm hook is the user's to register. DDP's own logger times them
        (backward_comm_time: from the first bucket's launch to the last bucket's end) at the
        iterations it samples, and the next forward publishes the sample. After each forward, a
        new sample becomes one finished record "ddp_all_reduce", in group "ddp" ("ddp:<name>"
        for a group other than the default) and numbered apart from the program's own calls,
        counted for the iterations since the last sample. On CPU every iteration is sampled (a
        few clock reads); on CUDA PyTorch's own rate stands, since a sample synchronises the
        previous iteration's CUDA events, and the share is that estimate."""
        module = _sys.modules.get("torch.nn.parallel.distributed")
        ddp = getattr(module, "DistributedDataParallel", None)
        if ddp is None or getattr(ddp, "_acc_recorded", False):
            return
        name = "_pre_forward" if hasattr(ddp, "_pre_forward") else "forward"  # 2.x; 1.13
        fn = getattr(ddp, name)
        recorder = self

        def recorded(model, *args, **kwargs):
            result = fn(model, *args, **kwargs)
            if _os.getpid() == recorder.pid:
                try:
                    recorder.ddp_sample(model)
                except Exception:
                    pass  # the step goes on as it would without us
            return result

        recorded.__name__ = fn.__name__
        recorded.__qualname__ = fn.__qualname__
        recorded.__doc__ = fn.__doc__
        recorded.__wrapped__ = fn
        setattr(ddp, name, recorded)
        ddp._acc_recorded = True

    def ddp_sample(self, model):
        seen = model.__dict__.get("_acc_ddp_seen")
        if seen is None:
            if getattr(model, "device_type", "cpu") == "cpu":
                model._set_ddp_runtime_logging_sample_rate(1)
            params = [p for p in model.module.parameters() if p.requires_grad]
            group_name, size = self.group_of(getattr(model, "process_group", None))
            seen = model._acc_ddp_seen = {
                "end": 0, "iteration": 0, "numel": sum(p.numel() for p in params),
                "dtype": str(params[0].dtype).replace("torch.", "") if params else "",
                "group": "ddp" if group_name == "default" else "ddp:" + group_name,
                "size": size}
        data = model._get_ddp_logging_data()
        took = data.get("backward_comm_time", 0)
        end = data.get("backward_comm_time_end", 0)
        iteration = data.get("iteration", 0)
        if took <= 0 or (end, iteration) == (seen["end"], seen["iteration"]):
            return  # no new sample: no_sync, no backward yet, or not a sampled iteration
        iterations = max(1, iteration - seen["iteration"])
        seen["end"], seen["iteration"] = end, iteration
        # The logger's times are the wall clock's; the records', CLOCK_MONOTONIC.
        now = _now()
        finished = end - (_time.time_ns() - now) if end else now
        finished = min(finished, now)
        buckets = data.get("num_buckets_reduced") or len(str(
            data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes", "")).split(","))
        key = (seen["group"], "ddp")
        seq = self.seqs.get(key, 0) + 1
        self.seqs[key] = seq
        self.f.add_done(seen["group"], seq, "ddp_all_reduce", seen["numel"], seen["dtype"],
                        seen["size"], self.where(), finished - took, finished, took * iterations,
                        buckets * iterations)

    def retiring(self, fn):
        """destroy_process_group, keeping the groups it destroys until the program ends or calls
        init_process_group again (_retired_groups)."""
        def destroy_process_group(*args, **kwargs):
            group = args[0] if args else kwargs.get("group")
            if group is None or group is self.dist.GroupMember.WORLD:
                world = getattr(self.c10d, "_world", None)  # 2.x; 1.13: _pg_map
                groups = getattr(world, "pg_map", None) or getattr(self.c10d, "_pg_map", {})
                _retired_groups.extend(groups)
            else:
                _retired_groups.append(group)
            return fn(*args, **kwargs)
        destroy_process_group.__wrapped__ = fn
        destroy_process_group.__doc__ = fn.__doc__
        destroy_process_group._acc_recorded = True
        return destroy_process_group


# Process groups the program destroyed, still referenced here. Against a deadlock in PyTorch
# (seen in 2.11 with Gloo): a DDP model that outlives destroy_process_group (a local of the
# function that called it) holds the last reference to its group. Freed, its Reducer destroys the
# group with the GIL held, the group joins its worker threads, and a worker still dropping its
# last finished Work (a tensor Python made) waits for the GIL: forever, after the program's last
# line. Kept here, the group outlives the model, and it goes through its Python object, whose
# destructor gives the GIL up, at exit (_let_threads_settle) or at the next init_process_group.
_retired_groups = []


class _WaitedWork:
    """A Work without a future: the record ends when the program waits for it."""

    def __init__(self, work, done):
        self._work, self._done = work, done

    def wait(self, *args, **kwargs):
        try:
            return self._work.wait(*args, **kwargs)
        except BaseException as error:
            _drop_own_frame(error)
            raise
        finally:
            done, self._done = self._done, None
            if done is not None:
                done()

    def __getattr__(self, name):
        return getattr(self._work, name)


def _patch(dist):
    """Wraps the calls of torch.distributed (and of distributed_c10d, where torch's own code
    finds them) so that each is recorded. Once per process; only in the file's owner."""
    f = _open()
    c10d = _sys.modules.get("torch.distributed.distributed_c10d")
    if f is None or c10d is None or getattr(dist, "_acc_recorded", False):
        return
    recorder = _Recorder(dist, c10d, f)
    names = [(n, None) for n in _COLLECTIVES] + list(_POINT_TO_POINT.items())
    names.append(("batch_isend_irecv", None))
    for name, peer_param in names:
        fn = getattr(c10d, name, None)
        if fn is None or getattr(fn, "_acc_recorded", False):
            continue
        wrapped = recorder.wrap(name, fn, peer_param)
        setattr(c10d, name, wrapped)
        if getattr(dist, name, None) is fn:
            setattr(dist, name, wrapped)
    for name, wrap in (("init_process_group", recorder.init_done),
                       ("destroy_process_group", recorder.retiring)):
        fn = getattr(c10d, name, None)
        if fn is not None:
            wrapped = wrap(fn)
            setattr(c10d, name, wrapped)
            if getattr(dist, name, None) is fn:
                setattr(dist, name, wrapped)
    dist._acc_recorded = True


class _Finder:
    """On sys.meta_path: when torch.distributed is imported, patch it right after it ran."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch.distributed":
            return None
        import importlib.machinery
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            try:
                run(module)
            except BaseException as error:
                _drop_own_frame(error)
                raise
            try:
                _patch(module)
            except Exception:
                pass  # the program runs as it would without us

        loader.exec_module = exec_module
        return spec


def _runnable_threads(own_id):
    """Whether a thread of this process other than `own_id` is running or waiting for a CPU."""
    try:
        for task in _os.listdir("/proc/self/task"):
            if task == own_id:
                continue
            with open("/proc/self/task/%s/stat" % task, "rb") as stat:
                if stat.read().rpartition(b")")[2].split()[0] == b"R":
                    return True
    except (OSError, IndexError):
        pass
    return False


def _let_threads_settle(limit=0.3):
    """At exit, while the interpreter is still whole: waits, the GIL given up, until no other
    thread of the process is runnable (two looks in a row), at most `limit` seconds.

    Against a race in PyTorch 2.x (seen with Gloo in 2.11, under load, with or without
    destroy_process_group): a ProcessGroupGloo worker thread drops its finished Work, which can
    hold the last reference to tensors Python made, a moment after the collective has returned.
    Where the interpreter is finalizing by then, that thread's decref takes the GIL, Python ends
    the thread (pthread_exit), the unwinding meets C++ noexcept frames, and the process aborts
    after the program's last line: "terminate called without an active exception", SIGABRT.
    Given the time, the thread finishes its decref while Python still runs: the program ends as
    it was written. Registered first, so it runs after the program's own atexit functions. Then
    lets go of the groups the program destroyed (_retired_groups)."""
    if "torch.distributed" not in _sys.modules:
        return
    import threading
    own_id = str(threading.get_native_id())
    deadline = _time.monotonic() + limit
    quiet = 0
    while quiet < 2 and _time.monotonic() < deadline:
        _time.sleep(0.002)
        quiet = 0 if _runnable_threads(own_id) else quiet + 1
    del _retired_groups[:]


# --- warm workers (docs/goodput.md) -------------------------------------------------------------

def _serve_as_standby():
    """In a standby (the launcher set ACC_STANDBY_FD): imports torch ahead of the worker, then
    waits for the worker this process becomes. The launcher sends that worker's whole environment
    and its stdin, stdout and stderr in one message; once they are in place this returns, and the
    interpreter runs the program as `python script.py` (or `-m mod`) would: it has not begun it.
    Before it becomes the worker, a warm standby leaves an heir (_leave_heir): a fork of itself,
    torch imported, that serves the next attempt. The process ends when the launcher drops it
    (end of file on the channel). With ACC_STANDBY_NOW the worker is there at once (a worker with
    no standby ready): the import runs at the process's own priority, its output the worker's."""
    fd = _os.environ.pop("ACC_STANDBY_FD", None)
    now = _os.environ.pop("ACC_STANDBY_NOW", None) is not None
    if fd is None:
        return
    import socket
    channel = socket.socket(fileno=int(fd))
    message = own_stdio = None
    if now:
        message, descriptors = _receive(channel)
        if not message:
            _os._exit(0)
        own_stdio = _swap_stdio(descriptors)
    nice = _os.getpriority(_os.PRIO_PROCESS, 0)
    importer = _warm_up(lower=not now)
    # The import thread's priority was its own; a thread started in it keeps that low one.
    fit = importer is not None and all(
        _priority_of(task) in (None, nice) for task in _other_threads() if task != importer)
    heir = False
    while True:
        if message is None:
            try:
                channel.send(b"ready")
            except OSError:
                pass  # the launcher has handed this standby its worker already, or dropped it
            message, descriptors = _receive(channel)
            if not message:
                _os._exit(0)
        try:
            heir_channel = _leave_heir(channel) if fit else None
        except BaseException:
            if heir:  # no standby may run the script with the environment of its import
                _os._exit(1)
            raise
        if heir_channel is None:
            break
        # This process is the heir: the worker's descriptors and channel are the parent's.
        heir = True
        if own_stdio:  # the standby's log again, not the worker's output
            for descriptor in _swap_stdio(own_stdio) + own_stdio:
                _os.close(descriptor)
            own_stdio = None
        for descriptor in descriptors:
            _os.close(descriptor)
        channel.close()
        channel = heir_channel
        message = None
    for descriptor in own_stdio or []:
        _os.close(descriptor)
    _become(message, descriptors)
    channel.close()
    if not fit and hasattr(_sys, "orig_argv"):
        # Torch's import failed here, or left a thread at low priority: the worker starts cold,
        # in this same process.
        _os.execv(_sys.executable, _sys.orig_argv)


def _flush_stdio():
    for stream in (_sys.stdout, _sys.stderr):
        if stream is not None:
            stream.flush()


def _swap_stdio(descriptors):
    """Makes `descriptors` this process's stdin, stdout and stderr; returns copies of those it
    had."""
    had = [_os.dup(target) for target in range(3)]
    _use_stdio(descriptors)
    return had


def _use_stdio(descriptors):
    """Makes the first three of `descriptors` this process's stdin, stdout and stderr, what
    Python's streams hold written first."""
    _flush_stdio()
    for target, fd in enumerate(descriptors[:3]):
        _os.dup2(fd, target)


def _leave_heir(channel):
    """Forks this standby, torch imported and nothing of the worker begun, into the next
    attempt's: twice, so that the launcher (the subreaper of its workers' orphans) becomes the
    heir's parent, reaps it, and sees its exit as a worker's. The middle process sends the heir's
    channel to the launcher on this one, as "heir <pid>" with the descriptor, and exits; so the
    worker waits for its own fork only (a thread of its own reaps the middle process). Returns
    the heir's channel in the heir; None in this process (the worker), and where a fork failed
    (the launcher then starts a standby that imports torch)."""
    import array
    import socket
    import threading
    launcher = _os.getppid()
    _flush_stdio()  # what they hold is written once, not twice
    try:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        middle = _os.fork()
    except OSError:
        return None
    if middle == 0:
        # Nothing raised here may reach the code after sitecustomize: the script would run.
        try:
            _os.setpgid(0, 0)  # out of the worker's group, which the launcher kills
            heir = _os.fork()
            if heir > 0:
                channel.sendmsg([b"heir %d" % heir], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                                       array.array("i", [ours.fileno()]))])
                _os._exit(0)
            ours.close()
            if _adopted_by(launcher):
                return theirs
        except BaseException:
            pass
        _os._exit(0)
    ours.close()
    theirs.close()
    threading.Thread(target=_reap, args=(middle,), name="acc-heir-reaper", daemon=True).start()
    return None


def _reap(pid):
    try:
        _os.waitpid(pid, 0)
    except OSError:
        pass  # the script reaped it first (os.wait())


def _adopted_by(launcher):
    """In the heir, once its first parent has exited: whether the launcher is its parent now.
    It then dies with the launcher, as a worker does (PR_SET_PDEATHSIG), and leads a process
    group of its own, as a standby the launcher spawns does."""
    import ctypes
    while _os.getppid() not in (launcher, 1):
        _time.sleep(0.001)
    _os.setpgid(0, 0)
    if ctypes.CDLL(None, use_errno=True).prctl(1, 9) != 0:  # PR_SET_PDEATHSIG, SIGKILL
        return False
    return _os.getppid() == launcher


def _warm_up(lower=True):
    """Imports torch (torch.distributed, and what DDP needs) in a thread of its own; where `lower`,
    at the lowest CPU priority (nice 19; ACC_WARM_WORKERS_NICE sets another, never below the
    process's own), which it gives back by ending: an unprivileged process cannot raise its own
    priority again. numpy first, here at the process's priority: its BLAS starts threads at
    import. Returns the import thread's id once torch is imported, None when it could not be."""
    import threading
    try:
        import numpy  # noqa: F401
    except Exception:
        pass
    done = []

    def run():
        if lower:
            try:
                nice = int(_os.environ.get("ACC_WARM_WORKERS_NICE", "19"))
                _os.setpriority(_os.PRIO_PROCESS, threading.get_native_id(),
                                max(_os.getpriority(_os.PRIO_PROCESS, 0), min(nice, 19)))
            except (OSError, ValueError):
                pass
        try:
            import torch  # noqa: F401
            import torch.distributed  # noqa: F401
        except BaseException:
            return
        # What DistributedDataParallel imports when it is first made (PyTorch 2.x: about 900
        # modules, 1.4 s on a quiet core); absent in 1.13.
        for name in ("torch.nn.parallel", "torch._dynamo"):
            try:
                __import__(name)
            except BaseException:
                pass
        done.append(str(threading.get_native_id()))

    thread = threading.Thread(target=run, name="acc-standby")
    thread.start()
    thread.join()
    return done[0] if done else None


def _other_threads():
    """The ids of this process's threads but the calling one."""
    import threading
    own = str(threading.get_native_id())
    try:
        return [task for task in _os.listdir("/proc/self/task") if task != own]
    except OSError:
        return []


def _priority_of(task):
    """The nice value of thread `task`; None when it has ended."""
    try:
        return _os.getpriority(_os.PRIO_PROCESS, int(task))
    except OSError:
        return None


def _receive(channel):
    """The launcher's one message: its bytes and the descriptors that came with it; no bytes
    when the launcher dropped this standby. A launcher that closed its end with our "ready"
    unread makes the first receive fail (ECONNRESET, reported once): its message is still
    there to read."""
    import array
    import socket
    size = array.array("i").itemsize
    for _ in range(2):
        try:
            message, ancillary, _, _ = channel.recvmsg(1 << 20, socket.CMSG_SPACE(3 * size))
            break
        except ConnectionResetError:
            continue
        except OSError:
            return b"", []
    else:
        return b"", []
    descriptors = array.array("i")
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            descriptors.frombytes(data[: len(data) - len(data) % size])
    return message, list(descriptors)


def _become(message, descriptors):
    """Takes the worker's environment ("KEY=VALUE" entries, each ended by a NUL) as this
    process's, whole, and its stdin, stdout and stderr."""
    wanted = dict(entry.partition(b"=")[::2] for entry in message.split(b"\0") if entry)
    for key in list(_os.environb):
        if key not in wanted:
            del _os.environb[key]
    for key, value in wanted.items():
        if _os.environb.get(key) != value:
            _os.environb[key] = value
    _use_stdio(descriptors)
    for fd in descriptors:
        if fd > 2:
            _os.close(fd)
    # Python line-buffers a stdout that is a terminal, as it found it at start: now it may be.
    if _sys.stdout is not None and not _sys.stdout.write_through:
        _sys.stdout.reconfigure(line_buffering=_os.isatty(1))


def _start():
    """From sitecustomize: claims the progress file, watches for torch.distributed, and lets
    torch's threads settle at exit."""
    if _open() is None:
        return
    import atexit
    atexit.register(_let_threads_settle)
    dist = _sys.modules.get("torch.distributed")
    if dist is not None:
        _patch(dist)
    else:
        _sys.meta_path.insert(0, _Finder())
