#include "cli/flag_filter.h"

#include <stdlib.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "acc/launcher/cli/cli.h"

namespace acc::launcher {
namespace {

using Words = std::vector<std::string>;

// A few flags as launch declares them, and a program with flags of its own.
const FlagNames kFlags({{"nproc_per_node", '\0', true},
                        {"nnodes", '\0', true},
                        {"no_python", '\0', false},
                        {"no_python_hook", '\0', false},
                        {"module", 'm', false},
                        {"redirects", 'r', true},
                        {"quiet", 'q', false},
                        {"max_restarts", '\0', true}});

Words expanded(const Words& args) {
  const ExpandedFlags result = expand_flag_prefixes(args, kFlags);
  EXPECT_EQ(result.error, "") << ::testing::PrintToString(args);
  return result.args;
}

TEST(FlagPrefixTest, AUniquePrefixIsTheWholeFlagInTheSpellingItIsWrittenIn) {
  EXPECT_EQ(expanded({"--nproc_per_nod", "2", "train.py"}),
            (Words{"--nproc_per_node", "2", "train.py"}));
  EXPECT_EQ(expanded({"--nproc-per", "2", "train.py"}),
            (Words{"--nproc-per-node", "2", "train.py"}));
  EXPECT_EQ(expanded({"--nproc", "2", "--nn=3", "--max_r=", "train.py"}),
            (Words{"--nproc_per_node", "2", "--nnodes=3", "--max_restarts=", "train.py"}));
}

TEST(FlagPrefixTest, AnExactNameWinsOverTheLongerNamesItBegins) {
  EXPECT_EQ(expanded({"--no_python", "/bin/true"}), (Words{"--no_python", "/bin/true"}));
  EXPECT_EQ(expanded({"--no-python", "/bin/true"}), (Words{"--no-python", "/bin/true"}));
  EXPECT_EQ(expanded({"--no_python_h", "t.py"}), (Words{"--no_python_hook", "t.py"}));
}

TEST(FlagPrefixTest, AnAmbiguousPrefixIsOneLineNamingTheFlagsItBegins) {
  ExpandedFlags result = expand_flag_prefixes({"--no_py", "/bin/true"}, kFlags);
  EXPECT_EQ(result.error, "ambiguous option: --no_py could match --no_python, --no_python_hook");
  result = expand_flag_prefixes({"--n=2", "t.py"}, kFlags);
  EXPECT_EQ(result.error,
            "ambiguous option: --n could match --nnodes, --no_python, --no_python_hook, "
            "--nproc_per_node");
  result = expand_flag_prefixes({"--no-p", "t.py"}, kFlags);
  EXPECT_EQ(result.error, "ambiguous option: --no-p could match --no-python, --no-python-hook");
}

// The program's arguments are its own: nothing after the program (or after `--`, or after a
// flag no name begins, which the parser names) is read as a launch flag, not even a value that
// looks like one.
TEST(FlagPrefixTest, NothingFromTheProgramOnIsTouched) {
  EXPECT_EQ(expanded({"--nnod", "2", "train.py", "--nproc", "--no_py"}),
            (Words{"--nnodes", "2", "train.py", "--nproc", "--no_py"}));
  EXPECT_EQ(expanded({"--max_r", "--nproc", "t.py"}), (Words{"--max_restarts", "--nproc", "t.py"}));
  EXPECT_EQ(expanded({"--", "--nproc", "2"}), (Words{"--", "--nproc", "2"}));
  EXPECT_EQ(expanded({"--lr", "--nproc", "2"}), (Words{"--lr", "--nproc", "2"}));
  EXPECT_EQ(expanded({"-x", "--nproc", "2"}), (Words{"-x", "--nproc", "2"}));
  EXPECT_EQ(expanded({"--nproc", "2"}), (Words{"--nproc_per_node", "2"}));
}

TEST(FlagPrefixTest, ShortFlagsAndTheirValuesAreSkipped) {
  EXPECT_EQ(expanded({"-r", "--x", "--nnod", "2", "-m", "pkg", "--nproc"}),
            (Words{"-r", "--x", "--nnodes", "2", "-m", "pkg", "--nproc"}));
  EXPECT_EQ(expanded({"-qr", "3", "--nnod", "2", "t.py"}),
            (Words{"-qr", "3", "--nnodes", "2", "t.py"}));
  EXPECT_EQ(expanded({"-r3", "--nnod", "2", "t.py"}), (Words{"-r3", "--nnodes", "2", "t.py"}));
}

// The real table: torchrun's, accelerate launch's and acc-launch's own flags.
TEST(FlagPrefixTest, ALaunchTakesTheUniquePrefixOfAnyOfItsFlags) {
  ParseResult parsed =
      parse_launch_args({"--nproc_per_nod", "2", "--max-rest=1", "--mixed_prec", "bf16",
                         "--no_python", "/bin/sh", "-c", "--nproc_per_nod"});
  ASSERT_FALSE(parsed.exit_now) << parsed.message;
  EXPECT_EQ(parsed.options.nproc_per_node, "2");
  EXPECT_EQ(parsed.options.max_restarts, 1);
  EXPECT_EQ(parsed.options.mixed_precision, "bf16");
  EXPECT_TRUE(parsed.options.no_python);
  EXPECT_FALSE(parsed.options.no_python_hook);
  EXPECT_EQ(parsed.options.source_of("nproc_per_node"), Source::kCommandLine);
  EXPECT_EQ(parsed.options.program, "/bin/sh");
  EXPECT_EQ(parsed.options.program_args, (Words{"-c", "--nproc_per_nod"}));

  parsed = parse_launch_args({"--no_py", "/bin/true"});
  EXPECT_EQ(parsed.exit_code, 2);
  EXPECT_EQ(parsed.message,
            "acc-launch: error: ambiguous option: --no_py could match --no_python, "
            "--no_python_hook (see acc-launch --help)");
  parsed = parse_launch_args({"--hel"});
  EXPECT_EQ(parsed.exit_code, 0);
  EXPECT_NE(parsed.message.find("--nproc_per_node"), std::string::npos);
}

TEST(FlagFilterTest, ALaunchWantsOnlyTheFlagsItNamesInEitherSpelling) {
  const FlagFilter filter(
      {"--nproc-per-node=8", "--max_restarts", "1", "--no_python", "/bin/true"});
  EXPECT_FALSE(filter.all());
  EXPECT_TRUE(filter.wants("nproc_per_node", false, ""));
  EXPECT_TRUE(filter.wants("max_restarts", false, ""));
  EXPECT_TRUE(filter.wants("no_python", false, ""));
  EXPECT_FALSE(filter.wants("master_port", false, ""));
  EXPECT_FALSE(filter.wants("fsdp_sharding_strategy", false, ""));
}

TEST(FlagFilterTest, FlagsWithAShortNameAreAlwaysWantedAsTheyMayBeCombined) {
  const FlagFilter filter({"-qm", "train"});
  EXPECT_TRUE(filter.wants("quiet", true, ""));
  EXPECT_TRUE(filter.wants("module", true, ""));
  EXPECT_FALSE(filter.wants("nnodes", false, ""));
}

TEST(FlagFilterTest, AFlagWhoseVariableIsSetIsWanted) {
  ::setenv("ACC_FLAG_FILTER_TEST_SET", "4", 1);
  ::unsetenv("ACC_FLAG_FILTER_TEST_UNSET");
  const FlagFilter filter({"/bin/true"});
  EXPECT_TRUE(filter.wants("nproc_per_node", false, "ACC_FLAG_FILTER_TEST_SET"));
  EXPECT_FALSE(filter.wants("nproc_per_node", false, "ACC_FLAG_FILTER_TEST_UNSET"));
  ::unsetenv("ACC_FLAG_FILTER_TEST_SET");
}

TEST(FlagFilterTest, HelpAndCompletionWantEveryFlag) {
  for (const char* word :
       {"--help", "-h", "-qh", "--print-completion", "--print_completion=bash"}) {
    const FlagFilter filter({word});
    EXPECT_TRUE(filter.all()) << word;
    EXPECT_TRUE(filter.wants("fsdp_sharding_strategy", false, "")) << word;
  }
  EXPECT_FALSE(FlagFilter({"-q", "--hostfile", "h"}).all());
}

// The program's own flags are its own: past the program (the first word that is no flag and
// cannot be a flag's value, or `--`), a --help is the program's, and no flag is registered.
TEST(FlagFilterTest, TheProgramsFlagsAreNotTheLaunchs) {
  EXPECT_TRUE(FlagFilter({"--nnodes", "2", "-h"}).all());
  EXPECT_FALSE(FlagFilter({"train.py", "-h"}).all());
  EXPECT_FALSE(FlagFilter({"--nnodes", "2", "train.py", "--help"}).all());
  EXPECT_FALSE(FlagFilter({"--max_restarts=1", "train.py", "--help"}).all());
  EXPECT_FALSE(FlagFilter({"--", "train.py", "--help"}).all());
  const FlagFilter filter({"--nnodes", "2", "train.py", "--master_port", "1"});
  EXPECT_TRUE(filter.wants("nnodes", false, ""));
  EXPECT_FALSE(filter.wants("master_port", false, ""));
  const ParseResult parsed = parse_launch_args({"--nnodes", "1", "train.py", "--help"});
  EXPECT_FALSE(parsed.exit_now) << parsed.message;
  EXPECT_EQ(parsed.options.program_args, std::vector<std::string>{"--help"});
}

}  // namespace
}  // namespace acc::launcher
