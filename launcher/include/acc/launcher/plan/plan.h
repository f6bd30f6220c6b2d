#pragma once

// Resolution of LaunchOptions into a LaunchPlan: how many workers, their ranks, their command
// lines and their environment. Pure: no processes, sockets or files, so it is unit-tested alone.

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "acc/launcher/cli/options.h"
#include "acc/launcher/host/host.h"
#include "acc/launcher/plan/launch_types.h"

namespace acc::launcher {

// The variable that names the job secret's file where --rdzv_conf job_secret_file does not.
inline constexpr const char* kJobSecretFileVar = "ACC_JOB_SECRET_FILE";

struct LaunchPlan {
  int nproc_per_node = 1;
  int nnodes = 1;     // static jobs; elastic ones learn it in each round
  int min_nodes = 1;  // elastic: --nnodes MIN:MAX
  int max_nodes = 1;
  std::string rdzv_backend = "static";
  std::string rdzv_host;  // c10d: the rendezvous store, --rdzv_endpoint host[:29400]
  int rdzv_port = 29400;
  std::map<std::string, std::string> rdzv_conf;  // --rdzv_conf k=v,...
  // The job secret, read from --rdzv_conf job_secret_file or $ACC_JOB_SECRET_FILE (empty: none):
  // the launchers' store connections prove it; never shown, logged or given to workers.
  std::string job_secret;
  // --rdzv_conf admit_members_only: the job's stores serve loopback and the addresses that proved
  // the job secret alone (docs/rendezvous.md, "Only the job's members").
  bool admit_members_only = false;
  std::string local_addr;  // this node's address as the other nodes reach it
  int node_rank = 0;
  // An elastic node's --node_rank (or its scheduler's): the rank it asks for in each round, kept
  // where the round has it and no other node asked first (docs/migrating.md, "Node ranks").
  std::optional<int> wanted_node_rank;
  int world_size = 1;
  std::string master_addr;
  int master_port = 0;  // 0: the launcher picks a free port at each attempt
  std::string run_id;
  std::string role;
  std::string hostname;
  int max_restarts = 0;
  std::chrono::milliseconds shutdown_timeout{30'000};  // from the stop signal to SIGKILL
  // After SIGKILL, how long a worker may take to end before it is named as unkillable (stuck in
  // the kernel) and the launcher ends without it (exit 5, docs/errors.md).
  std::chrono::milliseconds kill_timeout{10'000};
  // Signals that are forwarded to the workers and then end the job (--signals-to-handle). SIGUSR1
  // is forwarded too when not listed, without ending the job; SIGUSR2 asks for a stack report.
  std::vector<int> stop_signals;
  bool virtual_local_rank = false;  // LOCAL_RANK=0, CUDA_VISIBLE_DEVICES=<the worker's device>
  std::chrono::milliseconds exit_barrier_timeout{300'000};  // elastic: a finished node waits
  StreamSpec redirects;
  StreamSpec tee;
  std::set<int> console_local_ranks;  // empty: every local rank is shown
  std::string log_dir;                // empty: a temporary directory, removed when unused
  std::string log_line_prefix;        // template; see expand_prefix
  bool quiet = false;
  bool dry_run = false;
  // Whether the agent writes the failure report to stderr; acc::launch (libacc) puts it in the
  // exception it throws instead (Agent::failure_report()).
  bool print_failure_report = true;
  std::string program;  // as the user named it, for messages
  std::string script;   // the Python file the workers run (python -u FILE), else empty
  // Python workers: their interpreter and why that one ("/venv/bin/python (beside acc-launch)"),
  // said by the dry run and the launcher's first line; empty for other programs.
  std::string python;
  // Python workers without the sitecustomize hook (--no_python_hook, ACC_PYTHON_HOOK=0).
  bool no_python_hook = false;
  // Python workers of a job that can restart: no standbys (--no_warm_workers, ACC_WARM_WORKERS=0;
  // agent/standbys.h).
  bool no_warm_workers = false;
  // How many of acc_launch.checkpoint's writes to storage stay: PATH, and the older ones as
  // PATH.<seq> (--keep_checkpoints; docs/checkpoints.md).
  int keep_checkpoints = 1;
  // Each node also holds the newest save of the node before it in the round (--checkpoint_replica;
  // agent/checkpoint_replica.h).
  bool checkpoint_replica = false;
  // Accelerate's simple launcher: one process that is not a distributed job, so its worker gets
  // no torchrun contract (with RANK/LOCAL_RANK set, Accelerate would join a group of one).
  bool single_process = false;
  EnvList env;           // the options' variables (agent/worker_environment.h: kLaunchOptions)
  EnvList env_defaults;  // the plan's defaults (kDefault)
  // The PyTorch the workers import, where the launcher could tell (Python workers whose
  // torch/version.py it found): they get only the names of PyTorch's variables it reads
  // (acc/common/torch_env.h); nullopt: every name.
  std::optional<torch_env::Version> worker_torch;
  // Which PyTorch that is and from where, for the dry run: "2.11.0 (/venv/lib/python3.11/
  // site-packages/torch/version.py)" where found, "not found for python3" where not; empty where
  // nobody looked (workers that are not Python, a test's host).
  std::string worker_torch_origin;
  std::vector<WorkerSpec> workers;
  std::vector<std::string> notices;  // one-line messages for the user (e.g. OMP_NUM_THREADS)

  // A fan-out over hosts with different slots (fanout.h): every node's workers, in node order;
  // ranks and the world size follow from them. Empty: nproc_per_node on every node.
  std::vector<int> node_slots;

  // Console output and CPU binding.
  bool dedup_lines = false;  // collapse identical lines of several ranks (line_dedup.h)
  std::chrono::milliseconds dedup_window{150};
  // The CPUs of each local rank (index), set in the child before exec, with OMP_NUM_THREADS
  // their count unless the user set it; empty: no binding (cpu_binding.h).
  std::vector<std::vector<int>> worker_cpus;

  // Hang detection: see LaunchOptions.
  std::chrono::milliseconds stall_timeout{0};  // 0: off
  // Before a worker's first progress; never shorter than stall_timeout.
  std::chrono::milliseconds stall_init_timeout{600000};
  bool stall_stops_job = true;
  std::chrono::milliseconds straggler_window{30000};  // 0: off

  // Pre-flight (nodes/preflight.h): how long a node that does not host the store keeps trying to
  // reach it before the launch fails; 0: no check.
  std::chrono::milliseconds preflight_timeout{60'000};
  // GPU health (docs/launch.md, "GPU health"): the NVIDIA GPUs this node's workers use, as
  // CUDA_VISIBLE_DEVICES names them (an index or a UUID), local rank i the i-th visible one; empty
  // where they use none (no NVIDIA GPU here, --cpu). Checked before the workers start.
  std::vector<std::string> worker_gpus;
  // Before a restart on a GPU node: how long to wait for the failed attempt's processes to let go
  // of their GPU memory. The driver frees it as a process's last handle on the device closes,
  // within a second or two of its exit even for tens of GiB; a bound of a few such seconds keeps
  // a driver that never frees it (a process stuck in it) from holding the restart up for long.
  std::chrono::milliseconds gpu_release_timeout{5'000};
  // --retryable_exit_code: the exit status that stands for every failure of the launcher's own
  // (not a worker's code passed through); 0: each keeps its own code (docs/errors.md).
  int retryable_exit_code = 0;

  // --max_no_progress_restarts: after this many attempts in a row whose workers failed before any
  // progress (no beat, no completed collective in their progress files), no restart: the
  // launcher exits no_restart_exit_code. 0: off.
  int max_no_progress_restarts = 0;
  int no_restart_exit_code = 93;
  // --sdc_exit_codes RESTART,SUSPECT (docs/errors.md, "Silent data corruption"): a worker that
  // exits sdc_restart_exit_code has the job restarted on the same nodes, a restart
  // --max_restarts does not count (not twice in a row); one that exits sdc_suspect_exit_code
  // keeps its node out of the next round, or ends the job with no_restart_exit_code where the
  // job cannot go on without the node. 0: off.
  int sdc_restart_exit_code = 0;
  int sdc_suspect_exit_code = 0;
  // --exclude_nodes_file and --node_health_command (node_verdicts.h): empty, none.
  std::string exclude_nodes_file;
  std::string node_health_command;
  // --network_check (nodes/network_check.h): off; the factor a faulty node is slower by.
  bool network_check = false;
  double network_check_factor = 3;
  // TORCHELASTIC_HEALTH_CHECK_PORT in the launcher's environment: the port of the health check
  // it serves over HTTP (0: one the system picks); nullopt: none.
  std::optional<int> health_check_port;
  std::chrono::milliseconds health_check_timeout{60'000};  // no progress for this long: 503
  // --status_port: the port of the job's status page and metrics (status/job_status.h), 0: one
  // the system picks; nullopt: none. Served on status_host.
  std::optional<int> status_port;
  std::string status_host = "127.0.0.1";

  // --rdzv_backend etcd-v2 (or etcd): the etcd members' client addresses, host:port each, that
  // the elastic rendezvous runs on instead of a store at rdzv_host:rdzv_port.
  std::vector<std::string> etcd_endpoints;
};

// The round of a static job: the plan's own node rank and count.
Round static_round(const LaunchPlan& plan, int master_port, int restart_count);

// A worker's global rank in a round.
int global_rank(const LaunchPlan& plan, const Round& round, int local_rank);
// The job's WORLD_SIZE in `round`: its nodes' workers, or the hostfile's slots.
int world_size(const LaunchPlan& plan, const Round& round);

// --rdzv_conf is_host, where given (its value was checked by build_plan).
std::optional<bool> rdzv_is_host(const LaunchPlan& plan);
// --rdzv_conf `key` in seconds (join_timeout, keep_alive_interval, ...), or `fallback` seconds
// where it is not given.
std::chrono::milliseconds rdzv_seconds(const LaunchPlan& plan, const std::string& key,
                                       double fallback);
// --rdzv_conf `key` as a whole number (keep_alive_max_attempt), or `fallback` where not given.
int rdzv_count(const LaunchPlan& plan, const std::string& key, int fallback);

// Whether this node serves the c10d rendezvous store: is_host where given, else whether the
// endpoint (--rdzv_endpoint) is an address of this machine. The elastic membership starts the
// store by it, and pre-flight skips checking a store this node is about to serve.
bool hosts_rendezvous_store(const LaunchPlan& plan);

// The workers on one node: the one place that decides nproc_per_node, for every node's plan (on
// a node a fan-out head starts, from the hostfile slots the head writes as its --nproc_per_node:
// fanout.h). From the spelling whose source is higher
// (option_sources.h): torchrun's --nproc_per_node (auto, cpu and gpu count `host`'s devices), or
// Accelerate's total --num_processes shared over `nnodes`; given both on the command line, they
// must agree. Throws ConfigError for a count out of range or not divisible.
int resolve_workers_per_node(const LaunchOptions& options, const HostInfo& host, int nnodes);

// The address of the workers' store (MASTER_ADDR): the one place that decides master_addr, for a
// node's plan and for the fan-out head. 127.0.0.1 for --standalone; the host of torchrun's
// single-node `--rdzv_endpoint HOST:0`, or of a static --rdzv_endpoint (it stands for
// master_addr:master_port); else --master_addr or Accelerate's --main_process_ip, from whichever
// layer set it (a scheduler's first host, a config file). Throws ConfigError for a malformed host
// or the two spellings contradicting each other on the command line.
std::string resolve_master_addr(const LaunchOptions& options);

// Builds the plan. Throws ConfigError (one line naming the flag and the fix) for bad input.
LaunchPlan build_plan(const LaunchOptions& options, const HostInfo& host);

// Parses a --redirects/--tee value. Throws ConfigError naming `flag`.
StreamSpec parse_stream_spec(const std::string& value, const std::string& flag);

// torchrun's contract for one worker of one attempt, in a stable order (only
// TORCHELASTIC_ERROR_FILE of it when plan.single_process). One source of the worker's
// environment, which agent/worker_environment.h puts together.
EnvList torchrun_contract(const LaunchPlan& plan, const WorkerSpec& worker, const Round& round,
                          const std::string& error_file);

// Expands ${rank}, ${local_rank}, ${role_name} and ${hostname} in the log line prefix.
std::string expand_prefix(const LaunchPlan& plan, const WorkerSpec& worker, const Round& round);

}  // namespace acc::launcher
