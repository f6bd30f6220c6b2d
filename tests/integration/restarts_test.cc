// Restarts with sense and torchelastic's health check, through the real binary: a job whose
// workers fail before any progress stops restarting (--max_no_progress_restarts), one whose
// workers beat first keeps every restart; TORCHELASTIC_HEALTH_CHECK_PORT answers 200 while a
// worker makes progress and 503 once it stops, and is refused in one line when the port is taken.
// Python workers beat through the launcher's own hook (acc_launch.beat()), without torch.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "launcher_harness.h"
#include "loopback.h"

namespace acc::testing {
namespace {
namespace fs = std::filesystem;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr char kPython[] = "/usr/bin/python3";

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

size_t lines_with(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (const std::string& line : lines_of(text)) n += line.find(needle) != std::string::npos;
  return n;
}

std::vector<std::string> python_job(std::vector<std::string> launcher_args,
                                    const std::string& script,
                                    const std::vector<std::string>& script_args = {}) {
  launcher_args.insert(launcher_args.end(), {"--python", kPython, script});
  launcher_args.insert(launcher_args.end(), script_args.begin(), script_args.end());
  return launcher_args;
}

const std::vector<std::string> kNoProgressFlags = {
    "--max_no_progress_restarts", "2", "--no_restart_exit_code", "75", "--max_restarts", "10"};

TEST(NoProgressRestartsTest, WorkersThatFailBeforeAnyProgressStopAfterTheLimitWithItsCode) {
  std::vector<std::string> args = kNoProgressFlags;
  args.insert(args.end(), {"--nproc_per_node", "2"});
  const LaunchRun run = run_launcher(worker(args, {"exit", "0", "1"}));
  EXPECT_EQ(run.exit_code, 75) << run.err;
  EXPECT_LE(count(run.err, "; restarting ("), 2u) << "at most 3 attempts:\n" << run.err;
  EXPECT_EQ(lines_with(run.err, "(--max_no_progress_restarts 2)"), 1u) << run.err;
  EXPECT_NE(run.err.find("2 attempt(s) in a row failed before any progress"), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("restarting (1 of 10; 1 of 2 attempts in a row without progress)"),
            std::string::npos)
      << run.err;
}

TEST(NoProgressRestartsTest, WorkersThatBeatBeforeFailingKeepEveryRestart) {
  const TempDir dir;
  const std::string script = dir.file("beat_then_fail.py",
                                      "import sys\n"
                                      "import acc_launch\n"
                                      "acc_launch.beat()\n"
                                      "sys.exit(3)\n");
  const LaunchRun run = run_launcher(python_job(kNoProgressFlags, script));
  EXPECT_EQ(run.exit_code, 3) << run.err;
  EXPECT_NE(run.err.find("restarting (10 of 10; 0 of 2 attempts in a row without progress)"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("FAILED after 11 attempts"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("--max_no_progress_restarts"), std::string::npos) << run.err;
}

// Attempts 0, 2 and 3 fail at once, attempt 1 beats first: the count starts again after it.
TEST(NoProgressRestartsTest, AnAttemptWithProgressStartsTheCountAgain) {
  const TempDir dir;
  const std::string script = dir.file("beat_on_attempt_1.py",
                                      "import os, sys\n"
                                      "import acc_launch\n"
                                      "if os.environ['TORCHELASTIC_RESTART_COUNT'] == '1':\n"
                                      "    acc_launch.beat()\n"
                                      "sys.exit(3)\n");
  const LaunchRun run = run_launcher(python_job(kNoProgressFlags, script));
  EXPECT_EQ(run.exit_code, 75) << run.err;
  EXPECT_EQ(count(run.err, "; restarting ("), 3u) << run.err;
  EXPECT_NE(run.err.find("restarting (2 of 10; 0 of 2 attempts in a row without progress)"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(lines_with(run.err, "(--max_no_progress_restarts 2)"), 1u) << run.err;
}

TEST(NoProgressRestartsTest, BadValuesAreOneLineNamingTheFlag) {
  for (const auto& [flag, value] :
       {std::pair<std::string, std::string>{"--max_no_progress_restarts", "-1"},
        {"--no_restart_exit_code", "256"},
        {"--no_restart_exit_code", "0"},
        {"--health_check_timeout", "0"}}) {
    const LaunchRun run = run_launcher(worker({flag, value}, {"exit", "0", "0"}));
    EXPECT_EQ(run.exit_code, 2) << flag << " " << value << ": " << run.err;
    EXPECT_EQ(lines_of(run.err).size(), 1u) << run.err;
    EXPECT_NE(run.err.find(flag), std::string::npos) << run.err;
  }
}

// --- the health check ---------------------------------------------------------------------------

struct HttpReply {
  int status = 0;  // 0: no connection, or no reply
  std::string body;
};

// GET / on 127.0.0.1:port, read to the end (10 s at most).
HttpReply http_get(int port) {
  HttpReply reply;
  const int fd = connect_loopback(port);
  if (fd < 0) return reply;
  const std::string request = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return reply;
  }
  std::string text;
  const auto deadline = Clock::now() + seconds(10);
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) == 0) {
      if (Clock::now() > deadline) break;
      continue;
    }
    char buffer[4096];
    const ssize_t got = ::recv(fd, buffer, sizeof(buffer), 0);
    if (got <= 0) break;
    text.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  if (text.rfind("HTTP/1.1 ", 0) == 0) reply.status = std::atoi(text.c_str() + 9);
  const size_t body = text.find("\r\n\r\n");
  if (body != std::string::npos) reply.body = text.substr(body + 4);
  return reply;
}

// The port of the health check, from the launcher's notice (it took a free one: port 0).
int health_port(const std::string& dir) {
  const std::string marker = "health check on port ";
  const auto deadline = Clock::now() + seconds(30);
  while (Clock::now() < deadline) {
    const std::string err = read_text(dir + "/launcher.err");
    const size_t at = err.find(marker);
    if (at != std::string::npos && err.find(' ', at + marker.size()) != std::string::npos)
      return std::atoi(err.c_str() + at + marker.size());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 0;
}

// GETs until the status is `status` (or 30 s pass): the last reply.
HttpReply wait_for_status(int port, int status) {
  HttpReply reply;
  const auto deadline = Clock::now() + seconds(30);
  while (Clock::now() < deadline) {
    reply = http_get(port);
    if (reply.status == status) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return reply;
}

// A socket on every IPv4 address, listening on a port the system picked; closed when it goes.
class HeldPort {
 public:
  HeldPort() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t size = sizeof(address);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(fd_, 1) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size) != 0)
      throw std::runtime_error("cannot hold a port");
    port_ = ntohs(address.sin_port);
  }
  ~HeldPort() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

TEST(HealthCheckTest, AnswersOkWhileTheWorkerMakesProgressAndUnavailableOnceItStops) {
  const std::string dir = make_temp_dir();
  const TempDir scripts;
  // Beats every 50 ms until told to stop; then sits (until SIGTERM) without progress.
  const std::string script = scripts.file("beat_until_stop.py",
                                          "import os, sys, time\n"
                                          "import acc_launch\n"
                                          "d = sys.argv[1]\n"
                                          "while not os.path.exists(d + '/stop'):\n"
                                          "    acc_launch.beat()\n"
                                          "    open(d + '/beating', 'w').close()\n"
                                          "    time.sleep(0.05)\n"
                                          "open(d + '/stopped', 'w').close()\n"
                                          "time.sleep(600)\n");
  const pid_t launcher = start_launcher(python_job({"--health_check_timeout", "2"}, script, {dir}),
                                        dir, {{"TORCHELASTIC_HEALTH_CHECK_PORT", "0"}});
  const int port = health_port(dir);
  ASSERT_GT(port, 0) << read_text(dir + "/launcher.err");
  ASSERT_TRUE(wait_for_file(dir + "/beating", seconds(30))) << read_text(dir + "/launcher.err");

  const HttpReply beating = wait_for_status(port, 200);
  EXPECT_EQ(beating.status, 200) << beating.body;
  EXPECT_NE(beating.body.find("\"state\":\"progress\""), std::string::npos) << beating.body;
  EXPECT_NE(beating.body.find("\"last_progress_time\":"), std::string::npos) << beating.body;
  EXPECT_NE(beating.body.find("\"timeout_s\":2.0"), std::string::npos) << beating.body;

  { std::ofstream(dir + "/stop"); }
  ASSERT_TRUE(wait_for_file(dir + "/stopped", seconds(30)));
  const HttpReply stopped = wait_for_status(port, 503);
  EXPECT_EQ(stopped.status, 503) << stopped.body;
  EXPECT_NE(stopped.body.find("\"state\":\"no_progress\""), std::string::npos) << stopped.body;

  ::kill(launcher, SIGTERM);
  EXPECT_EQ(wait_launcher(launcher), 128 + SIGTERM);
  EXPECT_EQ(http_get(port).status, 0) << "the port is closed when the launcher ends";
  expect_nothing_left(dir);
  fs::remove_all(dir);
}

// torchelastic starts its health check before the rendezvous: a node still waiting for the
// others (here in pre-flight, for a store that refuses it) is alive.
TEST(HealthCheckTest, AnswersOkBeforeAnyWorkerStarts) {
  const std::string dir = make_temp_dir();
  // A port that is bound and not listening: every connection to it is refused.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size), 0);
  const std::string store_port = std::to_string(ntohs(address.sin_port));
  const pid_t launcher =
      start_launcher(worker({"--nnodes", "2", "--node_rank", "1", "--master_addr", "127.0.0.1",
                             "--master_port", store_port, "--preflight_timeout", "120"},
                            {"wait", dir}),
                     dir, {{"TORCHELASTIC_HEALTH_CHECK_PORT", "0"}});
  const int port = health_port(dir);
  ASSERT_GT(port, 0) << read_text(dir + "/launcher.err");
  const HttpReply reply = http_get(port);
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_NE(reply.body.find("\"state\":\"no_attempt\""), std::string::npos) << reply.body;
  EXPECT_FALSE(fs::exists(dir + "/0.pid")) << "no worker started";
  ::kill(launcher, SIGTERM);
  EXPECT_EQ(wait_launcher(launcher), 128 + SIGTERM) << read_text(dir + "/launcher.err");
  ::close(fd);
  fs::remove_all(dir);
}

TEST(HealthCheckTest, APortInUseIsOneLineAndNoWorkerStarts) {
  const std::string dir = make_temp_dir();
  const HeldPort held;
  const LaunchRun run = run_launcher(
      worker({}, {"wait", dir}), {{"TORCHELASTIC_HEALTH_CHECK_PORT", std::to_string(held.port())}});
  EXPECT_EQ(run.exit_code, 3) << run.err;
  ASSERT_EQ(lines_of(run.err).size(), 1u) << run.err;
  EXPECT_NE(run.err.find("cannot serve the health check on port " + std::to_string(held.port()) +
                         " (TORCHELASTIC_HEALTH_CHECK_PORT): Address already in use"),
            std::string::npos)
      << run.err;
  EXPECT_FALSE(fs::exists(dir + "/0.pid")) << "a worker started";
  fs::remove_all(dir);
}

TEST(HealthCheckTest, APortThatIsNoNumberIsOneLineNamingTheVariable) {
  const LaunchRun run =
      run_launcher(worker({}, {"exit", "0", "0"}), {{"TORCHELASTIC_HEALTH_CHECK_PORT", "http"}});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  ASSERT_EQ(lines_of(run.err).size(), 1u) << run.err;
  EXPECT_NE(run.err.find("TORCHELASTIC_HEALTH_CHECK_PORT=\"http\" is not a port number"),
            std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace acc::testing
