#include "cli/flag_filter.h"

#include <stdlib.h>

#include <gtest/gtest.h>

namespace acc::launcher {
namespace {

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

}  // namespace
}  // namespace acc::launcher
