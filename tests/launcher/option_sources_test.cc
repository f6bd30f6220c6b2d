// The precedence of every setting that more than one layer gives (plan/option_sources.h):
// command line > scheduler > config file > default, through the real layers: the command line
// parsed (cli.cc), a scheduler's facts proposed (cluster.h), a config file merged
// (config_merge.h), then the plan built, or on the head of a fan-out the nodes' command lines
// (fanout.h).

#include "acc/launcher/plan/option_sources.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "acc/common/error.h"
#include "acc/config/cluster_config.h"
#include "acc/launcher/cli/cli.h"
#include "acc/launcher/nodes/cluster.h"
#include "acc/launcher/nodes/fanout.h"
#include "acc/launcher/plan/plan.h"
#include "plan/config_merge.h"

namespace acc::launcher {
namespace {

using Strings = std::vector<std::string>;

// One setting given by two layers (or one, against the default). Each row names the layers it
// sets and fails if those two swapped places: their values differ, and so do their sources.
struct Row {
  const char* setting;     // as plan_value reads it
  Strings command_line;    // flags; empty: none
  ClusterFacts scheduler;  // a scheduler's facts; none: it says nothing
  const char* config;      // lines of a config file; nullptr: no file
  std::string expected;
  Source source;
};

const char* name_of(Source source) {
  switch (source) {
    case Source::kDefault:
      return "default";
    case Source::kConfigFile:
      return "config file";
    case Source::kScheduler:
      return "scheduler";
    case Source::kCommandLine:
      return "command line";
  }
  return "?";
}

HostInfo eight_cpus() {
  HostInfo host;
  host.hostname = "node7";
  host.cpu_count = 8;
  return host;
}

// A row as a failure names it: the setting, the flags, and the other layers it has.
std::string where_of(const char* setting, const Strings& command_line, bool scheduler,
                     const char* config) {
  std::string where = setting;
  for (const std::string& word : command_line) where += " " + word;
  if (scheduler) where += " +scheduler";
  if (config) where += " +config " + std::string(config);
  return where;
}

// The layers of `row`, applied as main() applies them.
LaunchOptions layered(const Row& row) {
  Strings args = row.command_line;
  args.push_back("./train");
  ParseResult parsed = parse_launch_args(args);
  EXPECT_FALSE(parsed.exit_now) << parsed.message;
  LaunchOptions options = parsed.options;
  apply_proposals(scheduler_proposals(row.scheduler), options);
  if (row.config) {
    std::string yaml = row.config;
    if (yaml.find("distributed_type") == std::string::npos) yaml += "distributed_type: MULTI_GPU\n";
    // A file names the worker count, or the merge refuses it; 4 fits 1, 2 and 4 machines.
    if (yaml.find("num_processes") == std::string::npos) yaml += "num_processes: 4\n";
    // And machine 0's address where it has several (the check of the file asks for it).
    if (yaml.find("num_machines") != std::string::npos &&
        yaml.find("main_process_ip") == std::string::npos)
      yaml += "main_process_ip: 10.0.0.9\n";
    merge_config(acc::config::parse_config(yaml, "c.yaml"), MergeEnvironment{}, options);
  }
  return options;
}

// The setting as the launch will use it: the plan's, where the plan resolves it.
std::string plan_value(const std::string& setting, const LaunchOptions& o, const LaunchPlan& p) {
  if (setting == "nnodes") return std::to_string(p.nnodes);
  if (setting == "node_rank") return std::to_string(p.node_rank);
  if (setting == "nproc_per_node") return std::to_string(p.nproc_per_node);
  if (setting == "master_addr") return p.master_addr;
  if (setting == "master_port") return std::to_string(p.master_port);
  if (setting == "rdzv_id") return p.run_id;
  if (setting == "rdzv_backend") return p.rdzv_backend;
  if (setting == "gpu_ids") return o.gpu_ids.value_or("");
  if (setting == "mixed_precision") return o.mixed_precision.value_or("");
  if (setting == "cpu") return o.cpu ? "true" : "false";
  if (setting == "debug") return o.debug ? "true" : "false";
  ADD_FAILURE() << "no such setting in the table: " << setting;
  return "";
}

// Every setting of several layers, each pair of its layers. Context a row needs to be a valid
// launch is in its own layer (a node rank below the nodes).
const Row kRows[] = {
    // Node count: torchrun's --nnodes, Accelerate's --num_machines / num_machines.
    {"nnodes", {"--nnodes", "2"}, {.nnodes = "4"}, nullptr, "2", Source::kCommandLine},
    {"nnodes", {"--num_machines", "2"}, {.nnodes = "4"}, nullptr, "2", Source::kCommandLine},
    {"nnodes", {}, {.nnodes = "4"}, "num_machines: 2\n", "4", Source::kScheduler},
    {"nnodes", {"--nnodes", "4"}, {}, "num_machines: 2\n", "4", Source::kCommandLine},
    {"nnodes", {"--num_machines", "4"}, {}, "num_machines: 2\n", "4", Source::kCommandLine},
    {"nnodes", {}, {}, "num_machines: 2\n", "2", Source::kConfigFile},
    // Node rank: --node_rank, --machine_rank / machine_rank.
    {"node_rank",
     {"--nnodes", "4", "--node_rank", "1"},
     {.node_rank = 2},
     nullptr,
     "1",
     Source::kCommandLine},
    {"node_rank",
     {"--nnodes", "4", "--machine_rank", "1"},
     {.node_rank = 2},
     nullptr,
     "1",
     Source::kCommandLine},
    {"node_rank",
     {},
     {.nnodes = "4", .node_rank = 2},
     "num_machines: 4\nmachine_rank: 3\n",
     "2",
     Source::kScheduler},
    {"node_rank",
     {"--node_rank", "1"},
     {},
     "num_machines: 4\nmachine_rank: 3\n",
     "1",
     Source::kCommandLine},
    {"node_rank", {}, {}, "num_machines: 4\nmachine_rank: 3\n", "3", Source::kConfigFile},
    // Workers: --nproc_per_node, Accelerate's total --num_processes / num_processes.
    {"nproc_per_node",
     {"--nproc_per_node", "2"},
     {.nproc_per_node = "4"},
     nullptr,
     "2",
     Source::kCommandLine},
    {"nproc_per_node",
     {"--num_processes", "2"},
     {.nproc_per_node = "4"},
     nullptr,
     "2",
     Source::kCommandLine},
    {"nproc_per_node", {}, {.nproc_per_node = "4"}, "num_processes: 6\n", "4", Source::kScheduler},
    {"nproc_per_node",
     {"--nproc_per_node", "2"},
     {},
     "num_processes: 6\n",
     "2",
     Source::kCommandLine},
    {"nproc_per_node", {}, {}, "num_processes: 6\n", "6", Source::kConfigFile},
    // The store's address: --master_addr, --main_process_ip / main_process_ip (with several
    // machines: Accelerate reads it only then).
    {"master_addr",
     {"--master_addr", "10.0.0.1"},
     {.master_addr = "10.0.0.2"},
     nullptr,
     "10.0.0.1",
     Source::kCommandLine},
    {"master_addr",
     {"--main_process_ip", "10.0.0.1"},
     {.master_addr = "10.0.0.2"},
     nullptr,
     "10.0.0.1",
     Source::kCommandLine},
    {"master_addr",
     {},
     {.master_addr = "10.0.0.2"},
     "num_machines: 2\nmain_process_ip: 10.0.0.3\n",
     "10.0.0.2",
     Source::kScheduler},
    {"master_addr",
     {"--master_addr", "10.0.0.1"},
     {},
     "num_machines: 2\nmain_process_ip: 10.0.0.3\n",
     "10.0.0.1",
     Source::kCommandLine},
    {"master_addr",
     {},
     {},
     "num_machines: 2\nmain_process_ip: 10.0.0.3\n",
     "10.0.0.3",
     Source::kConfigFile},
    // The store's port: --master_port, --main_process_port / main_process_port.
    {"master_port",
     {"--master_port", "29600"},
     {.master_port = 29700},
     nullptr,
     "29600",
     Source::kCommandLine},
    {"master_port",
     {"--main_process_port", "29600"},
     {.master_port = 29700},
     nullptr,
     "29600",
     Source::kCommandLine},
    {"master_port",
     {},
     {.master_port = 29700},
     "main_process_port: 29800\n",
     "29700",
     Source::kScheduler},
    {"master_port",
     {"--master_port", "29600"},
     {},
     "main_process_port: 29800\n",
     "29600",
     Source::kCommandLine},
    {"master_port", {}, {}, "main_process_port: 29800\n", "29800", Source::kConfigFile},
    // The job id: the command line or a scheduler (SLURM's job id).
    {"rdzv_id", {"--rdzv_id", "mine"}, {.rdzv_id = "4711"}, nullptr, "mine", Source::kCommandLine},
    {"rdzv_id", {}, {.rdzv_id = "4711"}, nullptr, "4711", Source::kScheduler},
    // GPUs: --gpu_ids, a hostfile's picked slots, the file's gpu_ids.
    {"gpu_ids", {"--gpu_ids", "0"}, {.gpu_ids = "1,2"}, nullptr, "0", Source::kCommandLine},
    {"gpu_ids",
     {},
     {.gpu_ids = "1,2"},
     "gpu_ids: 2,3\nnum_processes: 2\n",
     "1,2",
     Source::kScheduler},
    {"gpu_ids",
     {"--gpu_ids", "0"},
     {},
     "gpu_ids: 2,3\nnum_processes: 2\n",
     "0",
     Source::kCommandLine},
    {"gpu_ids", {}, {}, "gpu_ids: 2,3\nnum_processes: 2\n", "2,3", Source::kConfigFile},
    // The command line or the file only.
    {"mixed_precision",
     {"--mixed_precision", "fp16"},
     {},
     "mixed_precision: bf16\n",
     "fp16",
     Source::kCommandLine},
    {"mixed_precision", {}, {}, "mixed_precision: bf16\n", "bf16", Source::kConfigFile},
    {"rdzv_backend",
     {"--rdzv_backend", "static", "--rdzv_endpoint", "head:29400"},
     {},
     "rdzv_backend: c10d\n",
     "static",
     Source::kCommandLine},
    {"rdzv_backend",
     {"--rdzv_endpoint", "head:29400"},
     {},
     "rdzv_backend: c10d\n",
     "c10d",
     Source::kConfigFile},
    {"debug", {}, {}, "debug: true\n", "true", Source::kConfigFile},
    {"cpu", {}, {}, "distributed_type: MULTI_CPU\n", "true", Source::kConfigFile},
};

TEST(OptionSourcesTest, EverySettingOfSeveralLayersTakesTheHighestLayersValue) {
  for (const Row& row : kRows) {
    const bool scheduler = row.scheduler.nnodes || row.scheduler.node_rank ||
                           row.scheduler.nproc_per_node || row.scheduler.master_addr ||
                           row.scheduler.master_port || row.scheduler.rdzv_id ||
                           row.scheduler.gpu_ids;
    const std::string where = where_of(row.setting, row.command_line, scheduler, row.config);
    try {
      const LaunchOptions options = layered(row);
      const LaunchPlan plan = build_plan(options, eight_cpus());
      EXPECT_EQ(plan_value(row.setting, options, plan), row.expected) << where;
      EXPECT_STREQ(name_of(setting_source(options, row.setting)), name_of(row.source)) << where;
    } catch (const Error& e) {
      ADD_FAILURE() << where << ": " << e.what();
    }
  }
}

// The head of a fan-out over two hosts of 4 slots (w1, w2) with one more layer: the command line
// (with the --hostfile), the config file, or nothing but the hostfile, whose word the head takes
// as a scheduler's (cluster.h fanout_facts). `expected` is what the head forwards on node 1's
// command line; `source`, the layer of the head's setting. A new job id is "fresh".
struct FanoutRow {
  const char* setting;   // the flag the head writes for a node
  Strings command_line;  // flags besides --hostfile; empty: none
  const char* config;    // lines of a config file; nullptr: no file
  std::string expected;
  Source source;
};

const FanoutRow kFanoutRows[] = {
    // The workers: a hostfile's slots, one worker a slot; the command line's count must agree, a
    // config file's total is below the hostfile's.
    {"nproc_per_node", {"--nproc_per_node", "4"}, "num_processes: 6\n", "4", Source::kCommandLine},
    {"nproc_per_node", {"--num_processes", "8"}, nullptr, "4", Source::kCommandLine},
    {"nproc_per_node", {}, "num_processes: 6\n", "4", Source::kScheduler},
    {"nproc_per_node", {}, nullptr, "4", Source::kScheduler},
    {"nnodes", {}, "num_machines: 4\nnum_processes: 16\n", "2", Source::kScheduler},
    // The store's address: the command line's in either spelling, else the first host; a config
    // file's main_process_ip is below it.
    {"master_addr",
     {"--master_addr", "10.0.0.1"},
     "num_machines: 2\nmain_process_ip: 10.0.0.3\n",
     "10.0.0.1",
     Source::kCommandLine},
    {"master_addr", {"--main_process_ip", "10.0.0.1"}, nullptr, "10.0.0.1", Source::kCommandLine},
    {"master_addr", {}, "num_machines: 2\nmain_process_ip: 10.0.0.3\n", "w1", Source::kScheduler},
    // The store's port: as a layer names it, else derived from the job id (a hostfile names none).
    {"master_port",
     {"--master_port", "29600"},
     "main_process_port: 29800\n",
     "29600",
     Source::kCommandLine},
    {"master_port", {"--main_process_port", "29600"}, nullptr, "29600", Source::kCommandLine},
    {"master_port", {}, "main_process_port: 29800\n", "29800", Source::kConfigFile},
    {"master_port",
     {"--rdzv_id", "job7"},
     nullptr,
     std::to_string(port_for_job("job7")),
     Source::kDefault},
    // The job id: the command line's, else a new one.
    {"rdzv_id", {"--rdzv_id", "mine"}, "main_process_port: 29800\n", "mine", Source::kCommandLine},
    {"rdzv_id", {}, nullptr, "fresh", Source::kDefault},
};

// The value that follows `flag` in a node's command line.
std::string forwarded(const Strings& argv, const std::string& flag) {
  const auto at = std::find(argv.begin(), argv.end(), flag);
  return at == argv.end() || at + 1 == argv.end() ? "(not forwarded)" : *(at + 1);
}

TEST(OptionSourcesTest, TheFanOutHeadForwardsEachSettingFromItsHighestLayer) {
  const std::vector<HostfileEntry> hosts = {{"w1", 4}, {"w2", 4}};
  for (const FanoutRow& row : kFanoutRows) {
    const std::string where = where_of(row.setting, row.command_line, false, row.config);
    Strings command_line = {"--hostfile", "hosts"};
    command_line.insert(command_line.end(), row.command_line.begin(), row.command_line.end());
    try {
      const LaunchOptions options =
          layered(Row{row.setting, command_line, fanout_facts(select_hosts(hosts, "", "")),
                      row.config, row.expected, row.source});
      ASSERT_TRUE(wants_fanout(options)) << where;
      const std::vector<RemoteNode> nodes = select_nodes(hosts, "", "");
      check_slots_agree(options, nodes);
      const FanoutJob job = resolve_fanout_job(options, nodes, "fresh");
      const Strings argv = node_launcher_argv(job, nodes[1]);
      EXPECT_EQ(forwarded(argv, "--" + std::string(row.setting)), row.expected) << where;
      EXPECT_STREQ(name_of(setting_source(options, row.setting)), name_of(row.source)) << where;
    } catch (const Error& e) {
      ADD_FAILURE() << where << ": " << e.what();
    }
  }
}

// Hosts of different sizes: every node starts its own slots, and the head's config file need not
// count the workers (the hostfile's slots do, as a scheduler's word), whether or not the command
// line gives their total.
TEST(OptionSourcesTest, TheFanOutHeadGivesEachNodeItsOwnSlots) {
  const std::vector<HostfileEntry> hosts = {{"w1", 1}, {"w2", 3}};
  for (const Strings& flags : {Strings{}, Strings{"--num_processes", "4"}}) {
    Strings args = {"--hostfile", "hosts"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("./train");
    LaunchOptions options = parse_launch_args(args).options;
    apply_proposals(scheduler_proposals(fanout_facts(select_hosts(hosts, "", ""))), options);
    merge_config(acc::config::parse_config("distributed_type: MULTI_GPU\n", "c.yaml"),
                 MergeEnvironment{}, options);
    const std::vector<RemoteNode> nodes = select_nodes(hosts, "", "");
    check_slots_agree(options, nodes);
    const FanoutJob job = resolve_fanout_job(options, nodes, "fresh");
    EXPECT_EQ(forwarded(node_launcher_argv(job, nodes[0]), "--nproc_per_node"), "1");
    EXPECT_EQ(forwarded(node_launcher_argv(job, nodes[1]), "--nproc_per_node"), "3");
    EXPECT_EQ(forwarded(node_launcher_argv(job, nodes[1]), "--node_slots"), "1,3");
    EXPECT_EQ(options.num_processes, 4);
  }
}

// Without a word from any layer a setting keeps its default, and its source says so.
TEST(OptionSourcesTest, ASettingNoLayerGivesIsTheDefault) {
  const LaunchOptions options = layered(Row{"nnodes", {}, {}, nullptr, "", Source::kDefault});
  const LaunchPlan plan = build_plan(options, eight_cpus());
  EXPECT_EQ(plan.nnodes, 1);
  EXPECT_EQ(plan.nproc_per_node, 1);
  EXPECT_EQ(plan.rdzv_backend, "static");
  for (const char* setting : {"nnodes", "nproc_per_node", "master_port", "gpu_ids"})
    EXPECT_EQ(setting_source(options, setting), Source::kDefault) << setting;
}

// Layers may come in any order: a lower one applied first is overridden, one applied later
// leaves the higher one's value.
TEST(OptionSourcesTest, TheOrderOfTheLayersDoesNotMatter) {
  OptionProposals file{.source = Source::kConfigFile};
  file.num_machines = 2;
  file.mixed_precision = "bf16";
  OptionProposals scheduler{.source = Source::kScheduler};
  scheduler.nnodes = "4";
  for (const bool file_first : {true, false}) {
    LaunchOptions options;
    apply_proposals(file_first ? file : scheduler, options);
    apply_proposals(file_first ? scheduler : file, options);
    EXPECT_EQ(options.nnodes, "4");
    EXPECT_EQ(options.source_of("nnodes"), Source::kScheduler);
    EXPECT_EQ(setting_source(options, "num_machines"), Source::kScheduler)
        << "one setting, two spellings";
    EXPECT_EQ(options.mixed_precision, "bf16");
    EXPECT_FALSE(options.num_machines) << "the file's spelling kept out, or dropped";
  }
}

TEST(OptionSourcesTest, BothPortSpellingsOnTheCommandLineMustAgree) {
  LaunchOptions options =
      parse_launch_args({"--master_port", "29600", "--main_process_port", "29600", "./train"})
          .options;
  EXPECT_EQ(named_store_port(options), 29600);
  options.main_process_port = 29601;
  EXPECT_THROW(named_store_port(options), ConfigError);
  EXPECT_EQ(named_store_port(LaunchOptions{}), std::nullopt);
}

}  // namespace
}  // namespace acc::launcher
