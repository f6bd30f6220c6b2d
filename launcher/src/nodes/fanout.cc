#include "acc/launcher/nodes/fanout.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <sstream>

#include "acc/common/error.h"
#include "acc/common/hostfile.h"
#include "acc/common/strings.h"
#include "acc/launcher/plan/option_sources.h"
#include "acc/launcher/plan/plan.h"
#include "output/console.h"

namespace acc::launcher {
namespace {

bool valid_name(const std::string& name) {
  return !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
         });
}

// Flags the head sets per node, or that only the head reads; all take a value.
const std::set<std::string>& head_only_flags() {
  static const std::set<std::string> flags = {
      "hostfile",    "include",         "exclude",      "launcher",        "ssh_port",
      "ssh_option",  "env_passthrough", "nnodes",       "node_rank",       "nproc_per_node",
      "master_addr", "master_port",     "rdzv_id",      "gpu_ids",         "num_processes",
      "node_slots",  "num_machines",    "machine_rank", "main_process_ip", "main_process_port",
  };
  return flags;
}

}  // namespace

bool wants_fanout(const LaunchOptions& options) {
  return !options.hostfile.empty() && options.source_of("node_rank") != Source::kCommandLine &&
         options.launcher != "none" && !options.stop_on_stdin_eof;
}

std::vector<RemoteNode> select_nodes(const std::vector<HostfileEntry>& hosts,
                                     const std::string& include, const std::string& exclude) {
  std::vector<RemoteNode> nodes;
  for (const SelectedHost& host : select_hosts(hosts, include, exclude)) {
    RemoteNode node;
    node.host = host.host;
    node.node_rank = static_cast<int>(nodes.size());
    node.slots = static_cast<int>(host.slots.size());
    // Only a selection of GPUs names them; a whole host keeps its own CUDA_VISIBLE_DEVICES.
    if (node.slots != host.hostfile_slots) {
      std::vector<std::string> ids;
      for (int slot : host.slots) ids.push_back(std::to_string(slot));
      node.gpu_ids = join(ids, ",");
    }
    nodes.push_back(node);
  }
  return nodes;
}

void check_slots_agree(const LaunchOptions& options, const std::vector<RemoteNode>& nodes) {
  if (options.source_of("nproc_per_node") == Source::kCommandLine) {
    // auto, gpu and cpu count this host's devices: the hostfile's slots count the others'.
    if (const std::optional<int> n = parse_int(options.nproc_per_node)) {
      for (const RemoteNode& node : nodes)
        ACC_CHECK(node.slots == *n, ConfigError, "--nproc_per_node ", *n,
                  " disagrees with the hostfile ", options.hostfile, ": host ", node.host, " has ",
                  node.slots, " slot(s), and a fanned-out node starts one worker a slot; drop ",
                  "--nproc_per_node or give every host slots=", *n);
    }
  }
  if (options.source_of("num_processes") == Source::kCommandLine && options.num_processes) {
    int total = 0;
    std::vector<std::string> slots;
    for (const RemoteNode& node : nodes) {
      total += node.slots;
      slots.push_back(node.host + ":" + std::to_string(node.slots));
    }
    ACC_CHECK(*options.num_processes == total, ConfigError, "--num_processes ",
              *options.num_processes, " disagrees with the hostfile ", options.hostfile,
              ": its hosts have ", total, " slot(s) in all (", join(slots, " "),
              "), and a fanned-out node starts one worker a slot; drop --num_processes or ",
              "change the hostfile");
  }
}

std::vector<std::string> forwarded_launcher_args(const LaunchOptions& options) {
  std::vector<std::string> kept;
  for (const TypedOption& option : options.typed) {
    if (head_only_flags().count(option.name)) continue;
    const std::string flag = "--" + option.name;
    if (!option.is_switch)
      kept.insert(kept.end(), {flag, option.value});
    else
      kept.push_back(option.value == "true" ? flag : flag + "=" + option.value);
  }
  return kept;
}

