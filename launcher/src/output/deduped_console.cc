#include "output/deduped_console.h"

#include <unistd.h>

#include <algorithm>

#include "output/console.h"

namespace acc::launcher {

DedupedConsole::DedupedConsole(std::chrono::milliseconds window, const LineDedup::PrefixFn& prefix)
    : out_(window, prefix), err_(window, prefix) {}

LineDedup* DedupedConsole::for_console(int console_fd) {
  return console_fd == STDOUT_FILENO ? &out_ : &err_;
}

std::optional<LineDedup::Clock::time_point> DedupedConsole::next_due() const {
  const auto out = out_.next_due();
  const auto err = err_.next_due();
  if (out && err) return std::min(*out, *err);
  return out ? out : err;
}

void DedupedConsole::write(bool everything, LineDedup::Clock::time_point now) {
  for (int console : {STDOUT_FILENO, STDERR_FILENO}) {
    LineDedup& dedup = *for_console(console);
    const std::string text = everything ? dedup.take_all() : dedup.take_due(now);
    if (!text.empty()) write_all(console, text);
  }
}

}  // namespace acc::launcher
