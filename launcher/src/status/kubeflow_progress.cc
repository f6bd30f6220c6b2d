#include "status/kubeflow_progress.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

#include "acc/common/endpoint.h"
#include "acc/common/error.h"
#include "acc/common/files.h"
#include "acc/common/strings.h"
#include "acc/rendezvous/https_post.h"
#include "output/log.h"

namespace acc::launcher {
namespace {

using Clock = rendezvous::Clock;
using std::chrono::milliseconds;

constexpr char kServerName[] = "Kubeflow Trainer's status server";
// The variables' prefixes: Kubeflow Trainer v2.2's (pkg/runtime/framework/plugins/
// trainjobstatus), then the KEP's first draft's, which SDK and test code of that time read.
constexpr const char* kPrefixes[] = {"KUBEFLOW_TRAINER_SERVER_", "KUBEFLOW_TRAINER_STATUS_"};
constexpr char kIntervalVariable[] = "ACC_KUBEFLOW_PROGRESS_INTERVAL";
// How often the thread looks at the progress file, besides posting: the first step is seen
// within this, and the rate of steps measured from it.
constexpr milliseconds kLookEvery{1'000};

// The value of `suffix`'s variable ("URL") in its first spelling that is set, and that name.
std::pair<std::string, std::string> variable(const std::map<std::string, std::string>& environment,
                                             const std::string& suffix) {
  for (const char* prefix : kPrefixes) {
    const auto found = environment.find(prefix + suffix);
    if (found != environment.end() && !found->second.empty()) return {found->second, found->first};
  }
  return {"", std::string(kPrefixes[0]) + suffix};
}

// https://host[:port][/path[?query]] into the settings' address and target; a problem or "".
std::string split_url(KubeflowSettings& settings) {
  const std::string& url = settings.url;
  const std::string scheme = "https://";
  if (to_lower(url.substr(0, scheme.size())) != scheme)
    return settings.url_variable + "=" + url + ": not an https:// URL";
  const std::string rest = url.substr(scheme.size());
  const std::size_t path = rest.find_first_of("/?");
  const std::string authority = rest.substr(0, path);
  if (authority.find('@') != std::string::npos)
    return settings.url_variable + "=" + url + ": a URL with a user name is not supported";
  try {
    const Endpoint endpoint = parse_endpoint(authority, 443, settings.url_variable);
    settings.address = format_endpoint(endpoint.host, endpoint.port);
  } catch (const ConfigError& e) {
    return e.what();
  }
  settings.target = path == std::string::npos ? "/" : rest.substr(path);
  if (settings.target.front() == '?') settings.target.insert(0, "/");
  return "";
}

// ACC_KUBEFLOW_PROGRESS_INTERVAL's seconds (30 where unset); none with a problem.
std::optional<milliseconds> interval(const std::map<std::string, std::string>& environment,
                                     std::string& problem) {
  const auto set = environment.find(kIntervalVariable);
  if (set == environment.end() || set->second.empty()) return milliseconds(30'000);
  char* end = nullptr;
  const double seconds = std::strtod(set->second.c_str(), &end);
  if (end == set->second.c_str() || *end != '\0' || !(seconds >= 0) || seconds > 86'400) {
    problem = std::string(kIntervalVariable) + "=" + set->second +
              ": not a number of seconds (0-86400; 0 turns the posts off)";
    return std::nullopt;
  }
  if (seconds == 0) return milliseconds(0);
  return milliseconds(static_cast<long long>(std::max(seconds, 0.1) * 1000));
}

// The message of a refusal: metav1.Status's "message" where the body is one, else the body.
std::string refusal_message(const std::string& body) {
  const nlohmann::json status = nlohmann::json::parse(body, nullptr, false);
  if (status.is_object() && status.contains("message") && status["message"].is_string())
    return one_line(status["message"].get<std::string>(), 120);
  return one_line(body, 120);
}

std::string rfc3339(Clock::wall_time_point at) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(at);
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace

std::optional<KubeflowSettings> kubeflow_settings(
    const std::map<std::string, std::string>& environment, std::string& problem) {
  problem.clear();
  KubeflowSettings settings;
  std::tie(settings.url, settings.url_variable) = variable(environment, "URL");
  if (settings.url.empty()) return std::nullopt;
  const std::optional<milliseconds> every = interval(environment, problem);
  if (!every || every->count() == 0) return std::nullopt;
  settings.interval = *every;
  std::tie(settings.ca_file, settings.ca_variable) = variable(environment, "CA_CERT");
  std::tie(settings.token_file, settings.token_variable) = variable(environment, "TOKEN");
  problem = split_url(settings);
  if (!problem.empty()) return std::nullopt;
  return settings;
}

StepSample step_sample(const std::vector<progress_file::Snapshot>& files, Clock::time_point at) {
  StepSample sample;
  sample.at = at;
  for (const progress_file::Snapshot& file : files) {
    if (file.writer_pid == 0) continue;
    sample.step = file.step != 0 ? file.step : file.beats;
    sample.total = file.total_steps;
    sample.known = sample.step > 0;
    break;
  }
  return sample;
}

// --- ProgressEstimate ----------------------------------------------------------------------------

void ProgressEstimate::attempt_started(int restarts) {
  restarts_ = restarts;
  first_.reset();
}

void ProgressEstimate::add(const StepSample& sample) {
  if (!sample.known) return;
  if (!first_) first_ = sample;
  last_ = sample;
}

TrainerStatus ProgressEstimate::status(bool succeeded) const {
  TrainerStatus status;
  status.restarts = restarts_;
  if (last_) {
    status.step = last_->step;
    if (last_->total > 0) status.total = last_->total;
  }
  if (succeeded) {
    status.percent = 100;
    status.remaining_seconds = 0;
    return status;
  }
  if (!last_ || last_->total == 0) return status;
  const std::uint64_t step = last_->step, total = last_->total;
  if (step >= total) {
    status.percent = 100;
    status.remaining_seconds = 0;
    return status;
  }
  status.percent = static_cast<int>(static_cast<double>(step) * 100 / static_cast<double>(total));
  if (!first_ || step <= first_->step) return status;
  const double seconds = std::chrono::duration<double>(last_->at - first_->at).count();
  if (seconds > 0) {
    const double per_step = seconds / static_cast<double>(step - first_->step);
    const double remaining = std::ceil(per_step * static_cast<double>(total - step));
    // The field is an int32 in the TrainJob's status.
    status.remaining_seconds =
        static_cast<std::int64_t>(std::min(remaining, double{std::numeric_limits<int>::max()}));
  }
  return status;
}

std::string trainer_status_body(const TrainerStatus& status, Clock::wall_time_point at) {
  nlohmann::json trainer = nlohmann::json::object();
  if (status.percent) trainer["progressPercentage"] = std::clamp(*status.percent, 0, 100);
  if (status.remaining_seconds)
    trainer["estimatedRemainingSeconds"] = std::max<std::int64_t>(0, *status.remaining_seconds);
  nlohmann::json metrics = nlohmann::json::array();
  if (status.step)
    metrics.push_back({{"name", "current_step"}, {"value", std::to_string(*status.step)}});
  if (status.total)
    metrics.push_back({{"name", "total_steps"}, {"value", std::to_string(*status.total)}});
  metrics.push_back({{"name", "restarts"}, {"value", std::to_string(status.restarts)}});
  trainer["metrics"] = std::move(metrics);
  trainer["lastUpdatedTime"] = rfc3339(at);
  return nlohmann::json{{"trainerStatus", std::move(trainer)}}.dump();
}

// --- KubeflowProgress ----------------------------------------------------------------------------

struct KubeflowProgress::Attempt {
  std::vector<std::unique_ptr<progress_file::Reader>> files;  // null: cannot be read
  int restarts = 0;

  std::vector<progress_file::Snapshot> look() const {
    std::vector<progress_file::Snapshot> snapshots;
    for (const auto& file : files)
      snapshots.push_back(file ? file->snapshot(0) : progress_file::Snapshot{});
    return snapshots;
  }
};

// What the thread saw of the agent's news at one wake.
struct KubeflowProgress::Look {
  std::shared_ptr<const Attempt> attempt;
  bool node_zero = false;
  std::uint64_t attempts = 0;
  std::optional<bool> ended;
  bool stopping = false;
};

KubeflowProgress::KubeflowProgress(KubeflowSettings settings, const Clock& clock)
    : settings_(std::move(settings)), clock_(clock), thread_([this] { run(); }) {}

KubeflowProgress::~KubeflowProgress() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  news_.notify_one();
  thread_.join();
}

void KubeflowProgress::attempt_started(const std::vector<std::string>& progress_files,
                                       int restart_count) {
  auto attempt = std::make_shared<Attempt>();
  attempt->restarts = restart_count;
  attempt->files = progress_file::open_readers(progress_files);
  {
    const std::lock_guard lock(mutex_);
    node_zero_ = !progress_files.empty();
    attempt_ = node_zero_ ? std::move(attempt) : nullptr;
    ++attempts_;
  }
  // The thread sees it at its next look (within kLookEvery): an attempt's first step comes later.
}

void KubeflowProgress::job_ended(bool succeeded) {
  {
    const std::lock_guard lock(mutex_);
    ended_ = succeeded;
  }
  news_.notify_one();
}

KubeflowProgress::Look KubeflowProgress::wait_for_news(Clock::time_point until) {
  std::unique_lock lock(mutex_);
  news_.wait_until(lock, until, [&] { return stopping_ || ended_.has_value(); });
  return Look{attempt_, node_zero_, attempts_, ended_, stopping_};
}

// Looks at the files every kLookEvery (or the interval, when shorter), posts every interval once
// a step is known, and once at the end.
void KubeflowProgress::run() {
  const milliseconds look_every = std::min(kLookEvery, settings_.interval);
  std::uint64_t attempts_seen = 0;
  Clock::time_point next_post{};
  for (Clock::time_point wake = clock_.now();; wake = clock_.now() + look_every) {
    const Look look = wait_for_news(wake);
    if (look.attempts != attempts_seen) {
      attempts_seen = look.attempts;
      if (look.attempt) estimate_.attempt_started(look.attempt->restarts);
    }
    const Clock::time_point now = clock_.now();
    if (look.attempt) estimate_.add(step_sample(look.attempt->look(), now));
    if (look.ended || look.stopping) {
      const bool succeeded = look.ended.value_or(false);
      if (look.node_zero && (succeeded || estimate_.known()))
        post(estimate_.status(succeeded), kLastPostTimeout);
      return;
    }
    if (look.attempt && estimate_.known() && now >= next_post) {
      post(estimate_.status(false), kPostTimeout);
      next_post = clock_.now() + settings_.interval;
    }
  }
}

std::string KubeflowProgress::try_post(const TrainerStatus& status, milliseconds timeout) const {
  rendezvous::HttpsPost request;
  request.address = settings_.address;
  request.target = settings_.target;
  request.ca_file = settings_.ca_file;
  request.server = kServerName;
  request.ca_setting = settings_.ca_variable;
  request.timeout = timeout;
  if (!settings_.token_file.empty()) {
    // Read at every post: the projected service account token is rotated by the kubelet.
    const std::string token = trim(read_file(settings_.token_file));
    if (token.empty())
      return settings_.token_variable + "=" + settings_.token_file +
             ": the token file is empty or cannot be read";
    request.headers.emplace_back("Authorization", "Bearer " + token);
  }
  request.body = trainer_status_body(status, clock_.wall_now());
  const rendezvous::HttpsReply reply = rendezvous::https_post(request);
  if (reply.status / 100 == 2) return "";
  return std::string(kServerName) + " at " + settings_.address + " refused the post (HTTP " +
         std::to_string(reply.status) + ": " + refusal_message(reply.body) + ")";
}

void KubeflowProgress::post(const TrainerStatus& status, milliseconds timeout) {
  std::string failure;
  try {
    failure = try_post(status, timeout);
  } catch (const std::exception& e) {
    failure = e.what();  // NetworkError, ConfigError (the CA, the handshake)
  }
  if (failure.empty() || warned_) return;
  warned_ = true;
  log::warn("Kubeflow Trainer progress (" + settings_.url_variable + "): " + failure +
            "; the job goes on, and later posts that fail say nothing more");
}

}  // namespace acc::launcher
