#pragma once

// Everything a training program needs from libacc, the error types it throws included
// (acc::Error and below it acc::ConfigError, acc::BackendError, acc::TimeoutError, ...).

#include "acc/common/error.h"           // IWYU pragma: export
#include "acc/runtime/accelerator.h"    // IWYU pragma: export
#include "acc/runtime/batch_sampler.h"  // IWYU pragma: export
#include "acc/runtime/data_loader.h"    // IWYU pragma: export
#include "acc/runtime/trainer.h"        // IWYU pragma: export
#include "acc/runtime/worker_env.h"     // IWYU pragma: export
