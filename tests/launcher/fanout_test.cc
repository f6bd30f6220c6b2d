#include "acc/launcher/nodes/fanout.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "acc/common/error.h"
#include "acc/launcher/cli/cli.h"

namespace acc::launcher {
namespace {

using Strings = std::vector<std::string>;
using Env = std::vector<std::pair<std::string, std::string>>;

std::vector<HostfileEntry> two_hosts() {
  return {{"w1", 4}, {"w2", 4}};
}

FanoutJob job_for(Strings program) {
  FanoutJob job;
  job.launcher_path = "/opt/acc/bin/acc-launch";
  job.working_dir = "/home/ada/my project";
  job.master_addr = "w1";
  job.master_port = 29500;
  job.rdzv_id = "job7";
  job.nnodes = 2;
  job.program = std::move(program);
  return job;
}

TEST(FanoutTest, AHostfileWithoutNodeRankFansOutUnlessTheLauncherIsNone) {
  LaunchOptions options;
  options.hostfile = "hosts";
  EXPECT_TRUE(wants_fanout(options));
  options.launcher = "none";
  EXPECT_FALSE(wants_fanout(options)) << "the same command on every node, as before";
  options.launcher = "ssh";
  options.sources["node_rank"] = Source::kCommandLine;
  EXPECT_FALSE(wants_fanout(options)) << "an explicit node rank is one node of the job";
  options.sources.clear();
  options.stop_on_stdin_eof = true;
  EXPECT_FALSE(wants_fanout(options)) << "a remote launcher never fans out again";
  EXPECT_FALSE(wants_fanout(LaunchOptions{}));
}

TEST(FanoutTest, EveryHostRunsItsSlotsAtItsPosition) {
  auto nodes = select_nodes(two_hosts(), "", "");
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[1].host, "w2");
  EXPECT_EQ(nodes[1].node_rank, 1);
  EXPECT_EQ(nodes[1].slots, 4);
  EXPECT_FALSE(nodes[1].gpu_ids) << "a whole host keeps its own CUDA_VISIBLE_DEVICES";
}

TEST(FanoutTest, DeepSpeedIncludeSelectsSlotsAsGpuIds) {
  auto nodes = select_nodes({{"w0", 4}, {"w1", 4}, {"w2", 4}}, "w1:0,2@w2", "");
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].host, "w1");
  EXPECT_EQ(nodes[0].node_rank, 0) << "ranks count the hosts kept";
  EXPECT_EQ(nodes[0].slots, 2);
  EXPECT_EQ(nodes[0].gpu_ids, "0,2");
  EXPECT_EQ(nodes[1].slots, 4);
  EXPECT_FALSE(nodes[1].gpu_ids);
}

TEST(FanoutTest, ExcludeDropsHostsOrSlots) {
  auto nodes = select_nodes(two_hosts(), "", "w1:3");
  EXPECT_EQ(nodes[0].gpu_ids, "0,1,2");
  EXPECT_EQ(select_nodes(two_hosts(), "", "w1").size(), 1u);
  EXPECT_EQ(select_nodes(two_hosts(), "w2", "").front().host, "w2") << "the comma list as before";
}

TEST(FanoutTest, FiltersNamingUnknownHostsOrSlotsAreRefused) {
  EXPECT_THROW(select_nodes(two_hosts(), "w9", ""), ConfigError);
  EXPECT_THROW(select_nodes(two_hosts(), "w1:4", ""), ConfigError);
  EXPECT_THROW(select_nodes(two_hosts(), "w1:x", ""), ConfigError);
  EXPECT_THROW(select_nodes(two_hosts(), "", "w1@w2"), ConfigError);
}

TEST(FanoutTest, HostsOfDifferentSizesAreListedForEveryNode) {
  EXPECT_EQ(node_slots_of(select_nodes({{"w1", 1}, {"w2", 3}}, "", "")), "1,3");
  EXPECT_EQ(node_slots_of(select_nodes(two_hosts(), "", "")), "") << "equal: nothing to say";
  EXPECT_EQ(node_slots_of(select_nodes(two_hosts(), "w1:0@w2", "")), "1,4");
}

