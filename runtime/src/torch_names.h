#pragma once

// A C++ worker's side of acc/common/torch_env.h: acc-launch cannot tell which LibTorch a program
// links, so it gives such a worker every name of PyTorch's NCCL and Flight Recorder variables;
// libacc knows its LibTorch's version and drops, before it makes a process group, each name that
// version does not read while another name of the same setting is set (PyTorch >= 2.2 warns on
// every rank about the older name otherwise).

#include <string>
#include <vector>

namespace acc::runtime::detail {

// Unsets those names in this process's environment and returns them. Call it before any thread
// reads the environment concurrently (the Accelerator does, before its process group exists).
std::vector<std::string> drop_names_libtorch_ignores();

}  // namespace acc::runtime::detail