FanoutJob resolve_fanout_job(const LaunchOptions& options, const std::vector<RemoteNode>& nodes,
                             const std::string& new_id) {
  FanoutJob job;
  job.nnodes = static_cast<int>(nodes.size());
  job.node_slots = node_slots_of(nodes);
  job.master_addr = resolve_master_addr(options);
  job.rdzv_id = options.source_of("rdzv_id") != Source::kDefault ? options.rdzv_id : new_id;
  // The port every node agrees on without a word: the one named, else derived from the job id,
  // as a free port (0) cannot be agreed on.
  const std::optional<int> named = named_store_port(options);
  job.master_port = named && *named != 0 ? *named : port_for_job(job.rdzv_id);
  job.own_prefix = options.source_of("log_line_prefix_template") == Source::kCommandLine;
  job.forwarded_args = forwarded_launcher_args(options);
  job.program = {options.program};
  job.program.insert(job.program.end(), options.program_args.begin(), options.program_args.end());
  return job;
}

std::vector<std::pair<std::string, std::string>> parse_env_file(const std::string& text,
                                                                const std::string& path) {
  std::vector<std::pair<std::string, std::string>> entries;
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    const size_t equals = line.find('=');
    const std::string name = equals == std::string::npos ? "" : line.substr(start, equals - start);
    ACC_CHECK(valid_name(name), ConfigError, path, ":", number, ": '", line, "' is not NAME=VALUE");
    entries.emplace_back(name, line.substr(equals + 1));
  }
  return entries;
}

std::vector<std::pair<std::string, std::string>> env_to_pass(
    const std::map<std::string, std::string>& environment, const std::string& passthrough,
    const std::vector<std::pair<std::string, std::string>>& from_files) {
  static const char* const kPrefixes[] = {"NCCL_", "PYTHON", "UCX_", "CUDA_", "ACC_", "GLOO_"};
  const std::vector<std::string> named = split(passthrough, ',');
  std::vector<std::pair<std::string, std::string>> env;
  for (const auto& variable : environment) {
    // Named, not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
    const std::string& name = variable.first;
    const std::string& value = variable.second;
    const bool listed = std::find(named.begin(), named.end(), name) != named.end();
    const bool prefixed = std::any_of(std::begin(kPrefixes), std::end(kPrefixes),
                                      [&](const char* p) { return name.rfind(p, 0) == 0; });
    // The head's GPU selection (often a login node's) says nothing about another host's GPUs.
    const bool head_gpus = name == "CUDA_VISIBLE_DEVICES";
    if ((listed || (prefixed && !head_gpus)) && valid_name(name)) env.emplace_back(name, value);
  }
  for (const auto& entry : from_files) {
    auto same = [&](const auto& e) { return e.first == entry.first; };
    env.erase(std::remove_if(env.begin(), env.end(), same), env.end());
    env.push_back(entry);
  }
  return env;
}

std::string node_slots_of(const std::vector<RemoteNode>& nodes) {
  std::vector<std::string> slots;
  bool differ = false;
  for (const RemoteNode& node : nodes) {
    slots.push_back(std::to_string(node.slots));
    differ = differ || node.slots != nodes.front().slots;
  }
  return differ ? join(slots, ",") : "";
}

std::vector<std::string> node_launcher_argv(const FanoutJob& job, const RemoteNode& node) {
  std::vector<std::string> argv = {job.launcher_path,  "--stop_on_stdin_eof",
                                   "--nnodes",         std::to_string(job.nnodes),
                                   "--node_rank",      std::to_string(node.node_rank),
                                   "--nproc_per_node", std::to_string(node.slots),
                                   "--master_addr",    job.master_addr,
                                   "--master_port",    std::to_string(job.master_port),
                                   "--rdzv_id",        job.rdzv_id};
  if (!job.node_slots.empty()) argv.insert(argv.end(), {"--node_slots", job.node_slots});
  if (node.gpu_ids) argv.insert(argv.end(), {"--gpu_ids", *node.gpu_ids});
  // The head's name for the host: in every namespace or container it may be the same hostname.
  if (!job.own_prefix)
    argv.insert(argv.end(), {"--log_line_prefix_template", "[" + node.host + " rank${rank}]: "});
  argv.insert(argv.end(), job.forwarded_args.begin(), job.forwarded_args.end());
  argv.push_back("--");
  argv.insert(argv.end(), job.program.begin(), job.program.end());
  return argv;
}

