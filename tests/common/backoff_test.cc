#include "acc/common/backoff.h"

#include <gtest/gtest.h>

namespace acc {
namespace {

using std::chrono::milliseconds;

TEST(BackoffTest, DoublesFromFirstUpToLongest) {
  Backoff backoff(milliseconds(50), milliseconds(300));
  EXPECT_EQ(backoff.next(), milliseconds(50));
  EXPECT_EQ(backoff.next(), milliseconds(100));
  EXPECT_EQ(backoff.next(), milliseconds(200));
  EXPECT_EQ(backoff.next(), milliseconds(300));
  EXPECT_EQ(backoff.next(), milliseconds(300));
  backoff.reset();
  EXPECT_EQ(backoff.next(), milliseconds(50));
}

TEST(BackoffTest, NeverPausesPastTheDeadline) {
  Backoff backoff(milliseconds(1000), milliseconds(1000));
  const auto soon = Clock::machine().now() + milliseconds(30);
  EXPECT_LE(backoff.next(soon, Clock::machine()), milliseconds(30));
  EXPECT_EQ(backoff.next(Clock::machine().now() - milliseconds(5), Clock::machine()),
            milliseconds(0));
  const auto later = Clock::machine().now() + std::chrono::hours(1);
  EXPECT_EQ(backoff.next(later, Clock::machine()), milliseconds(1000));
}

TEST(BackoffTest, ALongestBelowFirstIsFirst) {
  Backoff backoff(milliseconds(20), milliseconds(5));
  EXPECT_EQ(backoff.next(), milliseconds(20));
  EXPECT_EQ(backoff.next(), milliseconds(20));
}

}  // namespace
}  // namespace acc
