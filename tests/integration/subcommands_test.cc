// The subcommands' command lines (config, env, test, stacks, rendezvous serve, top) and the
// launcher's own messages (--log_level, ACC_LOG_LEVEL, --quiet), through the real acc-launch
// binary.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "launcher_harness.h"

namespace acc::testing {
namespace {
namespace fs = std::filesystem;

size_t count_lines(const std::string& text) {
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& word : words) out += (out.empty() ? "" : " ") + word;
  return out;
}

TEST(SubcommandTest, EachHelpExitsZeroAndPrintsItsUsage) {
  const std::vector<std::vector<std::string>> commands = {{"config"},
                                                          {"config", "default"},
                                                          {"config", "show"},
                                                          {"config", "validate"},
                                                          {"config", "update"},
                                                          {"env"},
                                                          {"test"},
                                                          {"stacks"},
                                                          {"rendezvous"},
                                                          {"rendezvous", "serve"}};
  for (const auto& command : commands) {
    for (const char* help : {"--help", "-h"}) {
      std::vector<std::string> args = command;
      args.push_back(help);
      const LaunchRun run = run_launcher(args);
      const std::string name = joined(command);
      EXPECT_EQ(run.exit_code, 0) << name << " " << help << ": " << run.err;
      EXPECT_NE(run.out.find("Usage: acc-launch " + name), std::string::npos)
          << name << " " << help << ": " << run.out;
      EXPECT_EQ(run.err, "") << name << " " << help;
    }
  }
}

// The flags each subcommand takes are named in its help, in the spelling the docs use.
TEST(SubcommandTest, HelpNamesTheFlagsWithUnderscores) {
  EXPECT_NE(run_launcher({"env", "--help"}).out.find("--config_file"), std::string::npos);
  EXPECT_NE(run_launcher({"test", "--help"}).out.find("--config_file"), std::string::npos);
  EXPECT_NE(run_launcher({"config", "default", "--help"}).out.find("--mixed_precision"),
            std::string::npos);
  EXPECT_NE(run_launcher({"rendezvous", "serve", "--help"}).out.find("--store_compat"),
            std::string::npos);
}

// As the launch's help (cli/help_format.h): values by placeholders and defaults in words, not
// CLI11's spellings of types and checks.
TEST(SubcommandTest, HelpNamesValuesInPlainWords) {
  for (const std::vector<std::string>& command : {std::vector<std::string>{"env"},
                                                  {"config", "default"},
                                                  {"stacks"},
                                                  {"top"},
                                                  {"rendezvous", "serve"}}) {
    std::vector<std::string> args = command;
    args.push_back("--help");
    const LaunchRun run = run_launcher(args);
    ASSERT_EQ(run.exit_code, 0) << joined(command) << ": " << run.err;
    for (const char* code :
         {" TEXT", " INT ", " INT:", " FLOAT", ":{", "=0.0.0.0", "--config-file", "-h,--"})
      EXPECT_EQ(run.out.find(code), std::string::npos) << joined(command) << ": " << code;
  }
  const std::string serve = run_launcher({"rendezvous", "serve", "--help"}).out;
  for (const char* plain : {"--port PORT ", "(default: 29400)", "--store_compat {1.13,2.1}"})
    EXPECT_NE(serve.find(plain), std::string::npos) << plain << "\n" << serve;
  EXPECT_NE(run_launcher({"stacks", "--help"}).out.find("LAUNCHER_PID ..."), std::string::npos);
}

TEST(SubcommandTest, ABadCommandLineIsOneLineNamingTheFlagAndExitsTwo) {
  struct Case {
    std::vector<std::string> args;
    std::string named;  // what the line must name
    std::string help;   // the help it points to
  };
  const std::vector<Case> cases = {
      {{"env", "--bogus"}, "--bogus", "acc-launch env --help"},
      {{"env", "--config_file"}, "--config_file", "acc-launch env --help"},
      {{"env", "extra"}, "extra", "acc-launch env --help"},
      {{"test", "--config-file"}, "--config_file", "acc-launch test --help"},
      {{"test", "--nproc_per_node", "2"}, "--nproc_per_node", "acc-launch test --help"},
      {{"config", "--bogus"}, "--bogus", "acc-launch config --help"},
      {{"config", "frobnicate"}, "frobnicate", "acc-launch config --help"},
      {{"config", "default", "--bogus", "x"}, "--bogus", "acc-launch config default --help"},
      {{"config", "show", "--config_file"}, "--config_file", "acc-launch config show --help"},
      {{"stacks", "--all"}, "--all", "acc-launch stacks --help"},
      {{"rendezvous", "serve", "--port", "x"}, "--port", "acc-launch rendezvous serve --help"},
      {{"rendezvous", "serve", "--store_compat", "3"},
       "--store_compat",
       "acc-launch rendezvous serve --help"},
      {{"rendezvous"}, "subcommand", "acc-launch rendezvous --help"},
  };
  for (const Case& c : cases) {
    const LaunchRun run = run_launcher(c.args);
    const std::string name = joined(c.args);
    EXPECT_EQ(run.exit_code, 2) << name << ": " << run.err;
    EXPECT_EQ(count_lines(run.err), 1u) << name << ": " << run.err;
    EXPECT_EQ(run.err.rfind("acc-launch: error: ", 0), 0u) << name << ": " << run.err;
    EXPECT_NE(run.err.find(c.named), std::string::npos) << name << ": " << run.err;
    EXPECT_NE(run.err.find("(see " + c.help + ")"), std::string::npos) << name << ": " << run.err;
    EXPECT_EQ(run.out, "") << name;
  }
}

// A dry run of two workers has one notice: that OMP_NUM_THREADS is set for them.
const char* kOmpNotice = "acc-launch: setting OMP_NUM_THREADS=1 for each worker";

LaunchRun dry_run(std::vector<std::string> flags, const std::string& acc_log_level = "") {
  flags.insert(flags.end(), {"--nproc_per_node", "2", "--dry_run", "--no_python", "/bin/true"});
  return run_launcher(flags, {{"OMP_NUM_THREADS", ""}, {"ACC_LOG_LEVEL", acc_log_level}});
}

TEST(LauncherMessagesTest, NoticesShowUnlessQuietOrAboveInfo) {
  struct Case {
    std::vector<std::string> flags;
    std::string acc_log_level;  // "": unset
    bool notice;
    bool debug = false;
  };
  const std::vector<Case> cases = {
      {{}, "", true},
      {{"--quiet"}, "", false},
      {{"-q"}, "", false},
      {{"--log_level", "warning"}, "", false},
      {{"--log-level", "error"}, "", false},
      {{"--log_level", "info"}, "", true},
      {{}, "warning", false},
      {{}, "warn", false},  // spdlog's name, as the runtime reads the same variable
      {{}, "off", false},
      {{}, "debug", true, true},
      {{"--log_level", "info"}, "error", true},  // the flag over the environment
      {{"--quiet", "--log_level", "info"}, "", true},
      {{"--quiet"}, "debug", false},
  };
  for (const Case& c : cases) {
    const LaunchRun run = dry_run(c.flags, c.acc_log_level);
    const std::string name = joined(c.flags) + " ACC_LOG_LEVEL=" + c.acc_log_level;
    ASSERT_EQ(run.exit_code, 0) << name << ": " << run.err;
    EXPECT_EQ(run.err.find(kOmpNotice) != std::string::npos, c.notice) << name << ": " << run.err;
    EXPECT_EQ(run.err.find("acc-launch: debug: ") != std::string::npos, c.debug)
        << name << ": " << run.err;
  }
}

TEST(LauncherMessagesTest, DebugAddsTheLauncherSteps) {
  const LaunchRun run = dry_run({"--log_level", "debug"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("\nacc-launch: debug: plan: 2 worker(s)"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find(kOmpNotice), std::string::npos) << run.err;
}

TEST(LauncherMessagesTest, AnUnknownLevelIsOneLineAndExitTwo) {
  const LaunchRun flag = dry_run({"--log_level", "verbose"});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_EQ(count_lines(flag.err), 1u) << flag.err;
  EXPECT_NE(flag.err.find("verbose"), std::string::npos) << flag.err;
  EXPECT_NE(flag.err.find("--log_level"), std::string::npos) << flag.err;

  const LaunchRun environment = dry_run({}, "verbose");
  EXPECT_EQ(environment.exit_code, 2);
  EXPECT_EQ(environment.err,
            "acc-launch: error: ACC_LOG_LEVEL=verbose: expected debug, info, warning or error\n");
}

// The subcommands follow ACC_LOG_LEVEL too: a config file's warning goes at "error", and a level
// that is none is refused as a launch refuses it.
TEST(LauncherMessagesTest, SubcommandsFollowTheLogLevelOfTheEnvironment) {
  const std::string dir = make_temp_dir();
  const std::string file = dir + "/legacy.yaml";
  std::ofstream(file) << "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\n"
                         "num_processes: 2\ndynamo_backend: INDUCTOR\ndynamo_config:\n"
                         "  dynamo_backend: EAGER\n";
  const std::vector<std::string> validate = {"config", "validate", "--config_file", file};
  const std::string warning = "acc-launch: warning: " + file + ":4:1: dynamo_backend: legacy key";
  const LaunchRun shown = run_launcher(validate);
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.err.find(warning), std::string::npos) << shown.err;
  const LaunchRun quiet = run_launcher(validate, {{"ACC_LOG_LEVEL", "error"}});
  EXPECT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  const LaunchRun bad = run_launcher({"env"}, {{"ACC_LOG_LEVEL", "verbose"}});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err,
            "acc-launch: error: ACC_LOG_LEVEL=verbose: expected debug, info, warning or error\n");
  fs::remove_all(dir);
}

// The error line is printed whatever the level: a failed launch always says why.
TEST(LauncherMessagesTest, TheErrorLineShowsEvenWhenEverythingElseIsOff) {
  const LaunchRun run = run_launcher({"--log_level", "error", "--no_python", "/nonexistent/prog"},
                                     {{"ACC_LOG_LEVEL", "off"}});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_EQ(count_lines(run.err), 1u) << run.err;
  EXPECT_EQ(run.err.rfind("acc-launch: error: ", 0), 0u) << run.err;
}

// A loopback listener with a backlog of `backlog` that never accepts: the kernel completes
// connections for it (up to the backlog) and nobody answers them.
class SilentListener {
 public:
  explicit SilentListener(int backlog) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&address), length);
    ::listen(fd_, backlog);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    url_ = "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port)) + "/";
  }
  ~SilentListener() {
    for (int fd : clients_) ::close(fd);
    ::close(fd_);
  }
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;
  const std::string& url() const { return url_; }
  // Connections of this process that fill its queue, so that the next one's SYN is dropped.
  void fill_the_queue(int connections) {
    for (int i = 0; i < connections; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      sockaddr_in address{};
      socklen_t length = sizeof(address);
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
      ::connect(fd, reinterpret_cast<sockaddr*>(&address), length);
      clients_.push_back(fd);
    }
  }

 private:
  int fd_ = -1;
  std::string url_;
  std::vector<int> clients_;
};

