#include "agent/terminal_input.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "acc/common/error.h"

namespace acc::launcher {

TerminalInput::TerminalInput(Os& os, int terminal, std::function<void(int rank)> before_answer)
    : os_(os), terminal_(terminal), before_answer_(std::move(before_answer)) {}

UniqueFd TerminalInput::add_worker(int rank) {
  int fds[2];
  ACC_CHECK(::pipe2(fds, O_CLOEXEC) == 0, SystemError,
            "cannot create a pipe: ", std::strerror(errno));
  UniqueFd read_end(fds[0]);
  Reader reader{rank, -1, UniqueFd(fds[1])};
  // A worker that does not read never blocks the launcher: what does not fit is dropped.
  ::fcntl(reader.pipe.get(), F_SETFL, O_WRONLY | O_NONBLOCK);
  const auto at = std::lower_bound(readers_.begin(), readers_.end(), rank,
                                   [](const Reader& r, int value) { return r.rank < value; });
  readers_.insert(at, std::move(reader));
  return read_end;
}

void TerminalInput::started(int rank, pid_t pid) {
  for (Reader& reader : readers_)
    if (reader.rank == rank) reader.pid = pid;
}

int TerminalInput::fd_to_watch() {
  foreground_ = os_.in_foreground(terminal_);
  return !ended_ && foreground_ ? terminal_ : -1;
}

void TerminalInput::on_readable() {
  if (!os_.in_foreground(terminal_)) return;
  char buffer[4096];
  const ssize_t got = ::read(terminal_, buffer, sizeof(buffer));
  if (got == 0) ended_ = true;
  if (got <= 0) return;
  held_.append(buffer, static_cast<size_t>(got));
  look();
}

std::optional<Os::Clock::time_point> TerminalInput::next_look() const {
  if (!held_.empty()) return os_.now() + kLookAgain;
  if (!ended_ && !foreground_) return os_.now() + kLookAgain * 2;
  return std::nullopt;
}

void TerminalInput::look() {
  if (held_.empty()) return;
  for (Reader& reader : readers_) {
    if (reader.pid <= 0 || !reader.pipe || !waits_on_stdin(reader.pid)) continue;
    if (before_answer_) before_answer_(reader.rank);
    // Up to the end of the first line: the next line goes to whoever waits then.
    const size_t end = held_.find('\n');
    const size_t size = end == std::string::npos ? held_.size() : end + 1;
    const ssize_t wrote = ::write(reader.pipe.get(), held_.data(), size);
    if (wrote < 0 && errno == EPIPE) reader.pipe.reset();  // it closed its stdin
    if (wrote > 0) held_.erase(0, static_cast<size_t>(wrote));
    return;
  }
}

bool TerminalInput::waits_on_stdin(pid_t pid) {
  // "<syscall number> <first argument in hex> ...": read(2) of descriptor 0.
  const std::string reading = std::to_string(SYS_read) + " 0x0 ";
  for (int tid : os_.proc().threads(pid))
    if (os_.proc().thread_file(pid, tid, "syscall").starts_with(reading)) return true;
  return false;
}

}  // namespace acc::launcher
