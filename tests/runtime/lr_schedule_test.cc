#include <gtest/gtest.h>

#include "acc/common/error.h"
#include "acc/runtime/trainer.h"

namespace {

using acc::lr_factor;
using acc::SchedulerType;

TEST(LrScheduleTest, LinearRampsUpOverTheWarmupThenFallsToZeroAtTheLastStep) {
  EXPECT_DOUBLE_EQ(lr_factor(SchedulerType::kLinear, 0, 4, 12), 0.0);
  EXPECT_DOUBLE_EQ(lr_factor(SchedulerType::kLinear, 2, 4, 12), 0.5);
  EXPECT_DOUBLE_EQ(lr_factor(SchedulerType::kLinear, 4, 4, 12), 1.0);
  EXPECT_DOUBLE_EQ(lr_factor(SchedulerType::kLinear, 8, 4, 12), 0.5);
  EXPECT_DOUBLE_EQ(lr_factor(SchedulerType::kLinear, 12, 4, 12), 0.0);
  EXPECT_DOUBLE_EQ(lr_factor(SchedulerType::kLinear, 20, 4, 12), 0.0) << "never negative";
  EXPECT_DOUBLE_EQ(lr_factor(SchedulerType::kLinear, 0, 0, 10), 1.0) << "no warmup";
}

TEST(LrScheduleTest, CosineFollowsHalfACosineAfterTheWarmup) {
  EXPECT_DOUBLE_EQ(lr_factor(SchedulerType::kCosine, 1, 2, 10), 0.5);
  EXPECT_DOUBLE_EQ(lr_factor(SchedulerType::kCosine, 2, 2, 10), 1.0);
  EXPECT_NEAR(lr_factor(SchedulerType::kCosine, 6, 2, 10), 0.5, 1e-12);
  EXPECT_NEAR(lr_factor(SchedulerType::kCosine, 10, 2, 10), 0.0, 1e-12);
}

TEST(LrScheduleTest, ConstantSchedulesIgnoreOrOnlyUseTheWarmup) {
  EXPECT_DOUBLE_EQ(lr_factor(SchedulerType::kConstant, 0, 5, 10), 1.0);
  EXPECT_DOUBLE_EQ(lr_factor(SchedulerType::kConstantWithWarmup, 1, 4, 10), 0.25);
  EXPECT_DOUBLE_EQ(lr_factor(SchedulerType::kConstantWithWarmup, 9, 4, 10), 1.0);
}

TEST(LrScheduleTest, NamesParseAsTransformersSpellsThemAndOthersAreOneClearError) {
  EXPECT_EQ(acc::parse_scheduler_type("constant_with_warmup"), SchedulerType::kConstantWithWarmup);
  EXPECT_EQ(acc::parse_interval_strategy("epoch", "eval_strategy"), acc::IntervalStrategy::kEpoch);
  try {
    acc::parse_interval_strategy("sometimes", "save_strategy");
    FAIL() << "accepted a bad strategy";
  } catch (const acc::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("save_strategy 'sometimes'"), std::string::npos);
  }
  EXPECT_THROW(acc::parse_scheduler_type("step"), acc::ConfigError);
}

}  // namespace
