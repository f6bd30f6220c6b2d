#include "status/job_status.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "acc/common/error.h"
#include "acc/common/progress_file.h"
#include "hangs/stragglers.h"
#include "host/nvml.h"
#include "nodes/store_json.h"
#include "process/proc.h"

// std::optional as JSON: the value, or null.
namespace nlohmann {
template <typename T>
struct adl_serializer<std::optional<T>> {
  static void to_json(json& j, const std::optional<T>& value) {
    j = value ? json(*value) : json(nullptr);
  }
  static void from_json(const json& j, std::optional<T>& value) {
    value = j.is_null() ? std::nullopt : std::optional<T>(j.get<T>());
  }
};
}  // namespace nlohmann

namespace acc::launcher {
namespace {

constexpr std::int64_t kNsPerSecond = 1'000'000'000;

double seconds_of(std::int64_t ns) {
  return static_cast<double>(ns) / 1e9;
}

// A sample value as Prometheus reads it: shortest round trip for a double.
std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

// A label value: backslash, double quote and newline escaped, as the text format asks.
std::string label_value(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// Writes the families of the text format: HELP and TYPE once, then the family's samples.
class Exposition {
 public:
  void family(const std::string& name, const char* type, const std::string& help) {
    text_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    name_ = name;
  }
  void sample(const std::string& labels, double value) {
    text_ += name_ + "{" + labels + "} " + number(value) + "\n";
  }
  // Lines written as they are (a histogram's _bucket, _sum and _count samples).
  void raw(const std::string& lines) { text_ += lines; }
  std::string text() const { return text_; }

 private:
  std::string text_;
  std::string name_;
};

const char* const kRankStates[] = {"starting", "running", "quiet", "stalled", "exited"};

// Seconds per step between the window's first and last samples that saw new steps (so that
// neither a start-up nor a pause before the last step counts); none with fewer than two.
template <typename Samples>
std::optional<double> window_step_seconds(const Samples& samples) {
  std::optional<size_t> first, last;
  for (size_t i = 1; i < samples.size(); ++i) {
    if (samples[i].beats <= samples[i - 1].beats) continue;
    if (!first) first = i;
    last = i;
  }
  if (!first || *last == *first) return std::nullopt;
  return seconds_of(samples[*last].at_ns - samples[*first].at_ns) /
         static_cast<double>(samples[*last].beats - samples[*first].beats);
}

}  // namespace

// The JSON of /api/job and of the status exchange: each field under its own name, an unknown
// value (std::nullopt) as null.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankStatus, rank, local_rank, node, host, pid, state, reporting,
                                   steps, collectives, collective_seconds, seconds_since_progress,
                                   step_seconds, straggler_ratio, straggler, last_collective,
                                   in_collective, recent_step_seconds, gpu_busy)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(NodeStatus, node_rank, host, phase, attempt, restarts,
                                   workers_alive, sdc_restart_exits, sdc_suspect_exits)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RecoveryStatus, attempt, cause, stop_seconds, rendezvous_seconds,
                                   spawn_seconds, seconds)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(GoodputStatus, wall_seconds, progress_seconds, recovery_seconds,
                                   lost_seconds)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(JobStatus, job_id, host, node_rank, nnodes, world_size, attempt,
                                   restarts, workers_alive, sdc_restart_exits, sdc_suspect_exits,
                                   phase, nodes, ranks, hang_report, recoveries, goodput)

// A node's status in node 0's store (encode_node_status); version 0 was job_json's plain object,
// 1 had no SDC counts.
constexpr StoreFormat kNodeStatusFormat{"acc-node-status", 2};

