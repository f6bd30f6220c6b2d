#include "acc/launcher/cli/cli.h"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "acc/common/strings.h"
#include "acc/config/schema.h"
#include "acc/launcher/cli/version.h"
#include "cli/flag_filter.h"
#include "cli/flag_spelling.h"
#include "cli/help_format.h"

namespace acc::launcher {
namespace {

// The groups of --help, in its order; `acc-launch help TOPIC` shows one (kHelpTopics).
constexpr const char* kGroupTorchrun = "Torchrun (each flag also from $PET_<NAME>)";
constexpr const char* kGroupAccelerate = "Accelerate launch";
constexpr const char* kGroupMultiNode = "Multi-node: rendezvous, hostfiles, one command for all";
constexpr const char* kGroupHangs = "Hangs and health";
constexpr const char* kGroupOutput = "Output and CPU binding";
constexpr const char* kGroupStatus = "Status page and metrics (watch it with acc-launch top)";
constexpr const char* kGroupConfigKeys =
    "Accelerate config keys as flags (--<key> VALUE, as accelerate launch takes them)";

struct HelpTopic {
  const char* name;
  std::vector<const char*> groups;
  // Whether the ~150 config-key flags are listed whole (else one line counts them).
  bool lists_config_keys() const {
    return std::find(groups.begin(), groups.end(), kGroupConfigKeys) != groups.end();
  }
};
const std::vector<HelpTopic>& help_topics() {
  static const std::vector<HelpTopic> topics = {
      {"torchrun", {kGroupTorchrun}},
      {"accelerate", {kGroupAccelerate, kGroupConfigKeys}},
      {"multi-node", {kGroupMultiNode}},
      {"hangs", {kGroupHangs}},
      {"output", {kGroupOutput}},
      {"status", {kGroupStatus}},
      {"all",
       {kGroupTorchrun, kGroupAccelerate, kGroupMultiNode, kGroupHangs, kGroupOutput, kGroupStatus,
        kGroupConfigKeys}},
  };
  return topics;
}

// What --help shows: every group but the config keys (one line counts them).
const HelpTopic& default_help() {
  static const HelpTopic help = {
      "",
      {kGroupTorchrun, kGroupAccelerate, kGroupMultiNode, kGroupHangs, kGroupOutput, kGroupStatus}};
  return help;
}

// The help of `app` with only the flags of `groups`; unless the groups hold the config keys, a
// line in place of them (`config_keys` of them are flags: a topic of their own).
std::string help_of_groups(CLI::App& app, const std::vector<const char*>& groups,
                           size_t config_keys) {
  for (CLI::Option* option : app.get_options()) {
    if (std::find(groups.begin(), groups.end(), option->get_group()) == groups.end())
      option->group("");  // CLI11 leaves an option of the empty group out of the help
  }
  std::string text = app.help();
  const size_t hidden_keys =
      std::find(groups.begin(), groups.end(), kGroupConfigKeys) == groups.end() ? config_keys : 0;
  if (hidden_keys > 0 && std::find(groups.begin(), groups.end(), kGroupAccelerate) != groups.end())
    text += "\n" + std::to_string(hidden_keys) +
            " accelerate config keys are flags too (--fsdp_sharding_strategy, "
            "--deepspeed_config_file, ...): acc-launch help accelerate\n";
  return text;
}

// What --help prints: `topic`'s groups, after the usage that lists `subcommands`.
struct HelpWanted {
  const HelpTopic& topic;
  const std::vector<SubcommandHelp>& subcommands;
};

std::string usage_text(const std::vector<SubcommandHelp>& subcommands) {
  std::string text =
      "Usage: acc-launch [OPTIONS] PROGRAM [ARGS...]\n"
      "       acc-launch launch [OPTIONS] PROGRAM [ARGS...]  (a PROGRAM named like a "
      "subcommand)\n"
      "       acc-launch SUBCOMMAND [ARGS...]\n"
      "\n"
      "Runs PROGRAM once per worker with torchrun's contract (RANK, LOCAL_RANK, WORLD_SIZE,\n"
      "MASTER_ADDR, ...). A .py PROGRAM, or -m MODULE, runs under --python, else $PYTHON_EXEC,\n"
      "else the python beside acc-launch (a venv's), else python3 on PATH.\n"
      "\n"
      "  acc-launch --nproc_per_node 8 train.py --lr 1e-4    as torchrun --nproc-per-node 8\n"
      "  acc-launch --config_file cfg.yaml train.py          as accelerate launch --config_file\n"
      "  acc-launch --nnodes 2 --rdzv_backend c10d --rdzv_endpoint node0:29400 \\\n"
      "             --nproc_per_node 8 train.py             on each of two nodes\n"
      "\n"
      "Every flag may also be written with dashes (--nproc-per-node) and shortened to a unique\n"
      "prefix (--nproc_per), as torchrun and accelerate launch take them.\n";
  if (!subcommands.empty()) text += "\nSubcommands:\n";
  for (const SubcommandHelp& command : subcommands)
    text += "  " + std::string(command.name) +
            std::string(command.name.size() < 12 ? 12 - command.name.size() : 1, ' ') +
            command.summary + "\n";
  text += "\nHelp on one group of flags: acc-launch help TOPIC, TOPIC one of";
  for (const HelpTopic& topic : help_topics()) text += std::string(" ") + topic.name;
  return text + "\n";
}

// --help: the usage, the subcommands and the topics first, then the flags in groups.
class HelpFormatter : public PlainHelpFormatter {
 public:
  explicit HelpFormatter(std::vector<SubcommandHelp> subcommands)
      : subcommands_(std::move(subcommands)) {}
  std::string make_usage(const CLI::App*, std::string) const override {
    return usage_text(subcommands_);
  }
  std::string make_description(const CLI::App*) const override { return ""; }

