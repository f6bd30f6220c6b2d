# PyTorch 2.x's TCPStore server (libuv, its default since 2.4) on 127.0.0.1 and a free port, for
# store_scale: prints the port, then serves until its stdin closes (or SIGTERM).
import sys

import torch
import torch.distributed as dist

if int(torch.__version__.split(".")[0]) < 2:
    sys.exit(f"torch_server.py: needs PyTorch 2.x, this is {torch.__version__}")
store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, use_libuv=True)
print(store.port, flush=True)
sys.stdin.read()  # the libuv loop runs on the store's own thread meanwhile
