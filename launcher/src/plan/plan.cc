#include "acc/launcher/plan/plan.h"
#include "acc/common/strings.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <numeric>
#include <set>
#include <sstream>
#include <tuple>

#include "acc/common/endpoint.h"
#include "acc/common/error.h"
#include "acc/common/random.h"
#include "acc/launcher/plan/option_sources.h"
#include "acc/rendezvous/job_secret.h"
#include "plan/accelerate_env.h"
#include "plan/cpu_binding_choice.h"

namespace acc::launcher {
namespace {

// A bound on one node's workers, far above any machine's devices or cores, so that a mistyped
// count is one line instead of an allocation that fails after seconds.
constexpr int kMaxWorkersPerNode = 4096;

int resolve_nproc_per_node(const LaunchOptions& o, const HostInfo& host) {
  const std::string& value = o.nproc_per_node;
  if (auto n = parse_int(value)) {
    ACC_CHECK(*n > 0 && *n <= kMaxWorkersPerNode, ConfigError, "--nproc_per_node ", value,
              ": expected 1 to ", kMaxWorkersPerNode, " workers per node");
    return *n;
  }
  if (value == "cpu") return host.cpu_count.get();
  if (value == "gpu") {
    ACC_CHECK(host.gpu_count > 0, ConfigError,
              "--nproc_per_node gpu: no GPU found on this machine; use a number or cpu");
    return host.gpu_count;
  }
  if (value == "auto") return host.gpu_count > 0 && !o.cpu ? host.gpu_count : host.cpu_count.get();
  throw ConfigError("--nproc_per_node " + value + ": expected a number, auto, cpu or gpu");
}

// Accelerate's total --num_processes (or config num_processes) as workers per node.
int per_node_of_total(int total, int nnodes) {
  ACC_CHECK(total % nnodes == 0, ConfigError, "--num_processes ", total, ": not divisible by the ",
            nnodes, " machines; give a multiple of --num_machines");
  const int per_node = total / nnodes;
  ACC_CHECK(per_node > 0 && per_node <= kMaxWorkersPerNode, ConfigError, "--num_processes ", total,
            ": expected 1 to ", kMaxWorkersPerNode, " workers per node");
  return per_node;
}

// nnodes is "N" or "MIN:MAX".
std::pair<int, int> resolve_nnodes(const std::string& value) {
  std::vector<std::string> parts = split(value, ':');
  ACC_CHECK(parts.size() == 1 || parts.size() == 2, ConfigError, "--nnodes ", value,
            ": expected N or MIN:MAX");
  auto low = parse_int(parts[0]);
  auto high = parts.size() == 2 ? parse_int(parts[1]) : low;
  ACC_CHECK(low && high && *low > 0 && *low <= *high, ConfigError, "--nnodes ", value,
            ": expected N or MIN:MAX with 0 < MIN <= MAX");
  return {*low, *high};
}

const std::set<std::string> kRendezvousKeys = {"join_timeout",
                                               "last_call_timeout",
                                               "close_timeout",
                                               "keep_alive_interval",
                                               "keep_alive_max_attempt",
                                               "read_timeout",
                                               "is_host",
                                               "timeout",
                                               "heartbeat_timeout",
                                               "store_type",
                                               "rank",
                                               "protocol",
                                               "cacert",
                                               "cert",
                                               "key",
                                               "job_secret_file",
                                               "admit_members_only"};

// The etcd backend's TLS files (torchrun's names); their values are paths.
const std::set<std::string> kTlsFileKeys = {"cacert", "cert", "key"};

// A truth value as torchrun takes it (1/0, true/false, yes/no, any case); none for anything else.
std::optional<bool> truth_value(std::string value) {
  std::transform(value.begin(), value.end(), value.begin(), ::tolower);
  if (value == "1" || value == "true" || value == "yes") return true;
  if (value == "0" || value == "false" || value == "no") return false;
  return std::nullopt;
}

// Each value as its key takes it: seconds (finite, not negative), a count of at least 1, a truth
// value, or a rank; checked here once so a dry run sees the mistake too.
void check_rdzv_conf_value(const std::string& key, const std::string& value) {
  const std::string where = "--rdzv_conf " + key + "=" + value;
  if (key == "keep_alive_max_attempt") {
    const auto n = parse_int(value);
    ACC_CHECK(n && *n >= 1, ConfigError, where, ": expected a whole number of at least 1");
  } else if (key == "rank") {
    const auto n = parse_int(value);
    ACC_CHECK(n && *n >= 0, ConfigError, where, ": expected a whole number of at least 0");
  } else if (key == "is_host" || key == "admit_members_only") {
    ACC_CHECK(truth_value(value), ConfigError, where, ": expected true or false");
  } else if (key == "protocol") {
    ACC_CHECK(value == "http" || value == "https", ConfigError, where,
              ": expected http or https (etcd's client URLs scheme)");
  } else if (kTlsFileKeys.count(key)) {
    ACC_CHECK(std::ifstream(value).good(), ConfigError, where,
              ": cannot read the file; give the path of a PEM file this user can read");
  } else if (key != "store_type" && key != "job_secret_file") {  // read by resolve_job_secret
    double seconds = -1;
    const char* end = value.data() + value.size();
    auto [ptr, ec] = std::from_chars(value.data(), end, seconds);
    ACC_CHECK(ec == std::errc() && ptr == end && std::isfinite(seconds) && seconds >= 0,
              ConfigError, where, ": expected a number of seconds, 0 or more");
  }
}

std::map<std::string, std::string> parse_rdzv_conf(const std::string& text) {
  std::map<std::string, std::string> conf;
  for (const std::string& item : split(text, ',')) {
    if (item.empty()) continue;
    const size_t equals = item.find('=');
    ACC_CHECK(equals != std::string::npos && equals + 1 < item.size(), ConfigError, "--rdzv_conf ",
              item, ": expected key=value");
    const std::string key = item.substr(0, equals);
    ACC_CHECK(kRendezvousKeys.count(key), ConfigError, "--rdzv_conf ", key,
              ": unknown key; known: join_timeout, last_call_timeout, keep_alive_interval, "
              "keep_alive_max_attempt, read_timeout, is_host, protocol, cacert, cert, key, ...");
    const std::string value = item.substr(equals + 1);
    check_rdzv_conf_value(key, value);
    conf[key] = value;
  }
  return conf;
}

// The TLS keys agree: files only with protocol=https, a key only with its certificate.
void check_etcd_tls(const std::map<std::string, std::string>& conf) {
  const bool https = conf.count("protocol") && conf.at("protocol") == "https";
  for (const std::string& key : kTlsFileKeys)
    ACC_CHECK(https || !conf.count(key), ConfigError, "--rdzv_conf ", key, "=", conf.at(key),
              ": TLS files need protocol=https; add it to --rdzv_conf");
  ACC_CHECK(!conf.count("key") || conf.count("cert"), ConfigError,
            "--rdzv_conf key=", conf.count("key") ? conf.at("key") : "",
            ": a key without its certificate; add cert=PATH to --rdzv_conf");
}

// --rdzv_backend etcd-v2: the members' client addresses, host[:2379] each, comma-separated.
std::vector<std::string> resolve_etcd_endpoints(const std::string& text) {
  ACC_CHECK(!text.empty(), ConfigError,
            "--rdzv_backend etcd-v2: give --rdzv_endpoint host:2379[,host:2379...], the client "
            "addresses of the etcd cluster's members");
  std::vector<std::string> endpoints;
  for (const Endpoint& member : parse_endpoint_list(text, 2379, "--rdzv_endpoint"))
    endpoints.push_back(member.to_string());
  return endpoints;
}

void resolve_elastic(const LaunchOptions& o, LaunchPlan& plan) {
  plan.rdzv_conf = parse_rdzv_conf(o.rdzv_conf);
  ACC_CHECK(o.rdzv_id != "none" || o.source_of("rdzv_id") != Source::kCommandLine, ConfigError,
            "--rdzv_id none: give the job an id every node shares");
  if (plan.rdzv_backend == "etcd-v2") {
    plan.etcd_endpoints = resolve_etcd_endpoints(o.rdzv_endpoint);
    check_etcd_tls(plan.rdzv_conf);
    return;
  }
  for (const char* key : {"protocol", "cacert", "cert", "key"})
    ACC_CHECK(!plan.rdzv_conf.count(key), ConfigError, "--rdzv_conf ", key,
              ": only the etcd backend takes it (--rdzv_backend etcd)");
  ACC_CHECK(!o.rdzv_endpoint.empty(), ConfigError,
            "--rdzv_backend c10d: give --rdzv_endpoint host[:port], the address of the "
            "rendezvous store (one of the nodes, or `acc-launch rendezvous serve`)");
  const Endpoint endpoint = parse_endpoint(o.rdzv_endpoint, plan.rdzv_port, "--rdzv_endpoint");
  plan.rdzv_host = endpoint.host;
  plan.rdzv_port = endpoint.port;
}

// Folds Accelerate's spellings into torchrun's; the same setting given both ways on the command
// line must agree. Otherwise only one of them is set past its default (apply_proposals keeps one
// spelling of a setting), so Accelerate's, where set, is the setting.
template <typename T>
void fold(const LaunchOptions& o, const std::optional<T>& accelerate_value,
          const char* accelerate_flag, const char* torchrun_flag, T& torchrun_value,
          const T& torchrun_as_given) {
  if (!accelerate_value) return;
  if (o.source_of(torchrun_flag) == Source::kCommandLine &&
      torchrun_as_given != *accelerate_value) {
    std::ostringstream message;
    message << "--" << accelerate_flag << " " << *accelerate_value << " contradicts --"
            << torchrun_flag << " " << torchrun_as_given << "; give one of them";
    throw ConfigError(message.str());
  }
  torchrun_value = *accelerate_value;
}

// Whether the workers are Python (a module, a .py file or --run_path, unless --no_python): then
// they run under o.python, and the launcher can tell their PyTorch.
bool runs_python(const LaunchOptions& o) {
  const bool is_python_file =
      o.program.size() > 3 && o.program.compare(o.program.size() - 3, 3, ".py") == 0;
  return o.module || (!o.no_python && (is_python_file || o.run_path));
}

std::vector<std::string> worker_argv(const LaunchOptions& o) {
  ACC_CHECK(!(o.module && o.no_python), ConfigError,
            "--module and --no_python cannot be used together");
  std::vector<std::string> argv;
  if (o.module) {
    argv = {o.python, "-u", "-m", o.program};
  } else if (runs_python(o)) {
    argv = {o.python, "-u", o.program};
  } else {
    argv = {o.program};
  }
  argv.insert(argv.end(), o.program_args.begin(), o.program_args.end());
  return argv;
}

std::string random_run_id() {
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(random_u64()));
  return id;
}

// accelerate launch on several machines (utils/launch.py prepare_multi_gpu_env): unless the
// machines share a network, --main_process_ip/port is torchrun's --rdzv_endpoint, so with
// --rdzv_backend c10d (or etcd) the nodes meet there in rounds (and need no --machine_rank:
// Accelerate's SLURM recipe gives none).
std::string accelerate_rdzv_endpoint(const LaunchOptions& o) {
  if (!o.rdzv_endpoint.empty() || o.same_network || o.rdzv_backend == "static")
    return o.rdzv_endpoint;
  if (!o.num_machines || *o.num_machines < 2 || !o.main_process_ip) return o.rdzv_endpoint;
  return format_endpoint(*o.main_process_ip, o.main_process_port.value_or(29500));
}

// torchrun's single-node form `--rdzv-backend=c10d --rdzv-endpoint=HOST:0 --nnodes=1` (its
// documentation's "stacked single-node" example): a store on a free port. One node meets no
// other, so it runs as --standalone does; returns HOST (where the store is), or nullopt for any
// other command line. Port 0 with several nodes is refused: they could not find each other.
std::optional<std::string> free_port_rendezvous(const LaunchOptions& o,
                                                const LaunchOptions& merged) {
  const std::string& text = merged.rdzv_endpoint;
  if (o.standalone || o.rdzv_backend != "c10d" || text.size() < 3 || !text.ends_with(":0"))
    return std::nullopt;
  const std::string host_part = text.substr(0, text.size() - 2);
  if (host_part.ends_with(":") || host_part.ends_with("]:")) return std::nullopt;  // "h::0"
  ACC_CHECK(resolve_nnodes(merged.nnodes) == std::pair(1, 1), ConfigError, "--rdzv_endpoint ", text,
            ": port 0 (a free port) serves one node only (--nnodes=1, as torchrun); give "
            "the port every node will reach, such as ",
            host_part, ":29400");
  return parse_endpoint(host_part, 29400, "--rdzv_endpoint").host;
}

// The options with Accelerate's spellings of the node count and rank folded into torchrun's, and
// Accelerate's multi-machine address as the rendezvous endpoint where it stands for one.
LaunchOptions merged_spellings(const LaunchOptions& o) {
  LaunchOptions merged = o;
  merged.rdzv_endpoint = accelerate_rdzv_endpoint(o);
  if (o.num_machines)
    fold(o, std::optional(std::to_string(*o.num_machines)), "num_machines", "nnodes", merged.nnodes,
         o.nnodes);
  fold(o, o.machine_rank, "machine_rank", "node_rank", merged.node_rank, o.node_rank);
  return merged;
}

// The store's port: a free one (0) where each attempt may pick its own (one node, a standalone
// or elastic job), else the one a layer named (named_store_port), else torchrun's 29500.
int resolve_master_port(const LaunchOptions& o, const LaunchPlan& plan, bool standalone) {
  const std::optional<int> port_given = named_store_port(o);
  const bool elastic = plan.rdzv_backend != "static";
  // A free port, chosen at launch (torchrun >= 2.4 does the same).
  if (standalone || (!port_given && plan.nnodes == 1) || elastic) return 0;
  const int port = port_given.value_or(29500);
  ACC_CHECK(port != 0 || plan.nnodes == 1, ConfigError,
            "--master_port 0: a free port can only be chosen on a single node; give the port "
            "every node will use");
  return port;
}

// The master address (every spelling, --standalone, a static --rdzv_endpoint), given what
// free_port_rendezvous() said of the options: resolve_master_addr(o) below, for callers that
// have not asked it.
std::string resolve_master_addr(const LaunchOptions& o,
                                const std::optional<std::string>& free_port_host) {
  std::string named = o.master_addr;
  fold(o, o.main_process_ip, "main_process_ip", "master_addr", named, o.master_addr);
  std::string address = o.standalone                    ? "127.0.0.1"
                        : free_port_host == "localhost" ? "127.0.0.1"
                        : free_port_host                ? *free_port_host
                                                        : parse_host(named, "--master_addr");
  // torchrun: a static endpoint host[:port] stands for master_addr:master_port.
  if (!o.rdzv_endpoint.empty() && o.rdzv_backend == "static")
    address = parse_endpoint(o.rdzv_endpoint, 0, "--rdzv_endpoint").host;
  return address;
}

void resolve_topology(const LaunchOptions& o, const HostInfo& host, LaunchPlan& plan) {
  const LaunchOptions merged = merged_spellings(o);
  const bool etcd = o.rdzv_backend == "etcd" || o.rdzv_backend == "etcd-v2";  // torchrun's names
  ACC_CHECK(o.rdzv_backend == "static" || o.rdzv_backend == "c10d" || etcd, ConfigError,
            "--rdzv_backend ", o.rdzv_backend, ": expected static, c10d or etcd-v2");
  ACC_CHECK(!o.standalone || resolve_nnodes(merged.nnodes) == std::pair(1, 1), ConfigError,
            "--standalone runs one node, but --nnodes is ", merged.nnodes,
            "; leave out one of them");
  const std::optional<std::string> free_port_host = free_port_rendezvous(o, merged);
  const bool standalone = o.standalone || free_port_host;
  plan.rdzv_backend = standalone ? "static" : etcd ? "etcd-v2" : o.rdzv_backend;
  const bool elastic = plan.rdzv_backend != "static";
  std::tie(plan.min_nodes, plan.max_nodes) =
      standalone ? std::pair(1, 1) : resolve_nnodes(merged.nnodes);
  plan.local_addr = o.local_addr;
  if (elastic) resolve_elastic(merged, plan);
  // Static jobs of several nodes read their keep-alive and join timeout from it too.
  if (!elastic) plan.rdzv_conf = parse_rdzv_conf(merged.rdzv_conf);
  ACC_CHECK(
      elastic || plan.min_nodes == plan.max_nodes, ConfigError, "--nnodes ", merged.nnodes,
      ": elastic membership (MIN:MAX) needs --rdzv_backend c10d or etcd-v2 and --rdzv_endpoint");
  // An elastic node learns its rank and the node count in each round; the plan holds the most.
  plan.nnodes = plan.max_nodes;
  plan.node_rank = elastic ? 0 : merged.node_rank;
  if (elastic && setting_source(o, "node_rank") != Source::kDefault)
    plan.wanted_node_rank = merged.node_rank;
  ACC_CHECK(plan.node_rank >= 0 && plan.node_rank < plan.nnodes, ConfigError, "--node_rank ",
            plan.node_rank, ": must be between 0 and ", plan.nnodes - 1, " for ", plan.nnodes,
            " node(s)");

  plan.nproc_per_node = resolve_workers_per_node(o, host, plan.nnodes);
  ACC_CHECK(int64_t{plan.nnodes} * plan.nproc_per_node <= std::numeric_limits<int32_t>::max(),
            ConfigError, "--nnodes ", merged.nnodes, ": ", plan.nnodes, " nodes of ",
            plan.nproc_per_node, " workers are more ranks than a job can number");
  plan.world_size = plan.nnodes * plan.nproc_per_node;
  plan.master_addr = resolve_master_addr(o, free_port_host);
  plan.master_port = resolve_master_port(o, plan, standalone);
}

// On a node of a fan-out over hosts of different sizes (--node_slots, fanout.h): every node's
// workers, checked against the node count, rank and this node's workers. Static jobs only.
std::vector<int> resolve_node_slots(const LaunchOptions& o, const LaunchPlan& plan) {
  if (o.node_slots.empty()) return {};
  std::vector<int> slots;
  for (const std::string& item : split(o.node_slots, ',')) {
    const auto n = parse_int(item);
    ACC_CHECK(n && *n > 0, ConfigError, "--node_slots ", o.node_slots,
              ": expected every node's workers, e.g. 1,3");
    slots.push_back(*n);
  }
  ACC_CHECK(plan.rdzv_backend == "static", ConfigError,
            "--node_slots: only a static job (--rdzv_backend static) has nodes of fixed sizes");
  ACC_CHECK(static_cast<int>(slots.size()) == plan.nnodes, ConfigError, "--node_slots ",
            o.node_slots, ": ", slots.size(), " nodes, but --nnodes is ", plan.nnodes);
  const int here = slots[static_cast<size_t>(plan.node_rank)];
  ACC_CHECK(here == plan.nproc_per_node, ConfigError, "--node_slots ", o.node_slots, ": node ",
            plan.node_rank, " has ", here, " but --nproc_per_node is ", plan.nproc_per_node);
  return slots;
}

// --retryable_exit_code: an exit status a scheduler can see (1-255); 0 when not given.
int resolve_retryable_exit_code(const LaunchOptions& o) {
  if (o.source_of("retryable_exit_code") != Source::kCommandLine) return 0;
  const int code = o.retryable_exit_code;
  ACC_CHECK(code >= 1 && code <= 255, ConfigError, "--retryable_exit_code ", code,
            ": expected an exit status from 1 to 255, such as 138 (Kubeflow's ExitCode restart "
            "policy retries 130, 137, 138 and 143)");
  return code;
}

// --no_restart_exit_code: an exit status a scheduler can see (1-255).
int resolve_no_restart_exit_code(const LaunchOptions& o) {
  const int code = o.no_restart_exit_code;
  ACC_CHECK(code >= 1 && code <= 255, ConfigError, "--no_restart_exit_code ", code,
            ": expected an exit status from 1 to 255 (default 93, as NVIDIA's ft_launcher)");
  return code;
}

// --sdc_exit_codes RESTART,SUSPECT: two different exit statuses from 1 to 255; empty: off.
void resolve_sdc_exit_codes(const LaunchOptions& o, LaunchPlan& plan) {
  if (o.sdc_exit_codes.empty()) return;
  const std::string usage = "--sdc_exit_codes " + o.sdc_exit_codes +
                            ": expected RESTART,SUSPECT, two different exit statuses from 1 to "
                            "255, such as 16,17 (Megatron's)";
  const std::size_t comma = o.sdc_exit_codes.find(',');
  ACC_CHECK(comma != std::string::npos, ConfigError, usage);
  const std::optional<int> restart = parse_int(o.sdc_exit_codes.substr(0, comma));
  const std::optional<int> suspect = parse_int(o.sdc_exit_codes.substr(comma + 1));
  ACC_CHECK(restart && suspect && *restart >= 1 && *restart <= 255 && *suspect >= 1 &&
                *suspect <= 255 && *restart != *suspect,
            ConfigError, usage);
  plan.sdc_restart_exit_code = *restart;
  plan.sdc_suspect_exit_code = *suspect;
}

// TORCHELASTIC_HEALTH_CHECK_PORT, where the launcher's environment sets it (empty: unset, as the
// other torchrun variables): a port number.
std::optional<int> resolve_health_check_port(const HostInfo& host) {
  const auto it = host.environment.find("TORCHELASTIC_HEALTH_CHECK_PORT");
  if (it == host.environment.end() || it->second.empty()) return std::nullopt;
  const std::string& text = it->second;
  const bool digits =
      !text.empty() && text.size() <= 5 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  ACC_CHECK(digits && std::stoi(text) <= 65535, ConfigError, "TORCHELASTIC_HEALTH_CHECK_PORT=\"",
            escape_control(text), "\" is not a port number (0-65535; 0: any free port)");
  return std::stoi(text);
}

// "SIGTERM,SIGINT" (names with or without SIG, or numbers) -> signal numbers.
std::vector<int> parse_signals(const std::string& list) {
  std::vector<int> signals;
  for (std::string name : split(list, ',')) {
    if (name.empty()) continue;
    int number = parse_int(name).value_or(0);
    if (number == 0) {
      if (name.rfind("SIG", 0) == 0) name = name.substr(3);
      for (int s = 1; s < NSIG && number == 0; ++s)
        if (const char* abbrev = sigabbrev_np(s); abbrev && name == abbrev) number = s;
    }
    ACC_CHECK(
        number > 0 && number < NSIG && number != SIGKILL && number != SIGSTOP && number != SIGCHLD,
        ConfigError, "--signals-to-handle ", list, ": ", name,
        " is not a signal acc-launch can handle; e.g. SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1");
    signals.push_back(number);
  }
  return signals;
}

// CUDA_VISIBLE_DEVICES as the workers get it: --gpu_ids (in plan.env), else the launcher's own.
std::string visible_devices_list(const LaunchPlan& plan, const HostInfo& host) {
  for (const auto& [key, value] : plan.env)
    if (key == "CUDA_VISIBLE_DEVICES") return value;
  auto it = host.environment.find("CUDA_VISIBLE_DEVICES");
  return it == host.environment.end() ? "" : it->second;
}

// The devices the workers share out under --virtual-local-rank: that list, else the indices.
std::vector<std::string> visible_devices(const LaunchPlan& plan, const HostInfo& host) {
  std::vector<std::string> devices;
  for (const std::string& device : split(visible_devices_list(plan, host), ','))
    if (!device.empty()) devices.push_back(device);
  return devices;
}

// --gpu_ids: "all", or a comma list of GPU indices or UUIDs (GPU-..., MIG-...), as
// CUDA_VISIBLE_DEVICES takes them.
void check_gpu_ids(const LaunchOptions& o) {
  if (!o.gpu_ids || *o.gpu_ids == "all") return;
  const std::vector<std::string> ids = split(*o.gpu_ids, ',');
  bool ok = !ids.empty();
  for (const std::string& id : ids) {
    const auto index = parse_int(id);
    ok = ok && ((index && *index >= 0) || id.rfind("GPU-", 0) == 0 || id.rfind("MIG-", 0) == 0);
  }
  ACC_CHECK(ok, ConfigError, "--gpu_ids ", *o.gpu_ids,
            ": expected all or a comma list of GPU numbers such as 0,1");
}

// --include/--exclude pick hosts of a --hostfile; without one they would be ignored.
void check_host_filters(const LaunchOptions& o) {
  for (const auto& [flag, value] :
       {std::pair<const char*, const std::string&>{"include", o.include_hosts},
        {"exclude", o.exclude_hosts}})
    ACC_CHECK(value.empty() || !o.hostfile.empty(), ConfigError, "--", flag, " ", value,
              ": selects hosts of a hostfile; give --hostfile FILE as well");
}

void resolve_logs(const LaunchOptions& o, LaunchPlan& plan) {
  plan.redirects = parse_stream_spec(o.redirects, "redirects");
  plan.tee = parse_stream_spec(o.tee, "tee");
  for (const std::string& part : split(o.local_ranks_filter, ',')) {
    if (part.empty()) continue;
    auto rank = parse_int(part);
    ACC_CHECK(rank && *rank >= 0, ConfigError, "--local_ranks_filter ", o.local_ranks_filter,
              ": expected a comma list of local ranks such as 0,1");
    plan.console_local_ranks.insert(*rank);
  }
  plan.log_dir = o.log_dir;
  plan.log_line_prefix = o.log_line_prefix;
}

bool has_variable(const EnvList& env, const std::string& name) {
  return std::any_of(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
}

// The NVIDIA GPUs the workers use (LaunchPlan::worker_gpus): local rank i the i-th that
// CUDA_VISIBLE_DEVICES leaves, as the NUMA binding reads them too. The launcher's own list is read
// only as far as PyTorch reads it (host.gpu_count entries).
std::vector<std::string> gpus_of_workers(const LaunchOptions& o, const LaunchPlan& plan,
                                         const HostInfo& host) {
  if (host.gpu_vendor != "nvidia" || host.gpu_count == 0 || o.cpu) return {};
  std::vector<std::string> gpus = visible_devices(plan, host);
  if (!has_variable(plan.env, "CUDA_VISIBLE_DEVICES") &&
      gpus.size() > static_cast<size_t>(host.gpu_count))
    gpus.resize(static_cast<size_t>(host.gpu_count));
  if (gpus.empty())
    for (int i = 0; i < host.gpu_count; ++i) gpus.push_back(std::to_string(i));
  gpus.resize(std::min(gpus.size(), static_cast<size_t>(plan.nproc_per_node)));
  return gpus;
}

void resolve_environment(const LaunchOptions& o, const HostInfo& host, LaunchPlan& plan) {
  plan.env = accelerate_env(o);
  plan.single_process = o.simple_launcher && plan.world_size == 1;
  // Async error handling under the name the workers' PyTorch reads (both when unknown), unless
  // the user set it under either: a second name makes PyTorch >= 2.2 warn on every rank.
  if (runs_python(o) && host.python_torch_of) {
    const std::optional<PythonTorch> torch = host.python_torch_of(o.python, host.environment);
    if (torch) plan.worker_torch = torch->version;
    plan.worker_torch_origin =
        torch ? torch->version_text + " (" + torch->version_py + ")" : "not found for " + o.python;
  }
  for (const char* name : {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"})
    if (torch_env::reads(name, plan.worker_torch) && !torch_env::is_set(host.environment, name))
      plan.env_defaults.emplace_back(name, "1");
  plan.worker_cpus = resolve_cpu_binding(choose_cpu_binding(o), host,
                                         visible_devices_list(plan, host), plan.nproc_per_node);
  if (o.enable_cpu_affinity && !has_variable(plan.env, "ACCELERATE_CPU_AFFINITY"))
    plan.env.emplace_back("ACCELERATE_CPU_AFFINITY", "1");

  // OMP_NUM_THREADS=1 chosen for the user, said in this one place: by an Accelerate launch
  // (config_merge.cc, as accelerate launch chooses it), or here for torchrun's launch, where a
  // CPU binding sets it per worker to the number of its CPUs instead.
  bool chosen = o.omp_threads_chosen;
  if (!has_variable(plan.env, "OMP_NUM_THREADS") && plan.worker_cpus.empty() &&
      !host.environment.count("OMP_NUM_THREADS") && plan.nproc_per_node > 1) {
    plan.env_defaults.emplace_back("OMP_NUM_THREADS", "1");
    chosen = true;
  }
  if (chosen && plan.nproc_per_node > 1)
    plan.notices.push_back(
        "setting OMP_NUM_THREADS=1 for each worker to avoid overloading the system; " +
        o.omp_threads_hint);
}

std::chrono::milliseconds milliseconds_of(double seconds) {
  return std::chrono::round<std::chrono::milliseconds>(std::chrono::duration<double>(seconds));
}

// The flags given in seconds, as the plan keeps them.
void resolve_timeouts(const LaunchOptions& o, LaunchPlan& plan) {
  plan.shutdown_timeout = milliseconds_of(o.shutdown_timeout);
  plan.kill_timeout = milliseconds_of(o.kill_timeout);
  plan.exit_barrier_timeout = milliseconds_of(o.exit_barrier_timeout);
  plan.stall_timeout = milliseconds_of(o.stall_timeout);
  plan.stall_init_timeout = std::max(plan.stall_timeout, milliseconds_of(o.stall_init_timeout));
  plan.preflight_timeout = milliseconds_of(o.preflight_timeout);
  plan.straggler_window = milliseconds_of(o.straggler_window);
  plan.health_check_timeout = milliseconds_of(o.health_check_timeout);
}

}  // namespace

int resolve_workers_per_node(const LaunchOptions& o, const HostInfo& host, int nnodes) {
  if (!o.num_processes) return resolve_nproc_per_node(o, host);
  const Source per_node = o.source_of("nproc_per_node");
  const Source total = o.source_of("num_processes");
  if (per_node == Source::kCommandLine && total == Source::kCommandLine) {
    const int n = resolve_nproc_per_node(o, host);
    ACC_CHECK(per_node_of_total(*o.num_processes, nnodes) == n, ConfigError, "--num_processes ",
              *o.num_processes, " contradicts --nproc_per_node ", o.nproc_per_node,
              "; give one of them");
    return n;
  }
  // A total set at the same level wins: --nproc_per_node always has a value, its default.
  return total >= per_node ? per_node_of_total(*o.num_processes, nnodes)
                           : resolve_nproc_per_node(o, host);
}

std::string resolve_master_addr(const LaunchOptions& o) {
  return resolve_master_addr(o, free_port_rendezvous(o, merged_spellings(o)));
}

int StreamSpec::mask_for(int local_rank) const {
  auto it = per_local_rank.find(local_rank);
  return it == per_local_rank.end() ? default_mask : it->second;
}

StreamSpec parse_stream_spec(const std::string& value, const std::string& flag) {
  StreamSpec spec;
  const std::string hint = "--" + flag + " " + value +
                           ": expected 0-3 (1 stdout, 2 stderr, 3 both) or per local rank "
                           "such as 0:1,1:2";
  if (auto all = parse_int(value)) {
    ACC_CHECK(*all >= 0 && *all <= 3, ConfigError, hint);
    spec.default_mask = *all;
    return spec;
  }
  for (const std::string& part : split(value, ',')) {
    const size_t colon = part.find(':');
    ACC_CHECK(colon != std::string::npos, ConfigError, hint);
    auto rank = parse_int(part.substr(0, colon));
    auto mask = parse_int(part.substr(colon + 1));
    ACC_CHECK(rank && mask && *rank >= 0 && *mask >= 0 && *mask <= 3, ConfigError, hint);
    spec.per_local_rank[*rank] = *mask;
  }
  return spec;
}

std::optional<bool> rdzv_is_host(const LaunchPlan& plan) {
  const auto given = plan.rdzv_conf.find("is_host");
  return given == plan.rdzv_conf.end() ? std::nullopt : truth_value(given->second);
}

std::chrono::milliseconds rdzv_seconds(const LaunchPlan& plan, const std::string& key,
                                       double fallback) {
  const auto given = plan.rdzv_conf.find(key);
  const double seconds = given == plan.rdzv_conf.end() ? fallback : std::stod(given->second);
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

int rdzv_count(const LaunchPlan& plan, const std::string& key, int fallback) {
  const auto given = plan.rdzv_conf.find(key);
  return given == plan.rdzv_conf.end() ? fallback : std::stoi(given->second);
}

bool hosts_rendezvous_store(const LaunchPlan& plan) {
  return rdzv_is_host(plan).value_or(is_local_address(plan.rdzv_host));
}

// The job secret (docs/rendezvous.md, "Only the job's members"): --rdzv_conf job_secret_file,
// else the file $ACC_JOB_SECRET_FILE names.
void resolve_job_secret(const HostInfo& host, LaunchPlan& plan) {
  const auto given = plan.rdzv_conf.find("job_secret_file");
  const auto variable = host.environment.find(kJobSecretFileVar);
  if (given != plan.rdzv_conf.end())
    plan.job_secret =
        rendezvous::read_job_secret(given->second, "--rdzv_conf job_secret_file=" + given->second);
  else if (variable != host.environment.end() && !variable->second.empty())
    plan.job_secret = rendezvous::read_job_secret(
        variable->second, std::string(kJobSecretFileVar) + "=" + variable->second);
  const auto admission = plan.rdzv_conf.find("admit_members_only");
  plan.admit_members_only = admission != plan.rdzv_conf.end() && *truth_value(admission->second);
  ACC_CHECK(!plan.admit_members_only || !plan.job_secret.empty(), ConfigError,
            "--rdzv_conf admit_members_only needs the job secret (--rdzv_conf "
            "job_secret_file=PATH, or ACC_JOB_SECRET_FILE): the members are the addresses that "
            "prove it");
}

// What a failure leads to: the launcher's exit codes, the restarts without progress, the SDC exit
// codes, and the verdicts that keep a node out.
void resolve_failure_policy(const LaunchOptions& o, LaunchPlan& plan) {
  plan.retryable_exit_code = resolve_retryable_exit_code(o);
  plan.max_no_progress_restarts = o.max_no_progress_restarts;
  plan.no_restart_exit_code = resolve_no_restart_exit_code(o);
  resolve_sdc_exit_codes(o, plan);
  plan.exclude_nodes_file = o.exclude_nodes_file;
  ACC_CHECK(o.exclude_nodes_file.empty() || std::ifstream(o.exclude_nodes_file).good(), ConfigError,
            "--exclude_nodes_file ", o.exclude_nodes_file,
            ": cannot read the file (an empty one leaves no node out)");
  plan.node_health_command = o.node_health_command;
  plan.network_check = o.network_check;
  ACC_CHECK(o.network_check_factor > 1, ConfigError, "--network_check_factor ",
            o.network_check_factor,
            ": must be above 1 (a node this many times slower is left out)");
  plan.network_check_factor = o.network_check_factor;
}

LaunchPlan build_plan(const LaunchOptions& o, const HostInfo& host) {
  ACC_CHECK(!o.program.empty(), ConfigError, "no PROGRAM given");
  check_gpu_ids(o);
  check_host_filters(o);
  LaunchPlan plan;
  resolve_topology(o, host, plan);
  resolve_job_secret(host, plan);
  plan.node_slots = resolve_node_slots(o, plan);
  if (!plan.node_slots.empty())
    plan.world_size = std::accumulate(plan.node_slots.begin(), plan.node_slots.end(), 0);
  resolve_logs(o, plan);
  resolve_environment(o, host, plan);
  plan.dedup_lines = o.dedup_lines;
  plan.dedup_window = std::chrono::milliseconds(o.dedup_window_ms);
  plan.run_id = o.standalone && o.rdzv_id == "none" ? random_run_id() : o.rdzv_id;
  plan.role = o.role;
  plan.hostname = host.hostname;
  plan.max_restarts = o.max_restarts;
  resolve_timeouts(o, plan);
  plan.stop_signals = parse_signals(o.signals_to_handle);
  plan.virtual_local_rank = o.virtual_local_rank;
  for (const auto& [flag, value] :
       {std::pair<std::string, std::string>{"logs_specs", o.logs_specs},
        {"event_log_handler", o.event_log_handler == "null" ? "" : o.event_log_handler},
        {"duplicate_stdout_filters", o.duplicate_stdout_filters},
        {"duplicate_stderr_filters", o.duplicate_stderr_filters}})
    if (!value.empty())
      plan.notices.push_back("--" + flag + " " + value +
                             " ignored: torchrun's Python plug-ins do not apply (logs are in "
                             "--log_dir, per attempt and rank)");
  plan.quiet = o.quiet;
  plan.dry_run = o.dry_run;
  plan.program = o.program;
  if (!o.module && !o.no_python && (o.program.size() > 3 && o.program.ends_with(".py")))
    plan.script = o.program;
  if (runs_python(o)) {
    plan.python = o.python + " (" + o.python_source + ")";
    plan.notices.push_back("Python workers run " + plan.python);
  }
  plan.no_python_hook = o.no_python_hook;
  plan.no_warm_workers = o.no_warm_workers;
  ACC_CHECK(o.keep_checkpoints >= 1, ConfigError, "--keep_checkpoints ", o.keep_checkpoints,
            ": expected a whole number of at least 1");
  plan.keep_checkpoints = o.keep_checkpoints;
  plan.checkpoint_replica = o.checkpoint_replica;
  if (o.checkpoint_replica && std::max(plan.nnodes, plan.max_nodes) < 2)
    plan.notices.push_back(
        "--checkpoint_replica: a job of one node has no other node to hold "
        "its replica; the saves stay in this node's memory");
  plan.notices.insert(plan.notices.begin(), o.notices.begin(), o.notices.end());
  plan.stall_stops_job = o.stall_action != "report";
  resolve_failure_policy(o, plan);
  plan.health_check_port = resolve_health_check_port(host);
  ACC_CHECK(plan.health_check_timeout.count() > 0, ConfigError, "--health_check_timeout ",
            o.health_check_timeout, ": expected seconds above 0 (default 60)");
  ACC_CHECK(o.status_port <= 65535, ConfigError, "--status_port ", o.status_port,
            ": not a port number (0-65535; 0: any free port)");
  if (o.status_port >= 0) plan.status_port = o.status_port;
  ACC_CHECK(!o.status_host.empty() && !has_control(o.status_host), ConfigError, "--status_host '",
            escape_control(o.status_host),
            "': expected an address of this host (default 127.0.0.1; 0.0.0.0 for every one)");
  plan.status_host = o.status_host;

  const std::vector<std::string> argv = worker_argv(o);
  const std::vector<std::string> devices = visible_devices(plan, host);
  plan.worker_gpus = gpus_of_workers(o, plan, host);
  for (int local_rank = 0; local_rank < plan.nproc_per_node; ++local_rank) {
    WorkerSpec worker;
    worker.local_rank = local_rank;
    if (plan.virtual_local_rank)
      worker.virtual_device = local_rank < static_cast<int>(devices.size())
                                  ? devices[static_cast<size_t>(local_rank)]
                                  : std::to_string(local_rank);
    for (const std::string& arg : argv)
      worker.argv.push_back(replace_all(arg, "${local_rank}", std::to_string(local_rank)));
    plan.workers.push_back(std::move(worker));
  }
  return plan;
}

Round static_round(const LaunchPlan& plan, int master_port, int restart_count) {
  Round round;
  round.node_rank = plan.node_rank;
  round.nnodes = plan.nnodes;
  round.master_addr = plan.master_addr;
  round.master_port = master_port;
  round.restart_count = restart_count;
  return round;
}

int global_rank(const LaunchPlan& plan, const Round& round, int local_rank) {
  if (!plan.node_slots.empty())
    return std::accumulate(plan.node_slots.begin(), plan.node_slots.begin() + round.node_rank, 0) +
           local_rank;
  return round.node_rank * plan.nproc_per_node + local_rank;
}

int world_size(const LaunchPlan& plan, const Round& round) {
  return plan.node_slots.empty() ? round.nnodes * plan.nproc_per_node : plan.world_size;
}

EnvList torchrun_contract(const LaunchPlan& plan, const WorkerSpec& worker, const Round& round,
                          const std::string& error_file) {
  if (plan.single_process) return {{"TORCHELASTIC_ERROR_FILE", error_file}};
  const std::string rank = std::to_string(global_rank(plan, round, worker.local_rank));
  const std::string world = std::to_string(world_size(plan, round));
  return {
      {"LOCAL_RANK", std::to_string(plan.virtual_local_rank ? 0 : worker.local_rank)},
      {"RANK", rank},
      {"GROUP_RANK", std::to_string(round.node_rank)},
      {"ROLE_RANK", rank},
      {"ROLE_NAME", plan.role},
      {"LOCAL_WORLD_SIZE", std::to_string(plan.nproc_per_node)},
      {"WORLD_SIZE", world},
      {"GROUP_WORLD_SIZE", std::to_string(round.nnodes)},
      {"ROLE_WORLD_SIZE", world},
      {"MASTER_ADDR", round.master_addr},
      {"MASTER_PORT", std::to_string(round.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(round.restart_count)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(plan.max_restarts)},
      {"TORCHELASTIC_RUN_ID", plan.run_id},
      // "True": every worker is a client of the store the launcher serves; "False": rank 0
      // hosts it, as torchrun's workers do without an agent store.
      {"TORCHELASTIC_USE_AGENT_STORE", round.agent_store ? "True" : "False"},
      {"TORCHELASTIC_ERROR_FILE", error_file},
  };
}

std::string expand_prefix(const LaunchPlan& plan, const WorkerSpec& worker, const Round& round) {
  std::string prefix = plan.log_line_prefix;
  prefix =
      replace_all(prefix, "${rank}", std::to_string(global_rank(plan, round, worker.local_rank)));
  prefix = replace_all(prefix, "${local_rank}", std::to_string(worker.local_rank));
  prefix = replace_all(prefix, "${role_name}", plan.role);
  return replace_all(prefix, "${hostname}", plan.hostname);
}

}  // namespace acc::launcher
