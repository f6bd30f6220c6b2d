#include "hangs/stall_watch.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "acc/common/error.h"
#include "acc/common/progress_file.h"
#include "acc/common/store_keys.h"
#include "acc/common/strings.h"
#include "acc/common/unique_fd.h"
#include "acc/rendezvous/store_client.h"
#include "hangs/flight_recorder.h"
#include "hangs/hang_report.h"
#include "hangs/nccl_ras.h"
#include "hangs/python_stack_hook.h"
#include "hangs/stack_dump.h"
#include "hangs/trace_gather.h"
#include "host/nvml.h"
#include "output/console.h"
#include "output/log.h"
#include "process/proc.h"

namespace acc::launcher {
namespace {

using std::chrono::milliseconds;

// Stacks must come in well within the 5 s the user waits after the stall timeout.
constexpr milliseconds kStackBudget{3000};
// A worker's descendants shown in the report, at most (a DataLoader has a few).
constexpr size_t kMaxDescendants = 16;
// How long node 0 waits for the other nodes' traces once its own stacks are in.
constexpr milliseconds kTraceWait{2000};
// How long NCCL's RAS service may take to gather its report (nothing listening answers at once).
constexpr milliseconds kRasWait{2000};

// What NCCL's RAS service says of the job's communicators; empty when nothing listens.
std::string ask_nccl_ras() {
  const char* configured = std::getenv("NCCL_RAS_ADDR");
  const std::string address = configured && *configured ? configured : kRasDefaultAddress;
  const std::optional<std::string> reply = query_ras(address, kRasWait);
  return reply ? ras_section(parse_ras_status(*reply), address) : "";
}

double seconds(StallWatch::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::vector<StragglerWatch::Rank> straggler_ranks(const std::vector<StallWatch::Worker>& workers) {
  std::vector<StragglerWatch::Rank> ranks;
  for (const StallWatch::Worker& w : workers) ranks.push_back({w.rank, progress_file_path(w.dir)});
  return ranks;
}

std::string straggler_table(const StragglerFinding& finding, const std::string& title) {
  const std::string table = format_straggler_table(finding);
  return table.empty() ? "" : title + "\n" + table;
}

// A rank is busy when it ran on a CPU for at least this share of the time between two polls (or
// was running at the poll): a rank blocked in a collective, a lock or a sleep uses next to none.
// Low on purpose: four ranks sharing two loaded cores get a small share each.
constexpr double kBusyCpuShare = 0.1;

}  // namespace

std::string on_demand_report_path(int launcher_pid) {
  return "/tmp/acc-launch-stacks." + std::to_string(::getuid()) + "." +
         std::to_string(launcher_pid) + ".txt";
}

std::string node_summary_key(int restart_count, int node_rank) {
  return store_keys::hang_node_summary(restart_count, node_rank);
}

std::string beat_key(int restart_count, int rank) {
  // libacc's c10d::PrefixStore joins "/worker/attempt_<n>" and the key with a "/".
  return store_keys::beat_in_attempt(restart_count, rank);
}

void append_report(const std::string& path, const std::string& report) {
  const UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (fd) write_all(fd.get(), report);
}

void publish_on_demand_report(const std::string& report) {
  const std::string path = on_demand_report_path(::getpid());
  const std::string temporary = path + ".part";
  ::unlink(temporary.c_str());
  {
    const UniqueFd fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd) return;
    write_all(fd.get(), report);
  }
  std::rename(temporary.c_str(), path.c_str());
}

StallWatch::StallWatch(const LaunchPlan& plan, const Round& round, std::vector<Worker> workers,
                       milliseconds timeout, std::function<void(const std::string&)> notice, Os& os)
    : os_(os),
      plan_(plan),
      round_(round),
      workers_(std::move(workers)),
      enabled_(timeout.count() > 0),
      monitor_(timeout, static_cast<int>(workers_.size()), clock_now(),
               std::max(timeout, plan.stall_init_timeout)),
      // Beats and CPU are looked at a few times per timeout, at most once a second; without a
      // stall timeout, only the sections' deadlines, once a second.
      poll_interval_(enabled_ ? std::clamp(timeout / 4, milliseconds(100), milliseconds(1000))
                              : milliseconds(1000)),
      next_poll_(clock_now() + poll_interval_),
      beats_seen_(workers_.size(), 0),
      counted_at_sample_(workers_.size(), 0),
      cpu_at_progress_(workers_.size(), 0),
      notice_(std::move(notice)),
      file_progress_seen_(workers_.size(), 0),
      in_collective_(workers_.size(), false),
      overrun_reported_(workers_.size(), 0),
      cpu_at_poll_(workers_.size(), 0),
      polled_at_(clock_now()),
      stragglers_(straggler_ranks(workers_), plan.straggler_window, clock_now(), round.node_rank,
                  plan.hostname,
                  round.nnodes > 1 ? StragglerWatch::Exchange([this](const NodeTimings& mine) {
                    return exchange_timings(mine);
                  })
                                   : nullptr) {
  // The progress files are mapped at the first poll (map_files()): a job that ends within its
  // first second never maps them. The CPU counts only with --stall_timeout (sample_busy).
  if (enabled_)
    for (size_t i = 0; i < workers_.size(); ++i)
      cpu_at_progress_[i] = cpu_at_poll_[i] = os_.proc().stat(workers_[i].pid).cpu_seconds;
}

void StallWatch::map_files() {
  files_.resize(workers_.size());
  for (size_t i = 0; i < workers_.size(); ++i) {
    try {
      files_[i] = std::make_unique<progress_file::Reader>(progress_file_path(workers_[i].dir));
    } catch (const Error&) {
      // No file (a worker directory from elsewhere): lines and store beats only.
    }
  }
}

StallWatch::~StallWatch() = default;

void StallWatch::progress(int index) {
  monitor_.progress(index, clock_now());
  busy_noticed_ = false;
}

StallWatch::Clock::time_point StallWatch::next_wake() const {
  if (!enabled_) return std::min(next_poll_, stragglers_.next_tick());
  return std::min({next_poll_, monitor_.next_check(), stragglers_.next_tick()});
}

bool StallWatch::tick() {
  for (const std::string& line : stragglers_.tick(clock_now())) log::info(line);
  const auto now = clock_now();
  if (now >= next_poll_) {
    next_poll_ = now + poll_interval_;
    if (!enabled_) return poll_files();  // a section's deadline holds without --stall_timeout
    poll_beats();
    if (poll_files()) return true;
    sample_cpu();
    sample_busy(now);
  }
  return enabled_ && monitor_.check(clock_now());
}

// The counters of each worker's progress file: a beat, a completed collective, or a section
// opened or closed moves last_progress_ns. A call started and not completed is a wait inside a
// collective. Memory reads only.
bool StallWatch::poll_files() {
  const auto now = clock_now();
  const std::int64_t now_ns = progress_file::now_ns();
  if (files_.empty()) map_files();
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!files_[i]) continue;
    const progress_file::Snapshot s = files_[i]->snapshot(0);
    in_collective_[i] = s.started > s.completed;
    if (s.last_progress_ns != file_progress_seen_[i]) {
      file_progress_seen_[i] = s.last_progress_ns;
      monitor_.progress(static_cast<int>(i), now);
      busy_noticed_ = false;
    }
    if (s.section.empty() || s.section_deadline_ns == 0 || now_ns < s.section_deadline_ns ||
        overrun_reported_[i] == s.section_started_ns)
      continue;
    overrun_reported_[i] = s.section_started_ns;
    overrun_ = Overrun{i, s.section, (s.section_deadline_ns - s.section_started_ns) / 1e9,
                       (now_ns - s.section_started_ns) / 1e9};
    return true;
  }
  return false;
}