 private:
  std::vector<SubcommandHelp> subcommands_;
};

std::string pet_name(const std::string& name) {
  std::string upper = "PET_" + name;
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  return upper;
}

// How --help names the value of a flag whose name says little of it (help_format.h names the
// others: by their choices, SECONDS, N, or their name in capitals); nullptr: none here.
const char* value_placeholder(const std::string& name) {
  static const std::map<std::string, const char*> kPlaceholders = {
      {"nproc_per_node", "NPROC"},
      {"master_addr", "HOST"},
      {"local_addr", "HOST"},
      {"main_process_ip", "HOST"},
      {"status_host", "HOST"},
      {"master_port", "PORT"},
      {"main_process_port", "PORT"},
      {"ssh_port", "PORT"},
      {"status_port", "PORT"},
      {"rdzv_endpoint", "HOST[:PORT]"},
      {"rdzv_backend", "BACKEND"},
      {"rdzv_id", "ID"},
      {"rdzv_conf", "KEY=VALUE,..."},
      {"role", "NAME"},
      {"log_dir", "DIR"},
      {"redirects", "MODE"},
      {"tee", "MODE"},
      {"local_ranks_filter", "RANKS"},
      {"signals_to_handle", "SIGNALS"},
      {"logs_specs", "NAME"},
      {"event_log_handler", "NAME"},
      {"duplicate_stdout_filters", "FILTERS"},
      {"duplicate_stderr_filters", "FILTERS"},
      {"python", "PATH"},
      {"config_file", "FILE"},
      {"hostfile", "FILE"},
      {"include", "HOSTS"},
      {"exclude", "HOSTS"},
      {"ssh_option", "OPTION"},
      {"env_passthrough", "NAMES"},
      {"node_slots", "SLOTS"},
      {"gpu_ids", "IDS"},
      {"bind_core_list", "CPUS"},
      {"log_line_prefix_template", "TEMPLATE"},
      {"dedup_window", "MS"},
      {"retryable_exit_code", "CODE"},
      {"no_restart_exit_code", "CODE"},
      {"sdc_exit_codes", "CODES"},
      {"exclude_nodes_file", "FILE"},
      {"node_health_command", "CMD"},
      {"network_check_factor", "FACTOR"},
  };
  const auto found = kPlaceholders.find(name);
  return found == kPlaceholders.end() ? nullptr : found->second;
}

// Validators whose messages say what was expected in words, not as a numeric range.
CLI::Validator whole_number(int minimum) {
  return CLI::Validator(
      [minimum](std::string& value) -> std::string {
        size_t used = 0;
        long parsed = 0;
        try {
          parsed = std::stol(value, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != value.size() || used == 0 || parsed < minimum)
          return value + " is not a whole number of at least " + std::to_string(minimum);
        return "";
      },
      "INT>=" + std::to_string(minimum));
}

CLI::Validator seconds() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        size_t used = 0;
        double parsed = -1;
        try {
          parsed = std::stod(value, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != value.size() || used == 0 || !std::isfinite(parsed) || parsed < 0)
          return value + " is not a number of seconds";
        return "";
      },
      "SECONDS");
}

// How else a flag is named: a short name, and the variable of the environment it falls back to
// (torchrun's PET_<NAME>, or one of our own).
struct Aliases {
  const char* short_name = "";
  bool pet = false;
  const char* env = "";
};
constexpr Aliases kPet{.pet = true};

// A declared flag: its CLI11 option where the command line can use it (FlagFilter), else
// nothing, and then its checks are dropped: no value of it will be parsed.
class Flag {
 public:
  explicit Flag(CLI::Option* option) : option_(option) {}
  Flag* operator->() { return this; }
  Flag* check(const CLI::Validator& validator) {
    if (option_) option_->check(validator);
    return this;
  }
  Flag* allow_extra_args(bool allow) {
    if (option_) option_->allow_extra_args(allow);
    return this;
  }

 private:
  CLI::Option* option_;
};

// Declares the flags, and registers with CLI11 those the filter wants (none without a filter:
// the names are all that is wanted then), of the config keys only those named when the help
// asked for (`help`) does not list them. Each registered one records its canonical
// (underscore) name so that LaunchOptions can tell a flag that was given from one left at its
// default (LaunchOptions::sources).
class FlagTable {
 public:
  FlagTable(CLI::App& app, LaunchOptions& options, const FlagFilter* filter,
            const HelpTopic* help = nullptr)
      : app_(app), options_(options), filter_(filter), help_(help) {}

  template <typename T>
  Flag value(const std::string& name, T& target, const std::string& help, Aliases aliases = {}) {
    if (!declare(name, aliases, true)) return Flag(nullptr);
    CLI::Option* option = app_.add_option(spec(name, aliases), target, help);
    // --help shows the default (help_format.h); a list has none to show.
    if constexpr (!std::is_same_v<T, std::vector<std::string>>) option->capture_default_str();
    return track(name, aliases, option);
  }

