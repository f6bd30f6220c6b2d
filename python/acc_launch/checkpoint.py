"""torch.distributed.checkpoint's save and load, with the state kept in the launcher's memory.

    acc_launch.checkpoint.save(state_dict, checkpoint_id=PATH)   # was dcp.save(...)
    acc_launch.checkpoint.load(state_dict, checkpoint_id=PATH)   # was dcp.load(...)

Under acc-launch (ACC_CHECKPOINT_MEMORY names a directory on the node's shared memory that the
launcher made and keeps across restarts), save copies each rank's tensors into one file there and
returns: no pickling of tensors, no storage. A save is committed when its description file
appears (rename); each rank keeps its last two, and load takes the newest save that every rank
committed, so a crash in the middle of a save leaves the one before it. The launcher has the
newest written to PATH in torch.distributed.checkpoint's own format by a helper interpreter that
imports torch once for the job (`python -m acc_launch.checkpoint serve`): in the background, when
a worker fails, and when the job ends, so that plain dcp.load reads PATH without acc-launch.
Where the memory has no save that every rank committed (a rank on a new node), load reads PATH
as dcp.load would, every rank the same write of it (the helper may be replacing it).

Outside acc-launch, with a storage_writer, storage_reader or planner, or with state dicts that
hold DTensors or ShardedTensors, both are torch.distributed.checkpoint's own calls. PyTorch 1.13
has no checkpoint_id: one line says 2.x is needed. docs/checkpoints.md says what survives what.
"""
import mmap as _mmap
import os as _os
import pickle as _pickle
import sys as _sys

__all__ = ["save", "load"]

_MEMORY = "ACC_CHECKPOINT_MEMORY"
_ALIGN = 64


def save(state_dict, *, checkpoint_id=None, **kwargs):
    """torch.distributed.checkpoint.save's arguments; under acc-launch, a copy in memory."""
    dcp = _torch_checkpoint()
    memory = _os.environ.get(_MEMORY)
    if memory and checkpoint_id is not None and set(kwargs) <= {"process_group"}:
        flat = _Flat.of(state_dict)
        if flat is not None:
            rank = _rank(kwargs.get("process_group"))
            path = _path_of(checkpoint_id)
            if _Shard.write(memory, rank, path, flat):
                _made(path)
                return None
    return dcp.save(state_dict, checkpoint_id=checkpoint_id, **kwargs)


def load(state_dict, *, checkpoint_id=None, **kwargs):
    """torch.distributed.checkpoint.load's arguments; under acc-launch, the newest save every
    rank committed to memory, else PATH."""
    dcp = _torch_checkpoint()
    memory = _os.environ.get(_MEMORY)
    if memory and checkpoint_id is not None and set(kwargs) <= {"process_group"}:
        group = kwargs.get("process_group")
        path = _path_of(checkpoint_id)
        seq = _Shard.agree(memory, _rank(group), path, group)
        if seq is not None and _Flat.of(state_dict) is not None:
            _Shard.read(memory, _rank(group), seq).into(state_dict)
            return None
        return _load_one_write(dcp, state_dict, path, group, kwargs)
    return dcp.load(state_dict, checkpoint_id=checkpoint_id, **kwargs)


_TAG = "acc-seq"  # in a PATH the launcher's helper wrote: the save's number in the job
_LOAD_TRIES = 20


def _tag(path):
    try:
        with open(_os.path.join(path, _TAG)) as f:
            return f.read().strip()
    except OSError:
        return None


