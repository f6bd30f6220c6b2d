"""PyTorch's torch.distributed.TCPStore (is_master=False) against our StoreServer: run with
Debian's python3-torch 1.13 and with PyTorch 2.x.

Usage: torch_python_client_test.py STORE_TEST_SERVER_BINARY
Exits 77 (skipped) when this Python cannot import torch.distributed.
"""
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta

try:
    import torch
    import torch.distributed as dist
except ImportError as error:  # pragma: no cover - depends on the machine
    print(f"skipped: {sys.executable} cannot import torch ({error})")
    sys.exit(77)

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print(f"FAIL: {what}", flush=True)


def client(port, timeout=20.0, **kwargs):
    return dist.TCPStore("127.0.0.1", port, is_master=False,
                         timeout=timedelta(seconds=timeout), **kwargs)


def test_basic_operations(port):
    store = client(port)
    store.set("k", "v")
    check(store.get("k") == b"v", "get returns what set stored")
    store.set("bin", b"\x00\xff")
    check(store.get("bin") == b"\x00\xff", "binary values round-trip")
    check(store.add("n", 5) == 5 and store.add("n", -2) == 3, "add returns the running total")
    check(store.get("n") == b"3", "add stores decimal text")
    check(store.compare_set("k", "v", "w") == b"w", "compare_set swaps on a match")
    check(store.compare_set("k", "v", "x") == b"w", "compare_set keeps a mismatch")
    check(store.compare_set("fresh", "", "new") == b"new", "compare_set creates with empty expected")
    check(store.compare_set("absent", "e", "d") == b"e", "compare_set on a missing key returns expected")
    check(store.num_keys() == 4, f"num_keys counts 4 keys (got {store.num_keys()})")
    check(store.delete_key("fresh") is True, "delete_key of a present key is True")
    check(store.delete_key("fresh") is False, "delete_key of a missing key is False")
    check(store.num_keys() == 3, "num_keys drops after delete_key")


def test_extended_operations(port):
    """The 2.2+ dialect's operations, those this client has (PyTorch 1.13's has none)."""
    store, other = client(port), client(port)
    ran = []
    if hasattr(store, "append"):
        store.append("log", "a")
        store.append("log", b"bc")
        check(store.get("log") == b"abc", "append creates, then concatenates")
        ran.append("append")
    if hasattr(store, "multi_set"):
        store.multi_set(["m1", "m2"], ["x", b"\x00y"])
        check(store.multi_get(["m2", "m1"]) == [b"\x00y", b"x"], "multi_get keeps the keys' order")
        ran.append("multi_set+multi_get")
    if hasattr(store, "queue_push"):
        store.queue_push("q", "first")
        store.queue_push("q", "second")
        check(store.queue_len("q") == 2, "queue_len counts the pushed items")
        check(store.queue_pop("q") == b"first", "queue_pop is first in, first out")
        check(store.queue_pop("q", block=False) == b"second", "a non-blocking pop takes what is there")
        got = []
        thread = threading.Thread(target=lambda: got.append(other.queue_pop("q2")))
        thread.start()
        time.sleep(0.2)
        store.queue_push("q2", "late")
        thread.join(10)
        check(got == [b"late"], f"a blocking pop is woken by another client's push (got {got})")
        try:
            store.queue_pop("q", block=False)
            check(False, "a non-blocking pop of an empty queue raises")
        except Exception as error:  # PyTorch raises its own error type for this
            check("empty" in str(error).lower() or "Empty" in type(error).__name__,
                  f"an empty non-blocking pop says the queue is empty (got {error!r})")
        ran.append("queue_push+queue_pop+queue_len")
    if hasattr(store, "list_keys"):
        keys = store.list_keys()
        check({"log", "m1", "m2"} <= set(keys), f"list_keys lists the keys (got {keys})")
        ran.append("list_keys")
    print("extended operations run:", ", ".join(ran) or "none (this client has none)")


def test_wait_without_and_with_timeout(port):
    waiter, setter = client(port), client(port)
    done = threading.Event()

    def wait_then_flag():
        waiter.wait(["w1", "w2"])
        done.set()

    thread = threading.Thread(target=wait_then_flag)
    thread.start()
    setter.set("w1", "1")
    check(not done.wait(0.2), "wait does not return before every key exists")
    setter.set("w2", "2")
    check(done.wait(10), "wait returns once every key exists")
    thread.join()

    lonely = client(port)
    start = time.monotonic()
    try:
        lonely.wait(["never"], timedelta(milliseconds=300))
        check(False, "wait with a timeout raises when the key never comes")
    except RuntimeError:
        check(time.monotonic() - start < 10, "wait with a timeout raises in time")
    # 1.13's client leaves its WAIT registered; a fresh client must still be served.
    other = client(port)
    other.set("never", "now")
    check(other.get("never") == b"now", "the server goes on after a client's wait timeout")


def test_world_size_and_prefix_store(port):
    a = client(port, world_size=3)
    b = client(port, world_size=3)
    check(a.add("probe", 0) == 0, "clients with a world size connect without waiting")
    prefixed = dist.PrefixStore("/worker/attempt_0", b)
    prefixed.set("x", "1")
    check(a.get("/worker/attempt_0/x") == b"1", "PrefixStore keys land under the prefix")


def test_many_clients_at_once(port):
    clients, adds = 16, 50
    results = [[] for _ in range(clients)]

    def work(i):
        store = client(port)
        for _ in range(adds):
            results[i].append(store.add("many", 1))
        store.set(f"member/{i}", str(i))
        store.wait([f"member/{j}" for j in range(clients)])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    flat = sorted(v for r in results for v in r)
    check(flat == list(range(1, clients * adds + 1)), "concurrent adds get distinct running totals")


def worker(rank, port, world_size, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world_size), TORCHELASTIC_USE_AGENT_STORE="True",
                      TORCHELASTIC_RESTART_COUNT="0")
    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=30))
    tensor = torch.tensor([float(rank + 1)])
    dist.all_reduce(tensor)
    dist.barrier()
    dist.destroy_process_group()
    queue.put((rank, tensor.item()))


def test_gloo_process_group_rendezvous_through_the_agent_store(port):
    import multiprocessing
    # Spawned, not forked: this process has threads by now (the clients above, PyTorch's own), and
    # a fork can copy a lock one of them holds; a child forked while another thread was in glibc's
    # resolver hung for ever on its lock (and kept the server's stdin open, so the server never
    # ended either).
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    world_size = 2
    processes = [context.Process(target=worker, args=(r, port, world_size, queue))
                 for r in range(world_size)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(90)
    results = dict(queue.get(timeout=5) for _ in range(world_size)) if all(
        p.exitcode == 0 for p in processes) else {}
    check(results == {0: 3.0, 1: 3.0},
          f"two gloo workers rendezvous on the agent store and all_reduce (got {results})")


def main():
    server = subprocess.Popen([sys.argv[1]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        port = int(server.stdout.readline())
        for test in (test_basic_operations, test_extended_operations,
                     test_wait_without_and_with_timeout,
                     test_world_size_and_prefix_store, test_many_clients_at_once,
                     test_gloo_process_group_rendezvous_through_the_agent_store):
            test(port)
            print(f"ran {test.__name__}", flush=True)
    finally:
        server.stdin.close()
        server.wait(10)
    print(f"torch {torch.__version__}: {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
