#include "plan/config_merge.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <utility>

#include "acc/common/error.h"
#include "acc/config/launch_env.h"
#include "acc/config/paths.h"
#include "acc/config/schema.h"
#include "acc/launcher/plan/option_sources.h"
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

// The file's word on the options the command line or a scheduler may have set too; for
// apply_proposals (option_sources.h), which keeps those they did not set.
OptionProposals file_proposals(const cfg::ClusterConfig& config, bool workers,
                               const std::string& devices) {
  OptionProposals file{.source = Source::kConfigFile};
  // Accelerate's simple launcher starts one process whatever num_processes says.
  if (const int n = config.num_processes(); n != -1) file.num_processes = workers ? n : 1;
  file.num_machines = config.num_machines();
  file.machine_rank = config.machine_rank();
  file.main_process_port = config.main_process_port();
  // Accelerate ignores these two from the file (their flags default to non-None values);
  // acc-launch honours them (docs/config.md, "Divergences").
  if (config.has("rdzv_backend")) file.rdzv_backend = config.rdzv_backend();
  file.mixed_precision = config.mixed_precision();
  if (config.debug()) file.debug = true;
  file.cpu = config.use_cpu() || config.distributed_type() == "MULTI_CPU";
  if (devices == "CUDA_VISIBLE_DEVICES") file.gpu_ids = config.gpu_ids();
  return file;
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
  ACC_CHECK(!o.multi_gpu || o.source_of("num_processes") != Source::kCommandLine ||
                o.num_processes.value_or(2) >= 2,
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
  const std::string devices = cfg::visible_devices_variable(config.distributed_type());

  apply_proposals(file_proposals(config, workers, devices), o);
  ACC_CHECK(config.num_processes() != -1 || setting_source(o, "num_processes") != Source::kDefault,
            ConfigError, file,
            ": num_processes: not set; pass --num_processes N, or add num_processes: N to the "
            "file (the total over all machines)");
  const int machines = o.num_machines.value_or(1);
  if (machines > 1 && config.main_process_ip()) {
    // Accelerate reads the address for several machines only.
    OptionProposals address{.source = Source::kConfigFile};
    address.main_process_ip = config.main_process_ip();
    apply_proposals(address, o);
  }
  o.same_network = config.same_network();
  const bool mixed_precision_from_config = o.source_of("mixed_precision") == Source::kConfigFile;
  // An Accelerate launch always names one (its flag's default).
  if (!o.mixed_precision) o.mixed_precision = "no";
  o.multi_gpu = mode.path != cfg::LaunchPath::kSimple;
  o.simple_launcher = !workers && o.num_processes.value_or(1) == 1 && machines == 1;

  // Another vendor's devices: the file's list goes to their variable, unless the command line or
  // a scheduler chose the GPUs.
  if (devices != "CUDA_VISIBLE_DEVICES" && config.gpu_ids() && *config.gpu_ids() != "all" &&
      setting_source(o, "gpu_ids") == Source::kDefault)
    o.extra_env.emplace_back(devices, *config.gpu_ids());

  if (mode.path != cfg::LaunchPath::kDeepSpeed) {
    // _validate_launch_command(): $OMP_NUM_THREADS, else 1; on CPU, the physical cores shared
    // by the local processes when that gives more than one thread each.
    int threads = environment.omp_num_threads.value_or(1);
    if (o.cpu && !environment.omp_num_threads) {
      const int local = environment.mpi_local_size.value_or(
          std::max(o.num_processes.value_or(1) / std::max(machines, 1), 1));
      const int share = environment.physical_cores.get() / local;
      if (share > 1) threads = share;
    }
    OptionProposals chosen{.source = Source::kConfigFile};
    chosen.num_cpu_threads_per_process = threads;
    apply_proposals(chosen, o);
    // The plan says so when it limits several workers (plan.cc, resolve_environment).
    if (o.source_of("num_cpu_threads_per_process") == Source::kConfigFile)
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
    if (o.source_of(name) == Source::kCommandLine) return true;
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
  } else if (!options.num_processes && options.source_of("nproc_per_node") == Source::kDefault) {
    // No file: the flags alone, as `accelerate launch` without a config (one process unless
    // told otherwise).
    config.set("num_processes", cfg::Value::of_int(1));
  }
  apply_config_flags(options, config);
  for (std::string& notice : ignored_flag_notices(options)) options.notices.push_back(notice);
  merge_config(config, environment, options);
}

}  // namespace acc::launcher
