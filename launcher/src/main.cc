// acc-launch: a thin main over the launcher module. Dispatches subcommands, parses, plans, runs,
// and maps errors to exit codes (docs/errors.md).

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "acc/common/error.h"
#include "acc/common/exit_code.h"
#include "acc/launcher/agent/agent.h"
#include "acc/launcher/cli/cli.h"
#include "acc/launcher/host/host.h"
#include "acc/launcher/nodes/cluster.h"
#include "acc/launcher/nodes/fanout.h"
#include "acc/launcher/plan/option_sources.h"
#include "acc/launcher/plan/plan.h"
#include "acc/rendezvous/store_server.h"
#include "agent/checkpoint_memory.h"
#include "commands/commands.h"
#include "commands/rendezvous_command.h"
#include "commands/subcommands.h"
#include "nodes/preflight.h"
#include "nodes/remote_nodes.h"
#include "nodes/slurm_address.h"
#include "output/console.h"
#include "output/log.h"
#include "output/timeline.h"
#include "plan/config_merge.h"
#include "process/proc.h"
#include "process/real_os.h"

namespace {

using namespace acc::launcher;

int fail(int code, const std::string& message) {
  log::error(message);
  return code;
}

// What a hostfile, or else the scheduler we run under, says about this node's place in the job;
// to the head of a fan-out, what the hostfile says about the job.
ClusterFacts cluster_facts(LaunchOptions& options, const HostInfo& host, Os& os) {
  ClusterFacts facts;
  if (!options.hostfile.empty()) {
    auto hosts = acc::select_hosts(acc::read_hostfile(options.hostfile), options.include_hosts,
                                   options.exclude_hosts);
    facts = wants_fanout(options)
                ? fanout_facts(hosts)
                : hostfile_facts(hosts, host.hostname,
                                 options.source_of("node_rank") == Source::kCommandLine
                                     ? std::optional(options.node_rank)
                                     : std::nullopt);
  } else {
    facts = detect_cluster(host.environment, [&os](const std::string& node) {
      return resolve_slurm_node_address(node, os);
    });
  }
  for (const std::string& source : facts.sources)
    options.detected.push_back(facts.scheduler + ": " + source);
  return facts;
}

// A Python script that is not there is one line, as a --no_python program that is not there, not
// Python's error from every worker and then the failure table. Not for a dry run: it shows what
// would run, and the script may be written later.
void check_script(const LaunchPlan& plan) {
  if (plan.script.empty() || plan.script.find("${") != std::string::npos) return;
  std::error_code error;
  ACC_CHECK(std::filesystem::is_regular_file(plan.script, error), acc::LaunchError, "cannot run ",
            plan.script, ": ",
            std::filesystem::exists(plan.script, error) ? "not a file" : "no such file");
}

// The workers' store, on the node that serves it, holds a descriptor per worker connection (two
// for PyTorch 1.13's clients). Where this node may serve it, the soft RLIMIT_NOFILE goes up to
// the hard one (the store would raise it anyway: said here, once) and the hard one towards what
// the job needs, up to fs.nr_open, where this process may (CAP_SYS_RESOURCE). Short of that, one
// warning with the fix: connections past the limit wait in the listener's queue, and the
// workers would time out with no word from the store.
void raise_open_file_limit(const LaunchPlan& plan) {
  // The launcher's own table holds its workers' output pipes (two each) and its own few; the
  // workers' store, where this node serves it, holds its connections in tables of its threads'
  // own (StoreServer::connection_capacity).
  const bool is_static = plan.rdzv_backend == "static";
  const bool serves_store = !is_static || plan.node_rank == 0;  // elastic: whichever is ranked 0
  const long long nodes = is_static ? plan.nnodes : std::max(plan.max_nodes, plan.nnodes);
  const long long own_need = 2LL * plan.nproc_per_node + 64;
  const long long store_workers = nodes * plan.nproc_per_node;
  const long long store_need = serves_store ? store_workers + nodes + 64 : 0;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t soft = limit.rlim_cur;
  auto fits = [&](rlim_t hard) {
    return hard == RLIM_INFINITY || (hard >= static_cast<rlim_t>(own_need) &&
                                     acc::rendezvous::StoreServer::connection_capacity(hard) >=
                                         static_cast<rlim_t>(store_need));
  };
  if (!fits(limit.rlim_max)) {
    const long long nr_open = proc::Reader::machine().nr_open();
    const auto most = static_cast<rlim_t>(std::min(std::max(own_need, store_need), nr_open));
    rlimit raised{most, most};
    if (raised.rlim_max > limit.rlim_max && ::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      log::info("open files: raised the hard limit from {} to {} for this node's {} workers{}",
                limit.rlim_max, raised.rlim_max, plan.nproc_per_node,
                serves_store ? " and the store's connections" : "");
      return;
    }
  }
  const rlim_t hard = limit.rlim_max;
  if (soft < hard) {
    limit.rlim_cur = hard;
    if (::setrlimit(RLIMIT_NOFILE, &limit) == 0)
      log::debug("open files: raised the soft limit from {} to the hard limit, {}", soft, hard);
  }
  if (fits(hard)) return;
  const long long want = hard < static_cast<rlim_t>(own_need) ? own_need : store_need;
  const std::string fix = fmt::format(
      ". This process cannot raise it: raise it to {0} or more with `ulimit -Hn {0}` as root "
      "before the launch, LimitNOFILE= in a systemd unit, or nofile in /etc/security/limits.conf",
      want);
  if (hard < static_cast<rlim_t>(own_need))
    log::warn(fmt::format("open files: this node's {} workers need about {} open files in the "
                          "launcher (their output pipes), but the open-file limit is {}",
                          plan.nproc_per_node, own_need, hard) +
              fix);
  else
    log::warn(fmt::format("open files: the store on this node may hold {} worker connections, but "
                          "at the open-file limit of {} its threads hold about {}; workers past it "
                          "wait and time out",
                          store_workers, hard,
                          acc::rendezvous::StoreServer::connection_capacity(hard)) +
              fix);
}

int launch(const std::vector<std::string>& args) {
  timeline::mark("main");
  ParseResult parsed =
      parse_launch_args(args, proc::Reader::machine().executable(), subcommand_help());
  timeline::mark("parsed");
  if (parsed.exit_now) {
    write_all(parsed.exit_code == 0 ? STDOUT_FILENO : STDERR_FILENO, parsed.message + "\n");
    return parsed.exit_code;
  }
  log::configure(parsed.options.log_level, parsed.options.quiet);
  HostInfo host = detect_host();
  timeline::mark("host");
  log::debug("host {}: {} GPU(s)", host.hostname, host.gpu_count);
  // The scheduler's and the config file's words, kept where they outrank what is set
  // (option_sources.h: command line > scheduler > config file > default), on a single node and on
  // the head of a fan-out alike: the head forwards what they decide.
  // The machine, for the steps before the agent (which has its own): scontrol, ssh, signals. A
  // remote launcher's stdin watch holds it to the process's end.
  static RealOs os;
  apply_proposals(scheduler_proposals(cluster_facts(parsed.options, host, os)), parsed.options);
  apply_config_file(parsed.options, MergeEnvironment::from_host(host));
  if (auto status = fan_out_if_asked(parsed.options, host, os)) return *status;
  LaunchPlan plan = build_plan(parsed.options, host);
  timeline::mark("planned");
  if (!plan.dry_run) check_script(plan);
  raise_open_file_limit(plan);
  log::debug(
      "plan: {} worker(s) on node {} of {}, rendezvous {}, max {} restart(s), none after {} in a "
      "row without progress (0: off; then exit {})",
      plan.nproc_per_node, plan.node_rank, plan.nnodes, plan.rdzv_backend, plan.max_restarts,
      plan.max_no_progress_restarts, plan.no_restart_exit_code);
  if (plan.dry_run) {
    const int port = plan.master_port != 0 ? plan.master_port : pick_free_port();
    for (const std::string& line : parsed.options.detected)
      write_all(STDOUT_FILENO, "# detected " + line + "\n");
    for (const std::string& message : plan.notices) log::info(message);
    write_all(STDOUT_FILENO, format_dry_run(plan, port, host.environment));
    return dry_run_preflight(plan) ? 0 : acc::kExitNetwork;
  }
  // From here a failure is the launcher's own: --retryable_exit_code applies (docs/errors.md).
  const int retryable = plan.retryable_exit_code;
  try {
    // The membership keeps a reference to the plan: both live in the agent.
    const int status = Agent(std::move(plan), std::move(host.environment), host.hostname).run();
    timeline::mark("ended");  // the agent's store thread joined, its watchdog reaped
    timeline::report();
    return status;
  } catch (const std::exception& e) {
    return fail(acc::launcher_exit(acc::exit_code_for(e), retryable), acc::exit_message_for(e));
  }
}

// `acc-launch SUBCOMMAND ...`, or a launch. `acc-launch launch ...` is always a launch, so a
// program named like a subcommand can still be run.
int dispatch(int argc, char** argv) {
  const std::string first = argc > 1 ? argv[1] : "";
  const std::vector<std::string> rest(argv + std::min(argc, 2), argv + argc);
  const Subcommand* command = find_subcommand(first);
  // The subcommands' messages follow ACC_LOG_LEVEL as a launch's do (a launch reads its flags
  // too, in launch()); a bad value is one line and exit 2 there as well.
  if (command && command->summary && first != "launch") log::configure(std::nullopt, false);
  if (first == "help") {
    // `help SUBCOMMAND` is that subcommand's --help; `help` alone, the launch's.
    const Subcommand* asked = rest.empty() ? nullptr : find_subcommand(rest.front());
    if (asked && asked->run && asked->summary) {
      std::vector<std::string> words = {argv[0], rest.front(), "--help"};
      std::vector<char*> pointers;
      for (std::string& word : words) pointers.push_back(word.data());
      return dispatch(static_cast<int>(pointers.size()), pointers.data());
    }
    if (rest.empty()) return launch({"--help"});
    const HelpResult help = launch_help(rest.front(), subcommand_help());
    write_all(help.exit_code == 0 ? STDOUT_FILENO : STDERR_FILENO, help.text);
    return help.exit_code;
  }
  if (command && command->run) return command->run(rest);
  if (first == "launch") return launch(rest);
  return launch(std::vector<std::string>(argv + 1, argv + argc));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(argc, argv);
  } catch (const std::exception& e) {
    return fail(acc::exit_code_for(e), acc::exit_message_for(e));
  }
}