  Flag flag(const std::string& name, bool& target, const std::string& help, Aliases aliases = {}) {
    if (!declare(name, aliases, false)) return Flag(nullptr);
    return track(name, aliases, app_.add_flag(spec(name, aliases), target, help));
  }

  // A flag whose value (or, for a switch, its presence) is kept as text by `store`.
  Flag text(const std::string& name, bool takes_value, const std::string& help,
            std::function<void(const std::string&)> store) {
    if (!declare(name, {}, takes_value)) return Flag(nullptr);
    CLI::Option* option =
        takes_value ? app_.add_option_function<std::string>(spec(name, {}), std::move(store), help)
                    : app_.add_flag_callback(
                          spec(name, {}), [store = std::move(store)] { store(""); }, help);
    return track(name, {}, option);
  }

  // Whether a flag of this name was declared (registered or not).
  bool has(const std::string& name) const { return declared_.count(name) > 0; }

  // Every flag declared, registered or not, in the order of declaration.
  const std::vector<FlagName>& names() const { return names_; }

  // How many config keys are flags (declared, registered or not).
  size_t config_keys() const { return config_keys_; }

  // The --help group of the flags declared from now on (help_topics()).
  void group(const char* name) { group_ = name; }

  // Records the command line (or a PET_* variable) as the source of each option it set, and
  // each option typed, in the user's order, for the fan-out head to forward (fanout.h).
  void record_command_line(const CLI::App& app) {
    std::map<const CLI::Option*, std::string> names;
    for (const auto& [name, option] : options_by_name_) {
      if (option->count() > 0) options_.sources[name] = Source::kCommandLine;
      names.emplace(option, name);
    }
    // CLI11 lists an option once per value it took from the command line (none it took from the
    // environment), in order, and keeps the values as typed in the same order.
    std::map<const CLI::Option*, size_t> taken;
    for (const CLI::Option* option : app.parse_order()) {
      const auto name = names.find(option);
      if (name == names.end()) continue;
      const std::string& value = option->results().at(taken[option]++);
      options_.typed.push_back({name->second, value, option->get_items_expected_max() == 0});
    }
  }

 private:
  static std::string spec(const std::string& name, const Aliases& aliases) {
    return *aliases.short_name ? aliases.short_name + ("," + flag_spellings(name))
                               : flag_spellings(name);
  }

  static std::string env_name(const std::string& name, const Aliases& aliases) {
    return aliases.pet ? pet_name(name) : aliases.env;
  }

  // Records the name; whether the flag is to be registered.
  bool declare(const std::string& name, const Aliases& aliases, bool takes_value) {
    declared_.insert(name);
    const bool config_key = group_ == kGroupConfigKeys;
    if (config_key) ++config_keys_;
    if (!filter_) {
      names_.push_back({name, *aliases.short_name ? aliases.short_name[1] : '\0', takes_value});
      return false;
    }
    const bool listed =
        !(config_key && filter_->help_only() && help_ && !help_->lists_config_keys());
    return listed ? filter_->wants(name, *aliases.short_name != 0, env_name(name, aliases))
                  : filter_->named(name, *aliases.short_name != 0, env_name(name, aliases));
  }

  Flag track(const std::string& name, const Aliases& aliases, CLI::Option* option) {
    if (const std::string env = env_name(name, aliases); !env.empty()) option->envname(env);
    // How --help names the value (help_format.h).
    if (const char* placeholder = value_placeholder(name)) option->option_text(placeholder);
    // First of its checks: a value that would print over two lines, or recolour the terminal,
    // is named escaped, before any other check echoes it raw.
    option->check(CLI::Validator(
        [](std::string& value) -> std::string {
          if (!has_control(value)) return "";
          return "\"" + escape_control(value) +
                 "\" holds a control character (a newline, a tab or an escape sequence); give "
                 "plain text";
        },
        ""));
    option->group(group_);
    options_by_name_.emplace_back(name, option);
    return Flag(option);
  }