TEST(FanoutTest, TheHeadKeepsItsOwnFlagsAndForwardsTheRest) {
  const Strings args = {"--hostfile",
                        "hosts",
                        "--nproc-per-node=2",
                        "--max_restarts",
                        "1",
                        "--ssh_option",
                        "IdentityFile=k",
                        "--master-port",
                        "1234",
                        "--include=w1",
                        "-m",
                        "--",
                        "train",
                        "--hostfile",
                        "x"};
  const ParseResult parsed = parse_launch_args(args);
  ASSERT_FALSE(parsed.exit_now) << parsed.message;
  // As the command line parsed them: -m in its long spelling.
  EXPECT_EQ(forwarded_launcher_args(parsed.options), (Strings{"--max_restarts", "1", "--module"}))
      << "and never the program's own arguments";
}

// What the head forwards is what CLI11 read, value for value: a value that looks like a flag,
// `--flag=value`, an empty value and a switch given a value all reach the nodes as typed.
TEST(FanoutTest, ForwardedFlagsKeepTheirValuesAsTypedAndTheirOrder) {
  const ParseResult parsed = parse_launch_args(
      {"--hostfile=hosts", "--rdzv_conf", "--nnodes=2", "--role=a b", "--use_fsdp=false",
       "--fsdp_offload_params=", "--redirects", "3", "--node_slots", "1,3", "--no_python", "prog"});
  ASSERT_FALSE(parsed.exit_now) << parsed.message;
  EXPECT_EQ(forwarded_launcher_args(parsed.options),
            (Strings{"--rdzv_conf", "--nnodes=2", "--role", "a b", "--use_fsdp=false",
                     "--fsdp_offload_params", "", "--redirects", "3", "--no_python"}))
      << "--nnodes=2 is --rdzv_conf's value, not --nnodes; --node_slots is the head's";
}

TEST(FanoutTest, FlagsSetThroughTheirVariablesAreNotForwardedAsTyped) {
  ::setenv("PET_MAX_RESTARTS", "3", 1);
  const ParseResult parsed = parse_launch_args({"--hostfile", "hosts", "--tee", "1", "prog"});
  ::unsetenv("PET_MAX_RESTARTS");
  ASSERT_FALSE(parsed.exit_now) << parsed.message;
  EXPECT_EQ(parsed.options.max_restarts, 3);
  EXPECT_EQ(parsed.options.source_of("max_restarts"), Source::kCommandLine)
      << "PET_* count as the command line";
  EXPECT_EQ(forwarded_launcher_args(parsed.options), (Strings{"--tee", "1"}));
}

TEST(FanoutTest, EnvFilesReadNameValueLines) {
  EXPECT_EQ(parse_env_file("# comment\n\nNCCL_IB_HCA=mlx5\nX=a=b c\n", "f"),
            (Env{{"NCCL_IB_HCA", "mlx5"}, {"X", "a=b c"}}));
  EXPECT_THROW(parse_env_file("JUSTANAME\n", "f"), ConfigError);
  EXPECT_THROW(parse_env_file("1X=2\n", "f"), ConfigError);
}

