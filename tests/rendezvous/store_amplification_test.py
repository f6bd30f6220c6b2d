"""The store under a client that asks for far more than it reads, and a PyTorch client afterwards.

Two amplification patterns, each against `acc-launch rendezvous serve` and against a launcher that
hosts its workers' store (a static node 0 with a long-running worker):
  * pipelined 1.13 GETs of an 8 MiB value whose replies are never read;
  * one 2.2 MULTI_GET naming the key of that value 1000 times (an 8 GiB reply).
The server must live, stay under its memory bound (docs/rendezvous.md, "Limits"; the VmRSS of
its process from /proc/<pid>/status, sampled while the client pushes), close the MULTI_GET
connection, and serve torch.distributed.TCPStore (PyTorch's own client) afterwards.

Usage: store_amplification_test.py ACC_LAUNCH_BINARY
Exits 77 (skipped) when this Python cannot import torch.distributed.
"""
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

try:
    import torch.distributed  # noqa: F401 (the clients run in child processes)
except ImportError as error:  # pragma: no cover - depends on the machine
    print(f"skipped: {sys.executable} cannot import torch ({error})")
    sys.exit(77)

MiB = 1024 * 1024
VALUE_BYTES = 8 * MiB
# What one connection may cost the server: replies up to pause_reading_bytes + max_reply_bytes
# (1 + 32 MiB) and unparsed requests up to max_request_bytes (32 MiB) plus a read's worth; the
# reply being built (up to 32 MiB) on top. Without the bounds the server passes 1 GiB in seconds.
RSS_GROWTH_BOUND = 128 * MiB

failures = []


def check(condition, what):
    print(("ok: " if condition else "FAIL: ") + what, flush=True)
    if not condition:
        failures.append(what)


