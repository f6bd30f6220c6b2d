#pragma once

// The worker's side of torchelastic's error file: what PyTorch's @record writes to
// $TORCHELASTIC_ERROR_FILE when a Python worker dies of an exception, so that the launcher's
// failure report shows the message, not only the stderr tail. libacc writes it for a C++ worker
// from acc::launch's worker and from a terminate handler that sees an uncaught exception.

#include <string>

namespace acc::runtime::detail {

// Writes {"message": "<message>"} to $TORCHELASTIC_ERROR_FILE (nothing when it is unset or
// empty). Best effort: never throws, blocks for one small file write.
void write_error_file(const std::string& message);

// "<type>: <what>" of the exception being handled (a c10::Error without its C++ backtrace), as
// Python's "RuntimeError: ..." names one; call it inside a catch block.
std::string describe_current_exception();

// Installs, once per process, a std::terminate handler that writes the error file for an
// uncaught exception and then calls the handler it replaced (the C++ runtime's prints the type
// and what() and aborts). libacc installs it when it is loaded and when an Accelerator is made;
// thread-safe, idempotent.
void install_terminate_handler();

}  // namespace acc::runtime::detail
