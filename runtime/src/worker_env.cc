#include "acc/runtime/worker_env.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <initializer_list>

#include "acc/common/error.h"

namespace acc {
namespace {

// The first variable of `names` that is set, with its name (for error messages).
std::optional<std::pair<std::string, std::string>> first_set(
    const EnvLookup& lookup, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (auto value = lookup(name)) return std::make_pair(std::string(name), *value);
  }
  return std::nullopt;
}

// SLURM_NTASKS_PER_NODE may read "2(x3)"; the leading integer is what we want, as Accelerate's
// get_int_from_env would fail on it. Everything else must be a plain non-negative integer.
int parse_int(const std::string& name, const std::string& value, bool allow_suffix = false) {
  size_t digits = 0;
  while (digits < value.size() && std::isdigit(static_cast<unsigned char>(value[digits]))) ++digits;
  const bool ok = digits > 0 && digits <= 9 && (allow_suffix || digits == value.size());
  ACC_CHECK(ok, ConfigError, "environment variable ", name, "='", value,
            "' is not a non-negative integer; unset it or set a number");
  return std::stoi(value.substr(0, digits));
}

std::optional<int> int_var(const EnvLookup& lookup, std::initializer_list<const char*> names) {
  auto found = first_set(lookup, names);
  if (!found) return std::nullopt;
  return parse_int(found->first, found->second,
                   found->first == std::string("SLURM_NTASKS_PER_NODE"));
}

}  // namespace

bool parse_env_bool(const std::string& name, const std::string& value) {
  std::string v = value;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* yes : {"y", "yes", "t", "true", "on", "1"})
    if (v == yes) return true;
  for (const char* no : {"n", "no", "f", "false", "off", "0"})
    if (v == no) return false;
  throw ConfigError(detail::concat("environment variable ", name, "='", value,
                                   "' is not a boolean; use true/false, yes/no, on/off or 1/0"));
}

WorkerEnv parse_worker_env(const EnvLookup& lookup) {
  WorkerEnv env;
  auto rank = int_var(
      lookup, {"RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID"});
  auto world = int_var(lookup, {"WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE",
                                "MV2_COMM_WORLD_SIZE", "SLURM_NTASKS"});
  auto local_rank = int_var(lookup, {"LOCAL_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK",
                                     "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"});
  auto local_world =
      int_var(lookup, {"LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE",
                       "MV2_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"});
  env.launched = rank.has_value() || local_rank.has_value() || world.has_value();
  env.rank = rank.value_or(0);
  env.world_size = world.value_or(1);
  env.local_rank = local_rank.value_or(env.rank);
  env.local_world_size = local_world.value_or(env.world_size);
  ACC_CHECK(env.world_size >= 1, ConfigError, "WORLD_SIZE must be at least 1, got ",
            env.world_size);
  ACC_CHECK(env.rank < env.world_size, ConfigError, "RANK=", env.rank,
            " is not below WORLD_SIZE=", env.world_size, "; check the launcher's variables");
  ACC_CHECK(env.local_rank < env.local_world_size || !local_world, ConfigError,
            "LOCAL_RANK=", env.local_rank, " is not below LOCAL_WORLD_SIZE=", env.local_world_size);

  if (auto addr = lookup("MASTER_ADDR"); addr && !addr->empty()) env.master_addr = *addr;
  if (auto port = lookup("MASTER_PORT")) {
    env.master_port = parse_int("MASTER_PORT", *port);
    ACC_CHECK(env.master_port > 0 && env.master_port < 65536, ConfigError, "MASTER_PORT=", *port,
              " is not a TCP port (1-65535)");
  }
  if (auto count = lookup("TORCHELASTIC_RESTART_COUNT"))
    env.restart_count = parse_int("TORCHELASTIC_RESTART_COUNT", *count);
  // torch compares against the literal "True"; any other value means the rank-0 store.
  if (auto agent = lookup("TORCHELASTIC_USE_AGENT_STORE")) env.use_agent_store = *agent == "True";
  if (auto mp = lookup("ACCELERATE_MIXED_PRECISION")) env.mixed_precision = *mp;
  if (auto cpu = lookup("ACCELERATE_USE_CPU"))
    env.use_cpu = parse_env_bool("ACCELERATE_USE_CPU", *cpu);
  if (auto steps = lookup("ACCELERATE_GRADIENT_ACCUMULATION_STEPS"))
    env.gradient_accumulation_steps = parse_int("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", *steps);
  if (auto omp = lookup("OMP_NUM_THREADS"))
    env.omp_num_threads = parse_int("OMP_NUM_THREADS", *omp);
  return env;
}

WorkerEnv worker_env_from_process() {
  return parse_worker_env([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

}  // namespace acc
