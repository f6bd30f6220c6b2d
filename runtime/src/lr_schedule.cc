// The learning-rate schedules and the Trainer's option parsers: pure functions.

#include <algorithm>
#include <cmath>

#include "acc/common/error.h"
#include "acc/runtime/trainer.h"

namespace acc {

IntervalStrategy parse_interval_strategy(const std::string& value, const std::string& what) {
  if (value == "no") return IntervalStrategy::kNo;
  if (value == "steps") return IntervalStrategy::kSteps;
  if (value == "epoch") return IntervalStrategy::kEpoch;
  throw ConfigError(
      detail::concat(what, " '", value, "' is not one of no, steps, epoch (IntervalStrategy)"));
}

SchedulerType parse_scheduler_type(const std::string& value) {
  if (value == "constant") return SchedulerType::kConstant;
  if (value == "constant_with_warmup") return SchedulerType::kConstantWithWarmup;
  if (value == "linear") return SchedulerType::kLinear;
  if (value == "cosine") return SchedulerType::kCosine;
  throw ConfigError(detail::concat("lr_scheduler_type '", value,
                                   "' is not one of constant, constant_with_warmup, linear, "
                                   "cosine"));
}

// transformers' optimization.py: _get_constant_lambda,
// _get_constant_schedule_with_warmup_lr_lambda, _get_linear_schedule_with_warmup_lr_lambda,
// _get_cosine_schedule_with_warmup_lr_lambda (num_cycles 0.5).
double lr_factor(SchedulerType type, int64_t step, int64_t warmup_steps, int64_t total_steps) {
  if (type == SchedulerType::kConstant) return 1.0;
  if (step < warmup_steps)
    return static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup_steps));
  if (type == SchedulerType::kConstantWithWarmup) return 1.0;
  const double remaining = static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  if (type == SchedulerType::kLinear)
    return std::max(0.0, static_cast<double>(total_steps - step) / remaining);
  const double progress = static_cast<double>(step - warmup_steps) / remaining;
  return std::max(0.0, 0.5 * (1.0 + std::cos(std::acos(-1.0) * progress)));
}

}  // namespace acc
