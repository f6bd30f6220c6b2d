#pragma once

// The variables `accelerate launch` sets for its workers (reference/accelerate.md §3.6), computed
// from the merged options. Pure.

#include "acc/launcher/cli/options.h"
#include "acc/launcher/plan/plan.h"

namespace acc::launcher {

EnvList accelerate_env(const LaunchOptions& options);

}  // namespace acc::launcher
