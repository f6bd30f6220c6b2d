#pragma once

// Small file-system helpers made of plain system calls, for the launch's path to its workers and
// back: no stream, locale or buffer set up for one read, no stat of what is about to be removed.

#include <string>
#include <string_view>
#include <vector>

namespace acc {

// The whole text of a small file (a /proc or /sys entry); empty where it cannot be opened or
// read (as an absent /proc entry is).
std::string read_file(const std::string& path);

// Writes `text` to `path`, created or truncated (mode 0644 less the umask). Returns 0, or the
// errno of the step that failed.
int write_file(const std::string& path, std::string_view text);

// The names in the directory `path` that start with `prefix`, "." and ".." left out; none where
// it cannot be read. Plain readdir: a /dev/shm of thousands of files costs about 2 ms here, most
// of it the reading.
std::vector<std::string> names_in(const std::string& path, std::string_view prefix = "");

// Removes `path` and, for a directory, everything under it, without following symbolic links
// (a link is removed, not what it points to). True when nothing is left at `path`; a tree that
// is not there is no error. False with errno from the first entry that could not be removed.
// Never throws. Safe in a LibTorch program (it does not use std::filesystem).
bool remove_tree(const std::string& path);

}  // namespace acc
