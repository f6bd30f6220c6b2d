#pragma once

// Reading the JSON that PyTorch's @record (or a C++ worker imitating it) writes to
// $TORCHELASTIC_ERROR_FILE:
//   {"message": {"message": "Type: msg", "extraInfo": {"py_callstack": "...", "timestamp": "..."}}}

#include <optional>
#include <string>

namespace acc::launcher {

struct WorkerError {
  std::string message;
  std::string traceback;
};

// Returns nothing when the file is absent or unreadable; never throws.
std::optional<WorkerError> read_error_file(const std::string& path);

// What torchrun's own @record does with the first failed worker's error file where torchrun
// itself runs with $TORCHELASTIC_ERROR_FILE (under TorchX, or another torchelastic agent): copies
// it to `to`, the message's errorCode set to the worker's `exit_code` (a signal's is -signal),
// so the scheduler above shows the worker's error. False where `from` is absent or not JSON, or
// `to` cannot be written; never throws.
bool pass_on_error_file(const std::string& from, const std::string& to, int exit_code);

}  // namespace acc::launcher