// Every running rank busy and none inside a collective: the group computes silently (a long
// step, a model loading), which is no hang. Busy is on CPU (from /proc), or, for a rank that uses
// next to no CPU, on a GPU: its process or one of its descendants ran kernels since the last poll
// (NVML, where there is an NVIDIA driver; a blocking synchronize waits on the GPU without CPU).
// A rank that burns CPU while the others wait in a collective does not make the group busy: that
// is the odd one out of the next report.
void StallWatch::sample_busy(Clock::time_point now) {
  const double elapsed = seconds(now - polled_at_);
  polled_at_ = now;
  int watched = 0;
  std::vector<size_t> idle;  // running, outside collectives, not on CPU
  bool waiting = false;      // some rank is inside a collective
  for (size_t i = 0; i < workers_.size(); ++i) {
    const proc::Stat stat = os_.proc().stat(workers_[i].pid);
    if (!stat.ok || stat.state == "Z") continue;
    const double share = elapsed > 0 ? (stat.cpu_seconds - cpu_at_poll_[i]) / elapsed : 0;
    cpu_at_poll_[i] = stat.cpu_seconds;
    ++watched;
    if (in_collective_[i])
      waiting = true;
    else if (stat.state != "R" && share < kBusyCpuShare)
      idle.push_back(i);
  }
  if (watched == 0 || waiting) return;
  const size_t on_gpu = idle.empty() ? 0 : busy_on_gpu(idle);
  if (on_gpu < idle.size()) return;
  monitor_.busy(now);
  // The notice is for a silence that would have been a stall; a start-up is busy as a rule.
  Clock::time_point group_last = Clock::time_point::min();
  bool started = true;
  for (size_t i = 0; i < workers_.size(); ++i) {
    group_last = std::max(group_last, monitor_.last_progress(static_cast<int>(i)));
    started = started && monitor_.started(static_cast<int>(i));
  }
  const double quiet = seconds(now - group_last);
  if (busy_noticed_ || !started || quiet < seconds(monitor_.timeout()) || !notice_) return;
  busy_noticed_ = true;
  const std::string where = on_gpu == 0
                                ? "on CPU"
                                : "on CPU or GPU (" + std::to_string(on_gpu) +
                                      (on_gpu == 1 ? " rank" : " ranks") + " on GPU only, by NVML)";
  notice_("no worker printed, beat or completed a collective for " + fixed(quiet, 1) +
          " s, but every rank is busy " + where +
          " outside collectives: computing, not a hang (--stall_timeout goes on watching)");
}

