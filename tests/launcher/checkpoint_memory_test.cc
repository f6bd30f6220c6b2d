// The launcher's side of acc_launch.checkpoint and libacc's save_state (agent/checkpoint_memory.h),
// over a scripted Os: when the helper that writes the newest save to storage runs, and what the
// launcher says of it; and libacc's helper (acc-launch __persist_state) on real files. The Python
// helper, and whole jobs, are tests/python/, tests/integration/pytorch/checkpoints.sh and
// tests/runtime/distributed_test.cc.

#include "agent/checkpoint_memory.h"

#include <signal.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "acc/common/files.h"
#include "fake_os.h"
#include "launcher_harness.h"

namespace acc::launcher {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class CheckpointMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override { os.installed["env"] = "/usr/bin/env"; }

  CheckpointMemory& memory(milliseconds interval = seconds(60)) {
    memory_.emplace(os, dir.path(), "/venv/bin/python", "/run/python", interval, /*keep=*/3,
                    [this](const std::string& line) { notices.push_back(line); });
    return *memory_;
  }
  void save(int seq) { write_file(dir.path() + "/rank0." + std::to_string(seq) + ".meta", "x"); }
  void written(int seq) { write_file(dir.path() + "/persisted", std::to_string(seq) + "\n"); }
  std::vector<const testing::FakeOs::Process*> helpers() const {
    std::vector<const testing::FakeOs::Process*> found;
    for (const auto& p : os.processes()) found.push_back(p.get());
    return found;
  }
  void run_helpers_to_their_end() {
    std::vector<pollfd> none;
    os.wait(none, os.now() + seconds(5));
    memory_->tick();
  }

  acc::testing::TempDir dir;
  testing::FakeOs os;
  std::optional<CheckpointMemory> memory_;
  std::vector<std::string> notices;
};

TEST_F(CheckpointMemoryTest, NoHelperRunsBeforeRankZeroHasSavedHere) {
  CheckpointMemory& m = memory();
  write_file(dir.path() + "/rank1.4.meta", "x");  // another rank's save: not this node's to write
  m.tick();
  m.persist();
  EXPECT_TRUE(helpers().empty());
}

TEST_F(CheckpointMemoryTest, TheFirstSaveIsWrittenAtOnceThenOnlyEveryIntervalAndNeverTwice) {
  CheckpointMemory& m = memory(seconds(60));
  save(1);
  m.tick();
  ASSERT_EQ(helpers().size(), 1u);
  EXPECT_EQ(helpers()[0]->request.argv,
            (std::vector<std::string>{"/usr/bin/env", "PYTHONPATH=/run/python", "/venv/bin/python",
                                      "-c", helpers()[0]->request.argv[4], "serve", dir.path(),
                                      "--keep", "3"}));
  written(1);
  run_helpers_to_their_end();
  save(2);
  m.tick();
  EXPECT_EQ(helpers().size(), 1u) << "written again before the interval";
  os.sleep_until(os.now() + seconds(61));
  m.tick();
  EXPECT_EQ(helpers().size(), 2u) << "save 2 not written after the interval";
  written(2);
  run_helpers_to_their_end();
  m.persist();  // a failure: nothing newer than what is written
  EXPECT_EQ(helpers().size(), 2u);
  EXPECT_TRUE(notices.empty());
}

// The helper of acc_launch.checkpoint's saves runs for the whole job (one import torch): it is
// asked for each later write with SIGUSR1, and counts the writes it has done in persist.done.
TEST_F(CheckpointMemoryTest, TheJobLongHelperIsAskedForEachWriteAndSaysItsLinesOnce) {
  os.helper = [](const std::vector<std::string>&) { return testing::Script{}; };  // runs on
  CheckpointMemory& m = memory(milliseconds(0));
  const auto done = [this](int count) {
    write_file(dir.path() + "/persist.done", std::to_string(count) + "\n");
  };
  save(1);
  m.tick();
  ASSERT_EQ(helpers().size(), 1u);
  const testing::FakeOs::Process& helper = *helpers()[0];
  save(2);
  m.persist();  // the first write is not done: nothing asked
  EXPECT_FALSE(helper.got(SIGUSR1));
  written(1);
  done(1);
  m.persist();
  EXPECT_TRUE(helper.got(SIGUSR1));
  EXPECT_TRUE(m.next_wake().has_value()) << "a write under way is looked at";
  write_file(dir.path() + "/persist.log",
             "acc-launch: checkpoint: cannot write /ckpt: No space left on device; training goes "
             "on with the copy in memory\n");
  done(2);
  m.tick();
  m.tick();
  EXPECT_EQ(notices,
            (std::vector<std::string>{"checkpoint: cannot write /ckpt: No space left on "
                                      "device; training goes on with the copy in memory"}));
  written(2);
  save(3);
  // The end asks for save 3 and waits for the count, which never comes here: the limit ends it.
  m.persist_and_wait(seconds(1), [](int) { return false; });
  EXPECT_EQ(helpers().size(), 1u) << "a second helper started";
  EXPECT_TRUE(helper.got(SIGTERM));
  EXPECT_EQ(notices.back(),
            "checkpoint: the newest save was not written to storage (it took too long)");
}

