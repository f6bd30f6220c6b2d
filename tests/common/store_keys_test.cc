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

}  // namespace
}  // namespace acc
