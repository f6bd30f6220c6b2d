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
  const auto soon = Backoff::Clock::now() + milliseconds(30);
  EXPECT_LE(backoff.next(soon), milliseconds(30));
  EXPECT_EQ(backoff.next(Backoff::Clock::now() - milliseconds(5)), milliseconds(0));
  const auto later = Backoff::Clock::now() + std::chrono::hours(1);
  EXPECT_EQ(backoff.next(later), milliseconds(1000));
}

TEST(BackoffTest, ALongestBelowFirstIsFirst) {
  Backoff backoff(milliseconds(20), milliseconds(5));
  EXPECT_EQ(backoff.next(), milliseconds(20));
  EXPECT_EQ(backoff.next(), milliseconds(20));
}

}  // namespace
}  // namespace acc
