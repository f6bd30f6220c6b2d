#pragma once

// Schedulers that already know the job's shape: SLURM, Open MPI / PMI, Kubernetes (Kubeflow's
// PyTorchJob), and hostfiles. Reading them spares users wiring addresses and ranks by hand; an
// explicit flag always wins. Pure, except resolve_slurm_node_address (it may ask scontrol).

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "acc/common/hostfile.h"
#include "acc/launcher/cli/options.h"
#include "acc/launcher/plan/option_sources.h"

namespace acc::launcher {

// What a scheduler says about this node's place in the job. Unset: it says nothing.
struct ClusterFacts {
  std::string scheduler{};  // "slurm", "mpi", "kubernetes", "hostfile", or empty
  std::optional<std::string> nnodes{};
  std::optional<int> node_rank{};
  std::optional<std::string> nproc_per_node{};
  std::optional<std::string> master_addr{};
  std::optional<int> master_port{};
  std::optional<std::string> rdzv_id{};
  std::optional<std::string> gpu_ids{};  // a hostfile's picked slots: "0,2"
  std::optional<int> num_processes{};    // the workers of every node: a fan-out's slots in all
  std::vector<std::string> sources{};    // "nnodes=2 (SLURM_STEP_NUM_NODES)", for --dry_run and env
};

// Reads the environment of a SLURM step, an mpirun rank or a Kubernetes pod. `resolve` maps a
// SLURM node name to an address the other nodes can reach (main's is nodes/slurm_address.h's);
// none: the name itself.
ClusterFacts detect_cluster(
    const std::map<std::string, std::string>& environment,
    const std::function<std::string(const std::string& node)>& resolve = nullptr);

// "gpu[01-03,7],login1" -> gpu01 gpu02 gpu03 gpu7 login1. Throws ConfigError if malformed.
std::vector<std::string> expand_slurm_hostlist(const std::string& hostlist);

// The port every node derives from the job id alone, so nodes agree without talking.
int port_for_job(const std::string& job_id);

// Facts from the hosts of a hostfile that --include / --exclude kept (select_hosts in
// acc/common/hostfile.h) for the node named `this_host` (or at node_rank when given). A node
// whose slots were picked (--include h:0,2) gets them as its GPUs (gpu_ids), as fan-out gives them.
ClusterFacts hostfile_facts(const std::vector<SelectedHost>& hosts, const std::string& this_host,
                            std::optional<int> node_rank);

// What the hosts of a hostfile say to the head of a fan-out (fanout.h), which is none of them:
// the node count, machine 0's address (the first host, as hostfile_facts) and the workers, one a
// slot (num_processes, and nproc_per_node where every host has the same slots). The head applies
// them as a scheduler's word before the config file's, as a node does (option_sources.h).
ClusterFacts fanout_facts(const std::vector<SelectedHost>& hosts);

// The facts as the scheduler's word on the options (Source::kScheduler), for apply_proposals
// (option_sources.h), which keeps those the command line did not set.
OptionProposals scheduler_proposals(const ClusterFacts& facts);

}  // namespace acc::launcher
