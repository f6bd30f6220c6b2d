#include "acc/runtime/launch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>

#include "acc/common/clock.h"
#include "acc/common/error.h"
#include "acc/common/processes.h"
#include "acc/launcher/agent/agent.h"
#include "acc/launcher/host/host.h"
#include "acc/launcher/plan/plan.h"
#include "error_file.h"

namespace acc {
namespace {

// The marker: set in the workers of a call, to that call's number in the caller (1 for its first
// call). A worker runs main() from the top: the calls it meets before that one replay what they
// did in the caller (below), the call it was started for runs fn.
constexpr const char* kWorkerMarker = "ACC_LAUNCH_WORKER";
// Where each worker leaves its result: <dir>/<rank>; and where it finds what each earlier call
// of the caller returned or threw: <dir>/call-<number>.
constexpr const char* kResultDir = "ACC_LAUNCH_RESULT_DIR";

// The calls of this process so far (in a worker, those it met).
std::atomic<int> calls{0};

// What a call of the caller ended with: every rank's result, or the exception it threw. A worker
// of a later call gets it back from that call instead of starting workers, so that its main()
// takes the caller's path to the call it was started for (acc::launch called again, as
// Accelerate's notebook_launcher can be).
struct CallRecord {
  std::vector<std::string> results;  // by rank, when it returned
  std::string error;                 // the exception's type when it threw (see rethrow)
  int signal = 0;                    // InterruptedError's
  std::string message;
};

// The caller's calls, in order: held for the program's life (results are usually a few bytes or
// a small tensor).
std::vector<CallRecord>& caller_history() {
  static std::vector<CallRecord> history;
  return history;
}

std::string record_path(const std::string& dir, int call) {
  return dir + "/call-" + std::to_string(call);
}

std::string read_file(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary);
  *ok = static_cast<bool>(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// "results N\n" then per rank "<size>\n<bytes>", or "error <type> <signal>\n<message>".
void write_record(const std::string& path, const CallRecord& record) {
  std::ofstream out(path, std::ios::binary);
  if (record.error.empty()) {
    out << "results " << record.results.size() << '\n';
    for (const std::string& bytes : record.results) out << bytes.size() << '\n' << bytes;
  } else {
    out << "error " << record.error << ' ' << record.signal << '\n' << record.message;
  }
  ACC_CHECK(out.flush(), SystemError, "acc::launch: cannot write ", path, ": ",
            std::strerror(errno));
}

CallRecord read_record(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  CallRecord record;
  std::string kind;
  bool ok = false;
  if (in >> kind && kind == "results") {
    size_t ranks = 0;
    in >> ranks;
    for (size_t rank = 0; in && rank < ranks; ++rank) {
      size_t size = 0;
      in >> size;
      in.get();  // the newline
      std::string bytes(size, '\0');
      in.read(bytes.data(), static_cast<std::streamsize>(size));
      record.results.push_back(std::move(bytes));
    }
    ok = in && record.results.size() == ranks;
  } else if (kind == "error") {
    ok = static_cast<bool>(in >> record.error >> record.signal);
    in.get();
    record.message.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ACC_CHECK(ok, LaunchError, "acc::launch: cannot read what an earlier call returned from ", path);
  return record;
}

CallRecord error_record(const std::exception& e) {
  CallRecord record;
  record.message = e.what();
  if (const auto* interrupted = dynamic_cast<const InterruptedError*>(&e)) {
    record.error = "InterruptedError";
    record.signal = interrupted->signal();
  } else if (dynamic_cast<const LaunchError*>(&e)) {
    record.error = "LaunchError";
  } else if (dynamic_cast<const ConfigError*>(&e)) {
    record.error = "ConfigError";
  } else if (dynamic_cast<const NetworkError*>(&e)) {
    record.error = "NetworkError";
  } else if (dynamic_cast<const SystemError*>(&e)) {
    record.error = "SystemError";
  } else {
    record.error = "Error";
  }
  return record;
}

[[noreturn]] void rethrow(const CallRecord& record) {
  if (record.error == "InterruptedError") throw InterruptedError(record.signal, record.message);
  if (record.error == "LaunchError") throw LaunchError(record.message);
  if (record.error == "ConfigError") throw ConfigError(record.message);
  if (record.error == "NetworkError") throw NetworkError(record.message);
  if (record.error == "SystemError") throw SystemError(record.message);
  throw Error(record.message);
}

// --- in a worker ------------------------------------------------------------------------------

[[noreturn]] void end_worker(int code, const std::string& message) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  if (!message.empty()) {
    const std::string line = "acc::launch: " + message + "\n";
    (void)!::write(STDERR_FILENO, line.data(), line.size());
  }
  // _exit, not exit: the program's static destructors (LibTorch's, the user's) run in the
  // caller; a worker's job ends with fn.
  ::_exit(code);
}

std::string worker_rank() {
  const char* rank = std::getenv("RANK");
  return rank ? rank : "0";
}

// A call the worker meets before the one it was started for: what it did in the caller.
std::vector<std::string> replay(int call) {
  const char* dir = std::getenv(kResultDir);
  ACC_CHECK(dir != nullptr, LaunchError, "acc::launch: ", kWorkerMarker, " is set without ",
            kResultDir);
  CallRecord record = read_record(record_path(dir, call));
  if (!record.error.empty()) rethrow(record);
  return std::move(record.results);
}

[[noreturn]] void run_in_worker(const std::function<std::string()>& body) {
  const std::string rank = worker_rank();
  std::string result;
  try {
    result = body();
  } catch (const std::exception& e) {
    runtime::detail::write_error_file(std::string("fn threw: ") + e.what());
    end_worker(1, "rank " + rank + ": fn threw: " + e.what());
  } catch (...) {
    runtime::detail::write_error_file("fn threw an exception that is not a std::exception");
    end_worker(1, "rank " + rank + ": fn threw an exception that is not a std::exception");
  }
  const char* dir = std::getenv(kResultDir);
  if (dir != nullptr) {
    // Written beside, then renamed: the caller never reads half a result.
    const std::string path = std::string(dir) + "/" + rank;
    {
      std::ofstream out(path + ".tmp", std::ios::binary);
      out.write(result.data(), static_cast<std::streamsize>(result.size()));
      if (!out.flush()) end_worker(1, "rank " + rank + ": cannot write its result to " + path);
    }
    if (::rename((path + ".tmp").c_str(), path.c_str()) != 0)
      end_worker(1, "rank " + rank + ": cannot write its result to " + path);
  }
  end_worker(0, "");
}

// --- in the caller ------------------------------------------------------------------------------

// Fork is unsafe once CUDA holds state in the process, and a caller holding a context keeps
// memory on a device its workers need: refuse, as notebook_launcher does.
void check_cuda_untouched() {
  if (!at::hasCUDA()) return;
  const auto& cuda = at::detail::getCUDAHooks();
  for (int device = 0; device < cuda.getNumGPUs(); ++device)
    ACC_CHECK(!cuda.hasPrimaryContext(device), ConfigError,
              "acc::launch: CUDA was initialised in this process (device ", device,
              " has a context) before the call; launch the workers before any CUDA use in "
              "main() and use CUDA only inside fn");
}

// The launcher learns of its workers' exits through SIGCHLD, blocked in the calling thread and
// read from a signalfd; another thread with it unblocked could take it first. A thread an earlier
// call joined may still be listed for a moment (pthread_join returns before the kernel releases
// it), so a count above one is read again for up to 200 ms before it is refused.
void check_single_threaded() {
  int threads = processes::own_thread_count();
  for (int retry = 0; threads > 1 && retry < 100; ++retry) {
    Clock::machine().sleep_for(std::chrono::milliseconds(2));
    threads = processes::own_thread_count();
  }
  ACC_CHECK(threads <= 1, ConfigError, "acc::launch: this process already runs ", threads,
            " threads; call acc::launch at the top of main(), before anything starts threads "
            "(LibTorch's thread pools, CUDA), and do that work inside fn");
}

// The results directory, removed with what the workers wrote into it and the records of the
// earlier calls.
class ResultDir {
 public:
  ResultDir(int ranks, int earlier_calls) : ranks_(ranks), earlier_calls_(earlier_calls) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/acc-launch-results-XXXXXX";
    ACC_CHECK(::mkdtemp(pattern.data()) != nullptr, SystemError,
              "acc::launch: cannot create a directory for the results in ", pattern, ": ",
              std::strerror(errno));
    path_ = pattern;
  }
  // Not std::filesystem::remove_all: a PyTorch wheel's libtorch.so brings its own, which crashes.
  ~ResultDir() {
    for (int rank = 0; rank < ranks_; ++rank) {
      ::unlink(file(rank).c_str());
      ::unlink((file(rank) + ".tmp").c_str());
    }
    for (int call = 1; call <= earlier_calls_; ++call) ::unlink(record_path(path_, call).c_str());
    ::rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  std::string file(int rank) const { return path_ + "/" + std::to_string(rank); }

 private:
  int ranks_;
  int earlier_calls_;
  std::string path_;
};

// What the agent changes in the process for the time of a launch (launcher::RealOs: the blocked
// signals, SIGPIPE ignored, the child subreaper), put back when it is done.
class ProcessStateGuard {
 public:
  ProcessStateGuard() {
    ::pthread_sigmask(SIG_SETMASK, nullptr, &mask_);
    ::sigaction(SIGPIPE, nullptr, &sigpipe_);
    ::prctl(PR_GET_CHILD_SUBREAPER, &subreaper_);
  }
  ~ProcessStateGuard() {
    ::prctl(PR_SET_CHILD_SUBREAPER, subreaper_);
    ::sigaction(SIGPIPE, &sigpipe_, nullptr);
    ::pthread_sigmask(SIG_SETMASK, &mask_, nullptr);
  }
  ProcessStateGuard(const ProcessStateGuard&) = delete;
  ProcessStateGuard& operator=(const ProcessStateGuard&) = delete;

 private:
  sigset_t mask_{};
  struct sigaction sigpipe_ {};
  int subreaper_ = 0;
};

launcher::LaunchPlan make_plan(const LaunchOptions& options, const launcher::HostInfo& host,
                               int call, const std::string& result_dir) {
  ACC_CHECK(options.num_processes >= 1, ConfigError,
            "acc::launch: num_processes must be at least 1, not ", options.num_processes);
  launcher::LaunchOptions o;
  o.nproc_per_node = std::to_string(options.num_processes);
  o.master_addr = options.master_addr;
  if (options.master_port != 0) o.master_port = options.master_port;
  o.max_restarts = options.max_restarts;
  o.shutdown_timeout = options.shutdown_timeout;
  o.log_line_prefix = options.log_line_prefix;
  if (options.mixed_precision != "no") o.mixed_precision = options.mixed_precision;
  o.program = processes::own_executable();
  o.program_args =  // argv[0] left out: the workers get the resolved path
      options.worker_args ? *options.worker_args : processes::own_arguments();
  o.no_python = true;  // the program itself, even when its name ends in .py
  // Above the plan's own variables: an OMP_NUM_THREADS here means no default and no notice.
  o.extra_env = options.env;
  o.omp_threads_hint = "set it in LaunchOptions::env (or the caller's environment) to tune";
  launcher::LaunchPlan plan = launcher::build_plan(o, host);
  plan.print_failure_report = false;  // it goes into the exception
  plan.env.emplace_back(kWorkerMarker, std::to_string(call));
  plan.env.emplace_back(kResultDir, result_dir);
  return plan;
}

std::vector<std::string> run_caller(int call, const LaunchOptions& options) {
  check_cuda_untouched();
  check_single_threaded();
  const std::vector<CallRecord>& history = caller_history();
  ResultDir results(options.num_processes, static_cast<int>(history.size()));
  for (size_t earlier = 0; earlier < history.size(); ++earlier)
    write_record(record_path(results.path(), static_cast<int>(earlier) + 1), history[earlier]);
  launcher::HostInfo host = launcher::detect_host();
  launcher::LaunchPlan plan = make_plan(options, host, call, results.path());
  int status = 0;
  std::string report;
  {
    ProcessStateGuard guard;
    launcher::Agent agent(std::move(plan), std::move(host.environment), host.hostname);
    status = agent.run();
    report = agent.failure_report();
  }
  if (!report.empty()) throw LaunchError("acc::launch: a worker failed\n" + report);
  if (status > 128)
    throw InterruptedError(status - 128, std::string("acc::launch: stopped by SIG") +
                                             sigabbrev_np(status - 128) +
                                             "; every worker was stopped");
  ACC_CHECK(status == 0, LaunchError, "acc::launch: the workers ended with status ", status,
            " (see the messages above)");
  std::vector<std::string> bytes;
  for (int rank = 0; rank < options.num_processes; ++rank) {
    bool ok = false;
    bytes.push_back(read_file(results.file(rank), &ok));
    ACC_CHECK(ok, LaunchError, "acc::launch: rank ", rank,
              " exited 0 without returning from fn: its main() did not reach the call "
              "(the workers run main() again from the top; docs/runtime.md)");
  }
  return bytes;
}

}  // namespace

bool is_launched_worker() {
  return std::getenv(kWorkerMarker) != nullptr;
}

namespace detail {

std::vector<std::string> launch_bytes(const std::function<std::string()>& body,
                                      const LaunchOptions& options) {
  const int call = ++calls;
  if (const char* marker = std::getenv(kWorkerMarker)) {
    const int started_for = std::atoi(marker);
    if (call < started_for) return replay(call);
    // A worker ends at the call it was started for: a later one is a call inside fn.
    if (call > started_for)
      end_worker(1, "rank " + worker_rank() +
                        ": acc::launch was called inside fn; call it from main() only");
    run_in_worker(body);
  }
  std::vector<CallRecord>& history = caller_history();
  try {
    std::vector<std::string> results = run_caller(call, options);
    history.push_back(CallRecord{results, "", 0, ""});
    return results;
  } catch (const std::exception& e) {
    history.push_back(error_record(e));
    throw;
  }
}

std::string tensor_to_bytes(const torch::Tensor& tensor) {
  const std::vector<char> bytes = torch::jit::pickle_save(tensor);
  return std::string(bytes.begin(), bytes.end());
}

torch::Tensor tensor_from_bytes(const std::string& bytes) {
  return torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toTensor();
}

}  // namespace detail
}  // namespace acc