TEST(FanoutTest, UsualPrefixesAndNamedVariablesAreSentAndFilesWin) {
  const std::map<std::string, std::string> environment = {
      {"NCCL_DEBUG", "INFO"},       {"GLOO_SOCKET_IFNAME", "eth1"},
      {"PYTHONPATH", "/src"},       {"HOME", "/root"},
      {"WANDB_KEY", "k"},           {"CUDA_HOME", "/cuda"},
      {"CUDA_VISIBLE_DEVICES", "0"}};
  EXPECT_EQ(env_to_pass(environment, "WANDB_KEY", {{"NCCL_DEBUG", "WARN"}}),
            (Env{{"CUDA_HOME", "/cuda"},
                 {"GLOO_SOCKET_IFNAME", "eth1"},
                 {"PYTHONPATH", "/src"},
                 {"WANDB_KEY", "k"},
                 {"NCCL_DEBUG", "WARN"}}))
      << "not the head's CUDA_VISIBLE_DEVICES";
  const Env named = env_to_pass(environment, "CUDA_VISIBLE_DEVICES", {});
  EXPECT_NE(std::find(named.begin(), named.end(),
                      std::make_pair(std::string("CUDA_VISIBLE_DEVICES"), std::string("0"))),
            named.end())
      << "unless named";
}

TEST(FanoutTest, EachNodeGetsItsRankSlotsStoreAndHostPrefix) {
  FanoutJob job = job_for({"train.py", "--lr", "0.1"});
  job.forwarded_args = {"--max_restarts", "1"};
  RemoteNode node{"w2", 1, 2, "0,2"};
  EXPECT_EQ(node_launcher_argv(job, node), (Strings{"/opt/acc/bin/acc-launch",
                                                    "--stop_on_stdin_eof",
                                                    "--nnodes",
                                                    "2",
                                                    "--node_rank",
                                                    "1",
                                                    "--nproc_per_node",
                                                    "2",
                                                    "--master_addr",
                                                    "w1",
                                                    "--master_port",
                                                    "29500",
                                                    "--rdzv_id",
                                                    "job7",
                                                    "--gpu_ids",
                                                    "0,2",
                                                    "--log_line_prefix_template",
                                                    "[w2 rank${rank}]: ",
                                                    "--max_restarts",
                                                    "1",
                                                    "--",
                                                    "train.py",
                                                    "--lr",
                                                    "0.1"}));
  job.own_prefix = true;
  const Strings argv = node_launcher_argv(job, node);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--log_line_prefix_template"), 0);
}

// The real test of quoting: a POSIX shell, as ssh's remote side uses, runs the command and the
// program sees exactly the words it was given.
TEST(FanoutTest, ArgumentsWithSpacesAndQuotesReachTheRemoteProgramIntact) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("fanout_test_" + std::to_string(::getpid()));
  const fs::path work = dir / "my 'project' dir";
  fs::create_directories(work);
  const fs::path printer = dir / "print-args";
  std::ofstream(printer) << "#!/bin/sh\npwd\nprintf '<%s>\\n' \"$GREETING\" \"$@\"\n";
  fs::permissions(printer, fs::perms::owner_all);

  const Strings program = {"train.py", "a b", "it's", "\"quoted\"", "$HOME", "`id`", "", "x;y"};
  FanoutJob job = job_for(program);
  job.launcher_path = printer.string();
  job.working_dir = work.string();
  job.env = {{"GREETING", "hello 'world' $USER"}};
  const std::string command = node_shell_command(job, RemoteNode{"w2", 1, 2, {}});

  FILE* shell = ::popen(("/bin/sh -c " + std::string("'") +
                         [&] {
                           std::string escaped;
                           for (char c : command)
                             escaped += c == '\'' ? "'\\''" : std::string(1, c);
                           return escaped;
                         }() +
                         "'")
                            .c_str(),
                        "r");
  ASSERT_NE(shell, nullptr);
  std::string output;
  char buffer[4096];
  while (size_t got = std::fread(buffer, 1, sizeof(buffer), shell)) output.append(buffer, got);
  EXPECT_EQ(::pclose(shell), 0) << command;
  fs::remove_all(dir);

  std::string expected = work.string() + "\n<hello 'world' $USER>\n";
  for (const std::string& arg : node_launcher_argv(job, RemoteNode{"w2", 1, 2, {}}))
    if (arg != printer.string()) expected += "<" + arg + ">\n";
  EXPECT_EQ(output, expected) << command;
  EXPECT_NE(output.find("<it's>\n<\"quoted\">\n<$HOME>\n<`id`>\n<>\n<x;y>\n"), std::string::npos);
}

