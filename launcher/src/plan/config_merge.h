#pragma once

// The merge of an Accelerate config file into a launch (reference/accelerate.md §3.2). The file
// proposes its keys' values and apply_proposals (option_sources.h) keeps those no higher layer
// (the command line and PET_*, a scheduler) set; the merge then derives what follows from the
// result (the launch mode, threads, the workers' variables).

#include <optional>
#include <string>

#include "acc/common/lazy.h"
#include "acc/config/cluster_config.h"
#include "acc/launcher/cli/options.h"
#include "acc/launcher/plan/plan.h"

namespace acc::launcher {

// The facts of the launching process that `accelerate launch` reads while merging.
struct MergeEnvironment {
  std::optional<int> omp_num_threads;  // $OMP_NUM_THREADS when a positive integer
  std::optional<int> mpi_local_size;   // $MPI_LOCALNRANKS / $OMPI_COMM_WORLD_LOCAL_SIZE / ...
  Lazy<int> physical_cores = 1;        // cores, not hyper-threads (read when needed)
  std::string pythonpath;              // $PYTHONPATH
  std::string cwd;                     // the current directory

  // Takes them from the host facts (detect_host()).
  static MergeEnvironment from_host(const HostInfo& host);
};

// Fills the options no higher layer set from `config` (Source::kConfigFile) and appends the
// config's worker variables to options.extra_env. Pure. Throws ConfigError (one line naming the
// file, the key and the fix) for a config that cannot be launched as asked (no num_processes, --cpu
// with
// --multi_gpu).
void merge_config(const acc::config::ClusterConfig& config, const MergeEnvironment& environment,
                  LaunchOptions& options);

// Sets the command line's config-key flags (options.config_flags) on `config`, each converted as
// argparse converts that flag, so that a flag beats the file. Throws ConfigError naming a flag
// whose value does not fit.
void apply_config_flags(const LaunchOptions& options, acc::config::ClusterConfig& config);

// Resolves the config file (--config_file, else Accelerate's default file when it exists: see
// acc/config/paths.h), loads and validates it, prints its warnings to stderr, applies the command
// line's config-key flags over it and merges it. Without a file, the flags alone are merged over an
// empty config; with neither, nothing happens. Throws ConfigError with one line per problem in the
// file.
void apply_config_file(LaunchOptions& options, const MergeEnvironment& environment);

}  // namespace acc::launcher