// A write under way at the job's end may hold an older save than the newest: the end waits for
// it, then has the newest written.
TEST_F(CheckpointMemoryTest, AtTheEndAWriteUnderWayOfAnOlderSaveIsFollowedByOneOfTheNewest) {
  os.helper = [](const std::vector<std::string>&) {
    testing::Script script;
    script.exit_after = milliseconds(500);  // each writes once, then ends
    return script;
  };
  CheckpointMemory& m = memory(milliseconds(0));
  save(1);
  m.tick();
  ASSERT_EQ(helpers().size(), 1u);
  written(1);  // what the first helper writes: save 1, while rank 0 saves 2
  save(2);
  m.persist_and_wait(seconds(10), [](int) { return false; });
  ASSERT_EQ(helpers().size(), 2u) << "save 2 was not written at the end";
  EXPECT_FALSE(helpers()[1]->alive) << "the end did not wait for the second write";
  EXPECT_TRUE(notices.empty());
}

TEST_F(CheckpointMemoryTest, TheJobLongHelperIsStoppedWithTheLauncherAndAnotherStartsWhereItDied) {
  os.helper = [](const std::vector<std::string>&) {
    testing::Script script;
    script.exit_after = milliseconds(500);
    script.killed_by = SIGKILL;  // the OOM killer, say
    return script;
  };
  CheckpointMemory& m = memory(milliseconds(0));
  save(1);
  m.tick();
  ASSERT_EQ(helpers().size(), 1u);
  run_helpers_to_their_end();
  EXPECT_EQ(notices, (std::vector<std::string>{
                         "checkpoint: the helper writing the newest save ended with signal 9; "
                         "training goes on with the copy in memory"}));
  m.persist();
  ASSERT_EQ(helpers().size(), 2u) << "no helper for the write after one died";
  EXPECT_FALSE(helpers()[0]->got(SIGUSR1));
  memory_.reset();
  EXPECT_TRUE(helpers()[1]->got(SIGTERM));
}

TEST_F(CheckpointMemoryTest, AWriteThatFailsAsTheLastOneDidSaysNothingNew) {
  os.helper = [](const std::vector<std::string>&) {
    testing::Script script;
    script.exit_after = milliseconds(10);
    script.exit_code = 1;
    script.output =
        "acc-launch: checkpoint: cannot write /ckpt: Read-only file system; training "
        "goes on with the copy in memory\n";
    return script;
  };
  CheckpointMemory& m = memory(milliseconds(0));
  for (int seq = 1; seq <= 3; ++seq) {
    save(seq);
    m.persist();
    run_helpers_to_their_end();
  }
  EXPECT_EQ(helpers().size(), 3u);
  EXPECT_EQ(notices, (std::vector<std::string>{
                         "checkpoint: cannot write /ckpt: Read-only file system; training goes on "
                         "with the copy in memory"}));
}