TEST(FanoutTest, SshNeverPromptsAndTheUsersOptionsComeFirst) {
  SshSettings ssh{2222, {"StrictHostKeyChecking=no"}};
  const Strings argv = ssh_argv(ssh, "w2", "true");
  EXPECT_EQ(argv.front(), "ssh");
  EXPECT_EQ(argv[1], "-o");
  EXPECT_EQ(argv[2], "StrictHostKeyChecking=no") << "ssh keeps the first value of an option";
  EXPECT_NE(std::find(argv.begin(), argv.end(), "BatchMode=yes"), argv.end());
  EXPECT_EQ(Strings(argv.end() - 5, argv.end()), (Strings{"-p", "2222", "--", "w2", "true"}));
}

TEST(FanoutTest, SingleCommandLaunchersLetTheSchedulerGiveTheNodeRank) {
  FanoutJob job = job_for({"train.py"});
  job.env = {{"NCCL_DEBUG", "INFO"}};
  const auto nodes = select_nodes(two_hosts(), "", "");
  const Strings pdsh = single_command_argv("pdsh", job, nodes);
  EXPECT_EQ(Strings(pdsh.begin(), pdsh.begin() + 6),
            (Strings{"pdsh", "-S", "-f", "1024", "-w", "w1,w2"}));
  EXPECT_NE(pdsh.back().find("--node_rank %n"), std::string::npos) << pdsh.back();
  EXPECT_EQ(pdsh.back().find("--stop_on_stdin_eof"), std::string::npos)
      << "pdsh gives the remote no stdin";
  const Strings srun = single_command_argv("srun", job, nodes);
  EXPECT_EQ(srun.front(), "srun");
  EXPECT_EQ(std::count(srun.begin(), srun.end(), "--node_rank"), 0);
  const Strings mpirun = single_command_argv("mpirun", job, nodes);
  EXPECT_NE(std::find(mpirun.begin(), mpirun.end(), "NCCL_DEBUG=INFO"), mpirun.end());
  EXPECT_THROW(single_command_argv("srun", job, select_nodes(two_hosts(), "w1:0@w2", "")),
               ConfigError);
}

// The job secret reaches every node by the paths the head starts them on: its file's path, in
// ACC_JOB_SECRET_FILE (an ACC_ variable) or in the forwarded --rdzv_conf; the secret itself is
// in no command line.
TEST(FanoutTest, TheJobSecretsFileGoesToEveryNodeOnEveryLauncherAndTheSecretNever) {
  const std::map<std::string, std::string> environment = {
      {"ACC_JOB_SECRET_FILE", "/shared/job.secret"}, {"HOME", "/root"}};
  const Env sent = env_to_pass(environment, "", {});
  ASSERT_EQ(sent, (Env{{"ACC_JOB_SECRET_FILE", "/shared/job.secret"}}));
  FanoutJob job = job_for({"train.py"});
  job.env = sent;
  job.forwarded_args = {"--rdzv_conf", "job_secret_file=/shared/job.secret,admit_members_only=1"};
  const auto nodes = select_nodes(two_hosts(), "", "");
  const auto carries = [](const std::string& command) {
    return command.find("ACC_JOB_SECRET_FILE=/shared/job.secret") != std::string::npos &&
           command.find("job_secret_file=/shared/job.secret,admit_members_only=1") !=
               std::string::npos;
  };
  EXPECT_TRUE(carries(node_shell_command(job, nodes[1]))) << "ssh";
  for (const std::string launcher : {"pdsh", "srun", "mpirun"}) {
    const Strings argv = single_command_argv(launcher, job, nodes);
    std::string line;
    for (const std::string& arg : argv) line += arg + " ";
    EXPECT_TRUE(carries(line)) << launcher << ": " << line;
  }
}

}  // namespace
}  // namespace acc::launcher
