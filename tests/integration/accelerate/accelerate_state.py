"""Prints what HuggingFace Accelerate's Accelerator concluded from its environment, one JSON line
per process, and checks a reduce over the processes. Run under `accelerate launch` and under
acc-launch with the same config file: the lines must be the same."""
import json

import torch
from accelerate import Accelerator

accelerator = Accelerator()
state = accelerator.state
total = accelerator.reduce(torch.ones(2, device=accelerator.device) * (accelerator.process_index + 1),
                           reduction="sum")
with accelerator.autocast():
    out = torch.nn.Linear(4, 4).to(accelerator.device)(torch.ones(2, 4, device=accelerator.device))
print("STATE " + json.dumps({
    "distributed_type": str(state.distributed_type),
    "backend": state.backend,
    "mixed_precision": accelerator.mixed_precision,
    "autocast_dtype": str(out.dtype),
    "num_processes": accelerator.num_processes,
    "process_index": accelerator.process_index,
    "local_process_index": accelerator.local_process_index,
    "device": str(accelerator.device),
    "reduce_sum": total.tolist(),
}, sort_keys=True), flush=True)
accelerator.end_training()
