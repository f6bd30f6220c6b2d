#include "config_merge.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <utility>

#include "acc/common/error.h"
#include "acc/config/launch_env.h"
#include "acc/config/paths.h"

namespace acc::launcher {
namespace {

namespace cfg = acc::config;

std::optional<int> positive_env(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (*end != '\0' || parsed <= 0) return std::nullopt;
  return static_cast<int>(parsed);
}

int count_physical_cores() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string line, physical_id = "0";
  while (std::getline(cpuinfo, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "physical id") physical_id = value;
    if (key == "core id") cores.emplace(physical_id, value);
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

// env_var_path_add(): the existing entries, then the new one.
std::string path_add(const std::string& list, const std::string& entry) {
  std::string out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t colon = list.find(':', start);
    if (colon == std::string::npos) colon = list.size();
    if (colon > start) out += (out.empty() ? "" : ":") + list.substr(start, colon - start);
    start = colon + 1;
  }
  return out + (out.empty() ? "" : ":") + entry;
}

}  // namespace

MergeEnvironment MergeEnvironment::from_process() {
  MergeEnvironment env;
  env.omp_num_threads = positive_env("OMP_NUM_THREADS");
  for (const char* name :
       {"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE"}) {
    if (auto size = positive_env(name)) {
      env.mpi_local_size = size;
      break;
    }
  }
  env.physical_cores = count_physical_cores();
  if (const char* pythonpath = std::getenv("PYTHONPATH")) env.pythonpath = pythonpath;
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd)) env.cwd = cwd;
  return env;
}

void merge_config(const cfg::ClusterConfig& config, const MergeEnvironment& environment,
                  LaunchOptions& o) {
  const std::string file = config.path().empty() ? "config" : config.path();
  ACC_CHECK(!(o.cpu && o.multi_gpu), ConfigError,
            "--cpu and --multi_gpu: give one of them (--cpu runs one process on the CPU)");
  const cfg::LaunchMode mode = cfg::launch_mode(config, o.cpu, o.multi_gpu);
  const bool workers = cfg::launches_workers(config, mode);
  auto given = [&](const char* name, const char* twin = nullptr) {
    return o.was_given(name) || (twin && o.was_given(twin));
  };

  if (!given("num_processes", "nproc_per_node")) {
    const int n = config.num_processes();
    ACC_CHECK(n != -1, ConfigError, file,
              ": num_processes: not set; pass --num_processes N, or add num_processes: N to the "
              "file (the total over all machines)");
    // Accelerate's simple launcher starts one process whatever num_processes says.
    o.num_processes = workers ? n : 1;
  }
  if (!given("num_machines", "nnodes")) o.num_machines = config.num_machines();
  if (!given("machine_rank", "node_rank")) o.machine_rank = config.machine_rank();
  const int machines = o.num_machines.value_or(1);
  if (!given("main_process_ip", "master_addr") && machines > 1 && config.main_process_ip())
    o.main_process_ip = config.main_process_ip();
  if (!given("main_process_port", "master_port") && config.main_process_port())
    o.main_process_port = config.main_process_port();
  // Accelerate ignores these two from the file (their flags default to non-None values);
  // acc-launch honours them (docs/config.md, "Divergences").
  if (!given("rdzv_backend") && config.has("rdzv_backend")) o.rdzv_backend = config.rdzv_backend();

  bool mixed_precision_from_config = false;
  if (!given("mixed_precision")) {
    mixed_precision_from_config = config.mixed_precision().has_value();
    o.mixed_precision = config.mixed_precision().value_or("no");
  }
  if (!given("debug")) o.debug = o.debug || config.debug();
  if (!given("cpu")) o.cpu = config.use_cpu() || config.distributed_type() == "MULTI_CPU";
  o.multi_gpu = mode.path != cfg::LaunchPath::kSimple;
  o.simple_launcher = !workers && o.num_processes.value_or(1) == 1 && machines == 1;

  const std::string devices = cfg::visible_devices_variable(config.distributed_type());
  if (!given("gpu_ids")) {
    if (devices == "CUDA_VISIBLE_DEVICES")
      o.gpu_ids = config.gpu_ids();
    else if (config.gpu_ids() && *config.gpu_ids() != "all")
      o.extra_env.emplace_back(devices, *config.gpu_ids());
  }

  if (!given("num_cpu_threads_per_process") && mode.path != cfg::LaunchPath::kDeepSpeed) {
    // _validate_launch_command(): $OMP_NUM_THREADS, else 1; on CPU, the physical cores shared
    // by the local processes when that gives more than one thread each.
    int threads = environment.omp_num_threads.value_or(1);
    if (o.cpu && !environment.omp_num_threads) {
      const int local = environment.mpi_local_size.value_or(
          std::max(o.num_processes.value_or(1) / std::max(machines, 1), 1));
      const int share = environment.physical_cores / local;
      if (share > 1) threads = share;
    }
    o.num_cpu_threads_per_process = threads;
  }

  if (mode.path == cfg::LaunchPath::kDeepSpeed)
    o.extra_env.emplace_back("PYTHONPATH", path_add(environment.pythonpath, environment.cwd));
  for (auto& entry : cfg::section_env(config, mode, o.mixed_precision.value_or("no"),
                                      mixed_precision_from_config))
    o.extra_env.push_back(std::move(entry));
}

void apply_config_file(LaunchOptions& options) {
  std::string path = options.config_file;
  if (path.empty()) {
    path = cfg::default_config_path();
    if (!cfg::file_exists(path)) return;
    // Accelerate applies its default file silently (huggingface/accelerate#1133); say so.
    if (!options.quiet)
      std::cerr << "acc-launch: using the config file " << path
                << " (pass --config_file to choose another)\n";
  }
  const cfg::ClusterConfig config = cfg::load_config(path);
  for (const std::string& warning : config.warnings())
    std::cerr << "acc-launch: warning: " << warning << "\n";
  merge_config(config, MergeEnvironment::from_process(), options);
}

}  // namespace acc::launcher
