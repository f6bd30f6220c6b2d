#pragma once

// Stand-in for the header Debian's libtorch-dev omits (the PyTorch wheel ships it). It is on the
// include path only when the real one is missing (runtime/CMakeLists.txt). c10d/reducer.hpp
// needs exactly these two names from it: a shared pointer type to the distributed autograd
// context, which it only stores, and GradCallback, whose type reducer.hpp static_asserts.

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>

namespace torch {
namespace distributed {
namespace autograd {

class DistAutogradContext {
 public:
  using GradCallback = std::function<bool(at::Tensor&)>;
};

using ContextPtr = std::shared_ptr<DistAutogradContext>;

}  // namespace autograd
}  // namespace distributed
}  // namespace torch
