"""A worker for the terminal test (in_a_terminal.py): says whether its streams are terminals,
writes a coloured line, stops at breakpoint() with x = 6, then says it is done. Plain Python."""
import os
import sys

rank = os.environ["RANK"]
print(f"rank {rank} stdout isatty {sys.stdout.isatty()} stderr isatty {sys.stderr.isatty()}",
      flush=True)
print(f"\x1b[31mrank {rank} in red\x1b[0m", flush=True)
x = 6
breakpoint()
print(f"rank {rank} done", flush=True)
