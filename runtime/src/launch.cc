#include "acc/runtime/launch.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>

#include "acc/common/error.h"
#include "acc/launcher/agent/agent.h"
#include "acc/launcher/host/host.h"
#include "acc/launcher/plan/plan.h"
#include "error_file.h"

namespace acc {
namespace {

// The marker: set in the workers of a call, to that call's number in the caller (1 for its first
// call), so that a worker whose main() reaches another call first says so instead of running the
// wrong function.
constexpr const char* kWorkerMarker = "ACC_LAUNCH_WORKER";
// Where each worker leaves its result: <dir>/<rank>.
constexpr const char* kResultDir = "ACC_LAUNCH_RESULT_DIR";

std::atomic<int> calls{0};

std::string read_file(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary);
  *ok = static_cast<bool>(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
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

[[noreturn]] void run_in_worker(int call, const char* marker,
                                const std::function<std::string()>& body) {
  const char* rank_text = std::getenv("RANK");
  const std::string rank = rank_text ? rank_text : "0";
  if (std::to_string(call) != marker)
    end_worker(1, "rank " + rank + " was started for call " + marker +
                      " of acc::launch but reached call " + std::to_string(call) +
                      " first: the workers run main() again from the top, so it must make the "
                      "same calls in every process (docs/runtime.md)");
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
// read from a signalfd; another thread with it unblocked could take it first.
void check_single_threaded() {
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return;
  int threads = 0;
  while (const dirent* entry = ::readdir(tasks))
    if (entry->d_name[0] != '.') ++threads;
  ::closedir(tasks);
  ACC_CHECK(threads <= 1, ConfigError, "acc::launch: this process already runs ", threads,
            " threads; call acc::launch at the top of main(), before anything starts threads "
            "(LibTorch's thread pools, CUDA), and do that work inside fn");
}

std::string own_executable() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  ACC_CHECK(n > 0, SystemError, "acc::launch: cannot read /proc/self/exe: ", std::strerror(errno));
  return std::string(path, static_cast<size_t>(n));
}

std::vector<std::string> own_arguments() {
  bool ok = false;
  const std::string cmdline = read_file("/proc/self/cmdline", &ok);
  std::vector<std::string> args;
  for (size_t start = 0; start < cmdline.size();) {
    const size_t end = cmdline.find('\0', start);
    args.push_back(cmdline.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (!args.empty()) args.erase(args.begin());  // argv[0]: the workers get the resolved path
  return args;
}

// The results directory, removed with what the workers wrote into it.
class ResultDir {
 public:
  explicit ResultDir(int ranks) : ranks_(ranks) {
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
    ::rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  std::string file(int rank) const { return path_ + "/" + std::to_string(rank); }

 private:
  int ranks_;
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
  o.program = own_executable();
  o.program_args = options.worker_args ? *options.worker_args : own_arguments();
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
  ResultDir results(options.num_processes);
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
  if (const char* marker = std::getenv(kWorkerMarker)) run_in_worker(call, marker, body);
  return run_caller(call, options);
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
