"""Two ranks train a small DDP model for a few steps, as a user's script would, and call no
collective themselves: DDP's Reducer makes every gradient all_reduce, in C++. The recorder must
still count them (python_recorder_test.cc): one finished "ddp_all_reduce" record per synced
backward, published at the next synced forward, none for a no_sync step. The forward's line ends
in "# forward", the line the records name."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo")
torch.manual_seed(0)
model = DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)),
    bucket_cap_mb=0.1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)


def step():
    loss = model(torch.randn(64, 256)).square().mean()  # forward
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()


for _ in range(5):
    step()
with model.no_sync():
    step()
step()
with torch.no_grad():
    model(torch.randn(1, 256))
print("parameters", sum(p.numel() for p in model.parameters()), flush=True)
dist.destroy_process_group()
