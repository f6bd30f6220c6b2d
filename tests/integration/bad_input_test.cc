// Bad inputs, tried as a careless user would: each gets exactly one line on stderr naming the flag
// as the user wrote it, the exit code docs/errors.md gives its error, and no hang.

#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "launcher_harness.h"

namespace acc::testing {
namespace {

struct BadInput {
  std::string name;
  std::vector<std::string> args;
  int exit_code;
  std::string line;  // regex for the one line on stderr, after "acc-launch: error: "
};

// A directory, a config file whose aliases nest ten deep ("billion laughs"), config files nested
// 5,000 deep, JSON with text after its value, and no script. Removed at exit (the test binary is
// also run to list its tests, at build time).
struct Files {
  TempDir temp;
  std::string dir = temp.path();
  std::string laughs = dir + "/laughs.yaml";
  std::string deep_json = dir + "/deep.json";
  std::string deep_yaml = dir + "/deep.yaml";
  std::string trailing_json = dir + "/trailing.json";
  std::string hosts = dir + "/hosts";
  Files() {
    std::ofstream(hosts) << "node-a slots=4\nnode-b slots=2\n";
    std::ofstream(deep_json) << std::string(5000, '[') << std::string(5000, ']') << "\n";
    std::string yaml = "a: ";
    for (int i = 0; i < 5000; ++i) yaml += "{a: ";
    std::ofstream(deep_yaml) << yaml << "1" << std::string(5000, '}') << "\n";
    std::ofstream(trailing_json) << R"({"compute_environment": "LOCAL_MACHINE", )"
                                 << R"("distributed_type": "NO"} and then some)"
                                 << "\n";
    std::ofstream out(laughs);
    out << "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
    for (char c = 'b'; c <= 'j'; ++c) {
      out << c << ": &" << c << " [";
      for (int i = 0; i < 10; ++i) out << (i ? ", " : "") << "*" << static_cast<char>(c - 1);
      out << "]\n";
    }
  }
};

const Files& files() {
  static const Files kFiles;
  return kFiles;
}

std::vector<BadInput> bad_inputs() {
  const std::string dir = files().dir;
  const std::vector<std::string> run = {"--no_python", "/bin/true"};
  auto with = [&](std::vector<std::string> args, bool dry_run = true) {
    if (dry_run) args.push_back("--dry_run");
    args.insert(args.end(), run.begin(), run.end());
    return args;
  };
  const std::vector<std::string> c10d = {"--rdzv_backend", "c10d", "--rdzv_endpoint",
                                         "127.0.0.1:29400"};
  auto rdzv_conf = [&](const std::string& conf) {
    std::vector<std::string> args = c10d;
    args.insert(args.end(), {"--rdzv_conf", conf});
    return with(args);
  };
  return {
      {"HugeWorkerCount", with({"--nproc_per_node", "2147483647"}), 2,
       "--nproc_per_node 2147483647: expected 1 to 4096 workers per node"},
      {"RdzvConfCountThatIsNotANumber", rdzv_conf("keep_alive_max_attempt=abc"), 2,
       "--rdzv_conf keep_alive_max_attempt=abc: expected a whole number of at least 1"},
      {"RdzvConfNegativeSeconds", rdzv_conf("join_timeout=-5"), 2,
       "--rdzv_conf join_timeout=-5: expected a number of seconds, 0 or more"},
      {"RdzvConfNanSeconds", rdzv_conf("last_call_timeout=nan"), 2,
       "--rdzv_conf last_call_timeout=nan: expected a number of seconds, 0 or more"},
      {"AdmissionWithoutAJobSecret", rdzv_conf("admit_members_only=true"), 2,
       "--rdzv_conf admit_members_only needs the job secret .*: the members are the addresses "
       "that prove it"},
      {"AdmissionThatIsNoTruthValue", rdzv_conf("admit_members_only=maybe"), 2,
       "--rdzv_conf admit_members_only=maybe: expected true or false"},
      {"StallTimeoutNan", with({"--stall_timeout", "nan"}), 2,
       "--stall_timeout: nan is not a number of seconds.*"},
      {"StallTimeoutNanHyphenated", with({"--stall-timeout", "nan"}), 2,
       "--stall-timeout: nan is not a number of seconds.*"},
      {"GpuIdsThatAreNotNumbers", with({"--gpu_ids", "a,b"}), 2,
       "--gpu_ids a,b: expected all or a comma list of GPU numbers such as 0,1"},
      {"IncludeWithoutAHostfile", with({"--include", "foo"}), 2,
       "--include foo: selects hosts of a hostfile; give --hostfile FILE as well"},
      {"StandaloneOnTwoNodes", with({"--standalone", "--nnodes", "2"}), 2,
       "--standalone runs one node, but --nnodes is 2; leave out one of them"},
      {"HostfileThatIsADirectory", with({"--hostfile", dir, "--node_rank", "0"}), 2,
       "--hostfile " + dir +
           ": not a regular file; give the file that lists 'host slots=N' a line"},
      {"HostfileThatIsADirectoryForAFanOut", with({"--hostfile", dir}, false), 2,
       "--hostfile " + dir +
           ": not a regular file; give the file that lists 'host slots=N' a line"},
      // The README's own `--hostfile hosts --nproc_per_node 8`, on hosts of other slots.
      {"FanOutWhoseNprocDisagreesWithAHostsSlots",
       with({"--hostfile", files().hosts, "--nproc_per_node", "4"}), 2,
       "--nproc_per_node 4 disagrees with the hostfile " + files().hosts +
           ": host node-b has 2 slot(s), and a fanned-out node starts one worker a slot; drop "
           "--nproc_per_node or give every host slots=4"},
      {"FanOutWhoseNumProcessesDisagreesWithTheSlots",
       with({"--hostfile", files().hosts, "--num_processes", "8"}), 2,
       "--num_processes 8 disagrees with the hostfile " + files().hosts +
           ": its hosts have 6 slot(s) in all (node-a:4 node-b:2), and a fanned-out node starts "
           "one worker a slot; drop --num_processes or change the hostfile"},
      {"ConfigFileWithNestedAliases", with({"--config_file", files().laughs}), 2,
       files().laughs + ":[0-9]+:[0-9]+: more than 100000 values once its aliases .*"},
      {"ConfigValidateADirectory",
       {"config", "validate", dir},
       2,
       "the config file " + dir +
           " is a directory; name the config file itself, or write one with `acc-launch config`"},
      {"ConfigValidateWithNestedAliases",
       {"config", "validate", files().laughs},
       2,
       files().laughs + ":[0-9]+:[0-9]+: more than 100000 values once its aliases .*"},
      {"MissingPythonScript",
       {dir + "/missing.py"},
       127,
       "cannot run " + dir + "/missing.py: no such file"},
      {"FlagNamedAsWrittenWithUnderscores", with({"--max_restarts", "-1"}), 2,
       "--max_restarts: -1 is not a whole number of at least 0.*"},
      {"RetryableExitCodeZero", with({"--retryable_exit_code", "0"}), 2,
       "--retryable_exit_code 0: expected an exit status from 1 to 255, such as 138 .*"},
      {"RetryableExitCodeAboveAByte", with({"--retryable_exit_code", "256"}), 2,
       "--retryable_exit_code 256: expected an exit status from 1 to 255, such as 138 .*"},
      {"RetryableExitCodeNegative", with({"--retryable_exit_code=-1"}), 2,
       "--retryable_exit_code: -1 is not a whole number of at least 0.*"},
      {"RetryableExitCodeThatIsNotANumber", with({"--retryable_exit_code", "abc"}), 2,
       "--retryable_exit_code: abc is not a whole number of at least 0.*"},
      {"PreflightTimeoutNegative", with({"--preflight_timeout=-1"}), 2,
       "--preflight_timeout: -1 is not a number of seconds.*"},
      {"ConfigFileThatIsADirectory", with({"--config_file", dir}), 2,
       "the config file " + dir +
           " is a directory; pass a file to --config_file, or write one with `acc-launch "
           "config`"},
      {"ConfigJsonNested5000Deep", with({"--config_file", files().deep_json}), 2,
       files().deep_json + ":[0-9]+:[0-9]+: nested too deep .*"},
      {"ConfigYamlNested5000Deep", with({"--config_file", files().deep_yaml}), 2,
       files().deep_yaml + ":[0-9]+:[0-9]+: nested too deep .*"},
      {"ConfigJsonWithTextAfterItsValue", with({"--config_file", files().trailing_json}), 2,
       files().trailing_json + ":1:[0-9]+: JSON syntax error: .*expected end of input.*"},
      {"RendezvousCommandThatDoesNotExist",
       {"rendezvous", "bogus"},
       2,
       "acc-launch rendezvous bogus: no such command; the one command is serve .*"},
      {"FlagValueWithANewlineAndAnEscapeSequence", with({"--nproc_per_node", "4\n\x1b[31mred"}), 2,
       "--nproc_per_node: \"4\\n\\x1b[31mred\" holds a control character .*"},
  };
}

std::string escaped(const std::string& text) {
  static const std::regex kSpecial(R"([.^$|()\[\]{}*+?\\])");
  return std::regex_replace(text, kSpecial, R"(\$&)");
}

// The expected line is a regex, but paths in it are literal: escape everything up to the first
// regex construct the table uses (".*" or "[0-9]").
std::string pattern_of(const std::string& line) {
  std::string pattern;
  size_t at = 0;
  while (at < line.size()) {
    const size_t any = line.find(".*", at);
    const size_t digits = line.find("[0-9]+", at);
    const size_t next = std::min(any, digits);
    pattern += escaped(line.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) break;
    const size_t length = next == any ? 2 : 6;
    pattern += line.substr(next, length);
    at = next + length;
  }
  return pattern;
}

class BadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadInputTest, GetsOneLineAndTheDocumentedExitCode) {
  const BadInput& input = GetParam();
  const LaunchRun run = run_launcher(input.args, {}, std::chrono::seconds(30));
  EXPECT_EQ(run.exit_code, input.exit_code) << run.err;
  const std::vector<std::string> lines = lines_of(run.err);
  ASSERT_EQ(lines.size(), 1u) << run.err;
  EXPECT_TRUE(
      std::regex_match(lines[0], std::regex("acc-launch: error: " + pattern_of(input.line))))
      << lines[0] << "\n  expected: acc-launch: error: " << input.line;
  EXPECT_EQ(lines[0].find("--max-restarts"), std::string::npos);
  EXPECT_TRUE(reap_until_no_children(std::chrono::seconds(2))) << "something was left running";
}

INSTANTIATE_TEST_SUITE_P(Table, BadInputTest, ::testing::ValuesIn(bad_inputs()),
                         [](const auto& info) { return info.param.name; });

// `yes garbage | acc-launch config`: gives up after a few invalid answers, in one line.
TEST(BadInputTest, ConfigQuestionnaireGivesUpOnAnInputThatNeverAnswers) {
  const TempDir home_dir;
  const std::string& home = home_dir.path();
  const std::string command = "cd " + home + " && HOME=" + home +
                              " timeout 30 sh -c 'yes garbage 2>/dev/null | " + launcher_binary() +
                              " config' 2>&1 >/dev/null; echo \"exit=$?\"";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  ::pclose(pipe);
  const std::vector<std::string> lines = lines_of(out);
  ASSERT_EQ(lines.size(), 2u) << out;
  EXPECT_TRUE(std::regex_match(
      lines[0], std::regex("acc-launch: error: no valid answer in 3 tries to \".*\"; nothing was "
                           "written \\(run acc-launch config again\\)")))
      << lines[0];
  EXPECT_EQ(lines[1], "exit=2") << "124 would be the hang guard";
}

// The text of `path` once it holds `marker`; "" after `timeout`.
std::string wait_for_text(const std::string& path, const std::string& marker,
                          std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const std::string text = read_text(path);
    if (text.find(marker) != std::string::npos) return text;
    if (std::chrono::steady_clock::now() > deadline) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The store of an elastic job (`acc-launch rendezvous serve`) is killed while the workers run:
// one error line naming the store and what became of it, the network exit code (3), nothing
// left running. (Its one other line is the round's, printed when the round formed.)
TEST(BadInputTest, AStoreThatFailsDuringTheJobIsOneErrorLine) {
  const TempDir store_dir, job_dir;
  const pid_t store = start_launcher({"rendezvous", "serve", "--host", "127.0.0.1", "--port", "0"},
                                     store_dir.path());
  const std::string listening =
      wait_for_text(store_dir.path() + "/launcher.out", "\n", std::chrono::seconds(20));
  std::smatch port;
  const bool found = std::regex_search(listening, port, std::regex("127\\.0\\.0\\.1:([0-9]+)"));
  EXPECT_TRUE(found) << listening;
  pid_t job = -1;
  if (found) {
    job = start_launcher({"--nnodes", "1:2", "--rdzv_backend", "c10d", "--rdzv_endpoint",
                          "127.0.0.1:" + port[1].str(), "--rdzv_conf", "last_call_timeout=0",
                          "--no_python", "/bin/sleep", "60"},
                         job_dir.path());
    EXPECT_NE(wait_for_text(job_dir.path() + "/launcher.err", "rendezvous round 0",
                            std::chrono::seconds(30)),
              "");
  }
  ::kill(store, SIGKILL);  // in every case: the test leaves nothing running
  EXPECT_EQ(wait_launcher(store), 128 + SIGKILL);
  if (job < 0) return;
  EXPECT_EQ(wait_launcher(job, std::chrono::seconds(30)), 3);
  const std::string err = read_text(job_dir.path() + "/launcher.err");
  const std::vector<std::string> lines = lines_of(err);
  ASSERT_EQ(lines.size(), 2u) << err;
  EXPECT_EQ(lines[0], "acc-launch: rendezvous round 0: node 0 of 1");
  EXPECT_EQ(lines[1], "acc-launch: error: lost the job's rendezvous: store 127.0.0.1:" +
                          port[1].str() + ": the store server closed the connection");
  EXPECT_TRUE(reap_until_no_children(std::chrono::seconds(5))) << "something was left running";
}

}  // namespace
}  // namespace acc::testing
