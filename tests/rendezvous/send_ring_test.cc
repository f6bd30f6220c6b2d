// BatchingChoice, the store server's choice between sending a round's replies together and one
// send each, driven by a fake preemption counter: it measures an epoch of one send each, batches
// when that epoch was preempted often, and measures again.

#include <gtest/gtest.h>

#include "send_ring.h"

namespace acc::rendezvous::detail {
namespace {

constexpr std::size_t kEpoch = BatchingChoice::kEpochReplies;
constexpr int kCycle = 1 + BatchingChoice::kExploitEpochs;

// A server preempted `each` times per reply when it sends each, `batched` times when it batches.
struct FakeServer {
  double each;
  double batched;
  double preemptions = 0;
  BatchingChoice choice{[this] { return preemptions; }};

  // Sends one epoch's replies, 8 a round, in whatever mode the choice gives; returns that mode.
  bool run_epoch() {
    const bool batch = choice.batch();
    for (std::size_t i = 0; i < kEpoch / 8; ++i) {
      preemptions += 8 * (choice.batch() ? batched : each);
      choice.sent(8);
    }
    return batch;
  }
};

TEST(BatchingChoiceTest, BatchesWhenClientsPreemptTheServerAfterEachSend) {
  FakeServer server{/*each=*/0.45, /*batched=*/0.04};  // 2 cores, as measured
  EXPECT_FALSE(server.run_epoch());                    // the measured epoch sends each
  EXPECT_NEAR(server.choice.measured(), 0.45, 1e-9);
  for (int i = 0; i < BatchingChoice::kExploitEpochs; ++i) EXPECT_TRUE(server.run_epoch());
  EXPECT_FALSE(server.run_epoch());  // measured again
  EXPECT_TRUE(server.run_epoch());
}

TEST(BatchingChoiceTest, SendsEachWhenClientsWakeOnCoresOfTheirOwn) {
  FakeServer server{/*each=*/0.01, /*batched=*/0.0};
  int batched_epochs = 0;
  for (int i = 0; i < 3 * kCycle; ++i) batched_epochs += server.run_epoch();
  EXPECT_EQ(batched_epochs, 0);
}

TEST(BatchingChoiceTest, FollowsAChangeAtTheNextMeasurement) {
  FakeServer server{/*each=*/0.45, /*batched=*/0.04};
  for (int i = 0; i < kCycle; ++i) server.run_epoch();
  server.each = 0.0;  // the clients moved to cores of their own
  int batched_epochs = 0;
  for (int i = 0; i < 2 * kCycle; ++i) batched_epochs += server.run_epoch();
  EXPECT_EQ(batched_epochs, 0);
}

}  // namespace
}  // namespace acc::rendezvous::detail
