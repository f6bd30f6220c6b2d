#include "acc/common/store_keys.h"

#include <gtest/gtest.h>

namespace acc {
namespace {

// The names are a protocol between the launcher and libacc (and PyTorch's own prefix): changing
// one is a deliberate, visible edit here.
TEST(StoreKeysTest, SpellsTheBeatKeyAndTheAttemptPrefix) {
  EXPECT_EQ(store_keys::beat(3), "acc/beat/3");
  EXPECT_EQ(store_keys::worker_attempt_prefix(2), "/worker/attempt_2/");
  EXPECT_EQ(store_keys::beat_in_attempt(2, 3), "/worker/attempt_2/acc/beat/3");
  EXPECT_EQ(store_keys::hang_node_summary(1, 4), "/acc/hang/attempt_1/node_4");
}

TEST(StoreKeysTest, SpellsTheKeysOfTheJobsLaunchers) {
  EXPECT_EQ(store_keys::node_alive(2), "/acc/job/node_2/alive");
  EXPECT_EQ(store_keys::job_end(), "/acc/job/end");
  EXPECT_EQ(store_keys::job_restart(), "/acc/job/restart");
  EXPECT_EQ(store_keys::attempt_barrier(1), "/acc/job/attempt_1/arrived");
  EXPECT_EQ(store_keys::exit_barrier(), "/acc/job/exit/arrived");
  EXPECT_EQ(store_keys::collective_trace(0, 3), "/acc/trace/attempt_0/rank_3");
}

}  // namespace
}  // namespace acc
