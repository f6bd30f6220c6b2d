"""acc_launch.checkpoint (python/acc_launch/checkpoint.py) in one process, under the interpreter
that runs it: PyTorch 2.x (the venv's) for the memory, the commit and the helper's write, and
PyTorch 1.13 (Debian's) for its one line. Run: python -m unittest discover -s tests/python
(with python/ on PYTHONPATH); tests/CMakeLists.txt runs it under both."""
import errno
import os
import time
import shutil
import tempfile
import unittest
from unittest import mock

import torch

import acc_launch
from acc_launch import checkpoint

try:
    checkpoint._torch_checkpoint()
    HAS_DCP = True
except RuntimeError:
    HAS_DCP = False


def state(seed):
    torch.manual_seed(seed)
    model = torch.nn.Linear(8, 4)
    return {"model": model.state_dict(), "step": seed,
            "nested": {"half": torch.full((3,), float(seed), dtype=torch.bfloat16), "list": [seed, "x"]}}


@unittest.skipIf(HAS_DCP, "this PyTorch has torch.distributed.checkpoint with checkpoint_id")
class OldTorchTest(unittest.TestCase):
    def test_save_says_in_one_line_that_pytorch_2_is_needed(self):
        with self.assertRaises(RuntimeError) as raised:
            acc_launch.checkpoint.save({}, checkpoint_id="/nonexistent")
        self.assertIn("needs PyTorch 2.2 or later", str(raised.exception))
        self.assertNotIn("\n", str(raised.exception))


