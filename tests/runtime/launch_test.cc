// acc::launch with real processes over Gloo: launch_program (a user's main() that calls
// acc::launch) is started as a plain program, with no acc-launch, and every process it makes
// carries a token in its environment so that what is left running can be counted.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Gloo on the CPU even where CUDA is available.
[[maybe_unused]] const bool kOnCpu = setenv("ACCELERATE_USE_CPU", "1", 1) == 0;

std::string new_token() {
  std::random_device random;
  return std::to_string(::getpid()) + "-" + std::to_string(random());
}

// The processes whose environment holds ACC_LAUNCH_TEST_TOKEN=<token>: the caller, its workers
// and its watchdog, wherever they were reparented.
int count_with_token(const std::string& token) {
  const std::string needle = "ACC_LAUNCH_TEST_TOKEN=" + token;
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "environ", std::ios::binary);
    const std::string env{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    for (size_t start = 0; start < env.size();) {
      size_t end = env.find('\0', start);
      if (end == std::string::npos) end = env.size();
      if (env.compare(start, end - start, needle) == 0) ++count;
      start = end + 1;
    }
  }
  return count;
}

// Polls until no process carries the token, at most `limit`; returns how many still do.
int left_running(const std::string& token, Clock::duration limit = 30s) {
  const auto deadline = Clock::now() + limit;
  int left = count_with_token(token);
  while (left > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);  // a poll interval, not a synchronisation
    left = count_with_token(token);
  }
  return left;
}

// launch_program started with its stdout and stderr on one pipe.
class Caller {
 public:
  Caller(const std::vector<std::string>& args, const std::string& token) {
    std::vector<std::string> argv_text = {LAUNCH_PROGRAM_BIN};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_text = {"ACC_LAUNCH_TEST_TOKEN=" + token};
    for (char** e = environ; *e; ++e) env_text.emplace_back(*e);
    std::vector<char*> env;
    for (auto& e : env_text) env.push_back(e.data());
    env.push_back(nullptr);
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
    EXPECT_EQ(::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), env.data()), 0);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    out_fd_ = fds[0];
  }
  ~Caller() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(out_fd_);
  }

  // Reads output until it holds `count` occurrences of `text`, at most `limit`.
  bool wait_for(const std::string& text, int count, Clock::duration limit) {
    const auto deadline = Clock::now() + limit;
    while (occurrences(text) < count) {
      if (Clock::now() >= deadline || !read_some(deadline)) return occurrences(text) >= count;
    }
    return true;
  }

  // Reads to the end and reaps; the exit code, or 128 + the signal. -1 after `limit`.
  int finish(Clock::duration limit = 240s) {
    const auto deadline = Clock::now() + limit;
    while (read_some(deadline)) {
    }
    while (Clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(20ms);
    }
    return -1;
  }

  pid_t pid() const { return pid_; }
  const std::string& output() const { return output_; }

 private:
  int occurrences(const std::string& text) const {
    int n = 0;
    for (size_t at = output_.find(text); at != std::string::npos; at = output_.find(text, at + 1))
      ++n;
    return n;
  }
  // False at the end of the output or the deadline.
  bool read_some(Clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd fd{out_fd_, POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(left.count())) <= 0) return false;
    char buffer[4096];
    const ssize_t n = ::read(out_fd_, buffer, sizeof(buffer));
    if (n <= 0) return false;
    output_.append(buffer, static_cast<size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool reaped_ = false;
  std::string output_;
};

void expect_ranks(int n) {
  const std::string token = new_token();
  Caller caller({"ranks", std::to_string(n)}, token);
  ASSERT_EQ(caller.finish(), 0) << caller.output();
  const int sum = n * (n + 1) / 2;
  for (int rank = 0; rank < n; ++rank)
    EXPECT_NE(caller.output().find("result: rank " + std::to_string(rank) + " world " +
                                   std::to_string(n) + " local " + std::to_string(rank) + " sum " +
                                   std::to_string(sum) + "\n"),
              std::string::npos)
        << caller.output();
  EXPECT_EQ(left_running(token), 0);
  // The notice names what a program that calls acc::launch has, not the launcher's flag.
  if (n > 1 && std::getenv("OMP_NUM_THREADS") == nullptr) {
    EXPECT_NE(caller.output().find("set it in LaunchOptions::env (or the caller's environment)"),
              std::string::npos)
        << caller.output();
    EXPECT_EQ(caller.output().find("--num_cpu_threads_per_process"), std::string::npos);
  }
}

TEST(LaunchTest, TwoWorkersGetTheirRanksAndAnAllReduceAddsUp) {
  expect_ranks(2);
}

TEST(LaunchTest, FourWorkersGetTheirRanksAndAnAllReduceAddsUp) {
  expect_ranks(4);
}

