#include "acc/launcher/nodes/cluster.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>

#include "acc/common/error.h"
#include "acc/common/strings.h"
#include "acc/rendezvous/tcp_connect.h"
#include "nodes/slurm_address.h"

namespace acc::launcher {
namespace {

std::optional<std::string> lookup(const std::map<std::string, std::string>& env,
                                  std::initializer_list<const char*> names, std::string* which) {
  for (const char* name : names) {
    auto it = env.find(name);
    if (it != env.end() && !it->second.empty()) {
      *which = name;
      return it->second;
    }
  }
  return std::nullopt;
}

// Scheduler variables are numbers, sometimes with stray whitespace.
std::optional<int> to_int(const std::string& text) {
  return parse_int(trim(text));
}

// Records a fact and where it came from.
class Facts {
 public:
  explicit Facts(const std::map<std::string, std::string>& env) : env_(env) {}
  std::optional<std::string> read(const char* fact, std::initializer_list<const char*> names) {
    std::string which;
    auto value = lookup(env_, names, &which);
    if (value) facts.sources.push_back(std::string(fact) + "=" + *value + " (" + which + ")");
    return value;
  }
  std::optional<int> read_int(const char* fact, std::initializer_list<const char*> names) {
    auto value = read(fact, names);
    return value ? to_int(*value) : std::nullopt;
  }
  const std::map<std::string, std::string>& env() const { return env_; }
  ClusterFacts facts;

 private:
  const std::map<std::string, std::string>& env_;
};

void detect_slurm(Facts& f, const std::function<std::string(const std::string&)>& resolve) {
  f.facts.scheduler = "slurm";
  f.facts.nnodes =
      f.read("nnodes", {"SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"});
  f.facts.node_rank = f.read_int("node_rank", {"SLURM_NODEID"});
  if (auto list =
          f.read("hosts", {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})) {
    const std::string first = expand_slurm_hostlist(*list).front();
    f.facts.master_addr = resolve ? resolve(first) : first;
    f.facts.sources.push_back("master_addr=" + *f.facts.master_addr + " (first host)");
  }
  if (auto job = f.read("rdzv_id", {"SLURM_JOB_ID", "SLURM_JOBID"})) {
    f.facts.rdzv_id = *job;
    f.facts.master_port = port_for_job(*job);
    f.facts.sources.push_back("master_port=" + std::to_string(*f.facts.master_port) +
                              " (derived from the job id)");
  }
  // One worker per GPU SLURM gave this node, else per CPU it gave (srun -c N): the task is
  // the launcher, so its allocation is the workers'.
  if (auto gpus = f.read_int("gpus", {"SLURM_GPUS_ON_NODE"}); gpus && *gpus > 0) {
    f.facts.nproc_per_node = std::to_string(*gpus);
  } else if (auto cpus = f.read_int("cpus", {"SLURM_CPUS_ON_NODE"})) {
    f.facts.nproc_per_node = std::to_string(*cpus);
  }
}

// SkyPilot's run section, on each node of a `num_nodes` task: the node IPs one per line, node
// 0's first; the task id is the same on every node of the task.
void detect_skypilot(Facts& f) {
  f.facts.scheduler = "skypilot";
  f.facts.node_rank = f.read_int("node_rank", {"SKYPILOT_NODE_RANK"});
  std::vector<std::string> ips;
  std::string which;
  std::stringstream lines(lookup(f.env(), {"SKYPILOT_NODE_IPS"}, &which).value_or(""));
  for (std::string line; std::getline(lines, line);)
    if (!trim(line).empty()) ips.emplace_back(trim(line));
  if (!ips.empty()) {
    f.facts.sources.push_back("hosts=" + join(ips, ",") + " (SKYPILOT_NODE_IPS)");
    f.facts.master_addr = ips.front();
    f.facts.sources.push_back("master_addr=" + ips.front() + " (first node IP)");
  }
  f.facts.nnodes = f.read("nnodes", {"SKYPILOT_NUM_NODES"});
  if (!f.facts.nnodes && !ips.empty()) {
    f.facts.nnodes = std::to_string(ips.size());
    f.facts.sources.push_back("nnodes=" + *f.facts.nnodes + " (node IPs)");
  }
  if (auto task = f.read("rdzv_id", {"SKYPILOT_TASK_ID"})) {
    f.facts.rdzv_id = *task;
    f.facts.master_port = port_for_job(*task);
    f.facts.sources.push_back("master_port=" + std::to_string(*f.facts.master_port) +
                              " (derived from the task id)");
  }
  // A CPU cluster says 0: the default (one worker per CPU slot) stays.
  if (auto gpus = f.read_int("gpus", {"SKYPILOT_NUM_GPUS_PER_NODE"}); gpus && *gpus > 0)
    f.facts.nproc_per_node = std::to_string(*gpus);
}

}  // namespace

std::vector<std::string> expand_slurm_hostlist(const std::string& hostlist) {
  std::vector<std::string> hosts;
  size_t at = 0;
  const auto bad = [&] {
    return ConfigError("SLURM host list " + hostlist + ": expected names like node[1-3,7],login");
  };
  while (at < hostlist.size()) {
    const size_t comma = hostlist.find(',', at);
    const size_t bracket = hostlist.find('[', at);
    if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket)) {
      const size_t end = comma == std::string::npos ? hostlist.size() : comma;
      if (end > at) hosts.push_back(hostlist.substr(at, end - at));
      at = end + 1;
      continue;
    }
    const size_t close = hostlist.find(']', bracket);
    if (close == std::string::npos) throw bad();
    const std::string prefix = hostlist.substr(at, bracket - at);
    std::stringstream ranges(hostlist.substr(bracket + 1, close - bracket - 1));
    for (std::string range; std::getline(ranges, range, ',');) {
      const size_t dash = range.find('-');
      const std::string low = range.substr(0, dash);
      const std::string high = dash == std::string::npos ? low : range.substr(dash + 1);
      auto from = to_int(low), to = to_int(high);
      if (low.empty() || !from || !to || *from > *to) throw bad();
      // No job has this many nodes (the largest machines have about 11,000): a range past it is
      // a typo, not a million names to make.
      constexpr long long kMaxHosts = 1 << 16;
      if (static_cast<long long>(*to) - *from + static_cast<long long>(hosts.size()) >= kMaxHosts)
        throw bad();
      for (long long n = *from; n <= *to; ++n) {
        std::string number = std::to_string(n);
        if (number.size() < low.size()) number.insert(0, low.size() - number.size(), '0');
        hosts.push_back(prefix + number);
      }
    }
    at = close + 1;
    if (at < hostlist.size() && hostlist[at] == ',') ++at;
  }
  if (hosts.empty()) throw bad();
  return hosts;
}

