#pragma once

// Everything a user can say to `acc-launch` (flags, their PET_* mirrors, a config file), before
// it is resolved into a LaunchPlan. Plain data: parsing lives in cli.h, resolution in plan.h.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace acc::launcher {

// Where an option's value came from, in rising precedence: a value from a later one wins over a
// value from an earlier one (apply_proposals, acc/launcher/plan/option_sources.h).
enum class Source { kDefault, kConfigFile, kScheduler, kCommandLine };

// One option as the user typed it: its underscore name, and its value as typed (for a switch, what
// followed '=', else "true").
struct TypedOption {
  std::string name;
  std::string value;
  bool is_switch = false;
};

struct LaunchOptions {
  // torchrun's flags, with torchrun's defaults.
  std::string nproc_per_node = "1";  // N, auto, cpu or gpu
  std::string nnodes = "1";          // N or MIN:MAX
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  std::optional<int> master_port;  // unset: a free port on one node, else 29500
  bool standalone = false;
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;
  std::string rdzv_id = "none";
  std::string rdzv_conf;
  int max_restarts = 0;
  double monitor_interval = 0.1;  // accepted for compatibility; exits are seen at once
  std::string start_method = "spawn";
  std::string role = "default";
  bool module = false;
  bool no_python = false;
  bool run_path = false;
  std::string log_dir;
  std::string redirects = "0";
  std::string tee = "0";
  std::string local_ranks_filter;
  std::string local_addr;
  double shutdown_timeout = 30;  // seconds between the forwarded signal and SIGKILL
  double kill_timeout = 10;      // seconds after SIGKILL before a worker is called unkillable
  // Current torchrun's (2.9+).
  std::string signals_to_handle = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";  // forwarded, then the end
  bool virtual_local_rank = false;         // LOCAL_RANK=0 and one visible device per worker
  double exit_barrier_timeout = 300;       // seconds a finished elastic node waits for the others
  std::string logs_specs;                  // accepted; acc-launch writes its own logs
  std::string event_log_handler = "null";  // accepted; events are not logged elsewhere
  std::string duplicate_stdout_filters;    // accepted; not honoured (one notice)
  std::string duplicate_stderr_filters;
  std::string print_completion;  // bash, zsh or tcsh: print a completion script and exit

  // Accelerate's launch flags (also a config file's keys). Unset optionals: no layer set them.
  std::optional<int> num_processes;  // total over all machines
  std::optional<int> num_machines;
  std::optional<int> machine_rank;
  std::optional<std::string> main_process_ip;
  std::optional<int> main_process_port;
  std::optional<std::string> gpu_ids;  // comma list or "all"
  bool cpu = false;
  bool multi_gpu = false;
  // A config file chose Accelerate's simple launcher (distributed_type NO, or use_cpu) for one
  // process: the worker gets no torchrun variables, as under `accelerate launch`.
  bool simple_launcher = false;
  std::optional<std::string> mixed_precision;  // no, fp16, bf16, fp8
  std::optional<int> num_cpu_threads_per_process;
  // Set by the config merge when it chose OMP_NUM_THREADS=1 for the user (not the user's value).
  bool omp_threads_chosen = false;
  // How a user of this front end sets the thread count, for the notice when acc-launch picks it.
  std::string omp_threads_hint = "set it yourself (or --num_cpu_threads_per_process) to tune";
  bool debug = false;
  bool quiet = false;
  std::optional<std::string> log_level;  // --log_level: debug, info, warning, error
  std::string config_file;
  // Accelerate's launch-mode flags (--cpu and --multi_gpu above).
  bool use_deepspeed = false;
  bool use_fsdp = false;
  bool use_megatron_lm = false;
  bool use_parallelism_config = false;
  // `--<key> VALUE` for the config keys `accelerate launch` also takes as flags (config/schema.h
  // launch_flags(): FSDP, DeepSpeed, Megatron-LM, FP8, dynamo, parallelism, same_network, ...),
  // as given; "" for a switch. They override the config file's keys.
  std::vector<std::pair<std::string, std::string>> config_flags;
  // Machines share a network (--same_network, or the file): multi-node jobs meet at
  // --main_process_ip/port directly instead of a rendezvous endpoint there.
  bool same_network = false;

  // Hostfile launches (DeepSpeed / Horovod / Open MPI syntax).
  std::string hostfile;
  std::string include_hosts;
  std::string exclude_hosts;

  // acc-launch's own.
  // The interpreter of .py programs and -m, as torchrun users expect it: --python, else
  // $PYTHON_EXEC, else the `python` beside the acc-launch binary (the venv it is installed in),
  // else python3 on PATH (cli.cc, resolve_python). python_source says which, for the dry run and
  // the launcher's first line.
  std::string python = "python3";
  std::string python_source = "python3 on PATH";
  bool no_python_hook = false;      // --no_python_hook (or ACC_PYTHON_HOOK=0): no sitecustomize
  bool no_warm_workers = false;     // --no_warm_workers (or ACC_WARM_WORKERS=0): no standbys
  int keep_checkpoints = 1;         // --keep_checkpoints: acc_launch.checkpoint's writes kept
  bool checkpoint_replica = false;  // --checkpoint_replica: a peer node holds this node's saves
  std::string log_line_prefix = "[rank${rank}]: ";
  bool dry_run = false;

