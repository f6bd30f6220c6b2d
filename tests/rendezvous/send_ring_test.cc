// BatchingChoice, the store server's choice between sending a round's replies together and one
// send each, driven by a fake CPU clock: it measures both, keeps the cheaper, and measures again.

#include <gtest/gtest.h>

#include "send_ring.h"

namespace acc::rendezvous::detail {
namespace {

constexpr std::size_t kEpoch = BatchingChoice::kEpochReplies;

// A server whose CPU per reply is `batched` or `each` seconds depending on the mode it is in.
struct FakeServer {
  double batched;
  double each;
  double cpu = 0;
  BatchingChoice choice{[this] { return cpu; }};

  // Sends one epoch's replies in whatever mode the choice gives; returns that mode.
  bool run_epoch() {
    const bool batch = choice.batch();
    for (std::size_t i = 0; i < kEpoch / 8; ++i) {
      cpu += 8 * (choice.batch() ? batched : each);
      choice.sent(8);
    }
    return batch;
  }
};

TEST(BatchingChoiceTest, StartsBatchedThenMeasuresBothAndKeepsTheCheaper) {
  FakeServer server{/*batched=*/1e-6, /*each=*/2e-6};
  EXPECT_TRUE(server.choice.batch());
  server.run_epoch();  // the first epoch starts the clock
  EXPECT_TRUE(server.run_epoch());
  EXPECT_FALSE(server.run_epoch());  // one send each, measured
  EXPECT_DOUBLE_EQ(server.choice.batched_cost(), 1e-6);
  EXPECT_DOUBLE_EQ(server.choice.each_cost(), 2e-6);
  for (int i = 0; i < BatchingChoice::kExploitEpochs; ++i) EXPECT_TRUE(server.run_epoch());
}

TEST(BatchingChoiceTest, SendsEachWhereThatIsCheaper) {
  FakeServer server{/*batched=*/8.3e-6, /*each=*/7.2e-6};
  server.run_epoch();
  server.run_epoch();
  server.run_epoch();
  int batched_epochs = 0;
  for (int i = 0; i < BatchingChoice::kExploitEpochs; ++i) batched_epochs += server.run_epoch();
  EXPECT_EQ(batched_epochs, 0);
}

TEST(BatchingChoiceTest, MeasuresBothAgainAndFollowsAChange) {
  FakeServer server{/*batched=*/1e-6, /*each=*/2e-6};
  for (int i = 0; i < 3 + BatchingChoice::kExploitEpochs; ++i) server.run_epoch();
  // The machine changes: batching now costs more. The running means cross after a few
  // measurements; from then on only the measuring epoch of each cycle is batched.
  server.batched = 4e-6;
  constexpr int kCycle = 2 + BatchingChoice::kExploitEpochs;
  for (int i = 0; i < 5 * kCycle; ++i) server.run_epoch();
  int batched_epochs = 0;
  for (int i = 0; i < kCycle; ++i) batched_epochs += server.run_epoch();
  EXPECT_EQ(batched_epochs, 1);
  EXPECT_GT(server.choice.batched_cost(), server.choice.each_cost());
}

}  // namespace
}  // namespace acc::rendezvous::detail
