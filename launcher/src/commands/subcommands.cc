#include "commands/subcommands.h"

#include <algorithm>

#include "agent/checkpoint_memory.h"
#include "agent/checkpoint_replica.h"
#include "commands/commands.h"
#include "commands/rendezvous_command.h"

namespace acc::launcher {

const std::vector<Subcommand>& subcommands() {
  static const std::vector<Subcommand> table = {
      {"launch", "run PROGRAM (the default: acc-launch PROGRAM is acc-launch launch PROGRAM)",
       nullptr, true},
      {"config", "write, show, validate or update an accelerate config file", run_config_command,
       false},
      {"env", "versions, libraries, GPUs, CPUs and the config, for a bug report", run_env_command,
       false},
      {"test", "a check job over the configured workers", run_test_command, true},
      {"stacks", "a running job's hang report: every rank's stack; the job goes on",
       run_stacks_command, false},
      {"top", "a running job's ranks, live (its --status_port)", run_top_command, false},
      {"rendezvous", "rendezvous serve: a store for elastic jobs, on a host of its own",
       run_rendezvous_command, false},
      {"help", "help TOPIC: the flags of one group (torchrun, accelerate, ...)", nullptr, false},
      {kTestWorkerCommand, nullptr, run_test_worker, false},
      {kPersistStateCommand, nullptr, persist_libacc_save, false},
      {kReplicaCommand, nullptr, run_replica_helper, false},
  };
  return table;
}

const Subcommand* find_subcommand(std::string_view name) {
  const std::vector<Subcommand>& all = subcommands();
  const auto found =
      std::find_if(all.begin(), all.end(), [&](const Subcommand& c) { return name == c.name; });
  return found == all.end() ? nullptr : &*found;
}

std::vector<SubcommandHelp> subcommand_help() {
  std::vector<SubcommandHelp> lines;
  for (const Subcommand& command : subcommands())
    if (command.summary) lines.push_back({command.name, command.summary});
  return lines;
}

}  // namespace acc::launcher
