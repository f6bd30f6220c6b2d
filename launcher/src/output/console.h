#pragma once

// Writing to the console and to log files from the agent's single thread.

#include <string>
#include <string_view>

namespace acc::launcher {

// Writes all of `data` to `fd`, retrying short writes, EINTR and EAGAIN (a non-blocking
// terminal). Gives up silently when the reader is gone (EPIPE): the job goes on.
void write_all(int fd, std::string_view data);

// `text` without a terminal's control sequences (colours, cursor moves, titles: ESC [ ... ,
// ESC ] ... BEL or ESC \, two-byte ESC sequences), as a log file should hold it.
std::string without_terminal_codes(std::string_view text);

// `arg` quoted for a POSIX shell when it needs quoting.
std::string quote_for_shell(const std::string& arg);

}  // namespace acc::launcher
