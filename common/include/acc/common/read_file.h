#pragma once

// The whole text of a small file (a /proc or /sys entry, a config file), read with plain system
// calls: no stream, locale or buffer set up for one read. A launch reads dozens of them on its
// way to the workers' start.

#include <string>

namespace acc {

// The file's bytes; empty where it cannot be opened or read (as an absent /proc entry is).
std::string read_file(const std::string& path);

}  // namespace acc
