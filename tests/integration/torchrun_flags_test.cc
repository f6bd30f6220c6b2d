// Current torchrun's flags and launcher-side variables, through the real binary: the ones
// acc-launch honours change what the workers get or how signals end the job; the ones it cannot
// honour are accepted with one notice, never an error.

#include <signal.h>
#include <stdlib.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "launcher_harness.h"

namespace acc::testing {
namespace {
namespace fs = std::filesystem;
using std::chrono::seconds;

void wait_ready(const std::string& dir, int workers) {
  for (int rank = 0; rank < workers; ++rank)
    ASSERT_TRUE(wait_for_file(dir + "/" + std::to_string(rank) + ".ready", seconds(30)));
}

TEST(TorchrunFlagsTest, SignalsToHandleMakesAListedSignalEndTheJob) {
  const std::string dir = make_temp_dir();
  const pid_t launcher = start_launcher(worker({"--nproc_per_node", "2", "--shutdown_timeout", "1",
                                                "--signals-to-handle", "SIGTERM,SIGUSR1"},
                                               {"wait", dir}),
                                        dir);
  wait_ready(dir, 2);
  ::kill(launcher, SIGUSR1);
  // Forwarded (each worker records it), then the job ends as for SIGTERM: 128 + SIGUSR1.
  EXPECT_EQ(wait_launcher(launcher), 128 + SIGUSR1);
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_TRUE(fs::exists(dir + "/" + std::to_string(rank) + ".usr1")) << rank;
  EXPECT_NE(read_text(dir + "/launcher.err").find("stopped by USR1"), std::string::npos);
  EXPECT_TRUE(processes_mentioning(dir).empty());
  reap_exited_children();
  fs::remove_all(dir);
}

TEST(TorchrunFlagsTest, ASignalLeftOutOfTheListIsNotForwarded) {
  // As torchrun: an unlisted SIGHUP is not handled, so it ends the launcher itself; its workers
  // never see it (no .term file) and the watchdog still leaves nothing running.
  const std::string dir = make_temp_dir();
  ::setenv("TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT", 1);
  const pid_t launcher = start_launcher(worker({"--nproc_per_node", "2"}, {"wait", dir}), dir);
  ::unsetenv("TORCHELASTIC_SIGNALS_TO_HANDLE");
  wait_ready(dir, 2);
  ::kill(launcher, SIGHUP);
  EXPECT_EQ(wait_launcher(launcher), 128 + SIGHUP);
  const auto deadline = std::chrono::steady_clock::now() + seconds(10);
  while (!processes_mentioning(dir).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(processes_mentioning(dir).empty());
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_FALSE(fs::exists(dir + "/" + std::to_string(rank) + ".term")) << rank;
  reap_exited_children();
  fs::remove_all(dir);
}

TEST(TorchrunFlagsTest, AnUnknownSignalIsOneErrorLine) {
  const LaunchRun run = run_launcher({"--signals-to-handle", "SIGTERM,SIGNOPE", "/bin/true"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(lines_of(run.err).size(), 1u) << run.err;
  EXPECT_NE(run.err.find("SIGNOPE"), std::string::npos) << run.err;
}

TEST(TorchrunFlagsTest, VirtualLocalRankGivesEachWorkerLocalRankZeroAndItsOwnDevice) {
  const LaunchRun run = run_launcher({"--virtual-local-rank", "--nproc_per_node", "2", "--gpu_ids",
                                      "3,5", "--no_python", "/bin/sh", "-c",
                                      "echo L=$LOCAL_RANK R=$RANK C=$CUDA_VISIBLE_DEVICES"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("[rank0]: L=0 R=0 C=3\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("[rank1]: L=0 R=1 C=5\n"), std::string::npos) << run.out;
  // Without --gpu_ids, the launcher's own list is shared out; without either, the indices.
  const LaunchRun inherited =
      run_launcher({"--virtual-local-rank", "--nproc_per_node", "2", "--no_python", "/bin/sh", "-c",
                    "echo L=$LOCAL_RANK C=$CUDA_VISIBLE_DEVICES"},
                   {{"CUDA_VISIBLE_DEVICES", "GPU-aa,GPU-bb"}});
  ASSERT_EQ(inherited.exit_code, 0) << inherited.err;
  EXPECT_NE(inherited.out.find("[rank1]: L=0 C=GPU-bb\n"), std::string::npos) << inherited.out;
}

TEST(TorchrunFlagsTest, LauncherSideVariablesSetTheDefaults) {
  const LaunchRun run = run_launcher({"--nproc_per_node", "2", "--no_python", "/bin/echo", "hi"},
                                     {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "<${rank}> "}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("<1> hi\n"), std::string::npos) << run.out;

  const std::string dir = make_temp_dir();
  ::setenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "0.3", 1);
  const pid_t launcher =
      start_launcher(worker({"--nproc_per_node", "1"}, {"ignore-term", dir}), dir);
  ::unsetenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT");
  wait_ready(dir, 1);
  const auto start = std::chrono::steady_clock::now();
  ::kill(launcher, SIGTERM);
  EXPECT_EQ(wait_launcher(launcher), 128 + SIGTERM);
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(10));  // 0.3 s, not the default 30
  EXPECT_NE(read_text(dir + "/launcher.err").find("sending SIGKILL"), std::string::npos);
  reap_exited_children();
  fs::remove_all(dir);
}

TEST(TorchrunFlagsTest, FlagsItCannotHonourAreAcceptedWithOneNoticeEach) {
  const LaunchRun run =
      run_launcher({"--logs-specs", "my_specs", "--event-log-handler", "console",
                    "--duplicate-stdout-filters", "loss", "--duplicate-stderr-filters", "err",
                    "--exit-barrier-timeout", "60", "--no_python", "/bin/echo", "ran"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("[rank0]: ran"), std::string::npos);
  for (const char* flag :
       {"--logs_specs my_specs ignored", "--event_log_handler console ignored",
        "--duplicate_stdout_filters loss ignored", "--duplicate_stderr_filters err ignored"})
    EXPECT_NE(run.err.find(flag), std::string::npos) << flag << "\n" << run.err;
}

// A launch registers only the flags its command line names (cli/flag_filter.h); help, asked for
// in any form, still lists every one: --help every group but the accelerate config keys, which
// `acc-launch help accelerate` lists.
TEST(TorchrunFlagsTest, HelpInAnyFormListsEveryFlag) {
  for (const char* help : {"--help", "-h", "-qh"}) {
    const LaunchRun run = run_launcher({help});
    ASSERT_EQ(run.exit_code, 0) << help << ": " << run.err;
    for (const char* flag : {"--nproc_per_node", "--stall_timeout", "--rdzv_backend",
                             "--status_port", "--dedup_lines", "--mixed_precision"})
      EXPECT_NE(run.out.find(flag), std::string::npos) << help << " " << flag;
    EXPECT_NE(run.out.find("acc-launch help accelerate"), std::string::npos) << help;
  }
  const LaunchRun keys = run_launcher({"help", "accelerate"});
  ASSERT_EQ(keys.exit_code, 0) << keys.err;
  EXPECT_NE(keys.out.find("--fsdp_sharding_strategy"), std::string::npos);
  EXPECT_NE(keys.out.find("--mixed_precision"), std::string::npos);
}

TEST(TorchrunFlagsTest, HelpStartsWithTheUsageAndListsEverySubcommand) {
  const LaunchRun run = run_launcher({"--help"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.rfind("Usage: acc-launch [OPTIONS] PROGRAM [ARGS...]\n", 0), 0u) << run.out;
  const size_t listed = run.out.find("\nSubcommands:\n");
  ASSERT_NE(listed, std::string::npos) << run.out;
  const size_t flags = run.out.find("\nTorchrun (");
  // Every word main.cc dispatches on, each listed before the flags; each answers --help.
  for (const std::string command :
       {"launch", "config", "env", "test", "stacks", "top", "rendezvous", "help"}) {
    const size_t at = run.out.find("\n  " + command + " ", listed);
    EXPECT_LT(at, flags) << command << " is not among the subcommands\n" << run.out;
    if (command == "launch" || command == "help") continue;
    const LaunchRun help = run_launcher({command, "--help"});
    EXPECT_EQ(help.exit_code, 0) << command << ": " << help.err;
    const LaunchRun by_topic = run_launcher({"help", command});
    EXPECT_EQ(by_topic.exit_code, 0) << command << ": " << by_topic.err;
    EXPECT_EQ(by_topic.out, help.out) << command;
  }
  // The flags in groups, every rendezvous backend named, and hangs findable by that word.
  for (const char* group : {"\nTorchrun (", "\nAccelerate launch:", "\nMulti-node:",
                            "\nHangs and health:", "\nOutput and CPU binding:", "\nStatus page"})
    EXPECT_NE(run.out.find(group), std::string::npos) << group;
  EXPECT_NE(run.out.find("etcd-v2"), std::string::npos);
  EXPECT_NE(run.out.find("hang report"), std::string::npos);
  EXPECT_LT(lines_of(run.out).size(), 230u);  // 225 with --network_check; 392 in `help all`
}

TEST(TorchrunFlagsTest, HelpTopicShowsOneGroupOfFlags) {
  const LaunchRun hangs = run_launcher({"help", "hangs"});
  ASSERT_EQ(hangs.exit_code, 0) << hangs.err;
  EXPECT_NE(hangs.out.find("--stall_timeout"), std::string::npos) << hangs.out;
  EXPECT_EQ(hangs.out.find("\n  --nproc_per_node "), std::string::npos) << hangs.out;
  EXPECT_EQ(hangs.out.find("--fsdp_sharding_strategy"), std::string::npos) << hangs.out;
  const LaunchRun all = run_launcher({"help", "all"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  for (const char* flag : {"--nproc_per_node", "--stall_timeout", "--fsdp_sharding_strategy"})
    EXPECT_NE(all.out.find(flag), std::string::npos) << flag;
  const LaunchRun unknown = run_launcher({"help", "flags"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_EQ(lines_of(unknown.err).size(), 1u) << unknown.err;
  EXPECT_NE(unknown.err.find("torchrun, accelerate, multi-node, hangs, output, status, all"),
            std::string::npos)
      << unknown.err;
}

// --help reads as torchrun's: a placeholder for each value, the default and the variable in
// words, none of CLI11's spellings of types and checks.
std::string one_spaced(const std::string& text) {
  std::string out;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c)) || (!out.empty() && out.back() != ' '))
      out += std::isspace(static_cast<unsigned char>(c)) ? ' ' : c;
  return out;
}

TEST(TorchrunFlagsTest, HelpNamesValuesDefaultsAndVariablesInPlainWords) {
  for (const std::vector<std::string>& asked :
       {std::vector<std::string>{"--help"}, {"help", "all"}}) {
    const LaunchRun run = run_launcher(asked);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    for (const char* code : {":INT>=", "(Env:", " TEXT", "TEXT:", "INT:", " FLOAT", ":SECONDS",
                             "=1.13", " ...\n", "--nproc-per-node,"})
      EXPECT_EQ(run.out.find(code), std::string::npos) << asked.front() << ": " << code;
    const std::string text = one_spaced(run.out);
    for (const char* plain :
         {"--nproc_per_node NPROC workers on this node: N, auto, cpu or gpu (default: 1; or "
          "$PET_NPROC_PER_NODE)",
          "--max_restarts N ", "--standalone single-node job on a free port (or $PET_STANDALONE=1)",
          "--start_method {spawn,fork,forkserver}", "-m, --module run PROGRAM",
          "--master_port PORT port of the node 0 store (default: free port on one node, else "
          "29500; or $PET_MASTER_PORT)",
          "--stall_timeout SECONDS ", "--ssh_option OPTION ", "-h, --help print this help"})
      EXPECT_NE(text.find(plain), std::string::npos) << asked.front() << ": " << plain;
  }
}

// argparse's abbreviations, as torchrun and accelerate launch take them: a prefix that begins one
// flag is that flag; one that begins several is one line naming them.
TEST(TorchrunFlagsTest, AUniquePrefixIsTheFlagItBeginsAndAnAmbiguousOneIsOneLine) {
  const LaunchRun run =
      run_launcher({"--nproc_per_nod", "2", "--max-rest=1", "--no_python", "/bin/sh", "-c",
                    "echo $WORLD_SIZE $TORCHELASTIC_MAX_RESTARTS", "--nproc"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<std::string> lines = lines_of(run.out);
  ASSERT_EQ(lines.size(), 2u) << run.out;
  for (const std::string& line : lines) EXPECT_NE(line.find(": 2 1"), std::string::npos) << line;

  const LaunchRun ambiguous = run_launcher({"--no_py", "/bin/true"});
  EXPECT_EQ(ambiguous.exit_code, 2);
  EXPECT_EQ(ambiguous.err,
            "acc-launch: error: ambiguous option: --no_py could match --no_python, "
            "--no_python_hook (see acc-launch --help)\n");
}

TEST(TorchrunFlagsTest, TheStackedSingleNodeLineRunsOnAFreePort) {
  // torchrun's documentation: --rdzv-backend=c10d --rdzv-endpoint=localhost:0 --nnodes=1.
  const LaunchRun run = run_launcher({"--rdzv-backend=c10d", "--rdzv-endpoint=localhost:0",
                                      "--nnodes=1", "--nproc-per-node=2", "--no_python", "/bin/sh",
                                      "-c", "echo $MASTER_PORT $WORLD_SIZE"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<std::string> lines = lines_of(run.out);
  ASSERT_EQ(lines.size(), 2u) << run.out;
  EXPECT_EQ(lines[0].substr(lines[0].find(": ") + 2), lines[1].substr(lines[1].find(": ") + 2));
  EXPECT_EQ(lines[0].find(" 0 "), std::string::npos) << "not a free port: " << lines[0];
  EXPECT_NE(lines[0].find(" 2"), std::string::npos) << lines[0];
  // Port 0 means a free port on one node only: nodes could not find each other.
  const LaunchRun two = run_launcher({"--rdzv-backend=c10d", "--rdzv-endpoint=localhost:0",
                                      "--nnodes=2", "--nproc-per-node=1", "/bin/true"});
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_EQ(lines_of(two.err).size(), 1u) << two.err;
  EXPECT_NE(two.err.find("--nnodes=1"), std::string::npos) << two.err;
}

TEST(TorchrunFlagsTest, PrintCompletionPrintsAScriptForTheShell) {
  const LaunchRun bash = run_launcher({"--print-completion", "bash"});
  ASSERT_EQ(bash.exit_code, 0) << bash.err;
  EXPECT_EQ(bash.out.rfind("complete ", 0), 0u) << bash.out;
  for (const char* flag : {"--nproc_per_node", "--rdzv-backend", "--fsdp_sharding_strategy"})
    EXPECT_NE(bash.out.find(flag), std::string::npos) << flag;
  EXPECT_EQ(run_launcher({"--print-completion", "fish"}).exit_code, 2);
}

}  // namespace
}  // namespace acc::testing
