#pragma once

// Everything a training program needs from libacc.

#include "acc/runtime/accelerator.h"    // IWYU pragma: export
#include "acc/runtime/batch_sampler.h"  // IWYU pragma: export
#include "acc/runtime/data_loader.h"    // IWYU pragma: export
#include "acc/runtime/trainer.h"        // IWYU pragma: export
#include "acc/runtime/worker_env.h"     // IWYU pragma: export
