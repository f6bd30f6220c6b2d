// The prompters behind `acc-launch config`: a terminal menu in raw mode (arrow keys, digit keys,
// Enter, as Accelerate's BulletMenu), and numbered menus over plain lines for pipes.

#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "acc/common/error.h"
#include "acc/config/questionnaire.h"

namespace acc::config {
namespace {

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Reads one byte; false at end of input.
bool read_byte(int fd, char& c) {
  while (true) {
    const ssize_t n = ::read(fd, &c, 1);
    if (n == 1) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

[[noreturn]] void input_ended() {
  throw ConfigError("the input ended before every question was answered; nothing was written");
}

class LinePrompter : public Prompter {
 public:
  LinePrompter(int in, int out) : in_(in), out_(out) {}

  std::string ask(const std::string& prompt) override {
    write_all(out_, prompt);
    return read_line();
  }

  int choose(const std::string& prompt, const std::vector<std::string>& options,
             int default_index) override {
    write_all(out_, prompt + "\n");
    for (size_t i = 0; i < options.size(); ++i)
      write_all(out_, "    " + std::to_string(i) + ") " + options[i] + "\n");
    for (int attempt = 1;; ++attempt) {
      write_all(out_, "Enter a number or a choice [" + std::to_string(default_index) + "]: ");
      const std::string answer = read_line();
      if (answer.empty()) return default_index;
      for (size_t i = 0; i < options.size(); ++i)
        if (answer == std::to_string(i) || answer == options[i]) return static_cast<int>(i);
      if (attempt == kMaxInvalidAnswers) give_up(prompt);
      write_all(out_, "Please enter a number from 0 to " + std::to_string(options.size() - 1) +
                          " or one of the choices.\n");
    }
  }

  void say(const std::string& line) override { write_all(out_, line + "\n"); }

 private:
  std::string read_line() {
    std::string line;
    char c;
    while (true) {
      if (!read_byte(in_, c)) {
        if (line.empty()) input_ended();
        break;
      }
      if (c == '\n') break;
      if (c != '\r') line += c;
    }
    // Echo what a pipe answered, so a transcript reads as a dialogue.
    write_all(out_, line + "\n");
    return line;
  }

  int in_;
  int out_;
};

// Raw mode for the time of one menu; restores the terminal on every exit path.
class RawMode {
 public:
  explicit RawMode(int fd) : fd_(fd) {
    ok_ = ::tcgetattr(fd_, &saved_) == 0;
    if (!ok_) return;
    termios raw = saved_;
    // ISIG off too: Ctrl-C arrives as a key, so the terminal is restored before exiting.
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO | ISIG);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    ::tcsetattr(fd_, TCSANOW, &raw);
  }
  ~RawMode() {
    if (ok_) ::tcsetattr(fd_, TCSANOW, &saved_);
  }
  RawMode(const RawMode&) = delete;
  RawMode& operator=(const RawMode&) = delete;

 private:
  int fd_;
  bool ok_ = false;
  termios saved_{};
};

class TerminalPrompter : public Prompter {
 public:
  TerminalPrompter(int in, int out) : in_(in), out_(out) {}

  std::string ask(const std::string& prompt) override {
    write_all(out_, prompt);
    std::string line;
    char c;
    while (true) {
      if (!read_byte(in_, c)) {
        if (line.empty()) input_ended();
        break;
      }
      if (c == '\n' || c == '\r') break;
      line += c;
    }
    return line;
  }

  int choose(const std::string& prompt, const std::vector<std::string>& options,
             int default_index) override {
    // Raw mode first: keys typed as soon as the menu shows are read as keys, not as a line.
    RawMode raw(in_);
    write_all(out_, "\n" + prompt + "\n");
    write_all(out_,
              "Please select a choice using the arrow or number keys, and selecting with enter\n");
    int position = default_index;
    draw(options, position, false);
    write_all(out_, "\x1b[?25l");  // hide the cursor while the menu is up
    while (true) {
      char c;
      if (!read_byte(in_, c)) {
        write_all(out_, "\x1b[?25h");
        input_ended();
      }
      if (c == '\r' || c == '\n') break;
      if (c == 3) {  // Ctrl-C
        write_all(out_, "\x1b[?25h\n");
        throw ConfigError("interrupted; nothing was written");
      }
      if (c >= '0' && c <= '9') {
        const int index = c - '0';
        if (index < static_cast<int>(options.size())) position = index;
      } else if (c == '\x1b') {
        char bracket, code;
        if (!read_byte(in_, bracket) || !read_byte(in_, code)) continue;
        if (bracket == '[' && code == 'A' && position > 0) --position;
        if (bracket == '[' && code == 'B' && position + 1 < static_cast<int>(options.size()))
          ++position;
      } else if (c == 'k' && position > 0) {
        --position;
      } else if (c == 'j' && position + 1 < static_cast<int>(options.size())) {
        ++position;
      }
      draw(options, position, true);
    }
    // Replace the menu by the choice, as Accelerate does.
    write_all(out_, "\x1b[" + std::to_string(options.size()) + "A\x1b[J\x1b[32m" +
                        options[position] + "\x1b[0m\n\x1b[?25h");
    return position;
  }

  void say(const std::string& line) override { write_all(out_, line + "\n"); }

 private:
  void draw(const std::vector<std::string>& options, int position, bool redraw) {
    std::string out;
    if (redraw) out += "\x1b[" + std::to_string(options.size()) + "A";
    for (size_t i = 0; i < options.size(); ++i) {
      out += "\r\x1b[2K";
      out += static_cast<int>(i) == position ? " \xe2\x9e\x94  \x1b[32m" + options[i] + "\x1b[0m"
                                             : "    " + options[i];
      out += "\n";
    }
    write_all(out_, out);
  }

  int in_;
  int out_;
};

}  // namespace

void give_up(const std::string& prompt) {
  // The prompt as one line, without the trailing ": " of a question.
  std::string question = prompt;
  std::replace(question.begin(), question.end(), '\n', ' ');
  while (!question.empty() && (question.back() == ' ' || question.back() == ':'))
    question.pop_back();
  throw ConfigError("no valid answer in " + std::to_string(kMaxInvalidAnswers) + " tries to \"" +
                    question + "\"; nothing was written (run acc-launch config again)");
}

std::unique_ptr<Prompter> make_prompter(int in_fd, int out_fd) {
  if (::isatty(in_fd)) return std::make_unique<TerminalPrompter>(in_fd, out_fd);
  return std::make_unique<LinePrompter>(in_fd, out_fd);
}

}  // namespace acc::config