  CLI::App& app_;
  LaunchOptions& options_;
  const FlagFilter* filter_;
  const HelpTopic* help_;
  size_t config_keys_ = 0;
  std::unordered_set<std::string> declared_;
  std::vector<FlagName> names_;  // without a filter
  std::string group_ = kGroupTorchrun;
  std::vector<std::pair<std::string, CLI::Option*>> options_by_name_;
};

void add_torchrun_flags(FlagTable& t, LaunchOptions& o) {
  t.group(kGroupTorchrun);
  t.value("nproc_per_node", o.nproc_per_node, "workers on this node: N, auto, cpu or gpu", kPet);
  t.group(kGroupMultiNode);
  t.value("nnodes", o.nnodes, "number of nodes, or MIN:MAX for elastic jobs", kPet);
  t.value("node_rank", o.node_rank, "rank of this node (static rendezvous)", kPet)
      ->check(whole_number(0));
  t.value("master_addr", o.master_addr, "address of the node 0 store", kPet);
  t.value("master_port", o.master_port,
          "port of the node 0 store (default: free port on one "
          "node, else 29500)",
          kPet)
      ->check(whole_number(0) & CLI::Range(0, 65535).description(""));
  t.value("rdzv_backend", o.rdzv_backend,
          "rendezvous backend: static (the default: fixed nodes at --master_addr), c10d (a store "
          "at --rdzv_endpoint, elastic) or etcd-v2 (also etcd: an etcd cluster)",
          kPet);
  t.value("rdzv_endpoint", o.rdzv_endpoint,
          "rendezvous host[:port] (c10d: port 29400 by default; HOST:0 with --nnodes=1: a free "
          "port); etcd-v2: host:2379[,host:2379...]",
          kPet);
  t.value("rdzv_id", o.rdzv_id, "job id shared by all nodes", kPet);
  t.value("rdzv_conf", o.rdzv_conf, "rendezvous settings k1=v1,k2=v2", kPet);
  t.value("local_addr", o.local_addr, "this node's address", kPet);
  t.value("exit_barrier_timeout", o.exit_barrier_timeout,
          "elastic: seconds a finished node waits for the others (default: "
          "$TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT, else 300)",
          kPet)
      ->check(seconds());
  t.group(kGroupTorchrun);
  t.flag("standalone", o.standalone, "single-node job on a free port", kPet);
  t.value("max_restarts", o.max_restarts, "restarts of the worker group before failing", kPet)
      ->check(whole_number(0));
  t.value("monitor_interval", o.monitor_interval,
          "accepted for compatibility (exits are seen at "
          "once)",
          kPet)
      ->check(seconds());
  t.value("start_method", o.start_method, "accepted for compatibility", kPet)
      ->check(CLI::IsMember({"spawn", "fork", "forkserver"}));
  t.value("role", o.role, "worker role name (ROLE_NAME)", kPet);
  t.flag("module", o.module, "run PROGRAM as a Python module (python -m)",
         {.short_name = "-m", .pet = true});
  t.flag("no_python", o.no_python, "run PROGRAM as is, without the interpreter", kPet);
  t.flag("run_path", o.run_path, "run a .py PROGRAM with the interpreter (runpy)", kPet);
  t.value("log_dir", o.log_dir, "directory for per-attempt, per-rank logs", kPet);
  t.value("redirects", o.redirects, "send worker output to files only: 0-3 or 0:1,1:2",
          {.short_name = "-r", .pet = true});
  t.value("tee", o.tee, "send worker output to files and console: 0-3 or 0:1,1:2",
          {.short_name = "-t", .pet = true});
  t.value("local_ranks_filter", o.local_ranks_filter, "local ranks shown on the console (0,1)",
          kPet);
  t.value("shutdown_timeout", o.shutdown_timeout,
          "seconds from SIGTERM to SIGKILL when stopping workers (default: "
          "$TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30)",
          kPet)
      ->check(seconds());
  t.value("kill_timeout", o.kill_timeout,
          "seconds a worker may take to end after SIGKILL before the launcher names it as "
          "unkillable and exits 5")
      ->check(seconds());
  t.value("signals_to_handle", o.signals_to_handle,
          "signals forwarded to the workers that then end the job (default: "
          "$TORCHELASTIC_SIGNALS_TO_HANDLE, else SIGTERM,SIGINT,SIGHUP,SIGQUIT)",
          kPet);
  t.flag("virtual_local_rank", o.virtual_local_rank,
         "every worker gets LOCAL_RANK=0 and only its own GPU in CUDA_VISIBLE_DEVICES", kPet);
  t.value("logs_specs", o.logs_specs, "accepted for compatibility (acc-launch writes its logs)");
  t.value("event_log_handler", o.event_log_handler, "accepted for compatibility", kPet);
  t.value("duplicate_stdout_filters", o.duplicate_stdout_filters,
          "accepted for compatibility; not honoured", kPet);
  t.value("duplicate_stderr_filters", o.duplicate_stderr_filters,
          "accepted for compatibility; not honoured", kPet);
  t.value("print_completion", o.print_completion, "print a shell completion script and exit")
      ->check(CLI::IsMember({"bash", "zsh", "tcsh"}));
}

// torchrun's launcher-side variables, read as the defaults of their flags.
void apply_torchrun_variables(LaunchOptions& o) {
  auto variable = [](const char* name) -> const char* {
    const char* value = std::getenv(name);
    return value && *value ? value : nullptr;
  };
  if (const char* v = variable("TORCHELASTIC_SIGNALS_TO_HANDLE")) o.signals_to_handle = v;
  if (const char* v = variable("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE")) o.log_line_prefix = v;
  if (const char* v = variable("TORCH_ELASTIC_SHUTDOWN_TIMEOUT")) o.shutdown_timeout = std::atof(v);
  if (const char* v = variable("TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT"))
    o.exit_barrier_timeout = std::atof(v);
}

// `--print-completion SHELL`: every long flag, for the shell's own completion.
std::string completion_script(const CLI::App& app, const std::string& shell) {
  std::string words;
  for (const CLI::Option* option : app.get_options())
    for (const std::string& name : option->get_lnames()) words += " --" + name;
  if (shell == "tcsh") return "complete acc-launch 'c/--/(" + words.substr(3) + ")/'";
  std::string script = "complete -o default -W \"" + words.substr(1) + "\" acc-launch";
  if (shell == "zsh") script = "autoload -U +X bashcompinit && bashcompinit\n" + script;
  return script;
}

void add_accelerate_flags(FlagTable& t, LaunchOptions& o) {
  t.group(kGroupAccelerate);
  t.value("num_processes", o.num_processes, "total processes over all machines")
      ->check(whole_number(1));
  t.value("num_machines", o.num_machines, "number of machines")->check(whole_number(1));
  t.value("machine_rank", o.machine_rank, "rank of this machine")->check(whole_number(0));
  t.value("main_process_ip", o.main_process_ip, "address of machine 0");
  t.value("main_process_port", o.main_process_port, "port on machine 0 (0: a free port)")
      ->check(whole_number(0) & CLI::Range(0, 65535).description(""));
  t.value("gpu_ids", o.gpu_ids, "GPUs to use: comma list or all");
  t.flag("cpu", o.cpu, "train on CPU even where GPUs exist");
  t.flag("multi_gpu", o.multi_gpu, "multi-GPU training");
  t.value("mixed_precision", o.mixed_precision, "no, fp16, bf16 or fp8")
      ->check(CLI::IsMember({"no", "fp16", "bf16", "fp8"}));
  t.value("num_cpu_threads_per_process", o.num_cpu_threads_per_process,
          "OMP_NUM_THREADS of "
          "each worker")
      ->check(whole_number(1));
  t.flag("debug", o.debug, "ACCELERATE_DEBUG_MODE=true in the workers");
  t.group(kGroupOutput);
  t.flag("quiet", o.quiet, "less launcher output (a hang report's path is still said)",
         {.short_name = "-q"});
  t.group(kGroupAccelerate);
  t.value("config_file", o.config_file, "accelerate config file");
  t.flag("use_deepspeed", o.use_deepspeed, "DeepSpeed launch (its variables for the workers)");
  t.flag("use_fsdp", o.use_fsdp, "FSDP launch (FSDP_* variables for the workers)");
  t.flag("use_megatron_lm", o.use_megatron_lm, "Megatron-LM launch (MEGATRON_LM_* variables)");
  t.flag("use_parallelism_config", o.use_parallelism_config,
         "ParallelismConfig (FSDP 2): PARALLELISM_CONFIG_* variables");
}

// accelerate launch's TPU and SageMaker flags: acc-launch starts local processes only, so these
// are refused in one line, as configs for those platforms are.
void add_refused_flags(FlagTable& t, std::vector<std::string>& refused) {
  t.group(kGroupAccelerate);
  const std::pair<const char*, bool> kRefused[] = {{"tpu", false},
                                                   {"tpu_cluster", false},
                                                   {"no_tpu_cluster", false},
                                                   {"tpu_use_sudo", false},
                                                   {"vm", true},
                                                   {"env", true},
                                                   {"aws_access_key_id", true},
                                                   {"aws_secret_access_key", true}};
  for (const auto& [name, takes_value] : kRefused) {
    const std::string flag = name;
    t.text(flag, takes_value, "TPU / SageMaker only: refused (use accelerate launch there)",
           [&refused, flag](const std::string&) { refused.push_back(flag); });
  }
}

// Every config key that `accelerate launch` also takes as `--<key>` (the schema is the one table
// of them), unless registered above with a meaning of its own (--num_processes, --gpu_ids, ...).
void add_config_key_flags(FlagTable& t, LaunchOptions& o) {
  t.group(kGroupConfigKeys);
  for (const acc::config::LaunchFlag& flag : acc::config::launch_flags()) {
    const std::string name(flag.spec->name);
    if (t.has(name)) continue;
    std::string help(flag.spec->doc);
    if (help.empty()) help = std::string(flag.section) + ": " + std::string(flag.spec->env);
    t.text(name, flag.spec->flag_arg != acc::config::FlagArg::kSwitch, help,
           [&o, name](const std::string& value) { o.config_flags.emplace_back(name, value); });
  }
}

void add_own_flags(FlagTable& t, LaunchOptions& o) {
  t.group(kGroupMultiNode);
  t.value("hostfile", o.hostfile, "hosts of a static multi-node job: 'host slots=N' a line");
  t.value("include", o.include_hosts, "hosts of the hostfile to use (comma list)");
  t.value("exclude", o.exclude_hosts, "hosts of the hostfile to leave out (comma list)");
  t.group(kGroupTorchrun);
  t.value("python", o.python,
          "interpreter for .py programs and -m (default: $PYTHON_EXEC, else the python beside "
          "acc-launch, as in a venv's bin/, else python3 on PATH)");
  t.flag("no_python_hook", o.no_python_hook,
         "no acc-launch sitecustomize in Python workers (also ACC_PYTHON_HOOK=0): no stacks in "
         "hang reports, no collective recorder");
  t.flag("no_warm_workers", o.no_warm_workers,
         "no standby Python per local rank with torch imported for the next attempt (also "
         "ACC_WARM_WORKERS=0): every restart starts its workers cold (docs/goodput.md)");
  t.value("keep_checkpoints", o.keep_checkpoints,
          "how many checkpoint writes to storage (acc_launch.checkpoint, libacc's save_state) "
          "to keep: PATH, then the older as PATH.<seq> (default 1; docs/checkpoints.md)");
  t.flag("checkpoint_replica", o.checkpoint_replica,
         "each node also holds the newest acc_launch.checkpoint save of the node before it, so "
         "that a node lost keeps its checkpoint (one more save per rank in memory; "
         "docs/checkpoints.md)");
  t.flag("dry_run", o.dry_run,
         "print each worker's command and the environment it gets (what acc-launch sets or "
         "changes), start nothing");
  t.group(kGroupOutput);
  t.value("log_line_prefix_template", o.log_line_prefix,
          "prefix of each worker output line; "
          "${rank}, ${local_rank}, ${role_name}, ${hostname}; empty for none");
  t.value("log_level", o.log_level,
          "launcher messages shown: debug, info (default; warning with --quiet), warning or "
          "error; default $ACC_LOG_LEVEL")
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}));
}