def _load_one_write(dcp, state_dict, path, group, kwargs):
    """dcp.load of PATH, every rank reading the same write of it. After a failure the launcher's
    helper may replace PATH while the ranks of the next attempt read it (a rank that lands on
    another node has no save in memory, and every rank then loads PATH): each rank notes the tag
    the helper leaves in PATH before and after its load, and where a load failed or the ranks
    saw different writes, or a load failed while a write was under way (PATH.acc-writing or
    PATH.acc-old there), all load again, 0.5 s later, at most 20 times."""
    import time
    import torch.distributed as dist
    distributed = dist.is_available() and dist.is_initialized()
    for attempt in range(_LOAD_TRIES):
        before, error = _tag(path), None
        try:
            dcp.load(state_dict, checkpoint_id=path, **kwargs)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # DCP's CheckpointException is one, alike on every rank
            error = e
        writing = any(_os.path.exists(path + suffix) for suffix in (".acc-writing", ".acc-old"))
        mine = (before, _tag(path), error is None, writing)
        everyone = [mine]
        if distributed:
            everyone = [None] * dist.get_world_size(group)
            dist.all_gather_object(everyone, mine, group=group)
        if all(ok and seen == after == everyone[0][0] for seen, after, ok, _ in everyone):
            return None
        one_write = all(seen == after == everyone[0][0] for seen, after, _, _ in everyone)
        if error is not None and one_write and not any(w for _, _, _, w in everyone):
            raise error  # no write under way: the load's own error (no checkpoint there)
        if attempt == _LOAD_TRIES - 1:
            if error is not None:
                raise error
            raise RuntimeError("checkpoint: the ranks read different writes of %s %d times "
                               "(it was being replaced)" % (path, _LOAD_TRIES))
        time.sleep(0.5)


_made_paths = set()


def _made(path):
    """PATH exists from the first save on, as after dcp.save: a script that loads only where
    os.path.exists(PATH) finds it after a restart, before the launcher has written the save."""
    if path not in _made_paths:
        try:
            _os.makedirs(path, exist_ok=True)
            _made_paths.add(path)
        except OSError:
            pass  # the launcher's write says why, in one line


def _dcp():
    """torch.distributed.checkpoint, once known to take checkpoint_id."""
    global _checked
    import torch.distributed.checkpoint as dcp
    if not _checked:
        import inspect
        if "checkpoint_id" not in inspect.signature(getattr(dcp, "save", _none)).parameters:
            raise ImportError
        _checked = True
    return dcp


_checked = False


def _torch_checkpoint():
    try:
        return _dcp()
    except ImportError:
        raise _needs_2x() from None


def _needs_2x():
    return RuntimeError("acc_launch.checkpoint needs PyTorch 2.2 or later (torch %s has no "
                        "torch.distributed.checkpoint with checkpoint_id)"
                        % _sys.modules["torch"].__version__)


def _none():
    pass


def _rank(group):
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(group) if group is not None else dist.get_rank()
    return int(_os.environ.get("RANK", "0"))


def _path_of(checkpoint_id):
    return _os.path.abspath(_os.fspath(checkpoint_id))


def _say(text):
    print("acc-launch: checkpoint: " + text, file=_sys.stderr, flush=True)


def _page_lock(whole, lock):
    """cudaHostRegister (or with `lock` False, cudaHostUnregister) of the memory of the uint8
    tensor `whole`; whether CUDA did it."""
    import torch
    try:
        cudart = torch.cuda.cudart()
        if lock:
            error = cudart.cudaHostRegister(whole.data_ptr(), whole.numel(), 0)
        else:
            error = cudart.cudaHostUnregister(whole.data_ptr())
    except (AttributeError, RuntimeError):  # a build without CUDA's runtime bindings
        return False
    return int(error) == 0


