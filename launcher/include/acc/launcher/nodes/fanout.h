#pragma once

// One command for all nodes: from a hostfile, the command lines that start one acc-launch per
// host (over ssh, or as one pdsh/srun/mpirun command). Pure: no processes, no sockets, no files;
// remote_nodes.h runs what this builds.
//
// How a remote launcher knows not to fan out again: its command carries no --hostfile, and an
// explicit --node_rank, --nnodes and --nproc_per_node, so it is an ordinary static node of the
// job. It also carries --stop_on_stdin_eof: ssh closes its stdin when the head stops it or dies,
// and it then stops its workers as on SIGTERM.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "acc/launcher/cli/options.h"
#include "acc/launcher/nodes/cluster.h"

namespace acc::launcher {

// One node of a fanned-out job.
struct RemoteNode {
  std::string host;                    // as the hostfile names it: where ssh connects
  int node_rank = 0;                   // its position among the hosts kept
  int slots = 1;                       // its workers
  std::optional<std::string> gpu_ids;  // "0,2" from --include host:0,2, else unset
};

// Everything each node's command shares.
struct FanoutJob {
  std::string launcher_path;  // acc-launch on every host (the head's own path)
  std::string working_dir;    // the head's, entered on every host
  std::string master_addr;
  int master_port = 0;
  std::string rdzv_id;
  int nnodes = 1;
  std::string node_slots;   // "1,3": every node's workers, when hosts' slots differ
  bool own_prefix = false;  // the user gave --log_line_prefix_template: keep theirs
  std::vector<std::pair<std::string, std::string>> env;  // sent to every node, in order
  std::vector<std::string> forwarded_args;  // the user's launcher flags the remotes also get
  std::vector<std::string> program;         // PROGRAM ARGS, verbatim
};

// Does this invocation fan out? --hostfile without --node_rank, and --launcher not none, and not
// itself a remote launcher.
bool wants_fanout(const LaunchOptions& options);

// The hosts and slots the job runs on: the hostfile's, filtered by --include / --exclude. Both
// take a comma list of hosts as before, or DeepSpeed's form "host1:0,2@host2" (slots by GPU id,
// hosts separated by '@'): a host with ids runs one worker per id, on those GPUs.
// Throws ConfigError for a host or slot not in the hostfile, or nothing left.
std::vector<RemoteNode> select_nodes(const std::vector<HostfileEntry>& hosts,
                                     const std::string& include, const std::string& exclude);

// The hostfile decides how many workers each node starts (one a slot): a --nproc_per_node N or
// a --num_processes given on the command line must agree with it, or the user meant another job.
// Throws ConfigError, one line naming the first host that disagrees (or the slots of all).
void check_slots_agree(const LaunchOptions& options, const std::vector<RemoteNode>& nodes);

// The launcher flags the user typed (options.typed, as the command line parsed them), less those
// the head decides per node or that only the head reads: --hostfile --include --exclude
// --launcher --ssh_* --env_passthrough --nnodes --node_rank --nproc_per_node --master_addr
// --master_port --rdzv_id --gpu_ids and Accelerate's machine flags. Each in its underscore
// spelling: `--name VALUE`, a switch `--name` (or `--name=VALUE` where one was typed).
std::vector<std::string> forwarded_launcher_args(const LaunchOptions& options);

// What the head tells every node, less where it runs (launcher_path, working_dir) and the
// variables it sends (env): the node count and slots, the store, the job id, the forwarded flags
// and the program. `options` have every layer applied (option_sources.h): the command line, the
// hostfile's word as a scheduler's (cluster.h fanout_facts), the config file; the plan's own
// functions decide from them, as on a single node: the store's address by resolve_master_addr
// (plan.h), its port as a layer named it (named_store_port) or else derived from the job id, as a
// free port cannot be agreed on; the job id as named, else `new_id`. Each node's workers are its
// slots (check_slots_agree holds the command line to them). Throws ConfigError as those do.
FanoutJob resolve_fanout_job(const LaunchOptions& options, const std::vector<RemoteNode>& nodes,
                             const std::string& new_id);

// KEY=VALUE lines of an ~/.acc-launch_env-style file ('#' comments and blank lines skipped).
// Throws ConfigError naming path:line for a line without '=' or an invalid name.
std::vector<std::pair<std::string, std::string>> parse_env_file(const std::string& text,
                                                                const std::string& path);

// The variables every node gets: those of `environment` named in `passthrough` (comma list) or
// with a usual prefix (NCCL_ PYTHON UCX_ CUDA_ ACC_ GLOO_; not CUDA_VISIBLE_DEVICES unless named:
// GPUs are chosen per host, --include host:0,2), then the env files' entries, which win over the
// environment (as DeepSpeed's .deepspeed_env does).
std::vector<std::pair<std::string, std::string>> env_to_pass(
    const std::map<std::string, std::string>& environment, const std::string& passthrough,
    const std::vector<std::pair<std::string, std::string>>& from_files);

// Every node's workers, "1,3", when they differ between hosts; empty when all are equal.
std::string node_slots_of(const std::vector<RemoteNode>& nodes);

// The acc-launch command line one node runs, as argv (before any shell quoting).
std::vector<std::string> node_launcher_argv(const FanoutJob& job, const RemoteNode& node);

// The shell command ssh runs on the node: cd DIR && exec env K=V... acc-launch ..., every word
// quoted so that arguments with spaces and quotes reach the program intact.
std::string node_shell_command(const FanoutJob& job, const RemoteNode& node);

struct SshSettings {
  std::optional<int> port;
  std::vector<std::string> options;  // user's -o options; theirs come first, so they win
};

// ssh's argv to run `command` on `host`: BatchMode (never a password prompt), a connect timeout,
// keep-alives so a vanished host is noticed. `command` "true" makes the reachability probe.
std::vector<std::string> ssh_argv(const SshSettings& ssh, const std::string& host,
                                  const std::string& command);

// The one command that starts every node with pdsh, srun or mpirun (equal slots on every host).
// pdsh substitutes %n with each host's rank; under srun and mpirun each launcher reads its rank
// from the scheduler (detect_cluster). Throws ConfigError if hosts' slots differ.
std::vector<std::string> single_command_argv(const std::string& launcher, const FanoutJob& job,
                                             const std::vector<RemoteNode>& nodes);

}  // namespace acc::launcher