@unittest.skipUnless(HAS_DCP, "PyTorch < 2.2")
class MemoryTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.memory = os.path.join(self.dir, "memory")
        os.mkdir(self.memory)
        self.path = os.path.join(self.dir, "ckpt")
        patcher = mock.patch.dict(os.environ, {"ACC_CHECKPOINT_MEMORY": self.memory, "RANK": "0"})
        patcher.start()
        self.addCleanup(patcher.stop)
        checkpoint._Shard._next_seq.clear()
        checkpoint._Shard._no_room = False
        self.addCleanup(shutil.rmtree, self.dir)

    def files(self):
        return sorted(n for n in os.listdir(self.memory) if n.startswith("rank"))

    @unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
    def test_cuda_tensors_are_copied_into_a_page_locked_slot_and_load_back_on_the_gpu(self):
        saved = {"w": torch.arange(1 << 20, dtype=torch.float32, device="cuda"),
                 "cpu": torch.ones(3), "step": 7}
        acc_launch.checkpoint.save(saved, checkpoint_id=self.path)
        self.assertEqual(checkpoint._Shard.page_locked(), 1)
        saved["w"].add_(1)  # the copy was done before save returned
        target = {"w": torch.zeros(1 << 20, device="cuda"), "cpu": torch.zeros(3), "step": 0}
        acc_launch.checkpoint.load(target, checkpoint_id=self.path)
        self.assertEqual(target["w"].device.type, "cuda")
        self.assertTrue(torch.equal(target["w"].cpu(), torch.arange(1 << 20, dtype=torch.float32)))
        self.assertEqual(target["step"], 7)

    def test_a_save_is_a_copy_in_memory_that_load_puts_back_in_place(self):
        saved = state(1)
        acc_launch.checkpoint.save(saved, checkpoint_id=self.path)
        self.assertEqual(self.files(), ["rank0.1.meta", "rank0.slot0.data"])
        self.assertTrue(os.path.isdir(self.path))  # as after dcp.save, for os.path.exists guards
        self.assertEqual(os.listdir(self.path), [])  # nothing written to storage by the step
        saved["model"]["weight"].add_(1)  # the copy does not change with the model
        target = state(2)
        weight = target["model"]["weight"]
        acc_launch.checkpoint.load(target, checkpoint_id=self.path)
        self.assertIs(target["model"]["weight"], weight)  # in place
        self.assertTrue(torch.equal(weight, state(1)["model"]["weight"]))
        self.assertEqual(target["step"], 1)
        self.assertTrue(torch.equal(target["nested"]["half"], state(1)["nested"]["half"]))
        self.assertEqual(target["nested"]["list"], [1, "x"])

    def test_each_rank_keeps_its_last_two_saves_in_two_slots_and_a_torn_one_is_not_loaded(self):
        for seed in (1, 2, 3):
            acc_launch.checkpoint.save(state(seed), checkpoint_id=self.path)
        self.assertEqual(self.files(), ["rank0.2.meta", "rank0.3.meta", "rank0.slot0.data",
                                        "rank0.slot1.data"])
        os.unlink(os.path.join(self.memory, "rank0.3.meta"))  # a save that died before its commit
        target = state(9)
        acc_launch.checkpoint.load(target, checkpoint_id=self.path)
        self.assertEqual(target["step"], 2)

    def test_a_key_missing_from_the_save_is_an_error_that_names_it(self):
        acc_launch.checkpoint.save({"a": torch.ones(2)}, checkpoint_id=self.path)
        with self.assertRaises(RuntimeError) as raised:
            acc_launch.checkpoint.load({"a": torch.zeros(2), "b": torch.zeros(1)}, checkpoint_id=self.path)
        self.assertIn("b is missing", str(raised.exception))

    def test_no_room_is_one_line_and_the_save_goes_to_storage_as_dcp_save(self):
        no_room = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        with mock.patch("os.posix_fallocate", side_effect=no_room), \
                mock.patch("acc_launch.checkpoint._say") as say, \
                mock.patch("torch.distributed.checkpoint.save") as dcp_save:
            acc_launch.checkpoint.save(state(1), checkpoint_id=self.path)
            acc_launch.checkpoint.save(state(2), checkpoint_id=self.path)
        self.assertEqual(say.call_count, 1)
        self.assertIn("no room for", say.call_args[0][0])
        self.assertEqual(dcp_save.call_count, 2)
        self.assertEqual(self.files(), [])  # nothing half-made left

    def test_outside_acc_launch_both_are_dcp_calls(self):
        os.environ.pop("ACC_CHECKPOINT_MEMORY")
        with mock.patch("torch.distributed.checkpoint.save") as dcp_save, \
                mock.patch("torch.distributed.checkpoint.load") as dcp_load:
            acc_launch.checkpoint.save({"a": 1}, checkpoint_id=self.path)
            acc_launch.checkpoint.load({"a": 1}, checkpoint_id=self.path)
        dcp_save.assert_called_once_with({"a": 1}, checkpoint_id=self.path)
        dcp_load.assert_called_once_with({"a": 1}, checkpoint_id=self.path)

    def test_a_slot_is_written_only_once_the_save_it_held_is_no_longer_committed(self):
        acc_launch.checkpoint.save(state(1), checkpoint_id=self.path)  # slot 0
        acc_launch.checkpoint.save(state(2), checkpoint_id=self.path)  # slot 1
        shard = checkpoint._Shard.read(self.memory, 0, 1)
        self.assertTrue(shard.still_committed(self.memory))
        acc_launch.checkpoint.save(state(3), checkpoint_id=self.path)  # slot 0 again
        self.assertFalse(shard.still_committed(self.memory))
        self.assertEqual(checkpoint._Shard.read(self.memory, 0, 3).meta["slot"], 0)

    def test_the_helper_writes_the_newest_save_in_dcps_format_once(self):
        import torch.distributed.checkpoint as dcp
        for seed in (1, 2):
            acc_launch.checkpoint.save(state(seed), checkpoint_id=self.path)
        self.assertEqual(checkpoint.persist(self.memory), 0)
        self.assertEqual(open(os.path.join(self.memory, "persisted")).read(), "2\n")
        self.assertEqual(open(os.path.join(self.path, "acc-seq")).read(), "2\n")
        with mock.patch("torch.distributed.checkpoint.save") as again:
            self.assertEqual(checkpoint.persist(self.memory), 0)
        again.assert_not_called()
        target = state(9)
        with mock.patch.dict(os.environ, {}, clear=False):
            os.environ.pop("ACC_CHECKPOINT_MEMORY")
            dcp.load(target, checkpoint_id=self.path)
        self.assertEqual(target["step"], 2)
        self.assertTrue(torch.equal(target["model"]["weight"], state(2)["model"]["weight"]))

    def test_the_helper_keeps_the_last_k_writes_as_path_dot_seq(self):
        import torch.distributed.checkpoint as dcp
        os.environ.pop("ACC_CHECKPOINT_MEMORY")
        dcp.save(state(7), checkpoint_id=self.path)  # a checkpoint of an earlier job
        os.environ["ACC_CHECKPOINT_MEMORY"] = self.memory
        for seed in (1, 2, 3, 4):
            acc_launch.checkpoint.save(state(seed), checkpoint_id=self.path)
            self.assertEqual(checkpoint.persist(self.memory, keep=3), 0)
            time.sleep(0.01)  # the kept ones are ordered by their time of writing
        kept = sorted(name for name in os.listdir(self.dir) if name.startswith("ckpt"))
        self.assertEqual(kept, ["ckpt", "ckpt.2", "ckpt.3"])
        os.environ.pop("ACC_CHECKPOINT_MEMORY")
        for name, step in (("ckpt", 4), ("ckpt.2", 2), ("ckpt.3", 3)):
            target = state(9)
            dcp.load(target, checkpoint_id=os.path.join(self.dir, name))
            self.assertEqual(target["step"], step)
        self.assertEqual(checkpoint._main(["persist", self.memory, "--keep", "0"]), 2)

    def test_the_job_long_helper_writes_at_once_then_at_each_sigusr1_and_counts_its_writes(self):
        import signal
        import subprocess
        import sys
        acc_launch.checkpoint.save(state(1), checkpoint_id=self.path)
        python_dir = os.path.dirname(os.path.dirname(acc_launch.__file__))
        helper = subprocess.Popen(
            [sys.executable, "-c", "import sys; from acc_launch.checkpoint import _main; "
             "sys.exit(_main(sys.argv[1:]))", "serve", self.memory],
            env=dict(os.environ, PYTHONPATH=python_dir))
        self.addCleanup(helper.kill)
        done = os.path.join(self.memory, "persist.done")

        def await_done(count):
            for _ in range(600):
                if os.path.exists(done) and open(done).read() == "%d\n" % count:
                    return
                self.assertIsNone(helper.poll(), "the helper ended")
                time.sleep(0.05)
            self.fail("the helper did not count write %d" % count)

        await_done(1)
        self.assertEqual(open(os.path.join(self.path, "acc-seq")).read(), "1\n")
        acc_launch.checkpoint.save(state(2), checkpoint_id=self.path)
        time.sleep(0.3)
        self.assertEqual(open(os.path.join(self.path, "acc-seq")).read(), "1\n",
                         "written before it was asked")
        helper.send_signal(signal.SIGUSR1)
        await_done(2)
        self.assertEqual(open(os.path.join(self.path, "acc-seq")).read(), "2\n")
        helper.send_signal(signal.SIGUSR1)  # nothing newer: counted, nothing written
        await_done(3)
        helper.terminate()
        self.assertEqual(helper.wait(10), -signal.SIGTERM)

    def test_the_job_long_helper_ends_once_the_launcher_that_started_it_is_gone(self):
        import subprocess
        import sys
        acc_launch.checkpoint.save(state(1), checkpoint_id=self.path)
        python_dir = os.path.dirname(os.path.dirname(acc_launch.__file__))
        code = "import sys; from acc_launch.checkpoint import _main; sys.exit(_main(sys.argv[1:]))"
        # The "launcher" (a shell) starts the helper and exits once it has written the first save.
        pid = int(subprocess.check_output(
            ["sh", "-c", '"$0" -c "$1" serve "$2" >/dev/null 2>&1 & echo $!; '
             'until [ -e "$2/persist.done" ]; do sleep 0.05; done', sys.executable, code,
             self.memory], env=dict(os.environ, PYTHONPATH=python_dir), timeout=120))

        def running():
            try:
                with open("/proc/%d/stat" % pid) as f:
                    return f.read().rsplit(")", 1)[1].split()[0] != "Z"
            except OSError:
                return False

        for _ in range(1200):
            if not running():
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            self.fail("the helper outlived its launcher by a minute")
        self.assertEqual(open(os.path.join(self.memory, "persist.done")).read(), "1\n")

    def test_without_a_save_in_memory_load_reads_path_once_it_is_whole(self):
        import torch.distributed.checkpoint as dcp
        real_load = dcp.load
        calls = []

        def load_while_replaced(state_dict, checkpoint_id, **kwargs):
            calls.append(checkpoint_id)
            if len(calls) == 1:  # the helper has moved PATH aside: not there
                os.rename(self.path, self.path + ".acc-old")
                return real_load(state_dict, checkpoint_id=checkpoint_id)
            if len(calls) == 2:  # back; read while the helper puts its next write in place
                os.rename(self.path + ".acc-old", self.path)
                real_load(state_dict, checkpoint_id=checkpoint_id)
                dcp.save(state(3), checkpoint_id=self.path, no_dist=True)
                with open(os.path.join(self.path, "acc-seq"), "w") as f:
                    f.write("3\n")
                return
            real_load(state_dict, checkpoint_id=checkpoint_id)

        os.environ.pop("ACC_CHECKPOINT_MEMORY")
        dcp.save(state(2), checkpoint_id=self.path, no_dist=True)
        with open(os.path.join(self.path, "acc-seq"), "w") as f:
            f.write("2\n")
        os.environ["ACC_CHECKPOINT_MEMORY"] = self.memory
        target = state(9)
        with mock.patch("torch.distributed.checkpoint.load", side_effect=load_while_replaced):
            acc_launch.checkpoint.load(target, checkpoint_id=self.path)
        self.assertEqual(calls, [self.path] * 3)
        self.assertEqual(target["step"], 3)
        self.assertTrue(torch.equal(target["model"]["weight"], state(3)["model"]["weight"]))

    def test_without_a_save_anywhere_load_fails_at_once_as_dcp_load_does(self):
        started = time.monotonic()
        with self.assertRaises(BaseException):  # DCP's CheckpointException
            acc_launch.checkpoint.load(state(9), checkpoint_id=self.path)
        self.assertLess(time.monotonic() - started, 0.4)

    def test_the_helper_says_in_one_line_why_it_cannot_write(self):
        blocker = os.path.join(self.dir, "file")
        open(blocker, "w").close()
        acc_launch.checkpoint.save(state(1), checkpoint_id=os.path.join(blocker, "ckpt"))
        with mock.patch("acc_launch.checkpoint._say") as say:
            self.assertEqual(checkpoint.persist(self.memory), 1)
        self.assertEqual(say.call_count, 1)
        self.assertIn("cannot write", say.call_args[0][0])
        self.assertFalse(os.path.exists(os.path.join(self.memory, "persisted")))


if __name__ == "__main__":
    unittest.main()
