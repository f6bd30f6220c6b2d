#include "acc/launcher/plan/option_sources.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "acc/common/endpoint.h"
#include "acc/common/error.h"

namespace acc::launcher {
namespace {

// The settings with two spellings, torchrun's and Accelerate's. A scheduler names one and a config
// file the other, so the precedence has to see them as one setting: a file's num_machines must
// not come in under a scheduler's nnodes, only to win later when plan.cc folds the spellings.
constexpr std::pair<std::string_view, std::string_view> kSpellings[] = {
    {"nproc_per_node", "num_processes"},  {"nnodes", "num_machines"},
    {"node_rank", "machine_rank"},        {"master_addr", "main_process_ip"},
    {"master_port", "main_process_port"},
};

std::string_view other_spelling(std::string_view name) {
  for (const auto& [torchrun, accelerate] : kSpellings) {
    if (name == torchrun) return accelerate;
    if (name == accelerate) return torchrun;
  }
  return {};
}

}  // namespace

Source setting_source(const LaunchOptions& options, const std::string& name) {
  const std::string_view other = other_spelling(name);
  const Source source = options.source_of(name);
  return other.empty() ? source : std::max(source, options.source_of(std::string(other)));
}

void apply_proposals(const OptionProposals& p, LaunchOptions& o) {
  auto take = [&](const char* name, auto& target, const auto& proposed) {
    if (!proposed || p.source <= setting_source(o, name)) return;
    target = *proposed;
    o.sources[name] = p.source;
  };
  take("nnodes", o.nnodes, p.nnodes);
  take("node_rank", o.node_rank, p.node_rank);
  take("nproc_per_node", o.nproc_per_node, p.nproc_per_node);
  take("master_addr", o.master_addr, p.master_addr);
  take("master_port", o.master_port, p.master_port);
  take("rdzv_id", o.rdzv_id, p.rdzv_id);
  take("rdzv_backend", o.rdzv_backend, p.rdzv_backend);
  take("gpu_ids", o.gpu_ids, p.gpu_ids);
  take("num_processes", o.num_processes, p.num_processes);
  take("num_machines", o.num_machines, p.num_machines);
  take("machine_rank", o.machine_rank, p.machine_rank);
  take("main_process_ip", o.main_process_ip, p.main_process_ip);
  take("main_process_port", o.main_process_port, p.main_process_port);
  take("mixed_precision", o.mixed_precision, p.mixed_precision);
  take("cpu", o.cpu, p.cpu);
  take("debug", o.debug, p.debug);
  take("num_cpu_threads_per_process", o.num_cpu_threads_per_process, p.num_cpu_threads_per_process);
  // One value a setting: Accelerate's spelling from below torchrun's would win again when plan.cc
  // folds the spellings (a config file's num_machines applied before a scheduler's nnodes).
  auto drop = [&](const char* accelerate, auto& value, const char* torchrun) {
    if (!value || o.source_of(accelerate) >= o.source_of(torchrun)) return;
    value.reset();
    o.sources.erase(accelerate);
  };
  drop("num_processes", o.num_processes, "nproc_per_node");
  drop("num_machines", o.num_machines, "nnodes");
  drop("machine_rank", o.machine_rank, "node_rank");
  drop("main_process_ip", o.main_process_ip, "master_addr");
  drop("main_process_port", o.main_process_port, "master_port");
}

std::optional<int> named_store_port(const LaunchOptions& o) {
  // Both set only when both were given on the command line: apply_proposals keeps one spelling.
  ACC_CHECK(!o.master_port || !o.main_process_port || *o.master_port == *o.main_process_port,
            ConfigError, "--main_process_port ", o.main_process_port.value_or(0),
            " contradicts --master_port ", o.master_port.value_or(0), "; give one of them");
  // torchrun: a static endpoint host[:port] stands for master_addr:master_port.
  if (!o.rdzv_endpoint.empty() && o.rdzv_backend == "static")
    return parse_endpoint(o.rdzv_endpoint, 0, "--rdzv_endpoint").port;
  return o.main_process_port ? o.main_process_port : o.master_port;
}

}  // namespace acc::launcher