  // Environment entries a config file contributes (ACCELERATE_*, FSDP_*, ...), in order.
  std::vector<std::pair<std::string, std::string>> extra_env;

  // Where settings not given on the command line came from (a scheduler, a hostfile), one line
  // each; --dry_run shows them.
  std::vector<std::string> detected;
  // One-line notices for the user, printed when the workers start (e.g. a flag that is ignored).
  std::vector<std::string> notices;

  // The program and its arguments, verbatim.
  std::string program;
  std::vector<std::string> program_args;

  // Where each option's value came from, by its underscore name ("nproc_per_node"); an option
  // not listed has its default. cli.cc records the command line (PET_* count as the command
  // line), apply_proposals (acc/launcher/plan/option_sources.h) a scheduler's and a config file's.
  std::map<std::string, Source> sources;

  Source source_of(const std::string& name) const {
    const auto it = sources.find(name);
    return it == sources.end() ? Source::kDefault : it->second;
  }

  // The options typed on the command line (not PET_*), one per occurrence, in the user's order:
  // what the fan-out head forwards to every node (fanout.h, forwarded_launcher_args).
  std::vector<TypedOption> typed;

  // Fan-out from one command (fanout.h): with --hostfile and no --node_rank, the head starts one
  // launcher per host over `launcher`; each remote one gets --stop_on_stdin_eof.
  std::string launcher = "ssh";  // ssh, pdsh, srun, mpirun, or none (every node runs it itself)
  std::optional<int> ssh_port;
  std::vector<std::string> ssh_options;  // each passed as `ssh -o OPTION`
  std::string env_passthrough;           // comma list of variable names sent to every node
  bool stop_on_stdin_eof = false;        // a remote launcher: stop the job when stdin closes
  std::string node_slots;  // every node's workers in node order, "1,3", when hosts differ

  // Console output and CPU binding (docs/launch.md, "Collapsed output" and "CPU binding").
  bool dedup_lines = false;   // identical lines of several ranks printed once, [rank0-7]
  int dedup_window_ms = 150;  // how long a line waits for the same line from other ranks
  std::string numa_binding;   // torchrun: node, socket, exclusive or core-complex; empty: none
  bool enable_cpu_affinity = false;  // Accelerate: the CPUs of each GPU's NUMA node
  bool bind_cores_to_rank = false;   // DeepSpeed: an even split of the cores
  std::string bind_core_list;        // DeepSpeed: the CPUs to split, 0-7,16-23

  // Hang detection (--stall_timeout, ACC_STALL_TIMEOUT; docs/launch.md "When a job hangs").
  double stall_timeout = 0;           // seconds without progress from any worker; 0: off
  double stall_init_timeout = 600;    // the same before a worker's first progress (start-up)
  std::string stall_action = "stop";  // stop (exit status 4) or report (and go on)

  // Multi-node start-up and exits (docs/launch.md "Pre-flight", docs/errors.md).
  double preflight_timeout = 60;  // seconds a node keeps trying to reach the store; 0: no check
  int retryable_exit_code = 0;    // 0: the launcher's failures keep their own exit codes
  // Stragglers (--straggler_window, ACC_STRAGGLER_WINDOW; docs/launch.md "Stragglers").
  double straggler_window = 30;  // seconds of collective timing per look; 0: off

  // Restarts with sense, as NVIDIA's ft_launcher (docs/launch.md, "Failures, restarts, signals").
  int max_no_progress_restarts = 0;  // attempts in a row failing before any progress; 0: off
  int no_restart_exit_code = 93;     // the exit status when they stop the restarts (ft_launcher's)
  // Silent data corruption's exit codes (docs/errors.md): "RESTART,SUSPECT" (Megatron's 16,17);
  // empty: off.
  std::string sdc_exit_codes;
  // External verdicts on this node, asked before each round (docs/clusters.md, "Keeping a node
  // out"): a file of hosts, addresses or node ids to leave out, and a command whose failure does.
  std::string exclude_nodes_file;
  std::string node_health_command;
  // --network_check: the round's nodes measure their links and a computation before the first
  // attempt, and a node slower than the others by network_check_factor stays out.
  bool network_check = false;
  double network_check_factor = 3;
  // TORCHELASTIC_HEALTH_CHECK_PORT: seconds without a worker's progress before it answers 503.
  double health_check_timeout = 60;  // torchelastic's
  // The job's status over HTTP (--status_port, ACC_STATUS_PORT; docs/launch.md "Watching a job").
  int status_port = -1;                   // 0: a port the system picks; -1: off
  std::string status_host = "127.0.0.1";  // the address it is served on
};

}  // namespace acc::launcher