namespace {

// The labels of the job's samples (escaped once a scrape), of a node's and of a rank's.
std::string job_labels(const JobStatus& job) {
  return "job_id=\"" + label_value(job.job_id) + "\"";
}

std::string node_labels(const std::string& job_label, int node, const std::string& host) {
  return job_label + ",node=\"" + std::to_string(node) + "\",host=\"" + label_value(host) + "\"";
}

std::string rank_labels(const std::string& job_label, const RankStatus& r) {
  return node_labels(job_label, r.node, r.host) + ",rank=\"" + std::to_string(r.rank) +
         "\",local_rank=\"" + std::to_string(r.local_rank) + "\"";
}

// The job's size, and each node's workers, attempt and restarts.
void write_node_families(Exposition& out, const JobStatus& job, const std::string& job_label) {
  out.family("acc_job_world_size", "gauge", "Ranks in the job's current attempt.");
  out.sample(job_label, job.world_size);
  out.family("acc_job_nodes", "gauge", "Nodes in the job's current attempt.");
  out.sample(job_label, job.nnodes);
  const auto per_node = [&](const std::string& name, const char* type, const std::string& help,
                            const std::function<double(const NodeStatus&)>& value) {
    out.family(name, type, help);
    for (const NodeStatus& n : job.nodes)
      out.sample(node_labels(job_label, n.node_rank, n.host), value(n));
  };
  per_node("acc_node_workers_alive", "gauge", "The node's workers still running.",
           [](const NodeStatus& n) { return n.workers_alive; });
  per_node("acc_node_attempt", "gauge", "The node's attempt (1 for the first; 0 before it).",
           [](const NodeStatus& n) { return n.attempt; });
  per_node("acc_node_restarts_total", "counter", "Restarts after a failure so far.",
           [](const NodeStatus& n) { return n.restarts; });
  per_node("acc_node_sdc_restart_exits_total", "counter",
           "Workers' exits with the RESTART code of --sdc_exit_codes so far.",
           [](const NodeStatus& n) { return n.sdc_restart_exits; });
  per_node("acc_node_sdc_suspect_exits_total", "counter",
           "Workers' exits with the SUSPECT code of --sdc_exit_codes so far.",
           [](const NodeStatus& n) { return n.sdc_suspect_exits; });
}

// Each rank's steps, collectives, pace and whether it straggles; a rank without a value (one
// that does not report) has no sample.
void write_rank_families(Exposition& out, const JobStatus& job, const std::string& job_label) {
  const auto per_rank = [&](const std::string& name, const char* type, const std::string& help,
                            const std::function<std::optional<double>(const RankStatus&)>& value) {
    out.family(name, type, help);
    for (const RankStatus& r : job.ranks)
      if (const std::optional<double> v = value(r)) out.sample(rank_labels(job_label, r), *v);
  };
  per_rank("acc_rank_steps_total", "counter",
           "Steps (beats: libacc's optimizer steps, acc_launch.beat()) of the rank.",
           [](const RankStatus& r) { return static_cast<double>(r.steps); });
  per_rank("acc_rank_collectives_total", "counter",
           "Collective and point-to-point calls the rank completed.",
           [](const RankStatus& r) { return static_cast<double>(r.collectives); });
  per_rank("acc_rank_collective_seconds_total", "counter",
           "Seconds the rank spent inside its completed collective calls.",
           [](const RankStatus& r) { return r.collective_seconds; });
  per_rank("acc_rank_seconds_since_progress", "gauge",
           "Seconds since the rank's last step, collective or section change.",
           [](const RankStatus& r) { return r.seconds_since_progress; });
  per_rank("acc_rank_step_seconds", "gauge", "Seconds per step over the last 10 s.",
           [](const RankStatus& r) { return r.step_seconds; });
  per_rank("acc_rank_straggler_ratio", "gauge",
           "The rank's compute time per collective over the median rank's, last 10 s.",
           [](const RankStatus& r) { return r.straggler_ratio; });
  per_rank("acc_rank_straggler", "gauge", "1 while the rank is named a straggler.",
           [](const RankStatus& r) { return r.straggler ? 1.0 : 0.0; });
  per_rank("acc_rank_gpu_busy_ratio", "gauge",
           "Highest SM utilization of the rank's processes on a GPU over the last second, by NVML.",
           [](const RankStatus& r) { return r.gpu_busy; });
  per_rank("acc_rank_in_collective", "gauge", "1 while the rank waits in a collective call.",
           [](const RankStatus& r) { return r.in_collective ? 1.0 : 0.0; });
}

// The histogram's samples of this node's recoveries: a bucket per bound, their sum and count.
std::string recovery_histogram(const JobStatus& job, const std::string& own) {
  std::string text;
  double sum = 0;
  for (const RecoveryStatus& r : job.recoveries) sum += r.seconds;
  for (const char* le : {"0.01", "0.1", "1", "10", "60", "+Inf"}) {
    const double bound = std::string(le) == "+Inf" ? 1e300 : std::stod(le);
    const auto count = std::count_if(job.recoveries.begin(), job.recoveries.end(),
                                     [&](const RecoveryStatus& r) { return r.seconds <= bound; });
    text += "acc_recovery_seconds_bucket{" + own + ",le=\"" + le + "\"} " +
            number(static_cast<double>(count)) + "\n";
  }
  text += "acc_recovery_seconds_sum{" + own + "} " + number(sum) + "\n";
  text += "acc_recovery_seconds_count{" + own + "} " +
          number(static_cast<double>(job.recoveries.size())) + "\n";
  return text;
}

// Recoveries and goodput: this node's (the serving launcher's).
void write_recovery_families(Exposition& out, const JobStatus& job, const std::string& job_label) {
  const std::string own = node_labels(job_label, job.node_rank, job.host);
  out.family("acc_recovery_seconds", "histogram",
             "Seconds from a failure seen to the next attempt's workers spawned.");
  out.raw(recovery_histogram(job, own));
  out.family("acc_time_lost_seconds_total", "counter",
             "Wall seconds in recoveries and in attempts whose workers made no progress.");
  out.sample(own, job.goodput.lost_seconds);
  out.family(
      "acc_goodput_ratio", "gauge",
      "Share of the wall time since the first attempt spent in attempts that made progress.");
  out.sample(own, job.goodput.wall_seconds > 0
                      ? job.goodput.progress_seconds / job.goodput.wall_seconds
                      : 0.0);
  out.family("acc_warm_workers", "gauge",
             "Standby Pythons waiting for the next attempt's workers (docs/goodput.md).");
  out.sample(own, job.warm_workers.waiting);
  out.family("acc_warm_workers_ready", "gauge", "Standbys that have torch imported.");
  out.sample(own, job.warm_workers.ready);
  out.family("acc_warm_workers_resident_bytes", "gauge", "The memory the standbys hold.");
  out.sample(own, job.warm_workers.resident_bytes);
}

}  // namespace

