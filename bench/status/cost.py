#!/usr/bin/env python3
"""What --status_port costs the launcher: a job of RANKS workers (sleeping, so that the launcher's
own CPU time is what is measured) run with and without --status_port, and on, one scrape of
/metrics a second (as Prometheus would) for SECONDS. The launcher's CPU time over that window
(utime + stime of every thread of it, /proc/PID/stat) is printed per round, off and on
interleaved, then the medians, the difference as a share of one core, and the ratio on/off.
Target (issue 26): on, with 64 ranks and one scrape a second, at most 1% of one core.

Usage: cost.py ACC_LAUNCH [--ranks 64] [--seconds 20] [--rounds 3] [--settle 3]
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def one_round(launcher, ranks, seconds, settle, status):
    err = tempfile.TemporaryFile(mode="w+")
    cmd = [launcher, "--nproc_per_node", str(ranks)]
    if status:
        cmd += ["--status_port", "0"]
    cmd += ["--no_python", "/bin/sleep", str(settle + seconds + 30)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        url = None
        deadline = time.monotonic() + 30
        while status and url is None and time.monotonic() < deadline:
            err.seek(0)
            m = re.search(r"status of the job at (http://\S+/)", err.read())
            url = m.group(1) if m else None
            time.sleep(0.05)
        if status and url is None:
            sys.exit(f"cost.py: the launcher printed no status URL: {' '.join(cmd)}")
        time.sleep(settle)  # every worker started
        scrapes, latencies = 0, []
        start, cpu_start = time.monotonic(), cpu_seconds(proc.pid)
        while time.monotonic() - start < seconds:
            if status:
                t = time.monotonic()
                with urllib.request.urlopen(url + "metrics", timeout=5) as reply:
                    body = reply.read()
                latencies.append(time.monotonic() - t)
                scrapes += 1
                if body.count(b"acc_rank_steps_total{") != ranks:
                    sys.exit(f"cost.py: /metrics does not have {ranks} ranks")
            time.sleep(max(0.0, start + scrapes - time.monotonic()) if status else 0.2)
        elapsed, cpu = time.monotonic() - start, cpu_seconds(proc.pid) - cpu_start
        return cpu / elapsed, scrapes, latencies
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("launcher")
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle", type=float, default=3)
    a = parser.parse_args()
    print(f"status_cost: {a.ranks} sleeping ranks, {a.seconds:g} s per window, one scrape of "
          f"/metrics a second when on; load average {os.getloadavg()[0]:.2f}")
    off, on, latencies, scrapes = [], [], [], 0
    for n in range(a.rounds):
        share_off, _, _ = one_round(a.launcher, a.ranks, a.seconds, a.settle, False)
        share_on, count, lat = one_round(a.launcher, a.ranks, a.seconds, a.settle, True)
        off.append(share_off)
        on.append(share_on)
        latencies += lat
        scrapes += count
        print(f"  round {n + 1}: launcher CPU off {100 * share_off:.3f}% of a core, "
              f"on {100 * share_on:.3f}% ({count} scrapes)")
    med_off, med_on = statistics.median(off), statistics.median(on)
    print(f"status_cost: median launcher CPU off {100 * med_off:.3f}%, on {100 * med_on:.3f}% of "
          f"one core; the status costs {100 * (med_on - med_off):.3f}% of one core (target <= 1%); "
          f"ratio on/off {f'{med_on / med_off:.2f}' if med_off > 0 else 'n/a (off used no tick)'}; scrape p50 "
          f"{1000 * statistics.median(latencies):.2f} ms over {scrapes} scrapes; load average "
          f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
