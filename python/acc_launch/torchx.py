"""A TorchX component: TorchX's own DDP job (torchx.components.dist.ddp) run by acc-launch.

  # by this file's path (TorchX 0.7 takes a custom component as FILE.py:FUNCTION):
  torchx run -s local_cwd python/acc_launch/torchx.py:ddp -j 1x4 --script train.py --lr 1e-3
  # the installed wheel's copy, from any directory:
  torchx run -s local_cwd "$(python -c 'import acc_launch.torchx as c; print(c.__file__)')":ddp \\
      -j 2x8 --script train.py
  # from Python:
  from torchx.runner import get_runner
  from acc_launch.torchx import ddp
  get_runner().run(ddp(script="train.py", j="1x4"), scheduler="local_cwd")

The parameters, their defaults and the AppDef are dist.ddp's (`torchx run ... :ddp --help`); only
the command the role runs differs: `acc-launch` (found on the replica's PATH: the wheel puts it
beside the environment's python) where dist.ddp runs `torchrun`, with the same flags. Not
registered as a `[torchx.components]` entry point: TorchX then hides its builtins (dist.ddp, ...).

TorchX is imported here only: `import acc_launch` does not need it.
"""
from typing import Dict, List, Optional

import torchx
import torchx.specs as specs
from torchx.components import dist as _dist


def ddp(
    *script_args: str,
    script: Optional[str] = None,
    m: Optional[str] = None,
    image: str = torchx.IMAGE,
    name: str = "/",
    h: Optional[str] = None,
    cpu: int = 2,
    gpu: int = 0,
    memMB: int = 1024,
    j: str = "1x2",
    env: Optional[Dict[str, str]] = None,
    max_retries: int = 0,
    rdzv_port: int = 29500,
    rdzv_backend: str = "c10d",
    mounts: Optional[List[str]] = None,
    debug: bool = False,
    tee: int = 3,
) -> specs.AppDef:
    """
    Distributed data parallel style application (one role, multi-replica) launched by acc-launch.
    TorchX's dist.ddp with acc-launch in torchrun's place: ``c10d`` rendezvous on
    ``$rank_0_host:$rdzv_port`` (a free port on a single node), one acc-launch per replica.
    """
    app = _dist.ddp(*script_args, script=script, m=m, image=image, name=name, h=h, cpu=cpu,
                    gpu=gpu, memMB=memMB, j=j, env=env, max_retries=max_retries,
                    rdzv_port=rdzv_port, rdzv_backend=rdzv_backend, mounts=mounts, debug=debug,
                    tee=tee)
    # dist.ddp's role runs `bash -c 'torchrun FLAGS SCRIPT|-m MODULE ARGS'`. acc-launch takes every
    # flag it writes as torchrun does (--rdzv_backend c10d|static, --rdzv_endpoint with port 0 on
    # one node, --rdzv_id, --nnodes [MIN:]MAX, --nproc_per_node, --tee, --role '', --node_rank,
    # -m), so nothing is dropped or translated: only the command's name changes.
    role = app.roles[0]
    command = role.args[-1]
    if role.entrypoint != "bash" or not command.startswith("torchrun "):
        raise RuntimeError("acc_launch.torchx.ddp: torchx %s's dist.ddp no longer runs "
                           "`bash -c 'torchrun ...'` (it runs %r); this component needs updating"
                           % (torchx.__version__, [role.entrypoint] + role.args))
    role.args[-1] = "acc-launch" + command[len("torchrun"):]
    return app


# `torchx run ... :ddp --help` describes each parameter from the docstring: dist.ddp's own.
ddp.__doc__ = (ddp.__doc__.rstrip() + "\n\n"
               + _dist.ddp.__doc__[_dist.ddp.__doc__.index("    Args:"):])