int port_for_job(const std::string& job_id) {
  // FNV-1a: the same on every node and every build. The port is clear of the ephemeral range
  // (32768+) and of torchrun's 29400/29500 defaults.
  uint32_t hash = 2166136261u;
  for (unsigned char c : job_id) hash = (hash ^ c) * 16777619u;
  return 20000 + static_cast<int>(hash % 9000);
}

std::string resolve_slurm_node_address(const std::string& node, Os& os) {
  if (rendezvous::resolve_tcp(node, 0).status == 0) return node;
  const std::string scontrol = os.find_program("scontrol");
  if (scontrol.empty()) return node;
  const std::optional<std::string> output =
      os.program_output({scontrol, "show", "node", "-o", node});
  if (!output) return node;
  const size_t at = output->find("NodeAddr=");
  if (at == std::string::npos) return node;
  const size_t start = at + 9;
  return output->substr(start, output->find_first_of(" \n", start) - start);
}

ClusterFacts detect_cluster(const std::map<std::string, std::string>& environment,
                            const std::function<std::string(const std::string&)>& resolve) {
  Facts f(environment);
  // SkyPilot first: its variables name the task, whatever it runs on (SLURM or Kubernetes too).
  if (environment.count("SKYPILOT_NODE_RANK") && environment.count("SKYPILOT_NODE_IPS")) {
    detect_skypilot(f);
    return f.facts;
  }
  // Only inside an srun step: a batch script runs on the first node alone, and taking the
  // job's node count there would wait for nodes that never come.
  if (environment.count("SLURM_JOB_ID") && environment.count("SLURM_NODEID") &&
      environment.count("SLURM_STEP_NUM_NODES")) {
    detect_slurm(f, resolve);
  } else if (environment.count("OMPI_COMM_WORLD_SIZE") || environment.count("PMI_SIZE")) {
    // One launcher per node under mpirun (-npernode 1): the ranks of mpirun are our nodes.
    f.facts.scheduler = "mpi";
    f.facts.nnodes = f.read("nnodes", {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"});
    f.facts.node_rank = f.read_int("node_rank", {"OMPI_COMM_WORLD_RANK", "PMI_RANK"});
    f.facts.master_addr = f.read("master_addr", {"MASTER_ADDR"});
    f.facts.master_port = f.read_int("master_port", {"MASTER_PORT"});
  } else if (environment.count("KUBERNETES_SERVICE_HOST") && environment.count("MASTER_ADDR")) {
    // Kubeflow's PyTorchJob: PET_* are read as flags; MASTER_* and RANK (the replica) name
    // the master and this pod's node rank when PET_* are absent.
    f.facts.scheduler = "kubernetes";
    f.facts.master_addr = f.read("master_addr", {"MASTER_ADDR"});
    f.facts.master_port = f.read_int("master_port", {"MASTER_PORT"});
    f.facts.node_rank = f.read_int("node_rank", {"RANK"});
  }
  return f.facts;
}

namespace {

// What every node of a hostfile's job shares: the node count, and machine 0's address, the
// first host kept.
ClusterFacts hostfile_job_facts(const std::vector<SelectedHost>& hosts) {
  ClusterFacts facts;
  facts.scheduler = "hostfile";
  facts.nnodes = std::to_string(hosts.size());
  facts.master_addr = hosts.front().host;
  return facts;
}

}  // namespace

ClusterFacts fanout_facts(const std::vector<SelectedHost>& hosts) {
  ClusterFacts facts = hostfile_job_facts(hosts);
  std::vector<std::string> slots;
  for (const SelectedHost& host : hosts) slots.push_back(std::to_string(host.slots.size()));
  facts.num_processes = std::accumulate(
      hosts.begin(), hosts.end(), 0,
      [](int sum, const SelectedHost& host) { return sum + static_cast<int>(host.slots.size()); });
  if (std::all_of(hosts.begin(), hosts.end(),
                  [&](const SelectedHost& h) { return h.slots.size() == hosts[0].slots.size(); }))
    facts.nproc_per_node = slots.front();
  facts.sources.push_back("nnodes=" + *facts.nnodes + ", slots=" + join(slots, ",") +
                          ", master_addr=" + *facts.master_addr + " (hostfile)");
  return facts;
}

ClusterFacts hostfile_facts(const std::vector<SelectedHost>& hosts, const std::string& this_host,
                            std::optional<int> node_rank) {
  ClusterFacts facts = hostfile_job_facts(hosts);
  if (!node_rank) {
    for (size_t i = 0; i < hosts.size() && !node_rank; ++i)
      if (hosts[i].host == this_host) node_rank = static_cast<int>(i);
    ACC_CHECK(node_rank, ConfigError, "--hostfile: this host (", this_host,
              ") is not in it; give --node_rank");
  }
  ACC_CHECK(*node_rank >= 0 && *node_rank < static_cast<int>(hosts.size()), ConfigError,
            "--node_rank ", *node_rank, ": the hostfile has ", hosts.size(), " hosts");
  facts.node_rank = *node_rank;
  const SelectedHost& here = hosts[*node_rank];
  facts.nproc_per_node = std::to_string(here.slots.size());
  for (size_t i = 1; i < hosts.size(); ++i)
    ACC_CHECK(hosts[i].slots.size() == hosts[0].slots.size(), ConfigError,
              "--hostfile: every host needs the same slots for a static launch (", hosts[0].host,
              " has ", hosts[0].slots.size(), ", ", hosts[i].host, " has ", hosts[i].slots.size(),
              ")");
  if (static_cast<int>(here.slots.size()) != here.hostfile_slots) {
    std::vector<std::string> ids;
    for (int slot : here.slots) ids.push_back(std::to_string(slot));
    facts.gpu_ids = join(ids, ",");
  }
  facts.sources.push_back(
      "nnodes=" + *facts.nnodes + ", node_rank=" + std::to_string(*facts.node_rank) +
      ", nproc_per_node=" + *facts.nproc_per_node + ", master_addr=" + *facts.master_addr +
      (facts.gpu_ids ? ", gpu_ids=" + *facts.gpu_ids : "") + " (hostfile)");
  return facts;
}

OptionProposals scheduler_proposals(const ClusterFacts& facts) {
  // Below the user's flags and above a config file: apply_proposals decides (option_sources.h).
  OptionProposals proposals;
  proposals.source = Source::kScheduler;
  proposals.nnodes = facts.nnodes;
  proposals.node_rank = facts.node_rank;
  proposals.nproc_per_node = facts.nproc_per_node;
  proposals.num_processes = facts.num_processes;
  proposals.master_addr = facts.master_addr;
  proposals.master_port = facts.master_port;
  proposals.rdzv_id = facts.rdzv_id;
  proposals.gpu_ids = facts.gpu_ids;
  return proposals;
}

}  // namespace acc::launcher
