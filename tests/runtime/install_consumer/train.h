#pragma once

#include <torch/types.h>

// In a worker: trains a Linear(4, 1) on this rank's shard of eight samples and returns its
// parameters, then the world size and the steps it took. With `plain_backward` it calls
// loss.backward() instead of acc.backward(loss), which libacc refuses at the first step.
torch::Tensor train(bool plain_backward);

// The model every rank starts from (rank 0's is broadcast anyway), and its parameters flat.
torch::Tensor start_parameters();
