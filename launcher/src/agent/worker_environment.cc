#include "agent/worker_environment.h"

#include <set>
#include <sstream>

#include "acc/common/int_ranges.h"
#include "acc/common/progress_file.h"
#include "acc/common/strings.h"
#include "acc/common/torch_env.h"
#include "acc/launcher/agent/agent.h"
#include "agent/checkpoint_memory.h"
#include "agent/standbys.h"
#include "hangs/flight_recorder.h"
#include "hangs/python_stack_hook.h"
#include "nodes/store_address.h"
#include "output/console.h"

namespace acc::launcher {

namespace {

EnvList defaults(const LaunchPlan& plan, const WorkerSpec& spec, const Round& round,
                 const std::map<std::string, std::string>& environment, const WorkerPlace& place) {
  EnvList env = plan.env_defaults;
  if (!round.socket_interface.empty())
    env.emplace_back("GLOO_SOCKET_IFNAME", round.socket_interface);
  // The Flight Recorder serves NCCL on GPUs. A Python script on a node without them gets none:
  // PyTorch 2.8+ would make one for Gloo too, whose teardown races the interpreter's exit (a
  // SIGABRT in about one run of five that torchrun's workers, without these variables, rarely
  // meet). A native program keeps them (libacc reads the names its LibTorch knows).
  if (!plan.worker_gpus.empty() || plan.python.empty())
    for (auto& entry : flight_recorder_env(place.worker_dir, plan.worker_torch))
      env.push_back(std::move(entry));
  // The pipe of torchelastic's file timer, which the agent serves. Not for Accelerate's simple
  // launcher, which gives no torchrun contract.
  if (!plan.single_process)
    env.emplace_back("TORCHELASTIC_TIMER_FILE", place.run_dir + "/timer_fifo");
  // Under a CPU binding, the worker's own CPUs: after the plan's OMP_NUM_THREADS=1, which it
  // replaces.
  if (spec.local_rank < static_cast<int>(plan.worker_cpus.size()) &&
      !plan.worker_cpus[spec.local_rank].empty())
    env.emplace_back("OMP_NUM_THREADS", std::to_string(plan.worker_cpus[spec.local_rank].size()));
  // A default never competes with the user's setting, under this name or another PyTorch reads.
  std::erase_if(env, [&](const auto& kv) { return torch_env::is_set(environment, kv.first); });
  return env;
}

EnvList users_environment(const std::map<std::string, std::string>& environment) {
  EnvList env(environment.begin(), environment.end());
  // The launchers' alone: a worker never learns where the job's secret is.
  std::erase_if(env, [](const auto& kv) { return kv.first == kJobSecretFileVar; });
  return env;
}

EnvList launchers_own(const LaunchPlan& plan, const WorkerSpec& spec, const WorkerPlace& place,
                      const std::map<std::string, std::string>& below) {
  EnvList env = {{progress_file::kEnvVar, progress_file_path(place.worker_dir)}};
  if (!place.python_hook_dir.empty()) {
    const auto pythonpath = below.find("PYTHONPATH");
    for (auto& entry : python_stack_hook_env(place.python_hook_dir, place.worker_dir,
                                             pythonpath == below.end() ? "" : pythonpath->second,
                                             below.count("PYTHONFAULTHANDLER") > 0))
      env.push_back(std::move(entry));
  }
  if (plan.virtual_local_rank) env.emplace_back("CUDA_VISIBLE_DEVICES", spec.virtual_device);
  return env;
}

}  // namespace

EnvList env_of_source(EnvSource source, const LaunchPlan& plan, const WorkerSpec& spec,
                      const Round& round, const std::map<std::string, std::string>& environment,
                      const WorkerPlace& place, const std::map<std::string, std::string>& below) {
  switch (source) {
    case EnvSource::kDefault:
      return defaults(plan, spec, round, environment, place);
    case EnvSource::kUsersEnvironment:
      return users_environment(environment);
    case EnvSource::kTorchrunContract:
      return torchrun_contract(plan, spec, round, place.worker_dir + "/error.json");
    case EnvSource::kLaunchOptions:
      return plan.env;
    case EnvSource::kLauncher:
      return launchers_own(plan, spec, place, below);
  }
  return {};
}

std::map<std::string, std::string> worker_environment(
    const LaunchPlan& plan, const WorkerSpec& spec, const Round& round,
    const std::map<std::string, std::string>& environment, const WorkerPlace& place) {
  std::map<std::string, std::string> env;
  for (const EnvSourceRow& row : kEnvPrecedence)
    for (auto& [key, value] : env_of_source(row.source, plan, spec, round, environment, place, env))
      env[key] = std::move(value);
  return env;
}

namespace {

// The dry run's lines on what the launcher adds to the job: restarts, warm workers, checkpoints
// in memory, the health check.
void describe_what_the_job_adds(const LaunchPlan& plan, std::ostringstream& out) {
  if (plan.nnodes > 1)
    out << "# several nodes: GLOO_SOCKET_IFNAME may be added once they meet (where the hostname "
           "does not reach node 0)\n";
  if (plan.max_no_progress_restarts > 0)
    out << "# restarts: " << plan.max_restarts << " (--max_restarts), none after "
        << plan.max_no_progress_restarts
        << " attempt(s) in a row without progress (--max_no_progress_restarts), then exit "
        << plan.no_restart_exit_code << " (--no_restart_exit_code)\n";
  if (Standbys::wanted(plan))
    out << "# warm workers: once an attempt has started, one standby Python per local rank imports "
           "torch for the next attempt's worker (about "
        << fixed(Standbys::kGbEach, 1) << " GB each, "
        << fixed(Standbys::kGbEach * plan.nproc_per_node, 1)
        << " GB in all; none where MemAvailable is below twice that; --no_warm_workers: none)\n";
  if (wants_checkpoint_memory(plan))
    out << "# checkpoints: acc_launch.checkpoint.save and libacc's save_state copy into "
           "<checkpoint memory> (on /dev/shm, kept across restarts), written to each save's "
           "directory in the background, when an attempt fails and at the end "
           "(docs/checkpoints.md)\n";
  if (plan.health_check_port)
    out << "# health check: HTTP on port " << *plan.health_check_port
        << " (TORCHELASTIC_HEALTH_CHECK_PORT), 503 after "
        << static_cast<double>(plan.health_check_timeout.count()) / 1000
        << " s without a worker's progress (--health_check_timeout)\n";
}

}  // namespace

std::string format_dry_run(const LaunchPlan& plan, int master_port,
                           const std::map<std::string, std::string>& environment) {
  std::ostringstream out;
  out << "# acc-launch dry run: " << plan.nnodes << " node(s) x " << plan.nproc_per_node
      << " worker(s), world size " << plan.world_size << ", node rank " << plan.node_rank
      << ", store " << plan.master_addr << ":" << master_port << "\n";
  out << describe_store_listeners(plan, master_port);
  if (plan.rdzv_backend == "etcd-v2") {
    const auto protocol = plan.rdzv_conf.find("protocol");
    const bool https = protocol != plan.rdzv_conf.end() && protocol->second == "https";
    out << "# rendezvous: etcd at";
    for (const std::string& member : plan.etcd_endpoints)
      out << " " << (https ? "https://" : "http://") << member;
    for (const char* key : {"cacert", "cert", "key"})
      if (const auto file = plan.rdzv_conf.find(key); file != plan.rdzv_conf.end())
        out << ", " << key << " " << file->second;
    out << "\n";
  }
  if (!plan.python.empty()) out << "# python: " << plan.python << "\n";
  // The PyTorch whose names of renamed variables the workers get (host/python_torch.h).
  if (!plan.worker_torch_origin.empty())
    out << "# torch: " << plan.worker_torch_origin
        << (plan.worker_torch ? "" : ": renamed variables are given under both names") << "\n";
  out << "# each worker's environment is the launcher's with these variables set"
      << (plan.no_python_hook ? " (Python hook off)" : "")
      << "; <run dir> is made at launch (--log_dir, else in /dev/shm or $TMPDIR)\n";
  describe_what_the_job_adds(plan, out);
  // Every membership serves the workers' store from the launcher (nodes/membership.h).
  Round round = static_round(plan, master_port, 0);
  round.agent_store = true;
  const std::string run_dir = "<run dir>";
  for (const WorkerSpec& worker : plan.workers) {
    out << "\n# rank " << global_rank(plan, round, worker.local_rank) << " (local rank "
        << worker.local_rank << ")\n";
    if (worker.local_rank < static_cast<int>(plan.worker_cpus.size())) {
      const std::vector<int>& cpus = plan.worker_cpus[worker.local_rank];
      out << "# cpus " << format_int_ranges(cpus) << "\n";
    }
    const WorkerPlace place{run_dir, run_dir + "/attempt_0/" + std::to_string(worker.local_rank),
                            plan.no_python_hook ? "" : run_dir + "/python"};
    std::map<std::string, std::string> env =
        worker_environment(plan, worker, round, environment, place);
    // The agent adds it to its own environment once it has made the directory.
    if (wants_checkpoint_memory(plan)) env[CheckpointMemory::kEnvVar] = "<checkpoint memory>";
    // The torchrun contract and the options' variables first, in their order, always (acc-launch
    // sets them whatever the launcher has); then, by name, every other variable whose value
    // differs from the launcher's own.
    std::set<std::string> printed;
    auto print = [&](const std::string& key, bool always) {
      const auto it = env.find(key);
      if (it == env.end() || !printed.insert(key).second) return;
      const auto given = environment.find(key);
      if (!always && given != environment.end() && given->second == it->second) return;
      out << key << "=" << it->second << "\n";
    };
    for (const EnvSource source : {EnvSource::kTorchrunContract, EnvSource::kLaunchOptions})
      for (const auto& [key, value] : env_of_source(source, plan, worker, round, {}, place, {}))
        print(key, true);
    for (const auto& [key, value] : env) print(key, false);
    out << "command:";
    for (const std::string& arg : worker.argv) out << " " << quote_for_shell(arg);
    out << "\n";
  }
  return out.str();
}

}  // namespace acc::launcher