std::string node_shell_command(const FanoutJob& job, const RemoteNode& node) {
  std::string command = "cd " + quote_for_shell(job.working_dir) + " && exec env";
  for (const auto& [name, value] : job.env) command += " " + quote_for_shell(name + "=" + value);
  for (const std::string& arg : node_launcher_argv(job, node))
    command += " " + quote_for_shell(arg);
  return command;
}

std::vector<std::string> ssh_argv(const SshSettings& ssh, const std::string& host,
                                  const std::string& command) {
  std::vector<std::string> argv = {"ssh"};
  // ssh keeps the first value it reads for an option: the user's come first.
  for (const std::string& option : ssh.options) argv.insert(argv.end(), {"-o", option});
  argv.insert(argv.end(), {"-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o",
                           "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3"});
  if (ssh.port) argv.insert(argv.end(), {"-p", std::to_string(*ssh.port)});
  argv.insert(argv.end(), {"--", host, command});
  return argv;
}

std::vector<std::string> single_command_argv(const std::string& launcher, const FanoutJob& job,
                                             const std::vector<RemoteNode>& nodes) {
  std::vector<std::string> hosts;
  for (const RemoteNode& node : nodes) {
    ACC_CHECK(node.slots == nodes.front().slots && !node.gpu_ids, ConfigError, "--launcher ",
              launcher, " starts the same command on every host: give every host the same slots",
              " and no GPU selection, or use --launcher ssh");
    hosts.push_back(node.host);
  }
  const std::string count = std::to_string(nodes.size());
  // The per-node argv without the per-node parts the scheduler supplies.
  // Each launcher names its own host in the prefix: the head cannot tell them apart here.
  RemoteNode any = nodes.front();
  any.host = "${hostname}";
  std::vector<std::string> node_argv = node_launcher_argv(job, any);
  node_argv.erase(std::find(node_argv.begin(), node_argv.end(), "--stop_on_stdin_eof"));
  auto rank = std::find(node_argv.begin(), node_argv.end(), "--node_rank");
  std::vector<std::string> argv;
  if (launcher == "pdsh") {
    rank[1] = "%n";  // pdsh's rank of the host in -w
    std::string command = "cd " + quote_for_shell(job.working_dir) + " && exec env";
    for (const auto& [name, value] : job.env) command += " " + quote_for_shell(name + "=" + value);
    for (const std::string& arg : node_argv) command += " " + quote_for_shell(arg);
    return {"pdsh", "-S", "-f", "1024", "-w", join(hosts, ","), command};
  }
  node_argv.erase(rank, rank + 2);  // the scheduler's node rank (detect_cluster)
  if (launcher == "srun") {
    argv = {"srun",           "--nodes", count,           "--ntasks-per-node", "1",  "--nodelist",
            join(hosts, ","), "--chdir", job.working_dir, "--export",          "ALL"};
  } else {
    ACC_CHECK(launcher == "mpirun", ConfigError, "--launcher ", launcher,
              ": expected ssh, pdsh, srun, mpirun or none");
    argv = {"mpirun",   "-np",        count,   "--host",       join(hosts, ","),
            "--map-by", "ppr:1:node", "-wdir", job.working_dir};
    for (const auto& [name, value] : job.env) argv.insert(argv.end(), {"-x", name + "=" + value});
  }
  if (launcher == "srun" && !job.env.empty()) {
    argv.push_back("env");
    for (const auto& [name, value] : job.env) argv.push_back(name + "=" + value);
  }
  argv.insert(argv.end(), node_argv.begin(), node_argv.end());
  return argv;
}

}  // namespace acc::launcher
