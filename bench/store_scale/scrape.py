"""Scrapes URL every INTERVAL seconds while process PID lives (or COUNT times), and prints the
number of scrapes and the median and largest latency in ms. Every scrape has a 10 s timeout.

Usage: scrape.py URL (--count N | --while-pid PID) [--interval 0.05]
"""
import argparse
import os
import statistics
import time
import urllib.request

parser = argparse.ArgumentParser()
parser.add_argument("url")
parser.add_argument("--count", type=int, default=0)
parser.add_argument("--while-pid", type=int, default=0)
parser.add_argument("--interval", type=float, default=0.05)
parser.add_argument("--bound-s", type=float, default=300)
args = parser.parse_args()


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


latencies, failures = [], 0
start = time.monotonic()
while time.monotonic() - start < args.bound_s:
    if args.count and len(latencies) + failures >= args.count:
        break
    if args.while_pid and not alive(args.while_pid):
        break
    t = time.monotonic()
    try:
        with urllib.request.urlopen(args.url, timeout=10) as reply:
            reply.read()
        latencies.append((time.monotonic() - t) * 1000)
    except OSError:
        failures += 1
    time.sleep(args.interval)
if latencies:
    print(f"{len(latencies)} scrapes, {failures} failed, median {statistics.median(latencies):.1f} ms,"
          f" max {max(latencies):.1f} ms")
else:
    print(f"0 scrapes, {failures} failed")