def rss_bytes(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except FileNotFoundError:
        pass
    return 0


def alive(process):
    return process.poll() is None


def torch_client(port, operations, timeout_s=60):
    """Runs `operations` (Python using `store`, a torch TCPStore client) in a child process: a
    1.13 client whose server vanishes may abort its whole process from a background thread.
    True when they all succeeded."""
    script = ("import sys; from datetime import timedelta; import torch.distributed as dist\n"
              f"store = dist.TCPStore('127.0.0.1', {port}, is_master=False, "
              "timeout=timedelta(seconds=30))\n" + operations + "\nprint('done')\n")
    try:
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False
    if result.returncode != 0 or "done" not in result.stdout:
        print(f"torch client failed ({result.returncode}): {result.stderr.strip()[-500:]}")
        return False
    return True


def wait_for_line(path, pattern, deadline_s):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        with open(path, errors="replace") as stream:
            match = re.search(pattern, stream.read())
        if match:
            return match
        time.sleep(0.05)
    return None


def u64(value):
    return struct.pack("<Q", value)


def key_bytes(key):
    return u64(len(key)) + key


def pipelined_gets(port, pid):
    """Pushes 1.13 GETs of the 8 MiB value, never reading; returns (peak RSS, bytes sent)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # take in almost nothing
    sock.connect(("127.0.0.1", port))
    sock.setblocking(False)
    chunk = (b"\x02" + key_bytes(b"/big")) * 4096  # 4096 GETs, 32 GiB of replies
    sent, peak = 0, rss_bytes(pid)
    # Push until the server stops taking requests for a whole second (it stopped reading us), or
    # until 64 MiB of requests (5 million GETs, 40 TiB of replies) went in.
    last_progress = time.monotonic()
    while sent < 64 * MiB and time.monotonic() - last_progress < 1.0 and pid_alive(pid):
        _, writable, _ = select.select([], [sock], [], 0.05)
        peak = max(peak, rss_bytes(pid))
        if not writable:
            continue
        try:
            sent += sock.send(chunk)
            last_progress = time.monotonic()
        except BlockingIOError:
            continue
        except OSError:
            break  # closed by the server: allowed, it is over a bound
    for _ in range(20):  # and a little longer, while the server works through what it took
        peak = max(peak, rss_bytes(pid))
        time.sleep(0.05)
    return sock, peak, sent


def huge_multi_get(port, pid):
    """One 2.2 MULTI_GET naming /big 1000 times; returns (peak RSS, closed by the server)."""
    try:
        sock = socket.create_connection(("127.0.0.1", port))
    except OSError as error:
        print(f"cannot connect: {error}")
        return 0, False
    request = b"\x00" + struct.pack("<I", 0x3C85F7CE)  # VALIDATE: this connection speaks 2.2
    request += b"\x0a" + u64(1000) + key_bytes(b"/big") * 1000
    sock.sendall(request)
    peak, closed = rss_bytes(pid), False
    deadline = time.monotonic() + 10
    sock.setblocking(False)
    while time.monotonic() < deadline:
        peak = max(peak, rss_bytes(pid))
        readable, _, _ = select.select([sock], [], [], 0.05)
        if readable:
            try:
                data = sock.recv(1 << 16)
            except ConnectionResetError:
                data = b""
            if not data:
                closed = True
                break
    sock.close()
    return peak, closed


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def exercise(name, process, pid, port, log_path, expect_log_line):
    """Both patterns against one server; `pid` is the process that hosts the store."""
    check(torch_client(port, f"store.set('big', b'x' * {VALUE_BYTES})\n"
                             f"assert len(store.get('big')) == {VALUE_BYTES}"),
          f"{name}: an 8 MiB value is stored")
    baseline = rss_bytes(pid)

    hostile, peak, sent = pipelined_gets(port, pid)
    print(f"{name}: pipelined GETs: {sent} request bytes ({sent // 13} GETs, "
          f"{sent // 13 * VALUE_BYTES / 2**40:.1f} TiB of replies) taken before the server "
          f"stopped reading; VmRSS {baseline / MiB:.0f} MiB before, peak {peak / MiB:.0f} MiB",
          flush=True)
    check(peak - baseline < RSS_GROWTH_BOUND,
          f"{name}: VmRSS grew {(peak - baseline) / MiB:.0f} MiB under pipelined GETs "
          f"(bound {RSS_GROWTH_BOUND // MiB} MiB)")
    check(sent < 64 * MiB, f"{name}: the server stopped reading a client that reads no replies")
    check(torch_client(port, f"assert store.add('n', 1) >= 1\n"
                             f"assert len(store.get('big')) == {VALUE_BYTES}"),
          f"{name}: a PyTorch client is served while that client stays connected")
    check(alive(process) and pid_alive(pid), f"{name}: alive after the pipelined GETs")
    hostile.close()

    baseline = rss_bytes(pid)
    peak, closed = huge_multi_get(port, pid)
    print(f"{name}: MULTI_GET x1000: VmRSS {baseline / MiB:.0f} MiB before, "
          f"peak {peak / MiB:.0f} MiB", flush=True)
    check(alive(process) and pid_alive(pid), f"{name}: alive after the MULTI_GET")
    check(closed, f"{name}: the MULTI_GET's connection is closed")
    check(peak - baseline < RSS_GROWTH_BOUND,
          f"{name}: VmRSS grew {(peak - baseline) / MiB:.0f} MiB under the MULTI_GET "
          f"(bound {RSS_GROWTH_BOUND // MiB} MiB)")
    if expect_log_line:
        line = wait_for_line(log_path, r"closed connection from [^\n]*MULTI_GET reply of "
                                       r"[0-9]+ bytes is over the limit of [0-9]+", 5)
        check(line is not None, f"{name}: one log line names the MULTI_GET over the limit")
    check(torch_client(port, "store.set('after', 'ok')\nassert store.get('after') == b'ok'\n"
                             "assert store.add('n', 1) >= 2"),
          f"{name}: a PyTorch client is served after the MULTI_GET")


def stop(process):
    if alive(process):
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def standalone_server(binary, work):
    log_path = os.path.join(work, "serve.log")
    with open(log_path, "w") as log:
        process = subprocess.Popen([binary, "rendezvous", "serve", "--host", "127.0.0.1",
                                    "--port", "0"], stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        match = wait_for_line(log_path, r"listening on 127\.0\.0\.1:([0-9]+)", 20)
        check(match is not None, "serve: prints its address")
        if match:
            exercise("serve", process, process.pid, int(match.group(1)), log_path, True)
        check(alive(process), "serve: still serving at the end")
    finally:
        stop(process)


def launcher_node0(binary, work):
    """A static node 0: the launcher serves its workers' store at MASTER_PORT (port 0: its pick)."""
    log_path = os.path.join(work, "launcher.log")
    worker = "echo STORE_PORT=$MASTER_PORT; exec sleep 300"
    with open(log_path, "w") as log:
        process = subprocess.Popen([binary, "--nnodes", "1", "--node_rank", "0",
                                    "--nproc_per_node", "1", "--master_addr", "127.0.0.1",
                                    "--master_port", "0", "--no_python", "sh", "-c", worker],
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        match = wait_for_line(log_path, r"STORE_PORT=([0-9]+)", 30)
        check(match is not None, "launcher: its worker reports the store's port")
        if match:
            exercise("launcher", process, process.pid, int(match.group(1)), log_path, False)
        check(alive(process), "launcher: the job still runs at the end")
    finally:
        stop(process)
        with open(log_path, errors="replace") as stream:
            tail = stream.read()[-2000:]
        if failures:
            print("launcher output:\n" + tail)


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as work:
        standalone_server(binary, work)
        launcher_node0(binary, work)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
