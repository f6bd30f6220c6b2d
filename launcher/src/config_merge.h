#pragma once

// The merge of an Accelerate config file into a launch (reference/accelerate.md §3.2), with
// acc-launch's precedence for every key: the command line (and PET_*), then the file, then the
// defaults. LaunchOptions::given says what the command line set.

#include <optional>
#include <string>

#include "acc/config/cluster_config.h"
#include "acc/launcher/options.h"

namespace acc::launcher {

// The facts of the launching process that `accelerate launch` reads while merging.
struct MergeEnvironment {
  std::optional<int> omp_num_threads;  // $OMP_NUM_THREADS when a positive integer
  std::optional<int> mpi_local_size;   // $MPI_LOCALNRANKS / $OMPI_COMM_WORLD_LOCAL_SIZE / ...
  int physical_cores = 1;              // cores, not hyper-threads
  std::string pythonpath;              // $PYTHONPATH
  std::string cwd;                     // the current directory

  // Reads them from this process (environment, /proc/cpuinfo, getcwd).
  static MergeEnvironment from_process();
};

// Fills the options the user did not give from `config` and appends the config's worker
// variables to options.extra_env. Pure. Throws ConfigError (one line naming the file, the key
// and the fix) for a config that cannot be launched as asked (no num_processes, --cpu with
// --multi_gpu).
void merge_config(const acc::config::ClusterConfig& config, const MergeEnvironment& environment,
                  LaunchOptions& options);

// Resolves the config file (--config_file, else Accelerate's default file when it exists: see
// acc/config/paths.h), loads and validates it, prints its warnings to stderr and merges it.
// Does nothing when no file applies. Throws ConfigError with one line per problem in the file.
void apply_config_file(LaunchOptions& options);

}  // namespace acc::launcher