class _Flat:
    """A state dict as its tensors (by key path) and the rest (a skeleton that pickles)."""

    def __init__(self, tensors, skeleton):
        self.tensors, self.skeleton = tensors, skeleton

    @classmethod
    def of(cls, state_dict):
        """None where a value is one this copy does not handle (DTensor, ShardedTensor)."""
        import torch
        tensors = []

        def walk(value, path):
            if hasattr(value, "state_dict") and hasattr(value, "load_state_dict"):
                value = value.state_dict()  # DCP's Stateful
            if isinstance(value, torch.Tensor):
                if type(value) is not torch.Tensor and not isinstance(value, torch.nn.Parameter):
                    raise _Unhandled
                tensors.append((path, value))
                return _TensorAt(len(tensors) - 1)
            if isinstance(value, dict):
                return {k: walk(v, path + (k,)) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                items = [walk(v, path + (i,)) for i, v in enumerate(value)]
                return items if isinstance(value, list) else tuple(items)
            return value

        try:
            return cls(tensors, walk(state_dict, ()))
        except _Unhandled:
            return None


class _Unhandled(Exception):
    pass


class _TensorAt:
    """In a skeleton: the place of tensor number `index`."""

    def __init__(self, index):
        self.index = index


class _Shard:
    """One rank's committed save in the memory directory. Each rank has two data files, its
    slots (rank<R>.slot<0|1>.data), made once and mapped once per process, so that a save is a
    copy into memory already there; a save goes to the slot the newest committed save is not in.
    rank<R>.<seq>.meta, written last, says which slot holds save <seq> (in a first line,
    "acc-slot <slot> <size>", then in its pickle), what its tensors are and the rest of the state
    dict. Before a slot is written, the description of the save it held is
    removed: a description never names a slot that is being written."""

    _next_seq = {}  # rank -> the seq its next save takes (set by agree() and write())
    # (memory, rank, slot) -> [size, mmap, its bytes as a tensor, page-locked for CUDA]
    _slots = {}

    def __init__(self, meta, data):
        self.meta, self.data = meta, data

    @staticmethod
    def committed(memory, rank, path=None):
        """The seqs rank `rank` committed in `memory` (for checkpoint `path`), oldest first."""
        seqs = []
        prefix = "rank%d." % rank
        try:
            names = _os.listdir(memory)
        except OSError:
            return []
        for name in names:
            if name.startswith(prefix) and name.endswith(".meta"):
                try:
                    seqs.append(int(name[len(prefix):-len(".meta")]))
                except ValueError:
                    pass
        seqs.sort()
        if path is not None:
            seqs = [s for s in seqs if _Shard.meta_of(memory, rank, s).get("path") == path]
        return seqs

    @staticmethod
    def meta_of(memory, rank, seq):
        try:
            with open(_os.path.join(memory, "rank%d.%d.meta" % (rank, seq)), "rb") as f:
                f.readline()  # "acc-slot <slot> <size>"
                return _pickle.load(f)
        except (OSError, EOFError, _pickle.UnpicklingError):
            return {}

    @staticmethod
    def slot_path(memory, rank, slot):
        return _os.path.join(memory, "rank%d.slot%d.data" % (rank, slot))

    @classmethod
    def slot(cls, memory, rank, slot, size, cuda=False):
        """The slot's bytes as a uint8 tensor of `size`, mapped (and its room reserved) once;
        with `cuda`, also page-locked once, so that copies from the GPU into it run at the link's
        speed, without a staging copy (where CUDA refuses, they are staged as before)."""
        import torch
        key = (memory, rank, slot)
        held = cls._slots.get(key)
        if held and held[0] != size:
            cls._unmap(key)
            held = None
        if not held:
            fd = _os.open(cls.slot_path(memory, rank, slot), _os.O_RDWR | _os.O_CREAT, 0o600)
            try:
                if _os.fstat(fd).st_size != size:  # a new size: the same one is mapped as is
                    _os.ftruncate(fd, 0)
                _os.posix_fallocate(fd, 0, size)  # room first: no SIGBUS on a full tmpfs
                buffer = _mmap.mmap(fd, size)
            finally:
                _os.close(fd)
            held = cls._slots[key] = [size, buffer, torch.frombuffer(buffer, dtype=torch.uint8),
                                      False]
        if cuda and not held[3]:
            held[3] = _page_lock(held[2], True)
        return held[2]

    @classmethod
    def _unmap(cls, key):
        held = cls._slots.pop(key)
        if held[3]:
            _page_lock(held[2], False)

    @classmethod
    def page_locked(cls):
        """How many of this process's slots are page-locked for CUDA (scripts/gpu-check.sh)."""
        return sum(1 for held in cls._slots.values() if held[3])

    @classmethod
    def write(cls, memory, rank, path, flat):
        """Copies `flat` into memory as this rank's next save. False (and one line for the node)
        where the memory has no room: the caller saves to storage instead."""
        import torch
        if cls._no_room:
            return False
        committed = cls.committed(memory, rank)
        seq = cls._next_seq.get(rank)
        if seq is None:
            seq = max(committed or [0]) + 1
        entries, offset = [], 0
        for key, tensor in flat.tensors:
            nbytes = tensor.numel() * tensor.element_size()
            entries.append((key, str(tensor.dtype).replace("torch.", ""), tuple(tensor.shape),
                            offset, nbytes, str(tensor.device), tensor.requires_grad))
            offset += -(-nbytes // _ALIGN) * _ALIGN
        newest = cls.meta_of(memory, rank, committed[-1]) if committed else {}
        slot = 1 - newest.get("slot", 1)
        for old in committed:  # the save this slot held, and any older one
            if old != newest.get("seq"):
                cls.remove(memory, rank, old)
        if offset:
            gpus = {tensor.device for _, tensor in flat.tensors if tensor.is_cuda}
            try:
                whole = cls.slot(memory, rank, slot, offset, bool(gpus))
            except OSError as error:
                try:
                    _os.unlink(cls.slot_path(memory, rank, slot))
                except OSError:
                    pass
                cls._say_no_room(memory, offset, error)
                return False
            for (key, tensor), entry in zip(flat.tensors, entries):
                if entry[4]:
                    source = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
                    # From the GPU: queued one after the other on the stream, into page-locked
                    # memory, and all waited for at once below.
                    whole[entry[3]:entry[3] + entry[4]].copy_(source, non_blocking=source.is_cuda)
            for device in gpus:
                torch.cuda.synchronize(device)  # every copy is done before the commit
        meta = {"seq": seq, "rank": rank, "path": path, "slot": slot, "size": offset,
                "entries": entries, "skeleton": flat.skeleton}
        base = _os.path.join(memory, "rank%d.%d" % (rank, seq))
        with open(base + ".meta.tmp", "wb") as f:
            # Its slot first, in a line the launcher reads without Python (--checkpoint_replica).
            f.write(b"acc-slot %d %d\n" % (slot, offset))
            _pickle.dump(meta, f, protocol=_pickle.HIGHEST_PROTOCOL)
        _os.rename(base + ".meta.tmp", base + ".meta")  # the commit
        cls._next_seq[rank] = seq + 1
        return True

    @staticmethod
    def remove(memory, rank, seq):
        try:
            _os.unlink(_os.path.join(memory, "rank%d.%d.meta" % (rank, seq)))
        except OSError:
            pass

    _no_room = False  # this process's saves go to storage

    @classmethod
    def _say_no_room(cls, memory, size, error):
        """One line for the node (the first process to find no room makes the file no-room)."""
        cls._no_room = True
        try:
            _os.close(_os.open(_os.path.join(memory, "no-room"), _os.O_CREAT | _os.O_EXCL, 0o600))
        except OSError:
            return
        st = _os.statvfs(memory)
        _say("no room for %.1f MB in %s (%.1f MB free: %s); the saves go to storage as dcp.save's "
             "would. A container's /dev/shm is often 64 MB: docker run --shm-size=16g (or more) "
             "gives it room" % (size / 1e6, _os.path.dirname(memory),
                                st.f_bavail * st.f_frsize / 1e6, error.strerror))

    @classmethod
    def agree(cls, memory, rank, path, group):
        """The newest seq of checkpoint `path` that every rank of `group` committed to its
        node's memory, or None. Collective where torch.distributed is initialized. Every rank's
        next save then takes one seq past the newest any rank has."""
        import torch.distributed as dist
        mine = cls.committed(memory, rank, path)
        everyone = [mine]
        if dist.is_available() and dist.is_initialized():
            everyone = [None] * dist.get_world_size(group)
            dist.all_gather_object(everyone, mine, group=group)
        newest = max([s for seqs in everyone for s in seqs] or [0])
        cls._next_seq[rank] = max(newest, max(cls.committed(memory, rank) or [0])) + 1
        common = set(everyone[0]).intersection(*everyone[1:])
        return max(common) if common else None

    @classmethod
    def read(cls, memory, rank, seq):
        """Save `seq` of rank `rank`, its data mapped (read-only) from its slot."""
        meta = cls.meta_of(memory, rank, seq)
        data = None
        if meta.get("size"):
            with open(cls.slot_path(memory, rank, meta["slot"]), "rb") as f:
                data = _mmap.mmap(f.fileno(), meta["size"], prot=_mmap.PROT_READ)
        return cls(meta, data)

    def still_committed(self, memory):
        """Whether this save's description is still there: its slot has not been reused."""
        return _os.path.exists(_os.path.join(
            memory, "rank%d.%d.meta" % (self.meta["rank"], self.meta["seq"])))

    def tensors(self):
        """The saved tensors, views of the memory (read-only: copy before changing them)."""
        import warnings
        import torch
        out = []
        for key, dtype, shape, offset, nbytes, device, requires_grad in self.meta["entries"]:
            if not nbytes:
                out.append(torch.empty(shape, dtype=getattr(torch, dtype)))
                continue
            with warnings.catch_warnings():  # a read-only buffer: we never write through it
                warnings.simplefilter("ignore")
                raw = torch.frombuffer(self.data, dtype=torch.uint8, count=nbytes, offset=offset)
            out.append(raw.view(getattr(torch, dtype)).view(shape))
        return out

    def state_dict(self, copy=False):
        """The saved state dict, its tensors as views of the memory (copies with `copy`)."""
        tensors = self.tensors()
        if copy:
            tensors = [t.clone() for t in tensors]

        def build(value):
            if isinstance(value, _TensorAt):
                return tensors[value.index]
            if isinstance(value, dict):
                return {k: build(v) for k, v in value.items()}
            if isinstance(value, list):
                return [build(v) for v in value]
            if isinstance(value, tuple):
                return tuple(build(v) for v in value)
            return value

        return build(self.meta["skeleton"])

    def into(self, state_dict):
        """Loads in place, as dcp.load does: each tensor of `state_dict` gets the saved values
        (on its own device), other values are replaced, Stateful objects load theirs."""
        import torch
        saved = self.state_dict()

        def fill(target, source, path):
            if hasattr(target, "state_dict") and hasattr(target, "load_state_dict"):
                inner = target.state_dict()
                target.load_state_dict(fill(inner, source, path))
                return target
            if isinstance(target, torch.Tensor):
                if not isinstance(source, torch.Tensor) or source.shape != target.shape:
                    raise RuntimeError("checkpoint: %s is %s in the saved state, not a tensor of "
                                       "shape %s" % (_key(path), _what(source),
                                                     tuple(target.shape)))
                with torch.no_grad():
                    target.copy_(source)
                return target
            if isinstance(target, dict):
                if not isinstance(source, dict):
                    raise RuntimeError("checkpoint: %s is %s in the saved state, not a dict"
                                       % (_key(path), _what(source)))
                for k in list(target):
                    if k not in source:
                        raise RuntimeError("checkpoint: %s is missing from the saved state"
                                           % _key(path + (k,)))
                    target[k] = fill(target[k], source[k], path + (k,))
                return target
            if isinstance(target, list) and isinstance(source, list) and len(target) == len(source):
                for i in range(len(target)):
                    target[i] = fill(target[i], source[i], path + (i,))
                return target
            return source

        fill(state_dict, saved, ())


def _key(path):
    return ".".join(str(p) for p in path) or "the state dict"


def _what(value):
    return type(value).__name__


# --- the launcher's helper: `python -m acc_launch.checkpoint persist MEMORY` ---------------------


def persist(memory, keep=1):
    """Writes the newest save of global rank 0 in `memory` (where this node has it) to its PATH in
    torch.distributed.checkpoint's format, unless that seq is written already; returns the exit
    status. Replicated state (DDP) is whole in rank 0's shard, as dcp.save would keep one copy of
    it. The write goes to PATH.acc-writing, then replaces PATH. With `keep` above 1, the PATH it
    replaces stays as PATH.<seq> (the save's number in the job; 0 for one this job did not
    write), and the newest keep - 1 of those are kept."""
    import shutil
    import warnings
    marker = _os.path.join(memory, "persisted")
    try:
        with open(marker) as f:
            written = int(f.read().strip() or 0)
    except (OSError, ValueError):
        written = 0
    # A copy of the newest save, taken while the save stays committed: a rank that saves again
    # meanwhile reuses the other slot, and only the save after that one reuses this one.
    for _ in range(10):
        seqs = _Shard.committed(memory, 0)
        if not seqs or seqs[-1] <= written:
            return 0
        seq = seqs[-1]
        try:
            shard = _Shard.read(memory, 0, seq)
            state = shard.state_dict(copy=True)
        except (OSError, KeyError, ValueError):
            continue
        if shard.still_committed(memory):
            break
    else:
        return 0
    path = shard.meta["path"]
    import torch.distributed.checkpoint as dcp
    writing, old = path + ".acc-writing", path + ".acc-old"
    try:
        shutil.rmtree(writing, ignore_errors=True)
        _os.makedirs(_os.path.dirname(path) or ".", exist_ok=True)
        with warnings.catch_warnings():  # "assuming the intent is to save in a single process"
            warnings.simplefilter("ignore", UserWarning)
            dcp.save(state, checkpoint_id=writing, no_dist=True)
        with open(_os.path.join(writing, _TAG), "w") as f:  # load's sign of which write it read
            f.write("%d\n" % seq)
        if _os.path.exists(path):
            shutil.rmtree(old, ignore_errors=True)
            _os.rename(path, old)
        _os.rename(writing, path)
        if keep > 1 and _os.path.exists(old):
            _keep_older(old, path, written, keep - 1)
        shutil.rmtree(old, ignore_errors=True)
    except OSError as error:
        shutil.rmtree(writing, ignore_errors=True)
        _say("cannot write %s: %s; training goes on with the copy in memory"
             % (path, error.strerror or error))
        return 1
    _write_number(marker, seq)
    return 0


def serve(memory, keep=1):
    """The launcher's helper for a whole job (`serve MEMORY`): imports torch once, writes the newest
    save (persist) at once, then again at each SIGUSR1, and after each write puts the count of
    writes done in MEMORY/persist.done, which the launcher reads to know that it is idle. A write
    costs the launcher's node no `import torch` after the first. Ends with SIGTERM, or within a
    second of the launcher that started it being gone."""
    import signal
    # Blocked before the first count is written: the launcher signals only after it.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    parent = _os.getppid()
    done = 0
    while True:
        persist(memory, keep)
        _sys.stdout.flush()
        done += 1
        _write_number(_os.path.join(memory, "persist.done"), done)
        while signal.sigtimedwait({signal.SIGUSR1}, 1.0) is None:
            if _os.getppid() != parent:
                return 0


def _write_number(path, number):
    """`number` and a newline in the file `path`, which is replaced whole (a rename)."""
    with open(path + ".tmp", "w") as f:
        f.write("%d\n" % number)
    _os.rename(path + ".tmp", path)


def _keep_older(old, path, seq, count):
    """Keeps the checkpoint `old` as PATH.<seq>, and of the PATH.<number> beside it the newest
    `count` (by their time of writing)."""
    import shutil
    kept = "%s.%d" % (path, seq)
    shutil.rmtree(kept, ignore_errors=True)
    _os.rename(old, kept)
    folder, name = _os.path.split(path)
    folder = folder or "."
    older = []
    for entry in _os.listdir(folder):
        number = entry[len(name) + 1:]
        if entry.startswith(name + ".") and number.isdigit():
            older.append((_os.stat(_os.path.join(folder, entry)).st_mtime, entry))
    for _, entry in sorted(older, reverse=True)[count:]:
        shutil.rmtree(_os.path.join(folder, entry), ignore_errors=True)


def _main(argv):
    if len(argv) in (2, 4) and argv[0] in ("persist", "serve") and argv[2:3] in ([], ["--keep"]):
        try:
            keep = int(argv[3]) if len(argv) == 4 else 1
        except ValueError:
            keep = 0
        if keep >= 1:
            # Below the workers' priority: the write takes the CPU that training leaves (a
            # restart's workers start beside it), and a quiet node's as fast as ever.
            try:
                _os.nice(10)
            except OSError:
                pass
            return (persist if argv[0] == "persist" else serve)(argv[1], keep)
    print("usage: python -m acc_launch.checkpoint persist|serve MEMORY_DIRECTORY [--keep K]",
          file=_sys.stderr)
    return 2


if __name__ == "__main__":
    _sys.exit(_main(_sys.argv[1:]))
