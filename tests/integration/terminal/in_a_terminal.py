"""acc-launch in a terminal (a pseudo-terminal this test holds), as a user at a shell runs it:
each worker's stdout and stderr are terminals (isatty() True, as under torchrun), breakpoint()
prompts in every rank, and what is typed goes to the lowest rank waiting: 'p x*7' answers 42 in
rank 0, 'c' lets it go on, then rank 1 answers and goes on; the job ends 0; the log file written
with --tee holds the coloured line without its colour codes.
Usage: in_a_terminal.py ACC_LAUNCH PYTHON (PYTHON runs the workers; no torch needed)."""
import os
import pty
import select
import shutil
import sys
import tempfile
import time

launcher, python = sys.argv[1], sys.argv[2]
worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "terminal_worker.py")
logs = tempfile.mkdtemp(prefix="acc-terminal-")
seen = b""  # all the terminal showed
looked = [0, 0]  # where in `seen` each rank's next line is looked for: the ranks interleave


def fail(why):
    print(f"FAIL: {why}\n--- the terminal showed:\n{seen.decode(errors='replace')}")
    sys.exit(1)


def expect(rank, texts, fd, timeout=60.0):
    """Reads the terminal until each of `texts` (one, or a tuple, in this order) shows as a line
    of `rank`'s, "[rank<rank>]: " and the text, after what earlier expects of that rank found."""
    global seen
    texts = [f"[rank{rank}]: {t}".encode() for t in ((texts,) if isinstance(texts, str) else texts)]
    deadline = time.monotonic() + timeout
    for text in texts:
        while text not in seen[looked[rank]:]:
            left = deadline - time.monotonic()
            if left <= 0:
                fail(f"{text!r} did not show within {timeout} s")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                fail(f"the terminal closed before {text!r}")
            seen += chunk
        looked[rank] = seen.index(text, looked[rank]) + len(text)


pid, fd = pty.fork()
if pid == 0:
    os.execv(launcher, [launcher, "--nproc_per_node", "2", "--python", python, "--tee", "3",
                        "--log_dir", logs, worker])
try:
    for r in (0, 1):
        expect(r, (f"rank {r} stdout isatty True stderr isatty True", "(Pdb) "), fd)
    # A prompt without a newline shows. The answers are typed without waiting for the next
    # prompt: the launcher shows a rank's prompt before it hands the rank what was typed, so the
    # rank's answer starts a line of its own.
    os.write(fd, b"p x*7\n")
    expect(0, "42", fd)
    os.write(fd, b"c\n")
    expect(0, ("(Pdb) ", "rank 0 done"), fd)
    os.write(fd, b"p x*7\n")
    expect(1, "42", fd)
    os.write(fd, b"c\n")
    expect(1, ("(Pdb) ", "rank 1 done"), fd)
    _, status = os.waitpid(pid, 0)
    pid = 0
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        fail(f"acc-launch ended with status {status}")
    print("PASS: isatty True in both streams, breakpoint() answered in rank 0 then rank 1, exit 0")
    logged = []
    for root, _, files in os.walk(logs):
        logged += [os.path.join(root, f) for f in files if f == "stdout.log"]
    text = "".join(open(f, errors="replace").read() for f in logged)
    if "rank 0 in red" not in text or "\x1b" in text:
        fail(f"the --tee files {logged} hold {text!r}")
    print("PASS: the --tee log files hold the coloured line without colour codes")
finally:
    if pid:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    shutil.rmtree(logs, ignore_errors=True)
