#pragma once

// Removing a directory tree, for the checkpoint code.

#include <filesystem>

namespace acc::runtime::detail {

// Removes `path` and everything under it, as std::filesystem::remove_all would; a missing path
// is not an error. acc::remove_tree (acc/common/files.h) underneath, not remove_all: a PyTorch
// wheel's libtorch.so exports a std::filesystem of its own, whose remove_all crashes (PyTorch
// 2.11, seen on the GPU machine). Throws acc::ConfigError naming the path when something cannot
// be removed.
void remove_tree(const std::filesystem::path& path);

}  // namespace acc::runtime::detail