// Starting every node from one command (docs/clusters.md, "One command for all nodes").
void add_fanout_flags(FlagTable& t, LaunchOptions& o) {
  t.group(kGroupMultiNode);
  t.value("launcher", o.launcher,
          "with --hostfile: how the head starts each node's launcher: ssh, pdsh, srun, "
          "mpirun, or none (run the same command on every node yourself)")
      ->check(CLI::IsMember({"ssh", "pdsh", "srun", "mpirun", "none"}));
  t.value("ssh_port", o.ssh_port, "port of sshd on every host")
      ->check(whole_number(1) & CLI::Range(1, 65535).description(""));
  t.value("ssh_option", o.ssh_options,
          "an ssh -o option, e.g. IdentityFile=~/.ssh/job (repeatable)")
      ->allow_extra_args(false);
  t.value("env_passthrough", o.env_passthrough,
          "variables sent to every node besides NCCL_* PYTHON* UCX_* CUDA_* ACC_* GLOO_* "
          "(comma list)");
  t.value("node_slots", o.node_slots,
          "every node's workers in node order, e.g. 1,3 (set by the head when hosts differ)");
  t.flag("stop_on_stdin_eof", o.stop_on_stdin_eof,
         "stop the job when stdin closes (set by the head on each remote launcher)");
}

