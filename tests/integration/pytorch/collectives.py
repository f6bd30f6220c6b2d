"""Two ranks call one of each kind of torch.distributed call, as a user's script would; the
launcher's recorder must leave each in the rank's progress file (python_recorder_test.cc reads
them with the C++ Reader). Each call's line ends in a "# <op>" comment the test looks for."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(10)
dist.all_reduce(t)  # all_reduce
dist.broadcast(t, src=0)  # broadcast
dist.barrier()  # barrier
if rank == 0:
    dist.send(torch.zeros(3, dtype=torch.int64), dst=1)  # send
else:
    dist.recv(torch.zeros(3, dtype=torch.int64), src=0)  # recv
dist.all_reduce(t, async_op=True).wait()  # async all_reduce
pair = dist.new_group([0, 1])  # new_group
dist.all_gather([torch.zeros(4), torch.zeros(4)], torch.ones(4), group=pair)  # all_gather
print("done", flush=True)
dist.destroy_process_group()
