#include "plan/config_merge.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <utility>

#include "acc/common/error.h"
#include "acc/config/launch_env.h"
#include "acc/config/paths.h"
#include "acc/config/schema.h"
#include "output/log.h"

namespace acc::launcher {
namespace {

namespace cfg = acc::config;

std::optional<int> positive(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  char* end = nullptr;
  const long parsed = std::strtol(it->second.c_str(), &end, 10);
  if (*end != '\0' || parsed <= 0) return std::nullopt;
  return static_cast<int>(parsed);
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

MergeEnvironment MergeEnvironment::from_host(const HostInfo& host) {
  MergeEnvironment env;
  env.omp_num_threads = positive(host.environment, "OMP_NUM_THREADS");
  for (const char* name :
       {"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE"}) {
    if (auto size = positive(host.environment, name)) {
      env.mpi_local_size = size;
      break;
    }
  }
  env.physical_cores = host.physical_cores;
  if (auto it = host.environment.find("PYTHONPATH"); it != host.environment.end())
    env.pythonpath = it->second;
  env.cwd = host.cwd;
  return env;
}

void merge_config(const cfg::ClusterConfig& config, const MergeEnvironment& environment,
                  LaunchOptions& o) {
  const std::string file = config.path().empty() ? "config" : config.path();
  ACC_CHECK(!(o.cpu && o.multi_gpu), ConfigError,
            "--cpu and --multi_gpu: give one of them (--cpu runs one process on the CPU)");
  ACC_CHECK(!o.multi_gpu || !o.was_given("num_processes") || o.num_processes.value_or(2) >= 2,
            ConfigError,
            "--multi_gpu needs at least 2 processes: pass --num_processes 2 or more "
            "(or leave out --multi_gpu for one process)");
  cfg::ModeFlags flags;
  flags.cpu = o.cpu;
  flags.multi_gpu = o.multi_gpu;
  flags.use_deepspeed = o.use_deepspeed;
  flags.use_fsdp = o.use_fsdp;
  flags.use_megatron_lm = o.use_megatron_lm;
  flags.use_parallelism_config = o.use_parallelism_config;
  const cfg::LaunchMode mode = cfg::launch_mode(config, flags);
  const bool workers = cfg::launches_workers(config, mode);
  // The command line, or a scheduler (which the file does not override either).
  auto given = [&](const char* name, const char* twin = nullptr) {
    auto set = [&](const char* n) { return o.was_given(n) || o.set_by_scheduler(n); };
    return set(name) || (twin && set(twin));
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
  o.same_network = config.same_network();

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
    // The plan says so when it limits several workers (plan.cc, resolve_environment).
    o.omp_threads_chosen = threads == 1 && !environment.omp_num_threads;
  }

  if (mode.path == cfg::LaunchPath::kDeepSpeed) {
    o.extra_env.emplace_back("PYTHONPATH", path_add(environment.pythonpath, environment.cwd));
    // Accelerate's DeepSpeed path sets no OMP_NUM_THREADS, so torchrun's rule gives it: 1 for
    // several workers unless set, also where acc-launch binds CPUs (--enable_cpu_affinity),
    // which elsewhere sets it to the worker's CPUs.
    if (!environment.omp_num_threads && o.num_processes.value_or(1) / std::max(machines, 1) > 1) {
      o.extra_env.emplace_back("OMP_NUM_THREADS", "1");
      o.omp_threads_chosen = true;
    }
  }
  for (auto& entry : cfg::section_env(config, mode, o.mixed_precision.value_or("no"),
                                      mixed_precision_from_config))
    o.extra_env.push_back(std::move(entry));
}

void apply_config_flags(const LaunchOptions& options, cfg::ClusterConfig& config) {
  for (const auto& [name, text] : options.config_flags) {
    for (const cfg::LaunchFlag& flag : cfg::launch_flags()) {
      if (flag.spec->name != name) continue;
      cfg::Value value = cfg::flag_value(*flag.spec, text);
      if (flag.section.empty()) {
        config.set(name, std::move(value));
        continue;
      }
      // A key the file wrote stays the file's key (Accelerate lists those in
      // ACCELERATE_CONFIG_DS_FIELDS) with the flag's value.
      const std::string section(flag.section);
      if (const cfg::Value* old = config.section(section).find(name))
        value.key_mark = old->key_mark;
      config.set_section_key(section, name, std::move(value));
    }
  }
}

namespace {

std::vector<std::string> ignored_flag_notices(const LaunchOptions& options) {
  std::vector<std::string> notices;
  for (const auto& [name, text] : options.config_flags) {
    const cfg::KeySpec* spec = cfg::find_cluster_key(name);
    if (spec && spec->doc.find("accepted and unused") != std::string_view::npos)
      notices.push_back("--" + name + " ignored: " + std::string(spec->doc.substr(0, 8)) +
                        " only (as accelerate launch ignores it elsewhere)");
  }
  return notices;
}

// A flag only `accelerate launch` takes makes this an Accelerate launch, with its checks and
// variables (OMP_NUM_THREADS, FP8, ...), file or not; torchrun's flags alone do not.
bool any_accelerate_flag(const LaunchOptions& o) {
  if (!o.config_flags.empty() || o.use_deepspeed || o.use_fsdp || o.use_megatron_lm ||
      o.use_parallelism_config || o.cpu || o.multi_gpu || o.debug)
    return true;
  for (const char* name :
       {"num_processes", "num_machines", "machine_rank", "main_process_ip", "main_process_port",
        "mixed_precision", "gpu_ids", "num_cpu_threads_per_process"})
    if (o.was_given(name)) return true;
  return false;
}

}  // namespace

void apply_config_file(LaunchOptions& options, const MergeEnvironment& environment) {
  std::string path = options.config_file;
  // accelerate launch skips the default file with --cpu (launch.py L1212), a quirk acc-launch
  // does not copy (docs/config.md, "Divergences").
  if (path.empty()) {
    path = cfg::default_config_path();
    if (!cfg::file_exists(path)) {
      path.clear();
    } else if (!options.quiet) {
      // Accelerate applies its default file silently (huggingface/accelerate#1133); say so.
      log::info("using the config file " + path + " (pass --config_file to choose another)");
    }
  }
  if (path.empty() && !any_accelerate_flag(options)) return;
  cfg::ClusterConfig config;
  if (!path.empty()) {
    config = cfg::load_config(path);
    for (const std::string& warning : config.warnings()) log::warn(warning);
  } else if (!options.num_processes && !options.was_given("nproc_per_node") &&
             !options.set_by_scheduler("nproc_per_node")) {
    // No file: the flags alone, as `accelerate launch` without a config (one process unless
    // told otherwise).
    config.set("num_processes", cfg::Value::of_int(1));
  }
  apply_config_flags(options, config);
  for (std::string& notice : ignored_flag_notices(options)) options.notices.push_back(notice);
  merge_config(config, environment, options);
}

}  // namespace acc::launcher