// How many of the workers at `indices` ran kernels since the last poll, by NVML's per-process
// samples of their processes and their descendants' (a wrapper script's python, say): each busy
// process is followed up its parents to the worker it belongs to. Zero where there is no NVML.
size_t StallWatch::busy_on_gpu(const std::vector<size_t>& indices) {
  Nvml* nvml = Nvml::machine();
  if (!nvml) return 0;
  std::set<int> idle_pids;
  for (size_t i : indices) idle_pids.insert(workers_[i].pid);
  std::set<int> on_gpu;
  for (const auto& [pid, percent] : nvml->sm_utilization()) {
    if (percent < kBusyGpuPercent) continue;
    for (int p = pid; p > 1; p = os_.proc().stat(p).parent) {
      if (idle_pids.count(p)) {
        on_gpu.insert(p);
        break;
      }
    }
  }
  return on_gpu.size();
}

// A worker that made progress since the last sample starts its "CPU since progress" again.
void StallWatch::sample_cpu() {
  for (size_t i = 0; i < workers_.size(); ++i) {
    const long count = monitor_.progress_count(static_cast<int>(i));
    if (count == counted_at_sample_[i]) continue;
    counted_at_sample_[i] = count;
    cpu_at_progress_[i] = os_.proc().stat(workers_[i].pid).cpu_seconds;
  }
}