// Collapsed console output and CPU binding (line_dedup.h, cpu_binding.h).
void add_output_and_binding_flags(FlagTable& t, LaunchOptions& o) {
  t.group(kGroupOutput);
  t.flag("dedup_lines", o.dedup_lines,
         "print a line that several ranks print at once a single time, as [rank0-7]: line");
  t.value("dedup_window", o.dedup_window_ms,
          "milliseconds a line waits for the same line from other ranks (default: 150)")
      ->check(whole_number(1));
  t.value("numa_binding", o.numa_binding,
          "bind each worker to CPUs near its GPU: node, socket, exclusive or core-complex")
      ->check(CLI::IsMember({"node", "socket", "exclusive", "core-complex"}));
  t.flag("enable_cpu_affinity", o.enable_cpu_affinity,
         "bind each worker to the CPUs of its GPU's NUMA node (Accelerate)");
  t.flag("bind_cores_to_rank", o.bind_cores_to_rank,
         "split the cores evenly among the workers and bind each to its share (DeepSpeed)");
  t.value("bind_core_list", o.bind_core_list,
          "the CPUs --bind_cores_to_rank splits, such as 0-7,16-23 (implies it)");
}

void add_stall_flags(FlagTable& t, LaunchOptions& o);
std::vector<std::string> split_empty_values(const CLI::App& app,
                                            const std::vector<std::string>& args);

// CLI11 messages name the flag already; we make them one line and add our prefix.
std::string one_line(std::string message) {
  std::replace(message.begin(), message.end(), '\n', ' ');
  while (!message.empty() && message.back() == ' ') message.pop_back();
  return "acc-launch: error: " + message + " (see acc-launch --help)";
}

// CLI11 names a flag by its first spelling (--max-restarts); say it as the user wrote it
// (--max_restarts). Only the flags on the command line are looked at.
std::string in_users_spelling(std::string message, const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) continue;
    const std::string written = arg.substr(0, arg.find('='));
    std::string other = written;
    if (written.find('_') != std::string::npos)
      std::replace(other.begin() + 2, other.end(), '_', '-');
    else
      std::replace(other.begin() + 2, other.end(), '-', '_');
    if (other == written) continue;
    for (size_t at = message.find(other); at != std::string::npos;
         at = message.find(other, at + written.size())) {
      // The whole flag only: --nproc-per-node must not match inside a longer name.
      const size_t after = at + other.size();
      const bool whole =
          after == message.size() || !(std::isalnum(static_cast<unsigned char>(message[after])) ||
                                       message[after] == '-' || message[after] == '_');
      if (whole) message.replace(at, other.size(), written);
    }
  }
  return message;
}

// The `python` (else `python3`) in the directory of the running binary, or "". A wheel installs
// acc-launch into a venv's bin/, beside the venv's python: the interpreter torchrun users expect
// (torchrun runs under its own). `binary` is the binary itself, its links resolved; the
// python found there is kept as that path, never resolved, since a venv's python is a symlink
// that makes the venv only when run through its bin/.
std::string beside_binary_python(const std::filesystem::path& binary) {
  if (binary.empty()) return "";
  for (const char* name : {"python", "python3"}) {
    const std::string candidate = (binary.parent_path() / name).string();
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return "";
}

// Every launch flag, in --help's order; the TPU and SageMaker flags, refused, put their names in
// `refused` when given.
void add_launch_flags(FlagTable& table, LaunchOptions& options, std::vector<std::string>& refused) {
  add_torchrun_flags(table, options);
  add_accelerate_flags(table, options);
  add_own_flags(table, options);
  add_fanout_flags(table, options);
  add_output_and_binding_flags(table, options);
  add_stall_flags(table, options);
  add_refused_flags(table, refused);
  add_config_key_flags(table, options);  // last: it skips the names registered above
}

// The name of every launch flag, CLI11's own --help and --version among them, for
// expand_flag_prefixes: the flags declared once a process into a table that registers none.
const FlagNames& launch_flag_names() {
  static const FlagNames names = [] {
    CLI::App app;
    LaunchOptions options;
    std::vector<std::string> refused;
    FlagTable table(app, options, nullptr);
    add_launch_flags(table, options, refused);
    std::vector<FlagName> all = table.names();
    all.push_back({"help", 'h', false});
    all.push_back({"version", '\0', false});
    return FlagNames(std::move(all));
  }();
  return names;
}

ParseResult usage_error(const std::string& message) {
  ParseResult result;
  result.exit_now = true;
  result.exit_code = 2;
  result.message = one_line(message);
  return result;
}

}  // namespace