std::string prometheus_text(const JobStatus& job) {
  Exposition out;
  const std::string job_label = job_labels(job);
  write_node_families(out, job, job_label);
  write_rank_families(out, job, job_label);
  write_recovery_families(out, job, job_label);
  out.family("acc_rank_state", "gauge",
             "1 for the rank's state (starting, running, quiet, stalled, exited), 0 for others.");
  for (const RankStatus& r : job.ranks)
    for (const char* state : kRankStates)
      out.sample(rank_labels(job_label, r) + ",state=\"" + state + "\"", r.state == state ? 1 : 0);
  return out.text();
}

std::string job_json(const JobStatus& job) {
  // Invalid UTF-8 (a hang report's bytes) is replaced, never thrown.
  return nlohmann::json(job).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string encode_node_status(const JobStatus& status) {
  return to_store_json(status, kNodeStatusFormat);
}

std::optional<JobStatus> decode_node_status(std::string_view text) {
  return from_store_json<JobStatus>(text, kNodeStatusFormat);
}

// --- StatusBoard ---------------------------------------------------------------------------------

struct StatusBoard::Rank {
  struct Sample {
    std::int64_t at_ns = 0;
    std::uint64_t beats = 0;
    std::uint64_t completed = 0;
    std::int64_t in_collective_ns = 0;
  };
  Worker worker;
  std::unique_ptr<progress_file::Reader> reader;  // null: none to read
  std::deque<Sample> samples;  // the window's, oldest first, and the one just before it
  std::deque<double> step_seconds;
  std::optional<double> gpu_busy;
};

StatusBoard::StatusBoard(std::string job_id, std::string host, int node_rank, proc::Reader& proc,
                         const rendezvous::Clock& clock)
    : proc_(proc), clock_(clock) {
  job_.job_id = std::move(job_id);
  job_.host = std::move(host);
  job_.node_rank = node_rank;
  job_.phase = "waiting";
}

StatusBoard::~StatusBoard() = default;

void StatusBoard::attempt_started(int restarts, int nnodes, int world_size,
                                  const std::vector<Worker>& workers, JobStore store) {
  std::vector<std::unique_ptr<Rank>> ranks;
  for (const Worker& w : workers) {
    auto rank = std::make_unique<Rank>();
    rank->worker = w;
    try {
      rank->reader = std::make_unique<progress_file::Reader>(w.progress_file);
    } catch (const Error&) {
      // Not reporting: its counters stay zero.
    }
    ranks.push_back(std::move(rank));
  }
  const std::lock_guard lock(mutex_);
  ranks_ = std::move(ranks);
  running_.assign(workers.size(), true);
  stalled_ = false;
  job_.attempt += 1;
  job_.restarts = restarts;
  job_.nnodes = nnodes;
  job_.world_size = world_size;
  job_.phase = "running";
  attempt_started_ns_ = progress_file::now_ns();
  counting_since_ = clock_.now();
  if (!first_started_) first_started_ = counting_since_;
  store_ = std::move(store);
  others_.clear();
}

StatusBoard::JobStore StatusBoard::job_store() const {
  const std::lock_guard lock(mutex_);
  return store_;
}

void StatusBoard::set_other_nodes(std::vector<JobStatus> others) {
  const std::lock_guard lock(mutex_);
  others_ = std::move(others);
}

void StatusBoard::workers_running(const std::vector<bool>& running) {
  const std::lock_guard lock(mutex_);
  if (running.size() == running_.size()) running_ = running;
}

void StatusBoard::stalled(const std::string& hang_report) {
  const std::lock_guard lock(mutex_);
  stalled_ = true;
  job_.hang_report = hang_report;
}

void StatusBoard::hang_report(const std::string& report) {
  const std::lock_guard lock(mutex_);
  job_.hang_report = report;
}

void StatusBoard::attempt_ended() {
  const std::lock_guard lock(mutex_);
  std::fill(running_.begin(), running_.end(), false);
  job_.phase = "waiting";
}

void StatusBoard::job_ended() {
  const std::lock_guard lock(mutex_);
  std::fill(running_.begin(), running_.end(), false);
  job_.phase = "ended";
}

void StatusBoard::sdc_exit(bool suspect) {
  const std::lock_guard lock(mutex_);
  ++(suspect ? job_.sdc_suspect_exits : job_.sdc_restart_exits);
}

void StatusBoard::recovered(const RecoveryStatus& recovery) {
  const std::lock_guard lock(mutex_);
  job_.recoveries.push_back(recovery);
}

void StatusBoard::set_warm_workers(const WarmWorkersStatus& warm) {
  const std::lock_guard lock(mutex_);
  job_.warm_workers = warm;
}

void StatusBoard::set_goodput(const GoodputStatus& goodput) {
  const std::lock_guard lock(mutex_);
  job_.goodput = goodput;
  counting_since_.reset();
}

// Why a running attempt's time without progress is not yet lost: at its end it counts whole as
// progress if its workers made any by then, so counting it lost now and as progress at the first
// beat would take time back from acc_time_lost_seconds_total, a counter.
GoodputStatus StatusBoard::goodput_now(bool progressed) const {
  GoodputStatus goodput = job_.goodput;
  if (job_.phase == "ended" || !first_started_) return goodput;
  const rendezvous::Clock::time_point now = clock_.now();
  const auto seconds = [](rendezvous::Clock::duration d) {
    return std::chrono::duration<double>(d).count();
  };
  goodput.wall_seconds = seconds(now - *first_started_);
  if (counting_since_ && progressed) goodput.progress_seconds += seconds(now - *counting_since_);
  return goodput;
}

void StatusBoard::sample() {
  // NVML first, outside the lock: its first load may take seconds (nvmlInit without the
  // persistence daemon), and the busy samples are per process, to be followed up to the workers.
  if (!nvml_tried_) {
    nvml_tried_ = true;
    nvml_ = Nvml::open_machine();
  }
  std::map<int, unsigned> busy;
  if (nvml_) busy = nvml_->sm_utilization();
  const std::lock_guard lock(mutex_);
  if (nvml_) {
    std::map<int, Rank*> by_pid;
    for (auto& rank : ranks_) {
      rank->gpu_busy = 0.0;
      by_pid[rank->worker.pid] = rank.get();
    }
    for (const auto& [pid, percent] : busy) {
      for (int p = pid; p > 1; p = proc_.stat(p).parent) {
        const auto it = by_pid.find(p);
        if (it == by_pid.end()) continue;
        it->second->gpu_busy = std::max(*it->second->gpu_busy, percent / 100.0);
        break;
      }
    }
  }
  const std::int64_t now = progress_file::now_ns();
  const std::int64_t window_start = now - kStatusWindow.count() * kNsPerSecond;
  for (auto& rank : ranks_) {
    if (!rank->reader) continue;
    const progress_file::Snapshot s = rank->reader->snapshot(0);
    const Rank::Sample sample{now, s.beats, s.completed, s.in_collective_ns};
    if (!rank->samples.empty() && sample.beats > rank->samples.back().beats) {
      const Rank::Sample& before = rank->samples.back();
      rank->step_seconds.push_back(seconds_of(now - before.at_ns) /
                                   static_cast<double>(sample.beats - before.beats));
      if (rank->step_seconds.size() > kStepHistory) rank->step_seconds.pop_front();
    }
    rank->samples.push_back(sample);
    // Keep one sample at or before the window's start, so the window is whole.
    while (rank->samples.size() > 2 && rank->samples[1].at_ns <= window_start)
      rank->samples.pop_front();
  }
}

JobStatus StatusBoard::status() const {
  const std::lock_guard lock(mutex_);
  JobStatus job = job_;
  const std::int64_t now = progress_file::now_ns();
  std::vector<RankTiming> timings;
  bool progressed = false;  // a worker of this node, as made_progress() (agent/recoveries.h)
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const Rank& rank = *ranks_[i];
    // The counters as of now (a few memory reads); the samples give the window's rates.
    const progress_file::Snapshot s =
        rank.reader ? rank.reader->snapshot(1) : progress_file::Snapshot{};
    RankStatus r;
    r.rank = rank.worker.rank;
    r.local_rank = rank.worker.local_rank;
    r.node = job.node_rank;
    r.host = job.host;
    r.pid = rank.worker.pid;
    r.reporting = s.writer_pid != 0;
    progressed = progressed || s.beats > 0 || s.completed > 0;
    r.steps = s.beats;
    r.collectives = s.completed;
    r.collective_seconds = seconds_of(s.in_collective_ns);
    r.seconds_since_progress = seconds_of(
        std::max<std::int64_t>(0, now - std::max(s.last_progress_ns, attempt_started_ns_)));
    if (!s.calls.empty()) {
      const progress_file::Call& call = s.calls.back();
      r.last_collective = call.op + " (" + call.group + ")";
      r.in_collective = call.in_flight();
    }
    r.recent_step_seconds.assign(rank.step_seconds.begin(), rank.step_seconds.end());
    r.gpu_busy = rank.gpu_busy;
    if (rank.samples.size() >= 2) {
      const Rank::Sample& first = rank.samples.front();
      const Rank::Sample& last = rank.samples.back();
      r.step_seconds = window_step_seconds(rank.samples);
      if (!r.step_seconds && !rank.step_seconds.empty()) r.step_seconds = rank.step_seconds.back();
      RankTiming t;
      t.rank = r.rank;
      t.node = job.node_rank;
      t.steps = last.completed - first.completed;
      t.window = seconds_of(last.at_ns - first.at_ns);
      t.in_collective = seconds_of(last.in_collective_ns - first.in_collective_ns);
      if (t.steps > 0) timings.push_back(t);
    }
    const bool running = i < running_.size() && running_[i];
    if (!running)
      r.state = "exited";
    else if (stalled_)
      r.state = "stalled";
    else if (r.reporting && s.beats == 0 && s.completed == 0)
      r.state = "starting";
    else if (r.reporting && r.seconds_since_progress > static_cast<double>(kQuietAfter.count()))
      r.state = "quiet";
    else
      r.state = "running";
    job.workers_alive += running ? 1 : 0;
    job.ranks.push_back(std::move(r));
  }
  job.goodput = goodput_now(progressed);
  job.nodes.push_back({job.node_rank, job.host, job.phase, job.attempt, job.restarts,
                       job.workers_alive, job.sdc_restart_exits, job.sdc_suspect_exits});
  // Node 0 of several: the other nodes' latest, after this node's. Each node judges its own
  // stragglers (the straggler watch's report judges the whole job).
  for (const JobStatus& other : others_) {
    job.nodes.insert(job.nodes.end(), other.nodes.begin(), other.nodes.end());
    job.ranks.insert(job.ranks.end(), other.ranks.begin(), other.ranks.end());
  }
  std::sort(job.ranks.begin(), job.ranks.end(),
            [](const RankStatus& a, const RankStatus& b) { return a.rank < b.rank; });
  const StragglerFinding finding = find_stragglers(timings);
  if (finding.median_compute > 0) {
    for (const RankTiming& t : finding.timings) {
      for (RankStatus& r : job.ranks) {
        if (r.rank != t.rank) continue;
        r.straggler_ratio = t.compute_per_step() / finding.median_compute;
        r.straggler = std::count(finding.ranks.begin(), finding.ranks.end(), r.rank) > 0;
      }
    }
  }
  return job;
}

}  // namespace acc::launcher