TEST(LaunchTest, LaunchAllReturnsEveryRanksTensorInRankOrder) {
  Caller caller({"tensor", "3"}, new_token());
  ASSERT_EQ(caller.finish(), 0) << caller.output();
  EXPECT_NE(caller.output().find("tensor: 0 0\ntensor: 1 1\ntensor: 2 2\n"), std::string::npos)
      << caller.output();
}

void expect_failure_named(const std::string& mode, int n, int rank, const std::string& exit) {
  const std::string token = new_token();
  Caller caller({mode, std::to_string(n), std::to_string(rank)}, token);
  ASSERT_EQ(caller.finish(), 3) << caller.output();
  const std::string& out = caller.output();
  EXPECT_NE(out.find("acc::launch: a worker failed"), std::string::npos) << out;
  EXPECT_NE(out.find("root cause (* above): rank " + std::to_string(rank) + " (local rank " +
                     std::to_string(rank) + ") on "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(" exited with " + exit + "\n"), std::string::npos) << out;
  EXPECT_NE(out.find("| rank " + std::to_string(rank) + " is about to fail"), std::string::npos)
      << out;
  EXPECT_EQ(left_running(token), 0) << "processes left running";
}

TEST(LaunchTest, AWorkerThatThrowsMakesTheCallerRaiseNamingItsRank) {
  expect_failure_named("throw", 2, 1, "1");
}

TEST(LaunchTest, AWorkerThatExitsAmongFourMakesTheCallerRaiseNamingItsRank) {
  expect_failure_named("exit", 4, 2, "7");
}

TEST(LaunchTest, TheExceptionOfFnIsInTheFailureReport) {
  Caller caller({"throw", "2", "0"}, new_token());
  ASSERT_EQ(caller.finish(), 3) << caller.output();
  EXPECT_NE(caller.output().find("| acc::launch: rank 0: fn threw: boom from rank 0"),
            std::string::npos)
      << caller.output();
  EXPECT_NE(caller.output().find("  error     : fn threw: boom from rank 0\n"), std::string::npos)
      << caller.output();
}

TEST(LaunchTest, SigintToTheCallerStopsEveryWorkerAndRaises) {
  const std::string token = new_token();
  Caller caller({"sleep", "2"}, token);
  ASSERT_TRUE(caller.wait_for("]: ready ", 2, 120s)) << caller.output();
  ::kill(caller.pid(), SIGINT);
  EXPECT_EQ(caller.finish(60s), 128 + SIGINT) << caller.output();
  EXPECT_NE(caller.output().find("acc::launch: stopped by SIGINT; every worker was stopped"),
            std::string::npos)
      << caller.output();
  EXPECT_EQ(left_running(token), 0) << "processes left running";
}

TEST(LaunchTest, NoWorkerOutlivesACallerKilledWithSigkill) {
  const std::string token = new_token();
  Caller caller({"sleep", "2"}, token);
  ASSERT_TRUE(caller.wait_for("]: ready ", 2, 120s)) << caller.output();
  ASSERT_GE(count_with_token(token), 3);  // the caller and its two workers at least
  ::kill(caller.pid(), SIGKILL);
  EXPECT_EQ(caller.finish(60s), 128 + SIGKILL);
  EXPECT_EQ(left_running(token), 0) << "processes left running";
}

TEST(LaunchTest, ACallWhileAnotherThreadRunsIsRefused) {
  const std::string token = new_token();
  Caller caller({"thread", "2"}, token);
  EXPECT_EQ(caller.finish(), 2) << caller.output();
  EXPECT_NE(caller.output().find("acc::launch: this process already runs 2 threads"),
            std::string::npos)
      << caller.output();
  EXPECT_EQ(left_running(token), 0);
}

// As notebook_launcher: the workers of each call run main() again, and the calls they meet before
// theirs give back what those gave the caller (results, or the exception), without running fn.
TEST(LaunchTest, LaunchCanBeCalledAgainAndLaterWorkersSeeWhatEarlierCallsReturnedOrThrew) {
  const std::string token = new_token();
  Caller caller({"again", "2"}, token);
  ASSERT_EQ(caller.finish(), 0) << caller.output();
  const std::string& out = caller.output();
  EXPECT_NE(out.find("first call returned\n"), std::string::npos) << out;
  EXPECT_NE(out.find("second call threw: acc::launch: a worker failed\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("fn threw: second call fails"), std::string::npos) << out;
  EXPECT_NE(out.find("result: third 0 after first 1, second failed\n"
                     "result: third 1 after first 1, second failed\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(left_running(token), 0) << "processes left running";
}

TEST(LaunchTest, ACallAfterCudaWasInitialisedIsRefused) {
  Caller caller({"cuda", "2"}, new_token());
  const int status = caller.finish();
  if (status == 77) GTEST_SKIP() << "no CUDA device";
  EXPECT_EQ(status, 2) << caller.output();
  EXPECT_NE(caller.output().find("acc::launch: CUDA was initialised in this process"),
            std::string::npos)
      << caller.output();
}

}  // namespace
