#include "acc/common/random.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>

namespace acc {
namespace {

// 64 draws of 64 bits: a repeat (or a constant) would mean the kernel's generator is not what is
// read; its chance by accident is about 2^-52.
TEST(RandomTest, DrawsAreDistinct) {
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 64; ++i) seen.insert(random_u64());
  EXPECT_EQ(seen.size(), 64u);
}

// Every bit position is set in some draw and clear in another: the whole width is random, not
// a 32-bit value widened.
TEST(RandomTest, EveryBitVaries) {
  std::uint64_t ones = 0;
  std::uint64_t zeros = 0;
  for (int i = 0; i < 64; ++i) {
    const std::uint64_t value = random_u64();
    ones |= value;
    zeros |= ~value;
  }
  EXPECT_EQ(ones, ~std::uint64_t{0});
  EXPECT_EQ(zeros, ~std::uint64_t{0});
}

}  // namespace
}  // namespace acc
