#include "output/timeline.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "acc/rendezvous/clock.h"
#include "output/console.h"

namespace acc::launcher::timeline {
namespace {

using Clock = rendezvous::Clock;

struct Mark {
  const char* step;
  Clock::time_point at;
};

std::array<Mark, 32> marks;
std::size_t count = 0;

}  // namespace

void mark(const char* step) {
  if (count < marks.size()) marks[count++] = {step, Clock::steady().now()};
}

void report() {
  const char* asked = std::getenv("ACC_TIMELINE");
  if (asked == nullptr || *asked == '\0' || std::strcmp(asked, "0") == 0 || count < 2) return;
  std::string line = "acc-launch: timeline (ms since " + std::string(marks[0].step) + "):";
  for (std::size_t i = 1; i < count; ++i) {
    const double ms = std::chrono::duration<double, std::milli>(marks[i].at - marks[0].at).count();
    line += fmt::format("{} {} {:.2f}", i > 1 ? "," : "", marks[i].step, ms);
  }
  write_all(STDERR_FILENO, line + "\n");
}

}  // namespace acc::launcher::timeline
