// parse_launch_args and launch_help (launcher/src/cli/cli.cc) without a process: torchrun's and
// Accelerate's flags in either spelling, their PET_* variables, where the program begins, what
// was given and how, and the one-line answers to bad input. (Which flags are registered, and
// argparse's prefixes: flag_filter_test.cc.)

#include "acc/launcher/cli/cli.h"

#include <stdlib.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace acc::launcher {
namespace {

using Words = std::vector<std::string>;

ParseResult parsed_ok(const Words& args) {
  ParseResult result = parse_launch_args(args);
  EXPECT_FALSE(result.exit_now) << result.message;
  return result;
}

// The one line of a bad command line (exit 2).
std::string refusal(const Words& args) {
  const ParseResult result = parse_launch_args(args);
  EXPECT_TRUE(result.exit_now);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.message.find('\n'), std::string::npos) << result.message;
  return result.message;
}

TEST(CliTest, NetworkCheckIsOffByDefaultAndTakesAFactor) {
  EXPECT_FALSE(parsed_ok({"train.py"}).options.network_check);
  const LaunchOptions o =
      parsed_ok({"--network_check", "--network_check_factor", "2.5", "train.py"}).options;
  EXPECT_TRUE(o.network_check);
  EXPECT_EQ(o.network_check_factor, 2.5);
}

TEST(CliTest, EitherSpellingSetsTheOptionAndThePogramBeginsAtTheFirstWordThatIsNoFlag) {
  const LaunchOptions o = parsed_ok({"--nproc-per-node", "4", "--max_restarts=2", "--standalone",
                                     "train.py", "--lr", "1e-4", "--nproc_per_node", "9"})
                              .options;
  EXPECT_EQ(o.nproc_per_node, "4");
  EXPECT_EQ(o.max_restarts, 2);
  EXPECT_TRUE(o.standalone);
  EXPECT_EQ(o.program, "train.py");
  EXPECT_EQ(o.program_args, (Words{"--lr", "1e-4", "--nproc_per_node", "9"}));
  EXPECT_EQ(o.source_of("nproc_per_node"), Source::kCommandLine);
  EXPECT_EQ(o.source_of("nnodes"), Source::kDefault);
  ASSERT_EQ(o.typed.size(), 3u);
  EXPECT_EQ(o.typed[0].name, "nproc_per_node");
  EXPECT_EQ(o.typed[0].value, "4");
  EXPECT_EQ(o.typed[1].name, "max_restarts");
  EXPECT_EQ(o.typed[2].name, "standalone");
}

TEST(CliTest, DoubleDashEndsTheFlagsButAProgramIsNeverAFlag) {
  const LaunchOptions o = parsed_ok({"-m", "--", "pkg.main", "--nnodes", "2"}).options;
  EXPECT_TRUE(o.module);
  EXPECT_EQ(o.program, "pkg.main");
  EXPECT_EQ(o.program_args, (Words{"--nnodes", "2"}));
  EXPECT_EQ(o.nnodes, "1");
  EXPECT_NE(refusal({"--", "--not-a-program"}).find("unknown option --not-a-program"),
            std::string::npos);
}

TEST(CliTest, APetVariableIsTheFlagsValueUnlessTheCommandLineGivesOne) {
  ::setenv("PET_MAX_RESTARTS", "5", 1);
  EXPECT_EQ(parsed_ok({"t.py"}).options.max_restarts, 5);
  EXPECT_EQ(parsed_ok({"--max_restarts", "1", "t.py"}).options.max_restarts, 1);
  ::unsetenv("PET_MAX_RESTARTS");
  EXPECT_EQ(parsed_ok({"t.py"}).options.max_restarts, 0);
}

TEST(CliTest, AcceleratesConfigKeysAreFlagsTooKeptAsTyped) {
  const LaunchOptions o =
      parsed_ok({"--fsdp_sharding_strategy", "FULL_SHARD", "--mixed_precision", "bf16", "t.py"})
          .options;
  bool found = false;
  for (const auto& [name, value] : o.config_flags)
    if (name == "fsdp_sharding_strategy") found = value == "FULL_SHARD";
  EXPECT_TRUE(found);
}

