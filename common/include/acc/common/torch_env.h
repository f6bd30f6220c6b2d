#pragma once

// The names under which PyTorch versions read the settings of their NCCL process group and
// Flight Recorder that acc-launch sets for its workers. PyTorch renamed several of them and warns
// on every rank when it finds an old name next to the new one ("Environment variable
// NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead"), so a
// worker should get only the names its own PyTorch reads. Pure; shared by the launcher (which
// finds a Python worker's PyTorch, host/python_torch.h) and libacc (which knows its LibTorch).
//
//   name                              read by PyTorch   setting
//   NCCL_ASYNC_ERROR_HANDLING         < 2.2             async error handling
//   TORCH_NCCL_ASYNC_ERROR_HANDLING   >= 2.2            async error handling
//   TORCH_NCCL_TRACE_BUFFER_SIZE      2.2 - 2.6         Flight Recorder entries
//   TORCH_FR_BUFFER_SIZE              >= 2.7            Flight Recorder entries
//   TORCH_NCCL_DEBUG_INFO_TEMP_FILE   2.2 - 2.6         Flight Recorder dump file prefix
//   TORCH_FR_DUMP_TEMP_FILE           >= 2.7            Flight Recorder dump file prefix
//   TORCH_NCCL_DUMP_ON_TIMEOUT        >= 2.2
//   TORCH_NCCL_DEBUG_INFO_PIPE_FILE   >= 2.2
//
// Later versions still read an older name of a setting, with the warning; "read by" above is
// where a name is read without one.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace acc::torch_env {

struct Version {
  int major = 0;
  int minor = 0;
  // Spelled out: installed headers compile as C++17 too (no defaulted comparison).
  friend bool operator==(const Version& a, const Version& b) {
    return a.major == b.major && a.minor == b.minor;
  }
};

// "2.11.0+cu130", "1.13.0a0", "2.7" -> {2, 11}, {1, 13}, {2, 7}; nullopt for anything else.
std::optional<Version> parse_version(std::string_view text);

// The version in the text of a torch/version.py (its `__version__ = '...'` line).
std::optional<Version> parse_version_py(std::string_view text);

// Whether PyTorch `version` reads `name` (a name of the table above) without a warning;
// nullopt (a PyTorch the caller could not tell) reads every name of the table. False for a name
// outside the table.
bool reads(const std::string& name, const std::optional<Version>& version);

// Every name of the setting `name` is a name of (itself included); {name} outside the table.
std::vector<std::string> names_of_setting(const std::string& name);

// Whether `environment` sets the setting of `name` under any of its names: the user's value of
// an old name is kept, not shadowed by a default under the new one.
bool is_set(const std::map<std::string, std::string>& environment, const std::string& name);

// The names of `environment` that PyTorch `version` does not read while a name of the same
// setting that it reads is set too: what a worker of that version can drop before it makes a
// process group, so that PyTorch does not warn.
std::vector<std::string> superfluous(const std::map<std::string, std::string>& environment,
                                     const Version& version);

}  // namespace acc::torch_env
