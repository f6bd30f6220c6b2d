#include "hangs/file_timer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "acc/common/error.h"

namespace acc::launcher {

std::optional<FileTimerRequest> parse_file_timer_request(std::string_view line) {
  // Without exceptions: a bad line is dropped, as torchrun's agent drops one it cannot parse.
  const nlohmann::json root = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!root.is_object()) return std::nullopt;  // also a line that is not JSON (discarded)
  const auto pid = root.find("pid");
  const auto scope_id = root.find("scope_id");
  const auto expiration_time = root.find("expiration_time");
  const auto signal = root.find("signal");
  if (pid == root.end() || !pid->is_number_integer() || scope_id == root.end() ||
      !scope_id->is_string() || expiration_time == root.end() || !expiration_time->is_number() ||
      (signal != root.end() && !signal->is_number_integer()))
    return std::nullopt;
  FileTimerRequest request;
  request.pid = pid->get<int>();
  request.scope_id = scope_id->get<std::string>();
  request.expiration_time = expiration_time->get<double>();
  request.signal = signal != root.end() ? signal->get<int>() : 0;
  if (request.pid <= 0) return std::nullopt;
  return request;
}

void FileTimerRegions::apply(const FileTimerRequest& request) {
  const auto key = std::make_pair(request.pid, request.scope_id);
  if (request.expiration_time < 0)
    regions_.erase(key);
  else
    regions_[key] = request;
}

std::vector<FileTimerRegions::Expiry> FileTimerRegions::take_expired(double now) {
  std::map<int, std::vector<const FileTimerRequest*>> by_pid;
  for (const auto& [key, request] : regions_)
    if (request.expiration_time <= now) by_pid[key.first].push_back(&request);
  std::vector<Expiry> expired;
  for (auto& [pid, requests] : by_pid) {
    std::sort(requests.begin(), requests.end(),
              [](const auto* a, const auto* b) { return a->expiration_time < b->expiration_time; });
    // torchrun's choice: the earliest expired region that asked for a signal.
    auto with_signal =
        std::find_if(requests.begin(), requests.end(), [](const auto* r) { return r->signal > 0; });
    const FileTimerRequest& chosen =
        with_signal == requests.end() ? *requests.front() : **with_signal;
    expired.push_back({pid, chosen.scope_id, chosen.expiration_time,
                       with_signal == requests.end() ? 0 : chosen.signal});
  }
  std::erase_if(regions_, [&](const auto& entry) { return by_pid.count(entry.first.first) > 0; });
  return expired;
}

std::optional<double> FileTimerRegions::next_expiry() const {
  std::optional<double> next;
  for (const auto& [key, request] : regions_)
    next = std::min(next.value_or(request.expiration_time), request.expiration_time);
  return next;
}

FileTimer::FileTimer(std::string path) : path_(std::move(path)) {
  ::unlink(path_.c_str());
  ACC_CHECK(::mkfifo(path_.c_str(), 0600) == 0, SystemError, "cannot make the timer pipe ", path_,
            " (TORCHELASTIC_TIMER_FILE): ", std::strerror(errno));
  read_end_.reset(::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  ACC_CHECK(read_end_, SystemError, "cannot open the timer pipe ", path_, ": ",
            std::strerror(errno));
  write_end_.reset(::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  ACC_CHECK(write_end_, SystemError, "cannot open the timer pipe ", path_, ": ",
            std::strerror(errno));
}

FileTimer::~FileTimer() {
  ::unlink(path_.c_str());
}

void FileTimer::read_requests() {
  char buffer[16 * 1024];
  for (;;) {
    const ssize_t got = ::read(read_end_.get(), buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    partial_.append(buffer, static_cast<size_t>(got));
  }
  size_t start = 0;
  for (size_t newline; (newline = partial_.find('\n', start)) != std::string::npos;
       start = newline + 1) {
    if (auto request =
            parse_file_timer_request(std::string_view(partial_).substr(start, newline - start)))
      regions_.apply(*request);
  }
  partial_.erase(0, start);
  // A client writes whole lines of at most PIPE_BUF bytes: a longer remainder is not a request.
  if (partial_.size() > 64 * 1024) partial_.clear();
}

}  // namespace acc::launcher