namespace {
ParseResult parse(const std::vector<std::string>& args, const HelpWanted& help,
                  const std::string& launcher_binary = "");
}  // namespace

HelpResult launch_help(const std::string& topic, const std::vector<SubcommandHelp>& subcommands) {
  const std::vector<HelpTopic>& topics = help_topics();
  const auto found = std::find_if(topics.begin(), topics.end(),
                                  [&](const HelpTopic& t) { return topic == t.name; });
  HelpResult result;
  if (found == topics.end()) {
    std::string names;
    for (const HelpTopic& t : topics) names += std::string(names.empty() ? "" : ", ") + t.name;
    result.exit_code = 2;
    result.text = "acc-launch: error: help " + topic + ": no such topic; topics: " + names +
                  " (or acc-launch SUBCOMMAND --help)\n";
    return result;
  }
  ParseResult parsed = parse({"--help"}, HelpWanted{*found, subcommands});
  result.text = parsed.message;
  return result;
}

void resolve_python(LaunchOptions& options, const std::string& beside_binary) {
  if (options.source_of("python") == Source::kCommandLine) {
    options.python_source = "--python";
  } else if (const char* exec = std::getenv("PYTHON_EXEC"); exec && *exec) {
    options.python = exec;
    options.python_source = "$PYTHON_EXEC";
  } else if (!beside_binary.empty()) {
    options.python = beside_binary;
    options.python_source = "beside acc-launch";
  } else {
    options.python = "python3";
    options.python_source = "python3 on PATH";
  }
}

namespace {

// parse(), of flags named whole; `unknown_flag` is set when a flag before the program is none
// of the launch's.
ParseResult parse_whole_names(const std::vector<std::string>& args, const HelpWanted& help,
                              const std::string& launcher_binary, bool& unknown_flag) {
  ParseResult result;
  LaunchOptions& options = result.options;
  apply_torchrun_variables(options);

  CLI::App app{"acc-launch: start one worker per GPU or CPU slot with the torchrun contract",
               "acc-launch"};
  app.formatter(std::make_shared<HelpFormatter>(help.subcommands));
  app.prefix_command();
  app.set_version_flag("--version", std::string("acc-launch ") + kVersion);
  app.get_help_ptr()->group(kGroupTorchrun)->description("print this help and exit");
  app.get_version_ptr()->group(kGroupTorchrun)->description("print the version and exit");
  const FlagFilter filter(args);
  FlagTable table(app, options, &filter, &help.topic);
  std::vector<std::string> refused;
  add_launch_flags(table, options, refused);

  const std::vector<std::string> split = split_empty_values(app, args);
  std::vector<std::string> reversed(split.rbegin(), split.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    result.exit_now = true;
    result.message = help_of_groups(app, help.topic.groups, table.config_keys());
    return result;
  } catch (const CLI::CallForVersion&) {
    result.exit_now = true;
    result.message = std::string("acc-launch ") + kVersion;  // main() ends it with a newline
    return result;
  } catch (const CLI::ParseError& e) {
    return usage_error(in_users_spelling(e.what(), args));
  }
  table.record_command_line(app);
  resolve_python(options, beside_binary_python(launcher_binary));
  if (const char* hook = std::getenv("ACC_PYTHON_HOOK"); hook && std::string(hook) == "0")
    options.no_python_hook = true;
  if (const char* warm = std::getenv("ACC_WARM_WORKERS"); warm && std::string(warm) == "0")
    options.no_warm_workers = true;
  if (!options.print_completion.empty()) {
    result.exit_now = true;
    result.message = completion_script(app, options.print_completion);
    return result;
  }
  if (!refused.empty())
    return usage_error("--" + refused.front() +
                       ": TPU and SageMaker launches are not supported; acc-launch starts local "
                       "processes (use accelerate launch on a TPU VM or for SageMaker)");

  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
  if (rest.empty()) return usage_error("no PROGRAM given: acc-launch [options] PROGRAM [args...]");
  if (rest.front().empty())
    return usage_error("PROGRAM is an empty word: acc-launch [options] PROGRAM [args...]");
  if (rest.front().size() > 1 && rest.front()[0] == '-') {
    unknown_flag = true;
    return usage_error("unknown option " + rest.front().substr(0, rest.front().find('=')));
  }
  options.program = rest.front();
  options.program_args.assign(rest.begin() + 1, rest.end());
  return result;
}

// parse_launch_args, with what --help prints (launch_help's topics).
ParseResult parse(const std::vector<std::string>& args, const HelpWanted& help,
                  const std::string& launcher_binary) {
  bool unknown_flag = false;
  ParseResult result = parse_whole_names(args, help, launcher_binary, unknown_flag);
  if (!unknown_flag) return result;
  // argparse's abbreviations (--nproc_per_nod), written out whole, and the words read again:
  // a command line of whole names, the usual one, never needs the names of every flag.
  const ExpandedFlags expanded = expand_flag_prefixes(args, launch_flag_names());
  if (!expanded.error.empty()) return usage_error(expanded.error);
  if (expanded.args == args) return result;
  return parse_whole_names(expanded.args, help, launcher_binary, unknown_flag);
}

}  // namespace