// `acc-launch top --once --url URL`: one line on stderr matching `line` (after the prefix), exit
// code 3 (a NetworkError), within a few seconds of its 2 s timeouts, nothing left running.
void expect_top_fails_in_time(const std::string& url, const std::string& line) {
  const auto start = std::chrono::steady_clock::now();
  const LaunchRun run = run_launcher({"top", "--once", "--url", url}, {}, std::chrono::seconds(30));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(run.exit_code, 3) << run.err;
  const std::vector<std::string> lines = lines_of(run.err);
  ASSERT_EQ(lines.size(), 1u) << run.err;
  EXPECT_TRUE(std::regex_match(lines[0], std::regex("acc-launch: error: acc-launch top: " + line)))
      << lines[0];
  EXPECT_GE(took, std::chrono::milliseconds(1900));
  EXPECT_LT(took, std::chrono::seconds(10));
  EXPECT_TRUE(reap_until_no_children(std::chrono::seconds(2))) << "something was left running";
}

TEST(TopTest, AStatusEndpointThatAcceptsAndNeverAnswersIsOneLineWithinTheTimeout) {
  const SilentListener listener(16);
  expect_top_fails_in_time(listener.url(),
                           "http://127\\.0\\.0\\.1:[0-9]+/ accepted the connection but did "
                           "not answer /api/job within 2 s; is that a launcher's --status_port\\?");
}

TEST(TopTest, AnEndpointThatNeverCompletesTheConnectionIsOneLineWithinTheTimeout) {
  SilentListener listener(0);
  listener.fill_the_queue(3);  // its SYNs are dropped from here on
  expect_top_fails_in_time(listener.url(),
                           "http://127\\.0\\.0\\.1:[0-9]+/ did not accept a connection within 2 "
                           "s; check the address, or give the --url the launcher printed");
}

TEST(TopTest, AnEndpointWhereNobodyListensMeansTheJobHasEnded) {
  std::string url;
  {
    const SilentListener listener(1);
    url = listener.url();
  }  // closed: the port refuses from here on
  const LaunchRun run = run_launcher({"top", "--once", "--url", url});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "acc-launch top: " + url + " no longer answers: the job has ended\n");
}

}  // namespace
}  // namespace acc::testing
