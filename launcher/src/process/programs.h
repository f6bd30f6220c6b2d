#pragma once

// Programs the launcher runs beside its workers (RealOs's start_program, run_program,
// program_output and replace_with, os.h): a debugger for a worker's stack, scontrol for a Slurm
// node's address, the launcher itself for `acc-launch test`, ssh or srun for a fan-out. Each starts
// with no signal blocked (the launcher blocks those it reads from its signalfd) and in the
// launcher's process group, unlike a worker (spawn.h).

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace acc::launcher {

// See Os::start_program. Never throws.
pid_t start_program(const std::vector<std::string>& argv, const std::string& stdout_path);

// See Os::run_program. Throws LaunchError.
int run_program(const std::vector<std::string>& argv);

// See Os::program_output. Never throws.
std::optional<std::string> program_output(const std::vector<std::string>& argv);

// See Os::exit_status. Never throws.
std::optional<int> exit_status(pid_t pid);

// See Os::replace_with. Throws LaunchError.
void replace_with(const std::string& executable, const std::vector<std::string>& argv);

}  // namespace acc::launcher
