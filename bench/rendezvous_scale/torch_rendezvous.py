"""The peer of rendezvous_scale: torchrun's own c10d rendezvous (DynamicRendezvousHandler over
C10dRendezvousBackend and PyTorch's TCPStore), N simulated nodes as threads of this process, each
with its own TCPStore client, --nnodes N:N. Prints one line per N in rendezvous_scale's format.

Per node it counts the backend's get_state/set_state calls (each one store request: GET, or
COMPARE_SET) and the bytes of rendezvous state they carried (the base64 of the pickled state,
without TCP framing): what each join costs in torchrun's design, where every node rewrites the
whole state.

Usage: torch_rendezvous.py [--nodes 100,1000] [--cap-s 120]
"""
import argparse
import os
import threading
import time
from datetime import timedelta

import torch.distributed as dist
from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (DynamicRendezvousHandler,
                                                                      RendezvousTimeout)


class CountingBackend(C10dRendezvousBackend):
    def __init__(self, store, run_id):
        super().__init__(store, run_id)
        self.requests = 0
        self.bytes = 0

    def get_state(self):
        result = super().get_state()
        self.requests += 1
        self.bytes += len(result[0]) if result else 0
        return result

    def set_state(self, state, token=None):
        result = super().set_state(state, token)
        self.requests += 1
        self.bytes += len(state) + (len(result[0]) if result else 0)
        return result


def measure(count, cap_s):
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=cap_s + 30))
    port = server.port
    start_connect = time.monotonic()
    backends, handlers = [], []
    for _ in range(count):
        store = dist.TCPStore("127.0.0.1", port, is_master=False,
                              timeout=timedelta(seconds=cap_s + 30))
        backend = CountingBackend(store, "scale")
        timeout = RendezvousTimeout(join=timedelta(seconds=cap_s), last_call=timedelta(seconds=1))
        handlers.append(DynamicRendezvousHandler.from_backend("scale", store, backend, count, count,
                                                              timeout))
        backends.append(backend)
    connected = time.monotonic() - start_connect
    done = [None] * count
    errors = []

    def join(i):
        try:
            handlers[i].next_rendezvous()
            done[i] = time.monotonic()
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(repr(error))

    threads = [threading.Thread(target=join, args=(i,), daemon=True) for i in range(count)]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    deadline = start + cap_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    if any(d is None for d in done):
        finished = sum(d is not None for d in done)
        reason = f" ({errors[0]})" if errors else ""
        print(f"{count:7d}  torchrun    did not finish in {cap_s} s: {finished} of {count} nodes "
              f"had joined{reason}", flush=True)
        os._exit(0)  # its threads are still polling the store: end them with the process
    requests = [b.requests for b in backends]
    bytes_ = [b.bytes for b in backends]
    print(f"{count:7d}  torchrun    connect {connected:7.3f} s  round {max(done) - start:7.3f} s  "
          f"requests/node {sum(requests) / count:5.2f} (max {max(requests):3d})  "
          f"bytes/node {sum(bytes_) / count:7.1f} (max {max(bytes_):5d})", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", default="100,1000")
    parser.add_argument("--cap-s", type=int, default=120)
    args = parser.parse_args()
    for count in (int(n) for n in args.nodes.split(",")):
        measure(count, args.cap_s)


if __name__ == "__main__":
    main()
