"""acc_launch.torchx.ddp (python/acc_launch/torchx.py) against TorchX's own dist.ddp, without
running a job: the same parameters, the same AppDef but for the role's command (acc-launch in
torchrun's place, every flag kept), a component TorchX's linter accepts, and `import acc_launch`
without torchx. Skipped where torchx is not importable."""
import inspect
import os
import subprocess
import sys
import unittest

try:
    from torchx.components import dist
except ImportError:
    dist = None
else:
    from torchx.specs import file_linter

    import acc_launch.torchx
    from acc_launch.torchx import ddp


@unittest.skipIf(dist is None, "torchx is not importable from " + sys.executable)
class DdpComponentTest(unittest.TestCase):
    def test_takes_the_same_parameters_as_dist_ddp(self):
        self.assertEqual(inspect.signature(ddp), inspect.signature(dist.ddp))

    def test_builds_dist_ddps_app_with_acc_launch_in_torchruns_place(self):
        cases = [
            dict(script="train.py"),
            dict(script="train.py", j="2x4", rdzv_port=29555, tee=1, name="exp/run"),
            dict(m="pkg.train", j="2:4x8", rdzv_backend="static", debug=True, env={"A": "1"},
                 h=None, cpu=8, gpu=2, memMB=4096, max_retries=3,
                 mounts=["type=bind", "src=/data", "dst=/data"]),
        ]
        for kwargs in cases:
            with self.subTest(**{k: str(v) for k, v in kwargs.items()}):
                ours = ddp("--lr", "1e-3", **dict(kwargs, env=dict(kwargs.get("env", {}))))
                theirs = dist.ddp("--lr", "1e-3", **dict(kwargs, env=dict(kwargs.get("env", {}))))
                command = theirs.roles[0].args[-1]
                self.assertTrue(command.startswith("torchrun --rdzv_backend "), command)
                self.assertEqual(ours.roles[0].args[-1], "acc-launch" + command[len("torchrun"):])
                ours.roles[0].args[-1] = command
                self.assertEqual(ours, theirs)

    def test_passes_torchxs_component_linter_with_dist_ddps_parameter_help(self):
        self.assertEqual(file_linter.validate(acc_launch.torchx.__file__, "ddp"), [])
        _, ours = file_linter.get_fn_docstring(ddp)
        _, theirs = file_linter.get_fn_docstring(dist.ddp)
        self.assertEqual(ours, theirs)

    def test_import_acc_launch_does_not_import_torchx(self):
        out = subprocess.run(
            [sys.executable, "-c", "import sys, acc_launch; print('torchx' in sys.modules)"],
            env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(acc_launch.__file__))),
            check=True, capture_output=True, text=True).stdout
        self.assertEqual(out.strip(), "False")


if __name__ == "__main__":
    unittest.main()
