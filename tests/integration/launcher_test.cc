// The launcher as a user meets it: the real acc-launch binary, real worker processes, real
// signals, and /proc to prove that nothing is left behind.

#include <arpa/inet.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "launcher_harness.h"

namespace acc::testing {
namespace {
namespace fs = std::filesystem;
using std::chrono::seconds;

// "[rank1]: KEY=VALUE" lines -> rank -> key -> value.
std::map<int, std::map<std::string, std::string>> env_by_rank(const std::string& out) {
  std::map<int, std::map<std::string, std::string>> result;
  std::regex line(R"(^\[rank(\d+)\]: ([A-Z_]+)=(.*)$)");
  for (const std::string& text : lines_of(out)) {
    std::smatch m;
    if (std::regex_match(text, m, line)) result[std::stoi(m[1])][m[2]] = m[3];
  }
  return result;
}

// Tests that run in parallel share the worker binary: those without a marker of their own
// check what only they can see, their unreaped children.
void expect_no_zombies() {
  EXPECT_TRUE(zombie_children().empty()) << "the launcher left unreaped children";
  reap_exited_children();
}

TEST(LaunchTest, EveryRankGetsTheTorchrunContract) {
  LaunchRun run = run_launcher(
      worker({"--nproc_per_node", "3", "--mixed_precision", "bf16", "--gpu_ids", "1,3"},
             {"env", "--lr", "0.1"}),
      {{"OMP_NUM_THREADS", ""}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto env = env_by_rank(run.out);
  ASSERT_EQ(env.size(), 3u) << run.out;
  std::set<std::string> error_files;
  for (int rank = 0; rank < 3; ++rank) {
    auto& e = env[rank];
    EXPECT_EQ(e["RANK"], std::to_string(rank));
    EXPECT_EQ(e["LOCAL_RANK"], std::to_string(rank));
    EXPECT_EQ(e["ROLE_RANK"], std::to_string(rank));
    EXPECT_EQ(e["WORLD_SIZE"], "3");
    EXPECT_EQ(e["LOCAL_WORLD_SIZE"], "3");
    EXPECT_EQ(e["ROLE_WORLD_SIZE"], "3");
    EXPECT_EQ(e["GROUP_RANK"], "0");
    EXPECT_EQ(e["GROUP_WORLD_SIZE"], "1");
    EXPECT_EQ(e["ROLE_NAME"], "default");
    EXPECT_EQ(e["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(e["MASTER_PORT"], env[0]["MASTER_PORT"]);
    EXPECT_GT(std::stoi(e["MASTER_PORT"]), 0);
    EXPECT_EQ(e["TORCHELASTIC_RESTART_COUNT"], "0");
    EXPECT_EQ(e["TORCHELASTIC_MAX_RESTARTS"], "0");
    EXPECT_EQ(e["TORCHELASTIC_RUN_ID"], "none");
    EXPECT_EQ(e["TORCHELASTIC_USE_AGENT_STORE"], "True");
    EXPECT_EQ(e["OMP_NUM_THREADS"], "1");
    EXPECT_EQ(e["ACCELERATE_MIXED_PRECISION"], "bf16");
    EXPECT_EQ(e["CUDA_VISIBLE_DEVICES"], "1,3");
    EXPECT_EQ(e["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
    EXPECT_NE(e["TORCHELASTIC_ERROR_FILE"].find("/" + std::to_string(rank) + "/error.json"),
              std::string::npos);
    error_files.insert(e["TORCHELASTIC_ERROR_FILE"]);
  }
  EXPECT_EQ(error_files.size(), 3u);
  EXPECT_NE(run.out.find("[rank2]: ARG=--lr"), std::string::npos);
  EXPECT_NE(run.out.find("[rank2]: ARG=0.1"), std::string::npos);
  EXPECT_NE(run.err.find("OMP_NUM_THREADS=1"), std::string::npos) << "one log line says so";
  expect_no_zombies();
}

TEST(LaunchTest, StaticMultiNodeRanksComeFromTheNodeRank) {
  LaunchRun run =
      run_launcher({"--nnodes", "2", "--node_rank", "1", "--nproc_per_node", "2", "--master_addr",
                    "10.1.2.3", "--master_port", "29555", "--dry_run", "--no_python", "./train"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("RANK=2\n"), std::string::npos);
  EXPECT_NE(run.out.find("RANK=3\n"), std::string::npos);
  EXPECT_NE(run.out.find("WORLD_SIZE=4\n"), std::string::npos);
  EXPECT_NE(run.out.find("GROUP_RANK=1\n"), std::string::npos);
  EXPECT_NE(run.out.find("MASTER_ADDR=10.1.2.3\n"), std::string::npos);
  EXPECT_NE(run.out.find("MASTER_PORT=29555\n"), std::string::npos);
  EXPECT_NE(run.out.find("command: ./train"), std::string::npos);
}

TEST(LaunchTest, AccelerateFlagsMapToTheSameLaunch) {
  LaunchRun run = run_launcher({"--num_processes", "4", "--num_machines", "2", "--machine_rank",
                                "1", "--main_process_ip", "10.0.0.1", "--main_process_port",
                                "29501", "--dry_run", "./train"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("2 node(s) x 2 worker(s), world size 4, node rank 1"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("MASTER_ADDR=10.0.0.1\n"), std::string::npos);
  EXPECT_NE(run.out.find("MASTER_PORT=29501\n"), std::string::npos);
}

TEST(LaunchTest, PetVariablesMirrorFlagsAndFlagsWin) {
  LaunchRun from_env = run_launcher(worker({}, {"env"}), {{"PET_NPROC_PER_NODE", "2"}});
  ASSERT_EQ(from_env.exit_code, 0) << from_env.err;
  EXPECT_EQ(env_by_rank(from_env.out).size(), 2u);
  LaunchRun flag_wins =
      run_launcher(worker({"--nproc-per-node", "1"}, {"env"}), {{"PET_NPROC_PER_NODE", "2"}});
  ASSERT_EQ(flag_wins.exit_code, 0) << flag_wins.err;
  EXPECT_EQ(env_by_rank(flag_wins.out).size(), 1u);
}

TEST(LaunchTest, PythonProgramsRunUnderTheInterpreter) {
  TempDir dir;
  const std::string train = dir.file("train.py", "");
  LaunchRun script = run_launcher({"--python", "/bin/echo", train, "--lr", "1"});
  EXPECT_EQ(script.exit_code, 0) << script.err;
  EXPECT_EQ(script.out, "[rank0]: -u " + train + " --lr 1\n");
  LaunchRun module = run_launcher({"--python", "/bin/echo", "-m", "pkg.train", "x"});
  EXPECT_EQ(module.out, "[rank0]: -u -m pkg.train x\n");
  LaunchRun local_rank_macro = run_launcher({"--nproc_per_node", "2", "--local_ranks_filter", "1",
                                             "/bin/echo", "--device=${local_rank}"});
  EXPECT_EQ(local_rank_macro.out, "[rank1]: --device=1\n");
}

TEST(LaunchTest, TheFirstFailingWorkersExitCodeIsTheLaunchersAndTheRestAreStopped) {
  LaunchRun run = run_launcher(worker({"--nproc_per_node", "3"}, {"exit", "1", "7"}));
  EXPECT_EQ(run.exit_code, 7) << run.err;
  EXPECT_NE(run.err.find("FAILED after 1 attempt"), std::string::npos) << run.err;
  std::regex root(R"(\n1 +1 +\S+ +\d+ +7 \*)");
  EXPECT_TRUE(std::regex_search(run.err, root)) << run.err;
  std::regex stopped(R"(\n0 +0 +\S+ +\d+ +SIGTERM \(15\) \(stopped\))");
  EXPECT_TRUE(std::regex_search(run.err, stopped)) << run.err;
  expect_no_zombies();
}

TEST(LaunchTest, AWorkerKilledBySignalNGives128PlusN) {
  LaunchRun run = run_launcher(worker({"--nproc_per_node", "2"}, {"signal", "0", "11"}));
  EXPECT_EQ(run.exit_code, 128 + 11) << run.err;
  EXPECT_NE(run.err.find("exited with SIGSEGV (11)"), std::string::npos) << run.err;
  expect_no_zombies();
}

TEST(LaunchTest, OneFailureAmongEightEndsTheGroup) {
  LaunchRun run = run_launcher(worker({"--nproc_per_node", "8"}, {"exit", "5", "1"}));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(std::regex_search(run.err, std::regex(R"(\(stopped\))")), true);
  size_t stopped = 0;
  for (const auto& line : lines_of(run.err)) stopped += line.find("(stopped)") != line.npos;
  EXPECT_EQ(stopped, 7u) << run.err;
  expect_no_zombies();
}

TEST(LaunchTest, RestartsCountInTheEnvironmentUntilTheWorkersSucceed) {
  LaunchRun run = run_launcher(worker({"--max_restarts", "3"}, {"fail-before", "2"}));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("[rank0]: attempt 0\n[rank0]: attempt 1\n[rank0]: attempt 2\n"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.err.find("restarting (1 of 3)"), std::string::npos);
  EXPECT_NE(run.err.find("restarting (2 of 3)"), std::string::npos);
  EXPECT_EQ(run.err.find("restarting (3 of 3)"), std::string::npos);
}

TEST(LaunchTest, RestartsRunOutAndTheLauncherFails) {
  LaunchRun run = run_launcher(worker({"--max-restarts", "1"}, {"fail-before", "5"}));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("FAILED after 2 attempts"), std::string::npos) << run.err;
}

TEST(LaunchTest, SignalsAreForwardedToEveryWorker) {
  const std::string dir = make_temp_dir();
  pid_t launcher = start_launcher(worker({"--nproc_per_node", "2"}, {"wait", dir}), dir);
  for (int rank = 0; rank < 2; ++rank)
    ASSERT_TRUE(wait_for_file(dir + "/" + std::to_string(rank) + ".ready", seconds(30)));
  ::kill(launcher, SIGUSR1);
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_TRUE(wait_for_file(dir + "/" + std::to_string(rank) + ".usr1", seconds(30)));
  ::kill(launcher, SIGTERM);
  EXPECT_EQ(wait_launcher(launcher), 128 + SIGTERM);
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_TRUE(fs::exists(dir + "/" + std::to_string(rank) + ".term"));
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(LaunchTest, WorkersThatIgnoreSigtermAreKilledAfterTheGracePeriod) {
  const std::string dir = make_temp_dir();
  pid_t launcher = start_launcher(
      worker({"--nproc_per_node", "2", "--shutdown_timeout", "0.3"}, {"ignore-term", dir}), dir);
  for (int rank = 0; rank < 2; ++rank)
    ASSERT_TRUE(wait_for_file(dir + "/" + std::to_string(rank) + ".ready", seconds(30)));
  ::kill(launcher, SIGTERM);
  EXPECT_EQ(wait_launcher(launcher), 128 + SIGTERM);
  std::ifstream err(dir + "/launcher.err");
  std::string text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("sending SIGKILL"), std::string::npos) << text;
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(LaunchTest, KillDashNineOfTheLauncherLeavesNoOrphanOrZombie) {
  const std::string dir = make_temp_dir();
  // Its run directory in `dir`, not in the machine's /dev/shm: a launcher killed outright leaves
  // it there for the next launcher to remove (run_dir_test.cc).
  pid_t launcher =
      start_launcher(worker({"--nproc_per_node", "3"}, {"wait", dir}), dir, {{"TMPDIR", dir}});
  for (int rank = 0; rank < 3; ++rank)
    ASSERT_TRUE(wait_for_file(dir + "/" + std::to_string(rank) + ".ready", seconds(30)));
  // The launcher, its watchdog, three workers and each worker's own child.
  EXPECT_EQ(processes_mentioning(dir).size(), 8u);
  ::kill(launcher, SIGKILL);
  EXPECT_EQ(wait_launcher(launcher), 128 + SIGKILL);
  // The killed launcher cannot reap: its watchdog, workers and their children come to this test
  // process (a subreaper) to be reaped. What matters is that all of them end, and soon.
  EXPECT_TRUE(reap_until_no_children(seconds(10))) << "processes of the killed launcher live on";
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(LaunchTest, HeavyOutputFromEightWorkersStaysLineAtomic) {
  const int kLines = 3000;
  LaunchRun run = run_launcher(worker({"--nproc_per_node", "8"}, {"spam", std::to_string(kLines)}));
  ASSERT_EQ(run.exit_code, 0) << run.err.substr(0, 2000);
  std::regex out_line(R"(\[rank(\d)\]: line (\d+) of rank (\d) ([a-z])\4{199} end)");
  std::regex err_line(R"(\[rank(\d)\]: err (\d+) of rank (\d) ([a-z])\4{199} end)");
  std::map<int, int> next_out, next_err;
  for (const auto& [text, pattern, next] :
       {std::tuple(&run.out, &out_line, &next_out), std::tuple(&run.err, &err_line, &next_err)}) {
    for (const std::string& line : lines_of(*text)) {
      if (line.rfind("acc-launch:", 0) == 0) continue;
      std::smatch m;
      ASSERT_TRUE(std::regex_match(line, m, *pattern)) << "torn or mixed line: " << line;
      const int rank = std::stoi(m[1]);
      ASSERT_EQ(rank, std::stoi(m[3])) << line;
      ASSERT_EQ(std::stoi(m[2]), (*next)[rank]++) << "lines of rank " << rank << " out of order";
    }
  }
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(next_out[rank], kLines);
    EXPECT_EQ(next_err[rank], kLines);
  }
}

TEST(LaunchTest, TheErrorFileAndStderrTailAppearInTheReport) {
  LaunchRun run = run_launcher(worker({"--nproc_per_node", "2"}, {"record"}));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("error     : ValueError: loss is nan"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("line 7, in step"), std::string::npos);
  EXPECT_NE(run.err.find("| about to fail"), std::string::npos);
}

// Under TorchX or another torchelastic agent (the launcher's own $TORCHELASTIC_ERROR_FILE set),
// the failed worker's error file goes up there as torchrun passes it on, with its exit code.
TEST(LaunchTest, TheRootCausesErrorFileGoesToTheLaunchersOwn) {
  TempDir dir;
  const std::string own = dir.path() + "/launcher-error.json";
  LaunchRun run = run_launcher(worker({"--nproc_per_node", "2"}, {"record"}),
                               {{"TORCHELASTIC_ERROR_FILE", own}});
  EXPECT_EQ(run.exit_code, 1);
  const std::string passed_on = read_text(own);
  EXPECT_NE(passed_on.find("\"message\":\"ValueError: loss is nan\""), std::string::npos)
      << passed_on;
  EXPECT_NE(passed_on.find("line 7, in step"), std::string::npos) << passed_on;
  EXPECT_NE(passed_on.find("\"errorCode\":1"), std::string::npos) << passed_on;
  // A job that succeeds writes none.
  std::filesystem::remove(own);
  EXPECT_EQ(
      run_launcher(worker({"--nproc_per_node", "2"}, {"env"}), {{"TORCHELASTIC_ERROR_FILE", own}})
          .exit_code,
      0);
  EXPECT_FALSE(std::filesystem::exists(own));
}

TEST(LaunchTest, DedupLinesLeavesTheReportsStderrTailAlone) {
  LaunchRun run = run_launcher(worker({"--nproc_per_node", "2", "--dedup_lines"}, {"record"}));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("[rank0]: about to fail\n"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("| about to fail"), std::string::npos) << run.err;
  EXPECT_LT(run.err.find("[rank0]: about to fail"), run.err.find("| about to fail"))
      << "the console lines come out before the report";
}

TEST(LaunchTest, LogDirKeepsPerAttemptPerRankFiles) {
  const std::string dir = make_temp_dir();
  LaunchRun run = run_launcher(worker(
      {"--nproc_per_node", "2", "--log_dir", dir, "--redirects", "0:1", "--max_restarts", "1"},
      {"fail-before", "1"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.find("[rank0]"), std::string::npos) << "rank 0's stdout is redirected";
  EXPECT_NE(run.out.find("[rank1]: attempt 1"), std::string::npos);
  std::vector<fs::path> runs(fs::directory_iterator(dir), fs::directory_iterator{});
  ASSERT_EQ(runs.size(), 1u);
  // Rank 1 of attempt 0 may be stopped before it prints: rank 0's failure ends the group.
  for (auto [attempt, rank] : {std::pair(0, 0), std::pair(1, 0), std::pair(1, 1)}) {
    {
      fs::path stdout_log =
          runs[0] / ("attempt_" + std::to_string(attempt)) / std::to_string(rank) / "stdout.log";
      std::ifstream file(stdout_log);
      std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
      EXPECT_EQ(text, "attempt " + std::to_string(attempt) + "\n") << stdout_log;
    }
  }
  fs::remove_all(dir);
}

// A short job's run directory (a dozen directories made and removed in milliseconds) goes to a
// tmpfs unless the user named a temporary directory or the run writes log files there.
TEST(LaunchTest, TheRunDirectoryIsOnATmpfsUnlessTmpdirIsSetOrLogsAreWritten) {
  struct statfs shm {};
  if (::statfs("/dev/shm", &shm) != 0 || shm.f_type != TMPFS_MAGIC ||
      static_cast<uint64_t>(shm.f_bavail) * shm.f_bsize < (256ull << 20) ||
      ::access("/dev/shm", W_OK) != 0)
    GTEST_SKIP() << "no writable tmpfs with room at /dev/shm";
  const std::map<std::string, std::string> no_tmpdir = {
      {"TMPDIR", ""}, {"TMP", ""}, {"TEMP", ""}, {"TEMPDIR", ""}};
  auto error_file_of_rank0 = [](const LaunchRun& run) {
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return env_by_rank(run.out)[0]["TORCHELASTIC_ERROR_FILE"];
  };
  const std::string on_tmpfs =
      error_file_of_rank0(run_launcher(worker({"--nproc_per_node", "2"}, {"env"}), no_tmpdir));
  EXPECT_EQ(on_tmpfs.rfind("/dev/shm/acc-launch-", 0), 0u) << on_tmpfs;
  EXPECT_FALSE(fs::exists(fs::path(on_tmpfs).parent_path())) << "removed at the end";

  TempDir mine;
  std::map<std::string, std::string> with_tmpdir = no_tmpdir;
  with_tmpdir["TMPDIR"] = mine.path();
  const std::string in_tmpdir =
      error_file_of_rank0(run_launcher(worker({"--nproc_per_node", "2"}, {"env"}), with_tmpdir));
  EXPECT_EQ(in_tmpdir.rfind(mine.path() + "/acc-launch-", 0), 0u) << in_tmpdir;

  // --tee writes files to the run directory, which is then kept: on disk, as before.
  const std::string teed = error_file_of_rank0(
      run_launcher(worker({"--nproc_per_node", "2", "--tee", "3"}, {"env"}), no_tmpdir));
  EXPECT_EQ(teed.rfind("/tmp/acc-launch-", 0), 0u) << teed;
  if (teed.rfind("/tmp/acc-launch-", 0) == 0)
    fs::remove_all(fs::path(teed).parent_path().parent_path().parent_path());
}

TEST(LaunchTest, ThePrefixCanBeChangedOrTurnedOff) {
  LaunchRun plain = run_launcher({"--log_line_prefix_template", "", "/bin/echo", "hi"});
  EXPECT_EQ(plain.out, "hi\n");
  LaunchRun custom = run_launcher({"--log_line_prefix_template", "<${role_name}:${local_rank}> ",
                                   "--role", "trainer", "/bin/echo", "hi"});
  EXPECT_EQ(custom.out, "<trainer:0> hi\n");
}

TEST(LaunchTest, DryRunPrintsEachWorkerAndStartsNothing) {
  LaunchRun run = run_launcher({"--nproc_per_node", "2", "--dry_run", "--no_python", "/bin/false"});
  EXPECT_EQ(run.exit_code, 0) << "/bin/false never ran";
  EXPECT_NE(run.out.find("# rank 1 (local rank 1)\nLOCAL_RANK=1\nRANK=1\n"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("command: /bin/false"), std::string::npos);
}

TEST(LaunchTest, AccTimelineEndsTheLaunchWithItsStepsInOrder) {
  const std::vector<std::string> args = {"--quiet", "--nproc_per_node", "2", "--no_python",
                                         "/bin/true"};
  LaunchRun run = run_launcher(args, {{"ACC_TIMELINE", "1"}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<std::string> lines = lines_of(run.err);
  ASSERT_EQ(lines.size(), 1u) << run.err;
  const std::string& line = lines[0];
  ASSERT_EQ(line.rfind("acc-launch: timeline (ms since main): parsed ", 0), 0u) << line;
  size_t at = 0;
  double before = 0;
  for (const char* step : {"parsed ", "host ", "planned ", "run dir ", "joined ", "started ",
                           "exited ", "cleaned ", "ended "}) {
    at = line.find(step, at);
    ASSERT_NE(at, std::string::npos) << step << " missing or out of order: " << line;
    at += std::strlen(step);
    const double ms = std::stod(line.substr(at));
    EXPECT_GE(ms, before) << step << line;
    before = ms;
  }
  EXPECT_EQ(run_launcher(args, {{"ACC_TIMELINE", "0"}}).err, "");
  EXPECT_EQ(run_launcher(args).err, "");
}

TEST(LaunchTest, AStorePortInUseIsOneClearError) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t length = sizeof(address);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  const std::string port = std::to_string(ntohs(address.sin_port));
  LaunchRun run = run_launcher({"--master_port", port, "/bin/true"});
  ::close(listener);
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_EQ(lines_of(run.err).size(), 1u) << run.err;
  EXPECT_NE(run.err.find(":" + port + " is already in use"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("in use"), std::string::npos) << run.err;
}

TEST(LaunchTest, AProgramThatCannotRunIsOneClearError) {
  LaunchRun run = run_launcher({"--nproc_per_node", "2", "./no-such-program"});
  EXPECT_EQ(run.exit_code, 127);
  EXPECT_EQ(run.err, "acc-launch: error: cannot run ./no-such-program: no such file\n");
}

// The exec itself fails (a script whose interpreter is missing): the child reports its errno to
// the launcher, which names the program in one line and leaves nothing behind.
TEST(LaunchTest, AProgramWhoseExecFailsIsOneClearError) {
  TempDir dir;
  const std::string script = dir.file("script", "#!/nonexistent/interpreter\n");
  fs::permissions(script, fs::perms::owner_all);
  LaunchRun run = run_launcher({"--nproc_per_node", "2", "--no_python", script});
  EXPECT_EQ(run.exit_code, 127);
  EXPECT_EQ(run.err, "acc-launch: error: cannot run " + script + ": No such file or directory\n");
  expect_no_zombies();
}

// "0-3,5" -> {0,1,2,3,5}
std::vector<int> ranks_in(const std::string& text) {
  std::vector<int> ranks;
  std::stringstream parts(text);
  for (std::string part; std::getline(parts, part, ',');) {
    const size_t dash = part.find('-');
    const int first = std::stoi(part.substr(0, dash));
    const int last = dash == std::string::npos ? first : std::stoi(part.substr(dash + 1));
    for (int r = first; r <= last; ++r) ranks.push_back(r);
  }
  return ranks;
}

TEST(LaunchTest, DedupLinesPrintsTheLinesEveryRankPrintsOnceInOrder) {
  const std::string dir = make_temp_dir();
  const std::string logs = dir + "/logs";
  // A generous window: on a loaded machine the ranks' lines must still meet (it only delays
  // lines that some rank does not print, here the private ones).
  LaunchRun run = run_launcher(worker(
      {"--nproc_per_node", "8", "--dedup_lines", "--dedup_window", "2000", "--log_dir", logs},
      {"chorus", dir, "1000"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;

  std::map<int, std::vector<std::string>> seen;  // rank -> its lines, as the console shows them
  int collapsed_shared = 0, console_lines = 0;
  std::regex line(R"(^\[rank([0-9,-]+)\]: (.*)$)");
  for (const std::string& text : lines_of(run.out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(text, m, line)) << text;
    ++console_lines;
    if (m[1] == "0-7" && m[2].str().rfind("shared line ", 0) == 0) ++collapsed_shared;
    for (int rank : ranks_in(m[1])) seen[rank].push_back(m[2]);
  }
  EXPECT_EQ(collapsed_shared, 1000) << "8 x 1000 shared lines come out as 1000";
  EXPECT_EQ(console_lines, 1000 + 8 * 10);
  for (int rank = 0; rank < 8; ++rank) {
    std::vector<std::string> expected;
    for (int i = 0; i < 1000; ++i) {
      expected.push_back("shared line " + std::to_string(i));
      if (i % 100 == 0)
        expected.push_back("rank " + std::to_string(rank) + " private " + std::to_string(i));
    }
    EXPECT_EQ(seen[rank], expected) << "rank " << rank << ": every line, in its order";
  }
  // The per-rank log files keep every line of their rank.
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(logs)) {
    if (entry.path().filename() != "stdout.log") continue;
    ++files;
    std::ifstream file(entry.path());
    std::stringstream text;
    text << file.rdbuf();
    EXPECT_EQ(lines_of(text.str()).size(), 1010u) << entry.path();
  }
  EXPECT_EQ(files, 8);
  expect_no_zombies();
}

// A two-socket machine as sysfs describes it, naming only CPUs 0 and 1 (those that exist here):
// CPU 0 on socket 0 / node 0, CPU 1 on socket 1 / node 1; GPU 0 (the lower PCI address) sits on
// node 1 and GPU 1 on node 0, so that a binding by rank alone would be caught.
std::string fake_two_socket_sysfs() {
  const std::string root = make_temp_dir();
  auto write = [&](const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(root + "/" + path).parent_path());
    std::ofstream(root + "/" + path) << text << "\n";
  };
  write("sys/devices/system/cpu/online", "0-1");
  for (int cpu : {0, 1}) {
    const std::string dir = "sys/devices/system/cpu/cpu" + std::to_string(cpu);
    write(dir + "/topology/physical_package_id", std::to_string(cpu));
    write(dir + "/topology/core_id", "0");
    write(dir + "/cache/index3/shared_cpu_list", std::to_string(cpu));
    write("sys/devices/system/node/node" + std::to_string(cpu) + "/cpulist", std::to_string(cpu));
  }
  for (auto [address, node] : {std::pair{"0000:01:00.0", "1"}, std::pair{"0000:81:00.0", "0"}}) {
    const std::string dir = std::string("sys/bus/pci/devices/") + address;
    write(dir + "/vendor", "0x10de");
    write(dir + "/class", "0x030200");
    write(dir + "/numa_node", node);
  }
  return root;
}

bool may_run_on_cpus_0_and_1() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return ::sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_ISSET(0, &set) && CPU_ISSET(1, &set);
}

TEST(LaunchTest, NumaBindingPinsEachWorkerToItsGpusNodeBeforeItStarts) {
  if (!may_run_on_cpus_0_and_1()) GTEST_SKIP() << "this test needs CPUs 0 and 1";
  const std::map<std::string, std::string> env{{"ACC_HOST_ROOT", fake_two_socket_sysfs()},
                                               {"OMP_NUM_THREADS", ""}};
  LaunchRun node =
      run_launcher(worker({"--nproc_per_node", "2", "--numa-binding", "node"}, {"affinity"}), env);
  ASSERT_EQ(node.exit_code, 0) << node.err;
  EXPECT_NE(node.out.find("[rank0]: cpus=1 omp=1\n"), std::string::npos) << node.out;
  EXPECT_NE(node.out.find("[rank1]: cpus=0 omp=1\n"), std::string::npos) << node.out;

  LaunchRun accelerate =
      run_launcher(worker({"--nproc_per_node", "2", "--enable_cpu_affinity"}, {"affinity"}), env);
  EXPECT_NE(accelerate.out.find("[rank0]: cpus=1 omp=1\n"), std::string::npos) << accelerate.out;

  LaunchRun split =
      run_launcher(worker({"--nproc_per_node", "2", "--bind_core_list", "0-1"}, {"affinity"}), env);
  EXPECT_NE(split.out.find("[rank0]: cpus=0 omp=1\n"), std::string::npos) << split.out;
  EXPECT_NE(split.out.find("[rank1]: cpus=1 omp=1\n"), std::string::npos) << split.out;

  LaunchRun dry = run_launcher(
      worker({"--nproc_per_node", "2", "--numa-binding", "socket", "--dry_run"}, {"affinity"}),
      env);
  EXPECT_NE(dry.out.find("# rank 0 (local rank 0)\n# cpus 1\n"), std::string::npos) << dry.out;
  const DryRun parsed = parse_dry_run(dry.out);
  ASSERT_EQ(parsed.workers.size(), 2u) << dry.out;
  EXPECT_EQ(parsed.workers[0].at("OMP_NUM_THREADS"), "1") << dry.out;

  LaunchRun both = run_launcher(worker({"--bind_cores_to_rank"}, {"affinity"}), env);
  EXPECT_EQ(both.out, "[rank0]: cpus=0,1 omp=2\n") << "OMP_NUM_THREADS follows the CPU count";

  LaunchRun user_omp =
      run_launcher(worker({"--bind_cores_to_rank"}, {"affinity"}),
                   {{"ACC_HOST_ROOT", env.at("ACC_HOST_ROOT")}, {"OMP_NUM_THREADS", "7"}});
  EXPECT_EQ(user_omp.out, "[rank0]: cpus=0,1 omp=7\n") << "the user's OMP_NUM_THREADS stays";
  expect_no_zombies();
}

TEST(LaunchTest, ABindingThatCannotApplyIsOneErrorBeforeAnyWorkerStarts) {
  const std::map<std::string, std::string> env{{"ACC_HOST_ROOT", fake_two_socket_sysfs()}};
  LaunchRun run = run_launcher(
      worker({"--nproc_per_node", "4", "--numa-binding", "exclusive"}, {"affinity"}), env);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(lines_of(run.err).size(), 1u) << run.err;
  EXPECT_EQ(run.err.rfind("acc-launch: error: --numa-binding exclusive: ", 0), 0u) << run.err;
  EXPECT_TRUE(run.out.empty()) << "no worker ran: " << run.out;
}

struct BadFlag {
  std::string case_name;
  std::vector<std::string> args;
  std::string names;  // what the one line must name
};

class BadFlagTest : public ::testing::TestWithParam<BadFlag> {};

TEST_P(BadFlagTest, ExitsTwoWithOneLineNamingTheFlag) {
  std::vector<std::string> args = GetParam().args;
  LaunchRun run = run_launcher(args);
  EXPECT_EQ(run.exit_code, 2) << run.err;
  ASSERT_EQ(lines_of(run.err).size(), 1u) << run.err;
  EXPECT_EQ(run.err.rfind("acc-launch: error: ", 0), 0u) << run.err;
  EXPECT_NE(run.err.find(GetParam().names), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Launcher, BadFlagTest,
    ::testing::Values(
        BadFlag{"UnknownFlag", {"--bogus", "/bin/true"}, "--bogus"},
        BadFlag{"NprocNotANumber", {"--nproc_per_node", "abc", "/bin/true"}, "--nproc_per_node"},
        BadFlag{"NprocZero", {"--nproc_per_node", "0", "/bin/true"}, "--nproc_per_node"},
        BadFlag{"NegativeRestarts", {"--max_restarts", "-1", "/bin/true"}, "--max_restarts"},
        BadFlag{"ZeroNodes", {"--nnodes", "0", "/bin/true"}, "--nnodes"},
        BadFlag{"NodeRankOutOfRange",
                {"--nnodes", "2", "--node_rank", "2", "/bin/true"},
                "--node_rank"},
        BadFlag{"RedirectsOutOfRange", {"--redirects", "9", "/bin/true"}, "--redirects"},
        BadFlag{"TeeMalformed", {"--tee", "0:x", "/bin/true"}, "--tee"},
        BadFlag{"ModuleWithNoPython", {"-m", "--no_python", "x"}, "--no_python"},
        BadFlag{"UnknownBackend", {"--rdzv_backend", "zookeeper", "/bin/true"}, "--rdzv_backend"},
        BadFlag{"PortOutOfRange", {"--master_port", "70000", "/bin/true"}, "--master_port"},
        BadFlag{
            "UnknownPrecision", {"--mixed_precision", "fp32", "/bin/true"}, "--mixed_precision"},
        BadFlag{"ProcessesNotDivisible",
                {"--num_processes", "3", "--num_machines", "2", "x"},
                "--num_processes"},
        BadFlag{"RanksFilterMalformed",
                {"--local_ranks_filter", "a", "/bin/true"},
                "--local_ranks_filter"},
        BadFlag{"ElasticNodes", {"--nnodes", "1:2", "/bin/true"}, "--nnodes"},
        BadFlag{"NoProgram", {"--nproc_per_node", "2"}, "PROGRAM"},
        BadFlag{"EmptyProgram", {"--hostfile", "/nonexistent", "--no_python", ""}, "PROGRAM"}),
    [](const auto& info) { return info.param.case_name; });

}  // namespace
}  // namespace acc::testing