// libacc adds to its rank's beat key in the job's store; reading it costs two round trips per
// local worker. A store that is not there (yet, or any more) is tried again a few seconds later.
rendezvous::StoreClient* StallWatch::store() {
  if (store_ || round_.master_addr.empty() || round_.master_port <= 0) return store_.get();
  const auto now = clock_now();
  if (now < next_store_connect_) return nullptr;
  try {
    rendezvous::StoreClientOptions options;
    options.host = round_.master_addr;
    options.port = round_.master_port;
    options.connect_timeout = milliseconds(200);
    options.timeout = milliseconds(1000);
    options.job_member = true;
    options.job_secret = plan_.job_secret;
    store_ = std::make_unique<rendezvous::StoreClient>(options);
  } catch (const std::exception&) {
    next_store_connect_ = now + std::chrono::seconds(5);
  }
  return store_.get();
}

// libacc adds to its rank's beat key in the job's store; reading it costs two round trips per
// local worker. A store that is not there (yet, or any more) is tried again a few seconds later.
void StallWatch::poll_beats() {
  rendezvous::StoreClient* client = store();
  if (!client) return;
  const auto now = clock_now();
  try {
    for (size_t i = 0; i < workers_.size(); ++i) {
      const std::string key = beat_key(round_.restart_count, workers_[i].rank);
      if (!client->check({key})) continue;
      const long long beats = std::stoll(client->get(key));
      if (beats > beats_seen_[i]) {
        beats_seen_[i] = beats;
        monitor_.progress(static_cast<int>(i), now);
      }
    }
  } catch (const std::exception&) {
    store_.reset();
    next_store_connect_ = now + std::chrono::seconds(5);
  }
}

std::string StallWatch::with_other_nodes(const std::string& report) {
  const std::string first_line = report.substr(0, report.find('\n'));
  const size_t semicolon = first_line.find("; ");
  const std::string summary =
      semicolon == std::string::npos ? first_line : first_line.substr(semicolon + 2);
  rendezvous::StoreClient* client = store();
  if (!client) return report;
  std::vector<std::string> summaries(static_cast<size_t>(round_.nnodes));
  try {
    client->set(node_summary_key(round_.restart_count, round_.node_rank), summary);
    if (round_.node_rank != 0) return report;
    // The other nodes stall at about the same time; their summaries come after their stacks.
    const auto deadline = os_.now() + std::chrono::seconds(2);
    for (int node = 1; node < round_.nnodes; ++node) {
      const std::string key = node_summary_key(round_.restart_count, node);
      if (os_.wait_for_keys(*client, {key}, deadline))
        summaries[static_cast<size_t>(node)] = client->get(key);
    }
  } catch (const std::exception&) {
    store_.reset();
    return report;
  }
  summaries[0] = summary;
  std::string nodes = "\nnodes (each launcher's summary):\n";
  std::vector<int> stuck;
  for (int node = 0; node < round_.nnodes; ++node) {
    const std::string& line = summaries[static_cast<size_t>(node)];
    nodes += "  node " + std::to_string(node) + ": " + (line.empty() ? "no report" : line) + "\n";
    if (line.rfind("odd one out", 0) == 0) stuck.push_back(node);
  }
  std::string head;
  if (stuck.size() == 1 && stuck[0] != 0)
    head = "acc-launch: hang: stuck node: " + std::to_string(stuck[0]) +
           " (its report: " + summaries[static_cast<size_t>(stuck[0])] + ")\n";
  return head + report + nodes;
}

// The workers' state and CPU time first: dumping a stack costs the worker some CPU.
HangReport StallWatch::snapshot(const std::vector<size_t>& indices, Clock::time_point now,
                                bool stalled) {
  HangReport report;
  report.host = plan_.hostname;
  report.nnodes = round_.nnodes;
  Clock::time_point group_last = Clock::time_point::min();
  for (size_t i = 0; i < workers_.size(); ++i)
    group_last = std::max(group_last, monitor_.last_progress(static_cast<int>(i)));
  if (stalled) report.stalled_for = std::max(seconds(now - group_last), 0.1);
  for (size_t i : indices) {
    const Worker& w = workers_[i];
    const proc::Stat stat = os_.proc().stat(w.pid);
    WorkerSnapshot snapshot;
    snapshot.rank = w.rank;
    snapshot.local_rank = w.local_rank;
    snapshot.pid = w.pid;
    snapshot.state = stat.ok ? stat.state : "?";
    snapshot.seconds_since_progress = seconds(now - monitor_.last_progress(static_cast<int>(i)));
    // Without a stall timeout there are no ticks, so no CPU sample at the last progress.
    snapshot.cpu_seconds_since_progress =
        stat.ok && enabled_ ? stat.cpu_seconds - cpu_at_progress_[i] : -1;
    snapshot.progress_count = monitor_.progress_count(static_cast<int>(i));
    report.workers.push_back(std::move(snapshot));
  }
  return report;
}

