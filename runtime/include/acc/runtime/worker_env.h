#pragma once

// What a worker learns from its environment: the torchrun contract (RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*), the MPI/PMI/SLURM fallbacks that
// Accelerate honours, and the ACCELERATE_* switches. Pure logic: no LibTorch, no sockets.

#include <functional>
#include <optional>
#include <string>

namespace acc {

struct WorkerEnv {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // TORCHELASTIC_RESTART_COUNT: which attempt of the worker group this is (0 for the first).
  int restart_count = 0;
  // TORCHELASTIC_USE_AGENT_STORE=True: the launcher hosts the store, every rank is a client.
  bool use_agent_store = false;
  // True when a launcher (or MPI/SLURM) set the rank variables; false for a plain `./train`.
  bool launched = false;
  // ACCELERATE_MIXED_PRECISION ("no", "fp16", "bf16"), as written; validated by the Accelerator.
  std::string mixed_precision = "no";
  // ACCELERATE_USE_CPU.
  bool use_cpu = false;
  // ACCELERATE_GRADIENT_ACCUMULATION_STEPS, 0 when unset.
  int gradient_accumulation_steps = 0;
  // OMP_NUM_THREADS, 0 when unset.
  int omp_num_threads = 0;
};

// Returns the value of an environment variable, or nullopt when it is unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// Parses the worker environment through `lookup`. Non-blocking, thread-safe if `lookup` is.
// Throws acc::ConfigError naming the variable when a value is malformed or inconsistent
// (for example RANK >= WORLD_SIZE).
WorkerEnv parse_worker_env(const EnvLookup& lookup);

// parse_worker_env over this process's environment (getenv).
WorkerEnv worker_env_from_process();

// Accelerate's str_to_bool: y/yes/t/true/on/1 and n/no/f/false/off/0, any case. Throws
// acc::ConfigError naming `name` for anything else.
bool parse_env_bool(const std::string& name, const std::string& value);

}  // namespace acc
