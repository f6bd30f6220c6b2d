#include "output/console.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace acc::launcher {

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t wrote = ::write(fd, data.data(), data.size());
    if (wrote >= 0) {
      data.remove_prefix(static_cast<size_t>(wrote));
    } else if (errno == EAGAIN) {
      pollfd writable{fd, POLLOUT, 0};
      ::poll(&writable, 1, -1);
    } else if (errno != EINTR) {
      return;
    }
  }
}

std::string without_terminal_codes(std::string_view text) {
  constexpr char kEscape = '\x1b';
  std::string plain;
  plain.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != kEscape) {
      plain += text[i++];
      continue;
    }
    if (++i >= text.size()) break;
    const char kind = text[i++];
    if (kind == '[') {  // CSI: parameters and intermediates, then one final byte @ to ~
      while (i < text.size() && (text[i] < '@' || text[i] > '~')) ++i;
      ++i;
    } else if (kind == ']') {  // OSC: up to BEL or ESC backslash
      while (i < text.size() && text[i] != '\a' && text[i] != kEscape) ++i;
      i += i < text.size() && text[i] == kEscape ? 2 : 1;
    }  // any other: a two-byte sequence, already passed
  }
  return plain;
}

std::string quote_for_shell(const std::string& arg) {
  const bool plain = !arg.empty() && arg.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_-./=:,+@%") == std::string::npos;
  if (plain) return arg;
  std::string quoted = "'";
  for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace acc::launcher
