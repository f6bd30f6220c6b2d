"""Clients of a hostile network against a TCPStore at HOST:PORT, all at once, until STOP exists:
  idle        IDLE connections opened and held, saying nothing
  garbage     connections that send random bytes, again and again
  half frames connections that announce a SET of an 8 MB value, send half of it, and stall
  huge        requests whose lengths read 2^63 and 2^64-1
  slow reader a client that sets a 1 MB value, then asks for it over and over, reading nothing
  stranger    with STRANGER_FROM=ADDRESS in the environment: worker-protocol clients (a SET, then
              a GET of it) whose connections come from ADDRESS, an address of no member
Prints one line per kind when STOP appears: what it did and how the store answered (closed or
still open). Standard library only. Usage: hostile_clients.py HOST PORT STOP [IDLE]"""
import os
import random
import resource
import socket
import struct
import sys
import threading
import time

HOST, PORT, STOP = sys.argv[1], int(sys.argv[2]), sys.argv[3]
IDLE = int(sys.argv[4]) if len(sys.argv) > 4 else 2000
U64 = struct.Struct("<Q")
SET = b"\x00"  # PyTorch 1.13's SET (the store reads a first byte other than VALIDATE's so)
report = {}


def stopped():
    return os.path.exists(STOP)


def connect():
    while not stopped():
        try:
            s = socket.create_connection((HOST, PORT), timeout=5)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return s
        except OSError:
            time.sleep(0.05)
    return None


def closed_by_store(s):
    """Whether the store has closed `s` (a read sees the end or a reset), without blocking."""
    s.setblocking(False)
    try:
        return s.recv(1 << 16) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def string(data):
    return U64.pack(len(data)) + data


def closed_when_stopped(held):
    """Waits for STOP; then how many of the connections `held` the store has closed."""
    while not stopped():
        time.sleep(0.1)
    return sum(closed_by_store(s) for s in held)


def idle():
    held = []
    while len(held) < IDLE and not stopped():
        s = connect()
        if s is None:
            break
        held.append(s)
    report["idle"] = "%d connections held, %d closed by the store" % (
        len(held), closed_when_stopped(held))


def garbage():
    sent = closed = 0
    while not stopped():
        s = connect()
        if s is None:
            break
        try:
            for _ in range(20):
                s.sendall(bytes([random.randrange(1, 256)]) + os.urandom(random.randrange(1, 4096)))
                sent += 1
            time.sleep(0.01)
            closed += closed_by_store(s)
        except OSError:
            closed += 1
        s.close()
    report["garbage"] = "%d bursts of random bytes sent, %d connections closed by the store" % (
        sent, closed)


def half_frames():
    held = []
    for i in range(64):
        s = connect()
        if s is None:
            break
        try:
            s.sendall(SET + string(b"half/%d" % i) + U64.pack(8 * 1024 * 1024) + b"x" * (4 << 20))
        except OSError:
            pass
        held.append(s)
    report["half frames"] = "%d SETs of 8 MB stalled at 4 MB, %d closed by the store" % (
        len(held), closed_when_stopped(held))


def huge():
    closed = tries = 0
    for length in (1 << 63, (1 << 64) - 1, 1 << 40):
        for first in (SET, b"\x02", b"\x00\xce\xf7\x85\x3c\x01"):
            s = connect()
            if s is None:
                break
            tries += 1
            try:
                s.sendall(first + U64.pack(length) + b"k" * 64)
                time.sleep(0.05)
                closed += closed_by_store(s)
            except OSError:
                closed += 1
            s.close()
    report["huge"] = "%d requests with lengths of 2^40 to 2^64-1, %d closed by the store" % (
        tries, closed)


def slow_reader():
    s = connect()
    if s is None:
        return
    asked = 0
    try:
        s.sendall(SET + string(b"slow/value") + string(b"v" * (1 << 20)))
        get = b"\x02" + string(b"slow/value")  # 1.13's GET
        s.setblocking(False)
        while not stopped():
            try:
                s.send(get)
                asked += 1
            except BlockingIOError:
                time.sleep(0.01)
    except OSError:
        pass
    report["slow reader"] = "asked %d times for a 1 MB value, reading nothing; %s" % (
        asked, "closed by the store" if closed_by_store(s) else "still open")


def stranger():
    source = os.environ.get("STRANGER_FROM")
    if not source:
        return
    tries = refused = 0
    while not stopped():
        try:
            s = socket.socket()
            s.bind((source, 0))
            s.settimeout(5)
            s.connect((HOST, PORT))
        except OSError:
            time.sleep(0.05)
            continue
        tries += 1
        get = b"\x02"  # PyTorch 1.13's GET
        try:
            s.sendall(SET + string(b"/stranger") + string(b"x") + get + string(b"/stranger"))
            answered = len(s.recv(16)) > 0
        except OSError:
            answered = False
        refused += not answered
        s.close()
        time.sleep(0.05)
    report["stranger"] = "%d worker-protocol clients from %s, %d closed by the store unanswered" % (
        tries, source, refused)


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    threads = [threading.Thread(target=f) for f in (idle, garbage, half_frames, huge, slow_reader,
                                                    stranger)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for kind in ("idle", "garbage", "half frames", "huge", "slow reader", "stranger"):
        if kind in report or kind != "stranger":
            print("hostile %s: %s" % (kind, report.get(kind, "did not run")))


if __name__ == "__main__":
    main()