// Each worker's descendants (DataLoader workers, ...) after the workers, in one collection: the
// stacks of `targets` (the workers', in `report`'s order, then the descendants') go where they
// belong.
void StallWatch::collect_report_stacks(HangReport& report, const std::vector<size_t>& indices,
                                       std::vector<StackTarget> targets) {
  std::vector<std::pair<size_t, size_t>> descendant_slots;  // (worker, descendant) per target
  for (size_t k = 0; k < indices.size(); ++k) {
    WorkerSnapshot& snapshot = report.workers[k];
    for (const auto& [pid, parent] : os_.proc().descendants(snapshot.pid)) {
      if (snapshot.descendants.size() == kMaxDescendants) break;
      const proc::Stat stat = os_.proc().stat(pid);
      DescendantSnapshot d;
      d.pid = pid;
      d.parent = parent;
      d.state = stat.ok ? stat.state : "?";
      d.name = os_.proc().name(pid);
      descendant_slots.emplace_back(k, snapshot.descendants.size());
      snapshot.descendants.push_back(std::move(d));
      targets.push_back({pid, workers_[indices[k]].dir, true});
    }
  }
  std::vector<WorkerStack> stacks = collect_stacks(targets, kStackBudget, os_);
  for (size_t k = 0; k < indices.size(); ++k) report.workers[k].stack = std::move(stacks[k]);
  for (size_t j = 0; j < descendant_slots.size(); ++j) {
    const auto [worker, slot] = descendant_slots[j];
    report.workers[worker].descendants[slot].stack = std::move(stacks[indices.size() + j]);
  }
}

// The section named in overrun_ is the cause: it replaces the "no worker made progress" of the
// report's first line.
std::string StallWatch::headed_by_overrun(const std::string& text) {
  const Overrun& o = *overrun_;
  const size_t end = text.find('\n');
  const size_t rest = text.find("; ");
  std::string headed = "acc-launch: hang: rank " + std::to_string(workers_[o.index].rank) + " on " +
                       plan_.hostname + " is still in its section \"" + o.section + "\" after " +
                       fixed(o.open_s, 1) + " s (its timeout: " + fixed(o.timeout_s, 1) + " s)" +
                       (rest < end ? text.substr(rest) : text.substr(end));
  overrun_.reset();
  return headed;
}

std::string StallWatch::report(const std::vector<bool>& running, bool stalled) {
  const auto now = clock_now();
  std::vector<StackTarget> targets;
  std::vector<size_t> indices;
  std::vector<LocalRank> ranks;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (i < running.size() && !running[i]) continue;
    targets.push_back({workers_[i].pid, workers_[i].dir});
    indices.push_back(i);
    ranks.push_back({workers_[i].rank, progress_file_path(workers_[i].dir)});
  }
  // The traces before the stacks, which disturb the workers; shared with node 0 at a stall.
  std::vector<RankTrace> traces = local_traces(ranks);
  const bool across_nodes = stalled && round_.nnodes > 1;
  if (across_nodes) share_traces(traces);
  // NCCL ranks dump their Flight Recorder while the stacks come in.
  std::vector<FlightRecorderTarget> recorders;
  for (size_t i : indices)
    recorders.push_back({workers_[i].rank, workers_[i].dir, workers_[i].pid});
  const FlightRecorderPoke poke = poke_flight_recorder(recorders);
  HangReport report = snapshot(indices, now, stalled);
  report.traces = std::move(traces);
  collect_report_stacks(report, indices, std::move(targets));
  if (across_nodes && round_.node_rank == 0) report.traces = gathered_traces(report.traces);
  const std::string stragglers =
      straggler_table(stragglers_.whole_run(),
                      std::string("stragglers (") + whose_ranks() + ", from collective timing):");
  if (!stragglers.empty()) report.sections.push_back(stragglers);
  // The dumps PyTorch writes while the stacks came in: the report waits for them (bounded), so
  // that --stall_action stop does not stop the workers in the middle of a dump.
  const std::vector<int> dumped =
      wait_for_flight_recorder_dumps(recorders, poke, kFlightRecorderDumpWait, os_.proc());
  const std::string recorder = flight_recorder_section(recorders, poke, dumped, plan_.world_size);
  if (!recorder.empty()) report.sections.push_back(recorder);
  if (stalled)
    if (const std::string ras = ask_nccl_ras(); !ras.empty()) report.sections.push_back(ras);
  std::string text = format_hang_report(report);
  if (stalled && overrun_) text = headed_by_overrun(text);
  return across_nodes ? with_other_nodes(text) : text;
}

