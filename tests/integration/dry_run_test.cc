// --dry_run prints exactly the environment each worker gets: the same job run for real, its
// workers write down their environment and the launcher's, and every variable is compared with
// what the dry run said, for a C++ worker and a Python one.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launcher_harness.h"

namespace acc::testing {
namespace {
namespace fs = std::filesystem;
using Environment = std::map<std::string, std::string>;

Environment read_environ(const std::string& path) {
  Environment env;
  std::istringstream in(read_text(path));
  for (std::string entry; std::getline(in, entry, '\0');) {
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

// A dry-run value as a pattern: "<run dir>" stands for the directory the run made, and
// "<checkpoint memory>" for the one it made beside it for acc_launch.checkpoint.
bool matches(const std::string& dry, const std::string& real, std::string& run_dir) {
  if (dry == "<checkpoint memory>")
    return real.find("/acc-launch-") != std::string::npos &&
           real.find("-checkpoints_") != std::string::npos;
  const std::string placeholder = "<run dir>";
  const size_t at = dry.find(placeholder);
  if (at == std::string::npos) return dry == real;
  if (!run_dir.empty()) {
    std::string expected = dry;
    for (size_t p = expected.find(placeholder); p != std::string::npos;
         p = expected.find(placeholder, p + run_dir.size()))
      expected.replace(p, placeholder.size(), run_dir);
    return expected == real;
  }
  // The first placeholder fixes the run directory: up to the text that follows it.
  const std::string before = dry.substr(0, at);
  const std::string after = dry.substr(at + placeholder.size());
  if (real.compare(0, before.size(), before) != 0) return false;
  const size_t end = after.empty() ? real.size() : real.find(after, before.size());
  if (end == std::string::npos) return false;
  run_dir = real.substr(before.size(), end - before.size());
  return matches(dry, real, run_dir);
}

// A restarted worker's environment as attempt 0's would be: the restart count 0, attempt_0's paths.
Environment as_attempt_zero(Environment env) {
  for (auto& [key, value] : env) {
    if (key == "TORCHELASTIC_RESTART_COUNT") value = "0";
    for (size_t at = value.find("/attempt_1/"); at != std::string::npos;
         at = value.find("/attempt_1/", at))
      value.replace(at, 11, "/attempt_0/");
  }
  return env;
}

// Runs `program` (after the launcher flags, then `flags`) as a dry run and for real; compares
// rank by rank. `restarted`: the workers that write are attempt 1's (as attempt 0's).
void expect_dry_run_is_what_workers_get(const std::vector<std::string>& program,
                                        const std::string& dir,
                                        const std::vector<std::string>& flags = {},
                                        bool restarted = false) {
  std::vector<std::string> args = {"--nproc_per_node", "2",
                                   "--master_port",    std::to_string(unused_port()),
                                   "--log_dir",        dir + "/logs"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), program.begin(), program.end());
  std::vector<std::string> dry_args = args;
  dry_args.insert(dry_args.begin(), "--dry_run");
  const LaunchRun dry = run_launcher(dry_args);
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  const DryRun said = parse_dry_run(dry.out);
  ASSERT_EQ(said.workers.size(), 2u) << dry.out;
  const LaunchRun run = run_launcher(args);
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;

  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    Environment worker = read_environ(dir + "/worker." + std::to_string(rank));
    if (restarted) worker = as_attempt_zero(worker);
    const Environment launcher = read_environ(dir + "/launcher." + std::to_string(rank));
    ASSERT_FALSE(worker.empty());
    ASSERT_FALSE(launcher.empty());
    const Environment& set = said.workers[rank];
    std::string run_dir;
    for (const auto& [key, value] : set) {
      const auto real = worker.find(key);
      ASSERT_NE(real, worker.end()) << "the dry run sets " << key << ", the worker has none";
      EXPECT_TRUE(matches(value, real->second, run_dir))
          << key << ": dry run " << value << ", worker " << real->second;
    }
    for (const auto& [key, value] : worker) {
      if (set.count(key)) continue;
      const auto inherited = launcher.find(key);
      ASSERT_NE(inherited, launcher.end())
          << key << "=" << value << " is set by acc-launch but not in its dry run";
      EXPECT_EQ(value, inherited->second) << key << " changed but not in the dry run";
    }
    for (const auto& [key, value] : launcher)
      EXPECT_TRUE(worker.count(key)) << key << " of the launcher's environment is not passed on";
    EXPECT_FALSE(run_dir.empty());
  }
}

TEST(DryRunTest, PrintsExactlyTheEnvironmentACppWorkerGets) {
  const TempDir dir;
  expect_dry_run_is_what_workers_get({"--no_python", worker_binary(), "environ", dir.path()},
                                     dir.path());
}

// A Python worker's last lines: its environment and its launcher's into the directory argv[1].
constexpr const char* kWriteEnvironments = R"PY(
rank = os.environ["RANK"]
with open(os.path.join(sys.argv[1], "worker." + rank), "w") as f:
    f.write("".join("%s=%s\0" % item for item in os.environ.items()))
with open("/proc/%d/environ" % os.getppid()) as parent:
    with open(os.path.join(sys.argv[1], "launcher." + rank), "w") as f:
        f.write(parent.read())
)PY";

TEST(DryRunTest, PrintsExactlyTheEnvironmentAPythonWorkerGets) {
  const TempDir dir;
  const std::string script =
      dir.file("environ.py", std::string("import os, sys\n") + kWriteEnvironments);
  expect_dry_run_is_what_workers_get({"--python", "/usr/bin/python3", script, dir.path()},
                                     dir.path());
}

// Warm workers (docs/goodput.md): attempt 1's workers run in standbys, and get what the dry run
// says all the same (attempt 0 fails once /metrics shows both standbys ready).
TEST(DryRunTest, PrintsExactlyTheEnvironmentARestartedWarmPythonWorkerGets) {
  const TempDir dir;
  const int status_port = unused_port();
  const std::string script = dir.file("environ.py", R"PY(
import os, sys, time, urllib.request
warm = "torch" in sys.modules
rank = os.environ["RANK"]
if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(
            line.startswith("acc_warm_workers_ready{") and line.endswith(" 2")
            for line in urllib.request.urlopen(sys.argv[2]).read().decode().splitlines()):
        time.sleep(0.1)
    sys.exit(1)
with open(os.path.join(sys.argv[1], "warm." + rank), "w") as f:
    f.write(str(warm))
)PY" + std::string(kWriteEnvironments));
  // At the process's own priority: beside other tests, the lowest could take minutes.
  ::setenv("ACC_WARM_WORKERS_NICE", "0", 1);
  expect_dry_run_is_what_workers_get(
      {"--python", "/usr/bin/python3", script, dir.path(),
       "http://127.0.0.1:" + std::to_string(status_port) + "/metrics"},
      dir.path(), {"--max_restarts", "1", "--status_port", std::to_string(status_port)}, true);
  ::unsetenv("ACC_WARM_WORKERS_NICE");
  for (const char* rank : {"0", "1"})
    EXPECT_EQ(read_text(dir.path() + "/warm." + rank), "True")
        << "rank " << rank << " started cold";
}

TEST(DryRunTest, SaysWhichPythonTheWorkersRunAndWhy) {
  const LaunchRun run = run_launcher({"--dry_run", "--python", "/usr/bin/python3", "train.py"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("# python: /usr/bin/python3 (--python)\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("command: /usr/bin/python3 -u train.py"), std::string::npos) << run.out;
}

// Node 1 of a 2-node SkyPilot task on CPUs: the dry run shows the shape it read, and from where.
TEST(DryRunTest, ShowsWhatASkyPilotTaskGivesAndFromWhere) {
  const LaunchRun run =
      run_launcher({"--dry_run", "--preflight_timeout", "0", "--no_python", "true"},
                   {{"SKYPILOT_NODE_RANK", "1"},
                    {"SKYPILOT_NODE_IPS", "192.0.2.7\n192.0.2.9"},
                    {"SKYPILOT_NUM_NODES", "2"},
                    {"SKYPILOT_NUM_GPUS_PER_NODE", "0"},
                    {"SKYPILOT_TASK_ID", "sky-2026-12-07_acc_1"}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // The port is derived from the task id, the same on every node: the one the workers get.
  const std::string said = "master_port=";
  const size_t at = run.out.find(said);
  ASSERT_NE(at, std::string::npos) << run.out;
  const std::string port =
      run.out.substr(at + said.size(), run.out.find(' ', at) - at - said.size());
  for (const std::string& line :
       {std::string("# detected skypilot: node_rank=1 (SKYPILOT_NODE_RANK)"),
        std::string("# detected skypilot: master_addr=192.0.2.7 (first node IP)"),
        std::string("# detected skypilot: nnodes=2 (SKYPILOT_NUM_NODES)"),
        "# detected skypilot: master_port=" + port + " (derived from the task id)",
        std::string("GROUP_RANK=1\n"), std::string("MASTER_ADDR=192.0.2.7\n"),
        "MASTER_PORT=" + port + "\n"})
    EXPECT_NE(run.out.find(line), std::string::npos) << line << "\n" << run.out;
}

// The dry run says which PyTorch it assumed for the workers and where it read its version: here
// one a virtual environment reaches through a .pth line, as a venv over the peers' site-packages
// does; then none, and the workers get both names of a renamed variable.
TEST(DryRunTest, SaysWhichTorchTheWorkersImportAndWhereItWasRead) {
  const TempDir dir;
  for (const char* sub : {"/venv/bin", "/venv/lib/python3.11/site-packages", "/peers/torch"})
    fs::create_directories(dir.path() + sub);
  dir.file("venv/pyvenv.cfg",
           "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11.2\n");
  const std::string python = dir.file("venv/bin/python", "");
  const std::string pth = dir.file("venv/lib/python3.11/site-packages/peers.pth",
                                   "import os\n" + dir.path() + "/peers\n");
  dir.file("peers/torch/version.py", "__version__ = '2.11.0+cu130'\n");

  const LaunchRun found = run_launcher({"--dry_run", "--python", python, "train.py"});
  ASSERT_EQ(found.exit_code, 0) << found.err;
  EXPECT_NE(found.out.find("\n# torch: 2.11.0+cu130 (" + dir.path() + "/peers/torch/version.py)\n"),
            std::string::npos)
      << found.out;
  const DryRun said = parse_dry_run(found.out);
  ASSERT_FALSE(said.workers.empty()) << found.out;
  EXPECT_EQ(said.workers[0].count("TORCH_NCCL_ASYNC_ERROR_HANDLING"), 1u) << found.out;
  EXPECT_EQ(said.workers[0].count("NCCL_ASYNC_ERROR_HANDLING"), 0u) << found.out;

  fs::remove(pth);
  const LaunchRun none = run_launcher({"--dry_run", "--python", python, "train.py"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_NE(none.out.find("\n# torch: not found for " + python +
                          ": renamed variables are given under both names\n"),
            std::string::npos)
      << none.out;
  const DryRun unknown = parse_dry_run(none.out);
  ASSERT_FALSE(unknown.workers.empty()) << none.out;
  EXPECT_EQ(unknown.workers[0].count("NCCL_ASYNC_ERROR_HANDLING"), 1u) << none.out;
}

// The head of a fan-out applies the config file before it fans out, as a single node does: the
// port the file names is the one every node is told; the hostfile's first host is the store, and
// the file's address, a lower layer, is not.
TEST(DryRunTest, AFanOutHeadTellsEveryNodeThePortItsConfigFileNames) {
  const TempDir dir;
  const std::string hosts = dir.file("hosts", "w1 slots=2\nw2 slots=2\n");
  const std::string config =
      dir.file("c.yaml",
               "distributed_type: MULTI_GPU\nnum_machines: 2\nnum_processes: 4\n"
               "main_process_ip: 10.0.0.3\nmain_process_port: 29800\n");
  const LaunchRun run = run_launcher(
      {"--dry_run", "--hostfile", hosts, "--config_file", config, "--no_python", "train"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<std::string> lines = lines_of(run.out);
  ASSERT_EQ(lines.size(), 2u) << run.out;
  for (const std::string& line : lines) {
    EXPECT_NE(line.find(" --master_port 29800 "), std::string::npos) << line;
    EXPECT_NE(line.find(" --master_addr w1 "), std::string::npos) << line;
    EXPECT_NE(line.find(" --nproc_per_node 2 "), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace acc::testing