ParseResult parse_launch_args(const std::vector<std::string>& args,
                              const std::string& launcher_binary,
                              const std::vector<SubcommandHelp>& subcommands) {
  return parse(args, HelpWanted{default_help(), subcommands}, launcher_binary);
}

namespace {

void add_stall_flags(FlagTable& t, LaunchOptions& o) {
  t.group(kGroupHangs);
  t.value("stall_timeout", o.stall_timeout,
          "hang detection: when no worker printed a line, beat, or completed a collective for "
          "this many seconds, print a hang report (every worker's stack, the stuck collective) "
          "and stop the job (exit 4); 0: off",
          {.env = "ACC_STALL_TIMEOUT"})
      ->check(seconds());
  t.value("stall_init_timeout", o.stall_init_timeout,
          "with --stall_timeout: the limit for a worker's start-up, before its first line, beat "
          "or collective (import torch, loading, init_process_group)",
          {.env = "ACC_STALL_INIT_TIMEOUT"})
      ->check(seconds());
  t.value("stall_action", o.stall_action,
          "what a stall does after its report: stop (the default) or report (and go on)")
      ->check(CLI::IsMember({"stop", "report"}));
  t.group(kGroupMultiNode);
  t.value("preflight_timeout", o.preflight_timeout,
          "seconds a node that does not host the store keeps trying to reach it (master, "
          "rendezvous endpoint) before the launch fails in one line; 0: no check")
      ->check(seconds());
  t.group(kGroupHangs);
  t.value("retryable_exit_code", o.retryable_exit_code,
          "exit with CODE (e.g. 138) for every failure of the launcher's own (hang, lost node, "
          "unkillable worker, rendezvous), so Kubeflow's ExitCode restart policy retries it; 0: "
          "off")
      ->check(whole_number(0));
  t.value("max_no_progress_restarts", o.max_no_progress_restarts,
          "after this many attempts in a row that failed before any progress (no beat, no "
          "completed collective), stop restarting and exit --no_restart_exit_code; 0: off")
      ->check(whole_number(0));
  t.value("no_restart_exit_code", o.no_restart_exit_code,
          "the exit status when --max_no_progress_restarts stops the restarts (default: 93, as "
          "NVIDIA's ft_launcher)")
      ->check(whole_number(1));
  t.value("sdc_exit_codes", o.sdc_exit_codes,
          "RESTART,SUSPECT (16,17): workers' silent-data-corruption exits");
  t.value("exclude_nodes_file", o.exclude_nodes_file,
          "hosts or $ACC_NODE_ID values to keep out of each round (see docs)");
  t.value("node_health_command", o.node_health_command,
          "shell command asked before each round: failing, it keeps this node out");
  t.flag("network_check", o.network_check,
         "before the first attempt, measure the links between the round's nodes and a short "
         "computation on each, and keep out a node --network_check_factor times slower");
  t.value("network_check_factor", o.network_check_factor,
          "how many times slower than the median node a node is left out by --network_check "
          "(default: 3)");
  t.value("health_check_timeout", o.health_check_timeout,
          "with $TORCHELASTIC_HEALTH_CHECK_PORT: seconds without a worker's progress before the "
          "health check answers 503 (default: 60)",
          {.env = "ACC_HEALTH_CHECK_TIMEOUT"})
      ->check(seconds());
  t.value("straggler_window", o.straggler_window,
          "every this many seconds, compare the ranks' time outside collectives per step and "
          "name a rank 1.5 times slower than the median; 0: off",
          {.env = "ACC_STRAGGLER_WINDOW"})
      ->check(seconds());
  t.group(kGroupStatus);
  t.value("status_port", o.status_port,
          "serve the job's status on this port: /metrics for Prometheus, /api/job as JSON, a "
          "live page at /; 0: a free port; off by default",
          {.env = "ACC_STATUS_PORT"})
      ->check(whole_number(0));
  t.value("status_host", o.status_host,
          "the address --status_port is served on (default: 127.0.0.1; 0.0.0.0: every one)");
}

}  // namespace

namespace {

// argparse reads `--flag=` as the empty value (`--megatron_lm_eod_mask_loss=` is bool('')), but
// CLI11 would take the next word for it, even the program. So up to the program such a word
// becomes two, `--flag` and "".
std::vector<std::string> split_empty_values(const CLI::App& app,
                                            const std::vector<std::string>& args) {
  std::vector<std::string> out;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--" || arg.size() < 2 || arg[0] != '-') break;
    const size_t equals = arg.find('=');
    const CLI::Option* option = app.get_option_no_throw(arg.substr(0, equals));
    if (option && equals == arg.size() - 1) {
      out.push_back(arg.substr(0, equals));
      out.emplace_back();
      continue;
    }
    out.push_back(arg);
    if (option && equals == std::string::npos && option->get_expected_min() > 0 &&
        i + 1 < args.size())
      out.push_back(args[++i]);  // its value, whatever it looks like
  }
  out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return out;
}

}  // namespace

}  // namespace acc::launcher
