#include "output/worker_stream.h"

#include <unistd.h>

#include <cerrno>

#include "output/console.h"

namespace acc::launcher {

void Stream::on_line(std::string_view line) {
  if (on_progress) on_progress();
  if (file_fd)
    write_all(file_fd.get(), terminal ? without_terminal_codes(line) : std::string(line));
  if (console_fd >= 0 && dedup) {
    dedup->add(local_rank, line, clock->now());
  } else if (console_fd >= 0) {
    // PyTorch >= 2 prefixes an uncaught exception's lines with "[rank<N>]: " itself (its
    // excepthook, from init_process_group on): a line that starts with our prefix already gets
    // no second one.
    if ((prefixed_already.empty() || !line.starts_with(prefixed_already)) &&
        !line.starts_with(prefix))
      console_batch += prefix;
    console_batch += line;
    if (line.back() != '\n' && line.back() != '\r') console_batch += '\n';
  }
  if (tail) {
    std::string_view text = line;
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
    tail->emplace_back(text);
    if (tail->size() > kTailLines) tail->pop_front();
  }
}

void Stream::show_partial() {
  partial_due.reset();
  const std::string start = splitter.take_pending();
  if (start.empty()) return;
  if (file_fd) write_all(file_fd.get(), without_terminal_codes(start));
  if (console_fd >= 0) write_all(console_fd, prefix + start);
}

void Stream::flush_console() {
  if (console_fd >= 0 && !console_batch.empty()) write_all(console_fd, console_batch);
  console_batch.clear();
}

Stream::Read Stream::read_some() {
  char buffer[64 * 1024];
  const ssize_t got = ::read(fd.get(), buffer, sizeof(buffer));
  if (got > 0) {
    splitter.feed(std::string_view(buffer, static_cast<size_t>(got)));
    flush_console();
    if (terminal && splitter.has_pending() && console_fd >= 0 && !dedup)
      partial_due = clock->now() + kPartialLineWait;
    else
      partial_due.reset();
    return Read::kData;
  }
  return got < 0 && (errno == EAGAIN || errno == EINTR) ? Read::kNothingYet : Read::kEnd;
}

void Stream::close_all() {
  if (fd) {
    while (read_some() == Read::kData) {
    }
    partial_due.reset();
    splitter.finish();
    flush_console();
    fd.reset();
  }
  file_fd.reset();
}

}  // namespace acc::launcher
