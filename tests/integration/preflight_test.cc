// Multi-node start-up and exits, with the real binary: the pre-flight check of a node that must
// reach another node's store (refused, then reached once that node starts; stopped by a signal),
// --retryable_exit_code, and torchelastic's file timer (TORCHELASTIC_TIMER_FILE). The pre-flight
// cases that need their own network (no route, filtered, a name that resolves to loopback) are in
// netns/preflight.sh.

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "launcher_harness.h"
#include "refusing_port.h"

namespace acc::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// A loopback port that accepts connections (the kernel completes them from the backlog) and
// never answers: another service's port, as far as a store client can tell.
class SilentListener {
 public:
  SilentListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    ::listen(fd_, 16);
    socklen_t size = sizeof(address);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size);
    port_ = ntohs(address.sin_port);
  }
  ~SilentListener() { ::close(fd_); }
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

std::vector<std::string> node(int rank, int port, std::vector<std::string> extra) {
  std::vector<std::string> args = {
      "--nnodes",      "2",         "--node_rank",   std::to_string(rank),
      "--master_addr", "127.0.0.1", "--master_port", std::to_string(port)};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<std::string> error_lines(const std::string& err) {
  std::vector<std::string> found;
  for (const std::string& line : lines_of(err))
    if (line.rfind("acc-launch: error: ", 0) == 0) found.push_back(line);
  return found;
}

bool wait_for_text(const std::string& path, const std::string& text, seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (read_text(path).find(text) == std::string::npos) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return true;
}

TEST(PreflightTest, ARefusingMasterIsOneLineAndExitThreeWithinTheBound) {
  const RefusingPort refusing;
  const int port = refusing.port();
  LaunchRun run =
      run_launcher(worker(node(1, port, {"--preflight_timeout", "2"}), {"env", "WORKER_STARTED"}));
  EXPECT_EQ(run.exit_code, 3) << run.err;
  const std::vector<std::string> errors = error_lines(run.err);
  ASSERT_EQ(errors.size(), 1u) << run.err;
  EXPECT_EQ(errors[0],
            "acc-launch: error: pre-flight: cannot reach the master (--master_addr, "
            "--master_port) at 127.0.0.1:" +
                std::to_string(port) + ": connection refused (tried for 2 s, --preflight_timeout)");
  EXPECT_EQ(run.out.find("WORKER_STARTED"), std::string::npos) << "no worker may start";
  // That the bound fires at 2 s, after a try a second, is tests/launcher/preflight_test's, on a
  // fake clock.
}

TEST(PreflightTest, ANodeStartedBeforeTheMasterWaitsForItAndTheJobRuns) {
  const std::string dir1 = make_temp_dir();
  const std::string dir0 = make_temp_dir();
  const RefusingPort refusing;
  const int port = refusing.port();
  pid_t node1 = start_launcher(worker(node(1, port, {}), {"env"}), dir1);
  ASSERT_TRUE(wait_for_text(dir1 + "/launcher.err", "trying again", seconds(30)))
      << read_text(dir1 + "/launcher.err");
  // Node 0 comes later; the job ends when both nodes' workers are done (the exit barrier).
  pid_t node0 = start_launcher(worker(node(0, port, {}), {"env"}), dir0);
  EXPECT_EQ(wait_launcher(node1), 0) << read_text(dir1 + "/launcher.err");
  EXPECT_NE(read_text(dir1 + "/launcher.out").find("RANK=1\n"), std::string::npos);
  EXPECT_EQ(wait_launcher(node0), 0) << read_text(dir0 + "/launcher.err");
  EXPECT_NE(read_text(dir0 + "/launcher.out").find("RANK=0\n"), std::string::npos);
  fs::remove_all(dir0);
  fs::remove_all(dir1);
}

void expect_stops_within_a_second(int sig) {
  const std::string dir = make_temp_dir();
  const RefusingPort refusing;
  pid_t launcher = start_launcher(worker(node(1, refusing.port(), {}), {"env", dir}), dir);
  ASSERT_TRUE(wait_for_text(dir + "/launcher.err", "trying again", seconds(30)))
      << read_text(dir + "/launcher.err");
  const auto sent = Clock::now();
  ::kill(launcher, sig);
  EXPECT_EQ(wait_launcher(launcher, seconds(30)), 128 + sig) << read_text(dir + "/launcher.err");
  const auto took = Clock::now() - sent;
  EXPECT_LT(took, seconds(1)) << "stopped in "
                              << std::chrono::duration_cast<milliseconds>(took).count() << " ms";
  EXPECT_NE(read_text(dir + "/launcher.err").find("during the pre-flight check"), std::string::npos)
      << read_text(dir + "/launcher.err");
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(PreflightTest, SigtermDuringPreflightExits143WithinASecond) {
  expect_stops_within_a_second(SIGTERM);
}

TEST(PreflightTest, SigintDuringPreflightExits130WithinASecond) {
  expect_stops_within_a_second(SIGINT);
}

// A store address held by another service: the pre-flight connect succeeds, the store's
// handshake is never answered. One line naming it, within the join timeout, not PyTorch's 60 s
// read timeout per try.
TEST(StoreHandshakeTest, ANodeWhoseMasterIsAnotherServiceSaysSoWithinTheJoinTimeout) {
  SilentListener other;
  LaunchRun run = run_launcher(
      worker(node(1, other.port(), {"--rdzv_conf", "join_timeout=2"}), {"env", "WORKER_STARTED"}));
  EXPECT_EQ(run.exit_code, 4) << run.err;
  const std::vector<std::string> errors = error_lines(run.err);
  ASSERT_EQ(errors.size(), 1u) << run.err;
  EXPECT_EQ(errors[0], "acc-launch: error: 127.0.0.1:" + std::to_string(other.port()) +
                           " accepted the connection but did not answer as a store (PyTorch's "
                           "TCPStore protocol) within 1000 ms; is another service on that "
                           "port? (node 0's store, --master_addr and --master_port)");
  EXPECT_EQ(run.out.find("WORKER_STARTED"), std::string::npos) << "no worker may start";
  EXPECT_LT(run.elapsed, seconds(15)) << "join timeout 2 s and a try of 1 s, generous for load";
}

TEST(StoreHandshakeTest, AnElasticEndpointThatIsAnotherServiceSaysSoAndStopsOnSigterm) {
  SilentListener other;
  const std::string endpoint = "127.0.0.1:" + std::to_string(other.port());
  LaunchRun run =
      run_launcher(worker({"--nnodes", "1:2", "--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint,
                           "--rdzv_conf", "join_timeout=2"},
                          {"env", "WORKER_STARTED"}));
  EXPECT_EQ(run.exit_code, 4) << run.err;
  const std::vector<std::string> errors = error_lines(run.err);
  ASSERT_EQ(errors.size(), 1u) << run.err;
  EXPECT_NE(errors[0].find(endpoint + " accepted the connection but did not answer as a store"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[0].find("(the rendezvous endpoint, --rdzv_endpoint)"), std::string::npos)
      << errors[0];
  EXPECT_LT(run.elapsed, seconds(15)) << "join timeout 2 s and a try of 1 s, generous for load";

  // The default join timeout (600 s): SIGTERM ends the wait within a try and the stop check.
  const std::string dir = make_temp_dir();
  pid_t launcher = start_launcher(
      worker({"--nnodes", "1:2", "--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint},
             {"env", "WORKER_STARTED"}),
      dir);
  std::this_thread::sleep_for(milliseconds(1500));
  const auto sent = Clock::now();
  ::kill(launcher, SIGTERM);
  EXPECT_EQ(wait_launcher(launcher, seconds(30)), 143) << read_text(dir + "/launcher.err");
  const auto took = Clock::now() - sent;
  EXPECT_LT(took, seconds(3)) << "stopped in "
                              << std::chrono::duration_cast<milliseconds>(took).count() << " ms";
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(PreflightTest, DryRunChecksTheMasterToo) {
  const RefusingPort refusing;
  LaunchRun run = run_launcher(node(1, refusing.port(), {"--dry_run", "--no_python", "/bin/true"}));
  EXPECT_EQ(run.exit_code, 0) << "refused is what a dry run before node 0 starts sees";
  EXPECT_NE(run.err.find("pre-flight: the master (--master_addr, --master_port) at 127.0.0.1:"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("connection refused"), std::string::npos) << run.err;
}

TEST(PreflightTest, NodeZeroAndSingleNodesHaveNothingToCheck) {
  const RefusingPort refusing;
  LaunchRun run = run_launcher(node(0, refusing.port(), {"--dry_run", "--no_python", "/bin/true"}));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err.find("pre-flight"), std::string::npos) << run.err;
}

// A hostfile launch whose ssh probe hangs (an ssh that never connects): a stop signal ends the
// head at once, with its probes.
void expect_fan_out_probe_stops(int sig) {
  const std::string dir = make_temp_dir();
  const std::string ssh = dir + "/ssh";
  // Never connects, and forks nothing (its command line names `dir`, for the check at the end).
  // The marker is made by the shell itself: a `touch` still exiting when the group is killed
  // would be an orphan of the test, not of the launcher.
  std::ofstream(ssh) << "#!/bin/sh\n: > \"$0.$$\"\nexec tail -f \"$0\"\n";
  fs::permissions(ssh, fs::perms::owner_all);
  std::ofstream(dir + "/hosts") << "h1 slots=1\nh2 slots=1\n";
  // The head finds ssh on its PATH, which it inherits from this process.
  const std::string saved_path = std::getenv("PATH");
  ::setenv("PATH", (dir + ":" + saved_path).c_str(), 1);
  pid_t head = start_launcher({"--hostfile", dir + "/hosts", "--no_python", "/bin/true"}, dir);
  ::setenv("PATH", saved_path.c_str(), 1);
  const auto deadline = Clock::now() + seconds(30);
  auto probes = [&] {
    size_t n = 0;
    for (const auto& entry : fs::directory_iterator(dir))
      n += entry.path().filename().string().rfind("ssh.", 0) == 0;
    return n;
  };
  while (probes() < 2 && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(20));
  ASSERT_EQ(probes(), 2u) << read_text(dir + "/launcher.err");
  const auto sent = Clock::now();
  ::kill(head, sig);
  EXPECT_EQ(wait_launcher(head, seconds(30)), 128 + sig) << read_text(dir + "/launcher.err");
  const auto took = Clock::now() - sent;
  EXPECT_LT(took, seconds(1)) << std::chrono::duration_cast<milliseconds>(took).count() << " ms";
  EXPECT_NE(read_text(dir + "/launcher.err").find("while probing the hosts over ssh"),
            std::string::npos)
      << read_text(dir + "/launcher.err");
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(FanOutSignalTest, SigtermWhileProbingTheHostsExits143WithNothingLeft) {
  expect_fan_out_probe_stops(SIGTERM);
}

TEST(FanOutSignalTest, SigintWhileProbingTheHostsExits130WithNothingLeft) {
  expect_fan_out_probe_stops(SIGINT);
}

// --- exit codes ------------------------------------------------------------------------------

TEST(RetryableExitCodeTest, AHangExitBecomesTheRetryableCode) {
  const std::string dir = make_temp_dir();
  LaunchRun run =
      run_launcher({"--stall_timeout", "1", "--stall_init_timeout", "1", "--retryable_exit_code",
                    "138", "--no_python", worker_binary(), "wait", dir});
  EXPECT_EQ(run.exit_code, 138) << run.err;
  EXPECT_NE(run.err.find("stopping the workers (--stall_timeout)"), std::string::npos) << run.err;
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

TEST(RetryableExitCodeTest, APreflightFailureBecomesTheRetryableCode) {
  const RefusingPort refusing;
  LaunchRun run = run_launcher(node(
      1, refusing.port(),
      {"--preflight_timeout", "1", "--retryable_exit_code", "143", "--no_python", "/bin/true"}));
  EXPECT_EQ(run.exit_code, 143) << run.err;
  EXPECT_EQ(error_lines(run.err).size(), 1u) << run.err;
}

TEST(RetryableExitCodeTest, AWorkersOwnCodeIsPassedThroughUnchanged) {
  // 4 is also the launcher's hang code: a worker's 4 stays the worker's.
  LaunchRun run = run_launcher(
      worker({"--nproc_per_node", "2", "--retryable_exit_code", "138"}, {"exit", "1", "4"}));
  EXPECT_EQ(run.exit_code, 4) << run.err;
}

// --- torchelastic's file timer ---------------------------------------------------------------

TEST(FileTimerTest, DryRunShowsTheTimerFile) {
  LaunchRun run = run_launcher({"--nproc_per_node", "2", "--dry_run", "--no_python", "/bin/true"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const DryRun dry = parse_dry_run(run.out);
  ASSERT_EQ(dry.workers.size(), 2u);
  for (const auto& env : dry.workers)
    EXPECT_EQ(env.at("TORCHELASTIC_TIMER_FILE"), "<run dir>/timer_fifo") << run.out;
}

bool has_torch_timer() {
  return std::system(
             "/usr/bin/python3 -c 'from torch.distributed.elastic.timer import "
             "FileTimerClient' >/dev/null 2>&1") == 0;
}

// A user's script as the torchelastic docs write it: rank 1's region overruns its 1 s.
constexpr const char* kTimerScript = R"(import os, sys, time
from torch.distributed.elastic.timer import FileTimerClient, configure, expires
configure(FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
rank = int(os.environ["RANK"])
with expires(after=30, scope="quick_step"):
    time.sleep(0.1)
print(f"rank {rank} finished quick_step", flush=True)
if rank == 1:
    with expires(after=1, scope="load_checkpoint"):
        time.sleep(120)
else:
    time.sleep(120)
)";

TEST(FileTimerTest, AnOverrunRegionStopsItsWorkerWithALineNamingIt) {
  if (!has_torch_timer()) GTEST_SKIP() << "no torch.distributed.elastic.timer in /usr/bin/python3";
  const std::string dir = make_temp_dir();
  const std::string script = dir + "/timed.py";
  std::ofstream(script) << kTimerScript;
  LaunchRun run = run_launcher(
      {"--nproc_per_node", "2", "--python", "/usr/bin/python3", "--shutdown_timeout", "2", script},
      {}, seconds(100));
  EXPECT_EQ(run.exit_code, 128 + SIGKILL) << run.err;
  EXPECT_NE(run.out.find("rank 1 finished quick_step"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("timer region 'load_checkpoint' of rank 1 (pid "), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("expired (torch.distributed.elastic.timer); sending it SIGKILL"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("quick_step'"), std::string::npos) << "a released region never fires";
  EXPECT_LT(run.elapsed, seconds(90)) << "the workers sleep 120 s unless the timer stops them";
  expect_nothing_left(script);
  fs::remove_all(dir);
}

// --- the open-file limit of the node that serves the workers' store ---------------------------

// A dry run under a hard open-file limit of 256 (prlimit, which any process may lower): stderr.
std::string dry_run_under_256_open_files(const std::vector<std::string>& args) {
  const std::string dir = make_temp_dir();
  std::string command = "prlimit --nofile=256:256 " + launcher_binary() + " --dry_run";
  for (const std::string& arg : args) command += " " + arg;
  command += " --no_python /bin/true >/dev/null 2>" + dir + "/err";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream file(dir + "/err");
  std::string err((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  fs::remove_all(dir);
  return err;
}

TEST(OpenFileLimitTest, AJobWithMoreWorkersThanTheHardLimitAllowsIsWarnedWithTheFix) {
  const std::string err = dry_run_under_256_open_files({"--nproc_per_node", "300"});
  EXPECT_NE(err.find("open files: this node's 300 workers need about 664 open files in the "
                     "launcher (their output pipes), but the open-file limit is 256"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("ulimit -Hn 664"), std::string::npos) << err;
}

// The store's connections live in its threads' own descriptor tables, 16 of them at most: at a
// limit of 256 it holds about 3,520, so 45 nodes of 90 workers (4,050) are past it.
TEST(OpenFileLimitTest, AStoreWithMoreConnectionsThanItsThreadsHoldIsWarnedWithTheFix) {
  const std::string err = dry_run_under_256_open_files(
      {"--nnodes", "45", "--node_rank", "0", "--master_addr", "127.0.0.1", "--master_port", "1",
       "--preflight_timeout", "0", "--nproc_per_node", "90"});
  EXPECT_NE(err.find("open files: the store on this node may hold 4050 worker connections, but at "
                     "the open-file limit of 256 its threads hold about 3520"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("ulimit -Hn 4159"), std::string::npos) << err;
}

TEST(OpenFileLimitTest, NoWarningWhereTheLimitFitsOrTheNodeServesNoStore) {
  EXPECT_EQ(dry_run_under_256_open_files({"--nproc_per_node", "8"}).find("open files"),
            std::string::npos);
  // 2,000 connections: past one table of 256, within the store's threads' tables.
  const std::string store = dry_run_under_256_open_files(
      {"--nnodes", "40", "--node_rank", "0", "--master_addr", "127.0.0.1", "--master_port", "1",
       "--preflight_timeout", "0", "--nproc_per_node", "50"});
  EXPECT_EQ(store.find("open files"), std::string::npos) << store;
  const std::string node_one = dry_run_under_256_open_files(
      {"--nnodes", "50", "--node_rank", "1", "--master_addr", "127.0.0.1", "--master_port", "1",
       "--preflight_timeout", "0", "--nproc_per_node", "90"});  // node 0's store: 4,500, past 3,520
  EXPECT_EQ(node_one.find("open files"), std::string::npos) << node_one;
}

}  // namespace
}  // namespace acc::testing
