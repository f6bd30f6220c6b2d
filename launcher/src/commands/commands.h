#pragma once

// The subcommands beside `launch`: `acc-launch config ...`, `acc-launch env`, `acc-launch test`,
// and the hidden worker side of `test`. Each takes the arguments after its name, prints to
// stdout/stderr and returns the exit code; a user's mistake throws acc::ConfigError (exit 2).

#include <string>
#include <vector>

namespace acc::launcher {

// `acc-launch config [--config_file F]` (the questionnaire), `config default`, `config show`,
// `config validate [F]`, `config update`.
int run_config_command(const std::vector<std::string>& args);

// `acc-launch env [--config_file F] [--python P]`: versions, the workers' Python and its PyTorch,
// libraries found, GPUs, CPUs, memory, the config.
int run_env_command(const std::vector<std::string>& args);

// `acc-launch test [--config_file F]`: launches the built-in check over the configured workers.
int run_test_command(const std::vector<std::string>& args);

// `acc-launch stacks [LAUNCHER_PID...]`: the hang report of running jobs (stall_watch.h), which
// go on. Without a pid, the one acc-launch launcher of this user started from this session or
// this directory (stacks_command.h).
int run_stacks_command(const std::vector<std::string>& args);

// `acc-launch top [--url URL] [--once]`: a running job's ranks, live, from the status its
// launcher serves (--status_port). Without --url, the one launcher of this user here that serves.
int run_top_command(const std::vector<std::string>& args);

// The hidden subcommand each worker of `acc-launch test` runs: checks the worker environment.
inline constexpr const char* kTestWorkerCommand = "__test_worker";
int run_test_worker(const std::vector<std::string>& args);

}  // namespace acc::launcher
