#pragma once

// Warm workers (docs/goodput.md): while an attempt runs, one standby Python per local rank waits
// with the slow part of a worker's start done (the interpreter, `import torch`, the hook), so
// that the next attempt's worker costs what the launcher and init_process_group cost. A standby
// is started by exec, never fork, with the worker's own command line and the environment a cold
// start of its local rank would have at import: worker_environment() without what changes
// between attempts (import_environment()). The hook (sitecustomize) imports torch in a thread of
// its own at the lowest CPU priority, then waits on its channel (descriptor 3, ACC_STANDBY_FD).
// On a restart the WorkerGroup gives each worker to its rank's standby (Os::hand_over: the
// environment and the three standard descriptors in one message) where that standby is alive
// and its environment at import is the worker's; else (with one line) and in the first attempt it
// gives the worker to a standby started for it at once (start_now), which imports torch then.
// A standby so handed its worker first forks its heir (the hook's _leave_heir): the next
// attempt's standby, warm at once, which the launcher adopts when the worker's channel brings it.
// Not thread-safe: the agent's one thread owns it.

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "acc/common/unique_fd.h"
#include "acc/launcher/plan/plan.h"
#include "process/os.h"
#include "status/job_status.h"

namespace acc::launcher {

// What of a worker's environment a standby starts with: all but what changes from one attempt to
// the next (ranks, world sizes, the store's address, the restart count, the attempt's paths).
std::map<std::string, std::string> import_environment(std::map<std::string, std::string> env,
                                                      const std::string& run_dir);

class Standbys {
 public:
  // About what one standby holds once torch is imported (resident: PyTorch 2.11 0.63 GB with
  // what DDP imports, 1.13 0.24 GB; docs/goodput.md).
  static constexpr double kGbEach = 0.7;

  // Whether `plan` is one for standbys: Python workers with the hook, a restart to serve
  // (--max_restarts, or an elastic --nnodes), not --no_warm_workers.
  static bool wanted(const LaunchPlan& plan);
  // Why this machine cannot hold them, for the user ("" where it can): MemAvailable below twice
  // what they would hold.
  static std::string memory_refusal(const LaunchPlan& plan, proc::Reader& proc);

  // `run_dir` holds the standbys' logs (standby/<local rank>.log: what the import printed).
  Standbys(Os& os, const LaunchPlan& plan, const std::map<std::string, std::string>& environment,
           std::string run_dir, std::string python_hook_dir);
  // Kills and reaps every standby left.
  ~Standbys();
  Standbys(const Standbys&) = delete;
  Standbys& operator=(const Standbys&) = delete;

  // Starts a standby for each local rank that has none, with the environment `round` would give
  // its worker at import. A standby that cannot start is left out with one line (cold starts).
  void replenish(const Round& round);

  struct Taken {
    pid_t pid = -1;
    UniqueFd channel;
    std::map<std::string, std::string> import_env;
  };
  // The standby of `local_rank` for a worker whose environment is `env`, out of the set. None
  // where there is none (`why` empty), or (`why` says it, for the user) it died, has not imported
  // torch yet, or its environment at import differs.
  std::optional<Taken> take(int local_rank, const std::map<std::string, std::string>& env,
                            std::string& why);
  // A new standby of `spec` to be handed its worker (environment `env`) at once, for a worker with
  // no standby ready: it imports torch at the worker's priority, its output the worker's, and
  // leaves its heir as a warm one does. None where it could not start (spawn the worker).
  std::optional<Taken> start_now(const WorkerSpec& spec,
                                 const std::map<std::string, std::string>& env);
  // `taken` now runs its worker: its channel brings the heir, the standby of its local rank
  // (docs/goodput.md). One that brings none is replaced by a standby that imports torch.
  void handed_over(int local_rank, Taken taken);
  // The channels of the standbys that wait, and of the workers whose heir is coming: readable
  // when one says it is ready, brings its heir or ends. Those that have ended are left out.
  std::vector<int> channels() const;
  // Reads what came on `fd` (one of channels()); false once it has ended (stop watching it).
  bool read_news(int fd);
  // Ends a standby taken but not handed its worker (the hand-over failed).
  void end(Taken& taken);
  // How many wait, how many have said they are ready, and the memory they hold (/proc).
  WarmWorkersStatus status();

 private:
  struct Standby {
    pid_t pid = -1;
    UniqueFd channel;
    std::map<std::string, std::string> import_env;
    bool ready = false;
    bool awaiting_heir = false;  // pid and channel are the worker's, until its heir comes
    bool ended = false;
  };
  // A standby of `spec` with `import_env` (ACC_STANDBY_NOW where `now`: start_now); none, and
  // `why`, where it could not start.
  std::optional<Standby> spawn(const WorkerSpec& spec,
                               std::map<std::string, std::string> import_env, bool now,
                               std::string& why);
  static bool alive(pid_t pid, const UniqueFd& channel);
  void end(pid_t pid, UniqueFd& channel);
  // False when the standby has ended, or the worker did without leaving an heir.
  bool read_news(Standby& standby);
  // Takes the heir the worker's channel brings, if it has come: false when none will.
  bool take_heir(Standby& standby);

  Os& os_;
  const LaunchPlan& plan_;
  const std::map<std::string, std::string>& environment_;
  std::string run_dir_;
  std::string python_hook_dir_;
  std::map<int, Standby> standbys_;  // by local rank
  std::optional<Round> round_;       // the last replenish()'s
};

}  // namespace acc::launcher