TEST_F(CheckpointMemoryTest, TheEndWaitsForTheWriteButAStopSignalEndsTheWaitAndTheHelper) {
  os.helper = [](const std::vector<std::string>&) {
    testing::Script script;
    script.exit_after = milliseconds(30'000);
    return script;
  };
  os.take_signals({SIGTERM});
  CheckpointMemory& m = memory(milliseconds(0));
  save(1);
  os.signal_launcher(seconds(2), SIGTERM);
  m.persist_and_wait(seconds(300), [](int sig) { return sig == SIGTERM; });
  ASSERT_EQ(helpers().size(), 1u);
  EXPECT_TRUE(helpers()[0]->got(SIGTERM));
  EXPECT_LT(os.now() - helpers()[0]->started, seconds(3));
  EXPECT_EQ(notices, (std::vector<std::string>{
                         "checkpoint: the newest save was not written to storage (stopped)"}));
}

TEST_F(CheckpointMemoryTest, LibaccsSavesAreWrittenByTheLauncherItself) {
  CheckpointMemory& m = memory();
  const std::string save = dir.path() + "/libacc.2";
  std::filesystem::create_directories(save);
  write_file(save + "/saved-for", "/ckpt");
  m.tick();
  EXPECT_TRUE(helpers().empty()) << "a save without rank 0's RNG states is another node's";
  write_file(save + "/random_states_0.pt", "x");
  m.tick();
  ASSERT_EQ(helpers().size(), 1u);
  EXPECT_EQ(helpers()[0]->request.argv,
            (std::vector<std::string>{os.proc().executable(), kPersistStateCommand, dir.path(),
                                      "--keep", "3"}));
}

// Save <seq>, saved for `path`, as libacc's save_state makes it (runtime/src/checkpoint.cc): the
// link libacc.<seq> to the slot libacc.slot<seq % 2>, which holds rank 0's RNG states and a model,
// each holding `contents`; the link of the save the slot held before is removed.
void libacc_save(const std::string& memory, int seq, const std::string& path,
                 const std::string& contents) {
  const std::string slot = "libacc.slot" + std::to_string(seq % 2);
  std::filesystem::remove(memory + "/libacc." + std::to_string(seq - 2));
  std::filesystem::create_directories(memory + "/" + slot);
  write_file(memory + "/" + slot + "/saved-for", path);
  write_file(memory + "/" + slot + "/random_states_0.pt", contents);
  write_file(memory + "/" + slot + "/model.pt", contents);
  std::filesystem::create_directory_symlink(slot, memory + "/libacc." + std::to_string(seq));
}

TEST(PersistLibaccSaveTest, TheNewestSaveIsCopiedOnceAndTheOneItReplacesKeptByItsNumber) {
  acc::testing::TempDir memory, storage;
  const std::string ckpt = storage.path() + "/run/ckpt";
  libacc_save(memory.path(), 1, ckpt, "one");
  ASSERT_EQ(persist_libacc_save({memory.path(), "--keep", "2"}), 0);
  EXPECT_EQ(read_file(ckpt + "/model.pt"), "one");
  EXPECT_FALSE(std::filesystem::is_symlink(ckpt)) << "the slot's files, not the link";
  EXPECT_FALSE(std::filesystem::exists(ckpt + "/saved-for"));
  EXPECT_EQ(read_file(ckpt + "/acc-seq"), "1\n") << "load_state's sign of the write it reads";
  EXPECT_EQ(read_file(memory.path() + "/persisted"), "1\n");
  libacc_save(memory.path(), 2, ckpt, "two");
  ASSERT_EQ(persist_libacc_save({memory.path(), "--keep", "2"}), 0);
  EXPECT_EQ(read_file(ckpt + "/model.pt"), "two");
  EXPECT_EQ(read_file(ckpt + ".1/model.pt"), "one");
  EXPECT_EQ(read_file(memory.path() + "/persisted"), "2\n");
  EXPECT_FALSE(std::filesystem::exists(ckpt + ".acc-writing"));
  EXPECT_FALSE(std::filesystem::exists(ckpt + ".acc-old"));
  write_file(ckpt + "/model.pt", "changed");
  ASSERT_EQ(persist_libacc_save({memory.path(), "--keep", "2"}), 0);
  EXPECT_EQ(read_file(ckpt + "/model.pt"), "changed") << "save 2 written twice";
  libacc_save(memory.path(), 3, ckpt, "three");
  ASSERT_EQ(persist_libacc_save({memory.path(), "--keep", "2"}), 0);
  EXPECT_EQ(read_file(ckpt + "/model.pt"), "three") << "slot 1 again, for save 3";
  EXPECT_FALSE(std::filesystem::exists(memory.path() + "/libacc.1"));
}

TEST(PersistLibaccSaveTest, APathThatCannotBeWrittenIsOneLineAndExitOne) {
  acc::testing::TempDir memory, storage;
  write_file(storage.path() + "/file", "x");
  libacc_save(memory.path(), 1, storage.path() + "/file/ckpt", "one");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(persist_libacc_save({memory.path(), "--keep", "1"}), 1);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "acc-launch: checkpoint: cannot write " + storage.path() +
                     "/file/ckpt: Not a directory; training goes on with the copy in memory\n");
  EXPECT_EQ(read_file(memory.path() + "/persisted"), "");
  EXPECT_EQ(persist_libacc_save({memory.path()}), 2) << "no --keep: usage";
}

}  // namespace
}  // namespace acc::launcher