TEST(CliTest, BadInputIsOneLineNamingWhatWasWrong) {
  EXPECT_NE(refusal({"--bogus", "t.py"}).find("unknown option --bogus"), std::string::npos);
  EXPECT_NE(refusal({"--nnodes", "2"}).find("no PROGRAM given"), std::string::npos);
  EXPECT_NE(refusal({"--tpu", "t.py"}).find("--tpu: TPU and SageMaker launches are not supported"),
            std::string::npos);
  EXPECT_NE(refusal({"--max-restarts=-1", "t.py"}).find("--max-restarts"), std::string::npos)
      << "named in the user's spelling";
  EXPECT_NE(refusal({"--max_restarts", "x", "t.py"}).find("--max_restarts"), std::string::npos);
  EXPECT_NE(refusal({"--log_dir", "a\nb", "t.py"}).find("holds a control character"),
            std::string::npos);
  EXPECT_NE(refusal({""}).find("PROGRAM is an empty word"), std::string::npos);
}

TEST(CliTest, HelpAndVersionExitZeroWithTheirText) {
  const ParseResult help = parse_launch_args({"--help"});
  EXPECT_TRUE(help.exit_now);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_EQ(help.message.rfind("Usage: acc-launch", 0), 0u) << help.message;
  EXPECT_NE(help.message.find("--nproc_per_node NPROC"), std::string::npos);
  EXPECT_EQ(help.message.find("--fsdp_sharding_strategy "), std::string::npos)
      << "the config keys are counted, not listed";
  EXPECT_NE(help.message.find("accelerate config keys are flags too"), std::string::npos);
  EXPECT_EQ(help.message.find("Subcommands:"), std::string::npos) << "none given";
  const std::vector<SubcommandHelp> commands = {{"config", "write a config"},
                                                {"rendezvous", "serve a store"}};
  EXPECT_NE(parse_launch_args({"--help"}, "", commands)
                .message.find("\nSubcommands:\n  config      write a config\n"
                              "  rendezvous  serve a store\n"),
            std::string::npos);
  const ParseResult version = parse_launch_args({"--version"});
  EXPECT_TRUE(version.exit_now);
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.message.rfind("acc-launch ", 0), 0u);
}

TEST(CliTest, HelpTopicsListTheirGroupsAndAnUnknownOneNamesTheTopics) {
  const HelpResult accelerate = launch_help("accelerate");
  EXPECT_EQ(accelerate.exit_code, 0);
  // Each flag's line (the usage's examples name --nproc_per_node too).
  EXPECT_NE(accelerate.text.find("\n  --fsdp_sharding_strategy "), std::string::npos);
  EXPECT_EQ(accelerate.text.find("\n  --nproc_per_node "), std::string::npos);
  const HelpResult torchrun = launch_help("torchrun");
  EXPECT_NE(torchrun.text.find("\n  --nproc_per_node "), std::string::npos);
  EXPECT_EQ(torchrun.text.find("\n  --fsdp_sharding_strategy "), std::string::npos);
  const HelpResult unknown = launch_help("nope");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(
      unknown.text.find("topics: torchrun, accelerate, multi-node, hangs, output, status, all"),
      std::string::npos)
      << unknown.text;
}

TEST(CliTest, ThePythonIsTheFlagsThenPythonExecThenTheOneBesideTheBinary) {
  ::unsetenv("PYTHON_EXEC");
  LaunchOptions o = parsed_ok({"t.py"}).options;
  resolve_python(o, "/opt/venv/bin/python");
  EXPECT_EQ(o.python, "/opt/venv/bin/python");
  EXPECT_EQ(o.python_source, "beside acc-launch");
  ::setenv("PYTHON_EXEC", "/usr/bin/python3.11", 1);
  resolve_python(o, "/opt/venv/bin/python");
  EXPECT_EQ(o.python, "/usr/bin/python3.11");
  ::unsetenv("PYTHON_EXEC");
  o = parsed_ok({"--python", "/my/python", "t.py"}).options;
  resolve_python(o, "/opt/venv/bin/python");
  EXPECT_EQ(o.python, "/my/python");
  EXPECT_EQ(o.python_source, "--python");
  o = parsed_ok({"t.py"}).options;
  resolve_python(o, "");
  EXPECT_EQ(o.python, "python3");
}

}  // namespace
}  // namespace acc::launcher