std::string StallWatch::straggler_summary() const {
  if (!stragglers_.named_any()) return "";
  return straggler_table(stragglers_.whole_run(),
                         std::string("acc-launch: stragglers over the attempt (") + whose_ranks() +
                             ", from collective timing):");
}

const char* StallWatch::whose_ranks() const {
  if (round_.nnodes <= 1) return "every rank";
  return stragglers_.job_wide() ? "every node's ranks" : "this node's ranks";
}

// Every node puts its window in node 0's store; node 0 reads the others' back (the latest each
// put, whatever its age: the straggler watch keeps only recent ones). A store that cannot be
// reached leaves node 0 with its own ranks, and the others quiet.
std::optional<std::vector<NodeTimings>> StallWatch::exchange_timings(const NodeTimings& mine) {
  const bool judge = round_.node_rank == 0;
  std::vector<NodeTimings> others;
  rendezvous::StoreClient* client = store();
  if (!client) return judge ? std::optional(others) : std::nullopt;
  try {
    client->set(store_keys::straggler_timings(round_.restart_count, round_.node_rank),
                encode_node_timings(mine));
    if (!judge) return std::nullopt;
    for (int node = 1; node < round_.nnodes; ++node) {
      const std::string key = store_keys::straggler_timings(round_.restart_count, node);
      if (!client->check({key})) continue;
      if (std::optional<NodeTimings> timings = decode_node_timings(client->get(key)))
        others.push_back(std::move(*timings));
    }
  } catch (const std::exception&) {
    store_.reset();
  }
  return judge ? std::optional(others) : std::nullopt;
}

void StallWatch::share_traces(const std::vector<RankTrace>& traces) {
  rendezvous::StoreClient* client = store();
  if (!client) return;
  try {
    publish_traces(*client, round_.restart_count, traces);
  } catch (const std::exception&) {
    store_.reset();
  }
}

// Node 0's view: every rank's trace that came through the store, its own ranks' as read here.
std::vector<RankTrace> StallWatch::gathered_traces(const std::vector<RankTrace>& local) {
  rendezvous::StoreClient* client = store();
  if (!client) return local;
  std::vector<RankTrace> all;
  try {
    all = gather_traces(*client, round_.restart_count, plan_.world_size, kTraceWait);
  } catch (const std::exception&) {
    store_.reset();
    return local;
  }
  for (const RankTrace& mine : local) {
    auto same = std::find_if(all.begin(), all.end(),
                             [&](const RankTrace& t) { return t.rank == mine.rank; });
    if (same == all.end())
      all.push_back(mine);
    else
      *same = mine;
  }
  // A node whose ranks issued nothing yet publishes no trace; the ranks that did still count.
  const bool any_call =
      std::any_of(all.begin(), all.end(), [](const RankTrace& t) { return !t.calls.empty(); });
  return any_call ? all : std::vector<RankTrace>{};
}

}  // namespace acc::launcher
