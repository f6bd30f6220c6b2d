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

}  // namespace acc::launcher
