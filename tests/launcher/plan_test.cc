#include "acc/launcher/plan/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "acc/common/error.h"
#include "acc/config/cluster_config.h"
#include "acc/launcher/nodes/cluster.h"
#include "plan/config_merge.h"

namespace acc::launcher {
namespace {

LaunchOptions program(const std::string& name = "./train") {
  LaunchOptions options;
  options.program = name;
  return options;
}

HostInfo host(int cpus = 4, int gpus = 0) {
  HostInfo info;
  info.hostname = "node7";
  info.cpu_count = cpus;
  info.gpu_count = gpus;
  return info;
}

std::string value_of(const EnvList& env, const std::string& key) {
  for (const auto& [k, v] : env)
    if (k == key) return v;
  return "<unset>";
}

TEST(PlanTest, NprocPerNodeAcceptsNumbersAndDeviceWords) {
  LaunchOptions o = program();
  o.nproc_per_node = "3";
  EXPECT_EQ(build_plan(o, host()).nproc_per_node, 3);
  o.nproc_per_node = "cpu";
  EXPECT_EQ(build_plan(o, host(6, 2)).nproc_per_node, 6);
  o.nproc_per_node = "gpu";
  EXPECT_EQ(build_plan(o, host(6, 2)).nproc_per_node, 2);
  o.nproc_per_node = "auto";
  EXPECT_EQ(build_plan(o, host(6, 2)).nproc_per_node, 2);
  EXPECT_EQ(build_plan(o, host(6, 0)).nproc_per_node, 6);
  o.nproc_per_node = "gpu";
  EXPECT_THROW(build_plan(o, host(6, 0)), ConfigError);
}

// GPU health (host/gpu_health.h) checks these: local rank i uses the i-th visible GPU.
TEST(PlanTest, TheWorkersGpusAreTheVisibleOnesOneALocalRank) {
  using Gpus = std::vector<std::string>;
  LaunchOptions o = program();
  HostInfo machine = host(8, 4);
  EXPECT_EQ(build_plan(o, machine).worker_gpus, Gpus{}) << "not said to be NVIDIA's";
  machine.gpu_vendor = "nvidia";
  o.nproc_per_node = "2";
  EXPECT_EQ(build_plan(o, machine).worker_gpus, (Gpus{"0", "1"}));
  o.nproc_per_node = "8";
  EXPECT_EQ(build_plan(o, machine).worker_gpus, (Gpus{"0", "1", "2", "3"}));
  machine.environment["CUDA_VISIBLE_DEVICES"] = "GPU-2222,3,9";
  machine.gpu_count = 2;  // PyTorch reads the list up to 9, which names no GPU
  EXPECT_EQ(build_plan(o, machine).worker_gpus, (Gpus{"GPU-2222", "3"}));
  o.gpu_ids = "1";  // the workers' own list
  EXPECT_EQ(build_plan(o, machine).worker_gpus, (Gpus{"1"}));
  o.cpu = true;
  EXPECT_EQ(build_plan(o, machine).worker_gpus, Gpus{});
  o.cpu = false;
  machine.gpu_vendor = "amd";
  EXPECT_EQ(build_plan(o, machine).worker_gpus, Gpus{});
}

TEST(PlanTest, GlobalRanksFollowTheNodeRank) {
  LaunchOptions o = program();
  o.nproc_per_node = "4";
  o.nnodes = "3";
  o.node_rank = 2;
  LaunchPlan plan = build_plan(o, host());
  EXPECT_EQ(plan.world_size, 12);
  ASSERT_EQ(plan.workers.size(), 4u);
  const Round round = static_round(plan, 29500, 0);
  EXPECT_EQ(global_rank(plan, round, plan.workers[0].local_rank), 8);
  EXPECT_EQ(global_rank(plan, round, plan.workers[3].local_rank), 11);
  EXPECT_EQ(plan.master_port, 29500) << "several nodes must agree on a port";
}

TEST(PlanTest, OneNodeWithoutAPortPicksAFreeOne) {
  EXPECT_EQ(build_plan(program(), host()).master_port, 0);
  LaunchOptions o = program();
  o.master_port = 29600;
  EXPECT_EQ(build_plan(o, host()).master_port, 29600);
}

TEST(PlanTest, AccelerateTotalsBecomePerNodeCounts) {
  LaunchOptions o = program();
  o.num_processes = 8;
  o.num_machines = 2;
  o.machine_rank = 1;
  o.main_process_ip = "10.0.0.1";
  o.main_process_port = 29555;
  LaunchPlan plan = build_plan(o, host());
  EXPECT_EQ(plan.nproc_per_node, 4);
  EXPECT_EQ(plan.nnodes, 2);
  EXPECT_EQ(plan.node_rank, 1);
  EXPECT_EQ(plan.master_addr, "10.0.0.1");
  EXPECT_EQ(plan.master_port, 29555);
  EXPECT_EQ(global_rank(plan, static_round(plan, 29555, 0), 0), 4);
}

TEST(PlanTest, ContradictingSpellingsAreRefused) {
  LaunchOptions o = program();
  o.nnodes = "3";
  o.sources["nnodes"] = Source::kCommandLine;
  o.num_machines = 2;
  EXPECT_THROW(build_plan(o, host()), ConfigError);
}

TEST(PlanTest, NetworkCheckFactorMustBeAboveOne) {
  LaunchOptions o = program();
  o.network_check = true;
  o.network_check_factor = 1;
  EXPECT_THROW(build_plan(o, host()), ConfigError);
  o.network_check_factor = 4;
  const LaunchPlan plan = build_plan(o, host());
  EXPECT_TRUE(plan.network_check);
  EXPECT_EQ(plan.network_check_factor, 4);
}

TEST(PlanTest, StaticEndpointStandsForMasterAddressAndPort) {
  LaunchOptions o = program();
  o.nnodes = "2";
  o.rdzv_endpoint = "head:1234";
  LaunchPlan plan = build_plan(o, host());
  EXPECT_EQ(plan.master_addr, "head");
  EXPECT_EQ(plan.master_port, 1234);
}

TEST(PlanTest, EtcdBackendListsTheMembersWithTheDefaultPort) {
  for (const std::string backend : {"etcd", "etcd-v2"}) {
    LaunchOptions o = program();
    o.nnodes = "2:3";
    o.rdzv_backend = backend;
    o.rdzv_endpoint = "e1,10.0.0.2:2380,e3:12379";
    LaunchPlan plan = build_plan(o, host());
    EXPECT_EQ(plan.rdzv_backend, "etcd-v2");
    EXPECT_EQ(plan.etcd_endpoints,
              (std::vector<std::string>{"e1:2379", "10.0.0.2:2380", "e3:12379"}));
    EXPECT_EQ(plan.min_nodes, 2);
    EXPECT_EQ(plan.max_nodes, 3);
    EXPECT_EQ(plan.master_port, 0);  // node 0 of each round picks the workers' store port
  }
}

// One decision of who serves the c10d rendezvous store, for the elastic membership and pre-flight.
TEST(PlanTest, TheRendezvousStoreIsServedHereByIsHostElseByALocalEndpoint) {
  const auto plan_for = [](const std::string& endpoint, const std::string& conf) {
    LaunchOptions o = program();
    o.nnodes = "1:2";
    o.rdzv_backend = "c10d";
    o.rdzv_endpoint = endpoint;
    o.rdzv_conf = conf;
    return build_plan(o, host());
  };
  EXPECT_TRUE(hosts_rendezvous_store(plan_for("127.0.0.1:29400", "")));
  EXPECT_FALSE(hosts_rendezvous_store(plan_for("192.0.2.1:29400", "")));
  EXPECT_TRUE(hosts_rendezvous_store(plan_for("192.0.2.1:29400", "is_host=Yes")));
  EXPECT_FALSE(hosts_rendezvous_store(plan_for("127.0.0.1:29400", "is_host=0")));
  EXPECT_EQ(rdzv_is_host(plan_for("127.0.0.1:29400", "")), std::nullopt);
  EXPECT_EQ(rdzv_is_host(plan_for("127.0.0.1:29400", "is_host=TRUE")), true);
  EXPECT_THROW(plan_for("127.0.0.1:29400", "is_host=maybe"), ConfigError);
}

TEST(PlanTest, EtcdBackendNeedsEndpointsThatAreHostPort) {
  for (const std::string endpoint : {"", "e1:x", "e1,:2379", "e1:70000"}) {
    LaunchOptions o = program();
    o.nnodes = "2";
    o.rdzv_backend = "etcd-v2";
    o.rdzv_endpoint = endpoint;
    EXPECT_THROW(build_plan(o, host()), ConfigError) << endpoint;
  }
}

// torchrun's etcd TLS keys: files checked here, so a dry run names the one it cannot read.
TEST(PlanTest, EtcdBackendTakesTlsKeysAndNamesAFileItCannotRead) {
  const std::string pem = ::testing::TempDir() + "plan_test_ca.pem";
  std::ofstream(pem) << "-----BEGIN CERTIFICATE-----\n";
  const auto plan_for = [](const std::string& backend, const std::string& conf) {
    LaunchOptions o = program();
    o.nnodes = "2";
    o.rdzv_backend = backend;
    o.rdzv_endpoint = "127.0.0.1:2379";
    o.rdzv_conf = conf;
    return build_plan(o, host());
  };
  const auto error_of = [&](const std::string& backend, const std::string& conf) {
    try {
      plan_for(backend, conf);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const LaunchPlan plan =
      plan_for("etcd", "protocol=https,cacert=" + pem + ",cert=" + pem + ",key=" + pem);
  EXPECT_EQ(plan.rdzv_conf.at("protocol"), "https");
  EXPECT_EQ(plan.rdzv_conf.at("cacert"), pem);
  EXPECT_EQ(plan_for("etcd", "protocol=http").rdzv_conf.at("protocol"), "http");
  EXPECT_EQ(error_of("etcd", "protocol=ftp"),
            "--rdzv_conf protocol=ftp: expected http or https (etcd's client URLs scheme)");
  EXPECT_EQ(error_of("etcd", "protocol=https,cacert=/nonexistent/ca.pem"),
            "--rdzv_conf cacert=/nonexistent/ca.pem: cannot read the file; give the path of a PEM "
            "file this user can read");
  EXPECT_EQ(error_of("etcd", "cacert=" + pem),
            "--rdzv_conf cacert=" + pem + ": TLS files need protocol=https; add it to --rdzv_conf");
  EXPECT_EQ(
      error_of("etcd", "protocol=https,key=" + pem),
      "--rdzv_conf key=" + pem + ": a key without its certificate; add cert=PATH to --rdzv_conf");
  EXPECT_EQ(error_of("c10d", "protocol=https"),
            "--rdzv_conf protocol: only the etcd backend takes it (--rdzv_backend etcd)");
  std::remove(pem.c_str());
}

TEST(PlanTest, ProgramsRunUnderTheInterpreterByTheirKind) {
  LaunchOptions o = program("train.py");
  o.program_args = {"--lr", "1"};
  EXPECT_EQ(build_plan(o, host()).workers[0].argv,
            (std::vector<std::string>{"python3", "-u", "train.py", "--lr", "1"}));
  o.module = true;
  o.program = "pkg.train";
  EXPECT_EQ(build_plan(o, host()).workers[0].argv,
            (std::vector<std::string>{"python3", "-u", "-m", "pkg.train", "--lr", "1"}));
  o.module = false;
  o.no_python = true;
  o.program = "train.py";
  EXPECT_EQ(build_plan(o, host()).workers[0].argv.front(), "train.py");
  LaunchOptions binary = program("./train");
  EXPECT_EQ(build_plan(binary, host()).workers[0].argv.front(), "./train");
}

TEST(PlanTest, OmpThreadsDefaultToOneOnlyWhenUnsetAndSeveralWorkers) {
  LaunchOptions o = program();
  o.nproc_per_node = "2";
  LaunchPlan plan = build_plan(o, host());
  EXPECT_EQ(value_of(plan.env_defaults, "OMP_NUM_THREADS"), "1");
  EXPECT_EQ(plan.notices.size(), 1u);
  HostInfo with_omp = host();
  with_omp.environment["OMP_NUM_THREADS"] = "8";
  EXPECT_EQ(value_of(build_plan(o, with_omp).env_defaults, "OMP_NUM_THREADS"), "<unset>");
  o.nproc_per_node = "1";
  EXPECT_EQ(value_of(build_plan(o, host()).env_defaults, "OMP_NUM_THREADS"), "<unset>");
  o.num_cpu_threads_per_process = 3;
  EXPECT_EQ(value_of(build_plan(o, host()).env, "OMP_NUM_THREADS"), "3");
}

TEST(PlanTest, OmpThreadsNoticeIsSaidOnceWhicheverLaunchChoseTheOne) {
  const std::string notice_start = "setting OMP_NUM_THREADS=1";
  auto notices_about_omp = [&](const LaunchPlan& plan) {
    return std::count_if(plan.notices.begin(), plan.notices.end(),
                         [&](const std::string& n) { return n.rfind(notice_start, 0) == 0; });
  };
  LaunchOptions accelerate = program();
  accelerate.nproc_per_node = "2";
  accelerate.num_cpu_threads_per_process = 1;  // as the config merge fills it
  accelerate.omp_threads_chosen = true;
  EXPECT_EQ(notices_about_omp(build_plan(accelerate, host())), 1);
  accelerate.omp_threads_chosen = false;  // the user's own 1: nothing to say
  EXPECT_EQ(notices_about_omp(build_plan(accelerate, host())), 0);
  LaunchOptions bound = program();
  bound.nproc_per_node = "2";
  bound.bind_cores_to_rank = true;  // each worker gets OMP_NUM_THREADS = its CPUs instead
  HostInfo machine = host();
  for (int id = 0; id < 4; ++id) {
    machine.topology.cpus.push_back({id, 0, id, 0});
    machine.topology.numa_nodes[0].push_back(id);
  }
  const LaunchPlan plan = build_plan(bound, machine);
  EXPECT_EQ(plan.worker_cpus.size(), 2u);
  EXPECT_EQ(notices_about_omp(plan), 0);
  EXPECT_EQ(value_of(plan.env_defaults, "OMP_NUM_THREADS"), "<unset>");
}

TEST(PlanTest, EnableCpuAffinityTellsAccelerateAndBindsTheWorkers) {
  LaunchOptions o = program();
  o.nproc_per_node = "2";
  o.enable_cpu_affinity = true;
  HostInfo machine = host();
  for (int id = 0; id < 4; ++id) {
    machine.topology.cpus.push_back({id, 0, id, 0});
    machine.topology.numa_nodes[0].push_back(id);
  }
  const LaunchPlan plan = build_plan(o, machine);
  EXPECT_EQ(value_of(plan.env, "ACCELERATE_CPU_AFFINITY"), "1");
  EXPECT_EQ(plan.worker_cpus.size(), 2u);
}

// distributed_type NO: accelerate launch runs the script alone, without RANK or LOCAL_RANK
// (with them Accelerate would join a process group of one on a GPU machine).
TEST(PlanTest, AccelerateSimpleLauncherGivesItsOneProcessNoTorchrunContract) {
  LaunchOptions o = program();
  o.simple_launcher = true;
  o.mixed_precision = "bf16";
  LaunchPlan plan = build_plan(o, host());
  EnvList env =
      torchrun_contract(plan, plan.workers[0], static_round(plan, 29500, 0), "/logs/e.json");
  for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
    EXPECT_EQ(value_of(env, name), "<unset>") << name;
  EXPECT_EQ(value_of(env, "TORCHELASTIC_ERROR_FILE"), "/logs/e.json");
  EXPECT_EQ(value_of(plan.env, "ACCELERATE_MIXED_PRECISION"), "bf16");
  // More than one process (--num_processes with distributed_type NO) is a distributed job.
  o.nproc_per_node = "2";
  plan = build_plan(o, host());
  env = torchrun_contract(plan, plan.workers[1], static_round(plan, 29500, 0), "/logs/e.json");
  EXPECT_EQ(value_of(env, "LOCAL_RANK"), "1");
}

TEST(PlanTest, WorkerEnvironmentIsTheTorchrunContract) {
  LaunchOptions o = program();
  o.nproc_per_node = "2";
  o.nnodes = "2";
  o.node_rank = 1;
  o.role = "trainer";
  o.rdzv_id = "job7";
  o.max_restarts = 3;
  LaunchPlan plan = build_plan(o, host());
  EnvList env =
      torchrun_contract(plan, plan.workers[1], static_round(plan, 29500, 2), "/logs/1/error.json");
  EXPECT_EQ(value_of(env, "RANK"), "3");
  EXPECT_EQ(value_of(env, "LOCAL_RANK"), "1");
  EXPECT_EQ(value_of(env, "GROUP_RANK"), "1");
  EXPECT_EQ(value_of(env, "WORLD_SIZE"), "4");
  EXPECT_EQ(value_of(env, "GROUP_WORLD_SIZE"), "2");
  EXPECT_EQ(value_of(env, "ROLE_NAME"), "trainer");
  EXPECT_EQ(value_of(env, "TORCHELASTIC_RESTART_COUNT"), "2");
  EXPECT_EQ(value_of(env, "TORCHELASTIC_MAX_RESTARTS"), "3");
  EXPECT_EQ(value_of(env, "TORCHELASTIC_RUN_ID"), "job7");
  EXPECT_EQ(value_of(env, "TORCHELASTIC_ERROR_FILE"), "/logs/1/error.json");
  EXPECT_EQ(value_of(env, "MASTER_PORT"), "29500");
}

TEST(PlanTest, StreamSpecsReadAllOrPerRank) {
  EXPECT_EQ(parse_stream_spec("3", "tee").mask_for(5), 3);
  StreamSpec spec = parse_stream_spec("0:1,1:2", "redirects");
  EXPECT_EQ(spec.mask_for(0), StreamSpec::kStdout);
  EXPECT_EQ(spec.mask_for(1), StreamSpec::kStderr);
  EXPECT_EQ(spec.mask_for(2), 0);
  EXPECT_THROW(parse_stream_spec("4", "tee"), ConfigError);
  EXPECT_THROW(parse_stream_spec("0:", "tee"), ConfigError);
}

TEST(PlanTest, PrefixTemplateExpandsItsMacros) {
  LaunchOptions o = program();
  o.log_line_prefix = "${hostname}/${role_name}/${rank}/${local_rank} ";
  o.nproc_per_node = "2";
  LaunchPlan plan = build_plan(o, host());
  EXPECT_EQ(expand_prefix(plan, plan.workers[1], static_round(plan, 1, 0)), "node7/default/1/1 ");
}

TEST(PlanTest, LocalRankMacroIsSubstitutedInArguments) {
  LaunchOptions o = program();
  o.nproc_per_node = "2";
  o.program_args = {"--device=cuda:${local_rank}"};
  EXPECT_EQ(build_plan(o, host()).workers[1].argv[1], "--device=cuda:1");
}

TEST(PlanTest, RanksRunOnAcrossNodesOfDifferentSizes) {
  LaunchOptions options;
  options.program = "train";
  options.no_python = true;
  options.nnodes = "2";
  options.node_rank = 1;
  options.nproc_per_node = "3";
  options.node_slots = "1,3";
  const LaunchPlan plan = build_plan(options, HostInfo{});
  EXPECT_EQ(plan.world_size, 4);
  const Round round = static_round(plan, 29500, 0);
  EXPECT_EQ(global_rank(plan, round, 0), 1);
  EXPECT_EQ(global_rank(plan, round, 2), 3);
  const EnvList env = torchrun_contract(plan, plan.workers[2], round, "e.json");
  EXPECT_NE(
      std::find(env.begin(), env.end(), std::pair<std::string, std::string>("WORLD_SIZE", "4")),
      env.end());
  EXPECT_NE(std::find(env.begin(), env.end(),
                      std::pair<std::string, std::string>("LOCAL_WORLD_SIZE", "3")),
            env.end());
  options.node_slots = "1,2";
  EXPECT_THROW(build_plan(options, HostInfo{}), ConfigError) << "node 1 has 3 workers";
  options.node_slots = "3";
  EXPECT_THROW(build_plan(options, HostInfo{}), ConfigError) << "2 nodes";
  options.node_slots = "1,x";
  EXPECT_THROW(build_plan(options, HostInfo{}), ConfigError);
}

// The worker count comes from the first source with a word: the command line (--nproc_per_node,
// else Accelerate's total --num_processes), the scheduler, the config file's total, the default.
TEST(PlanTest, WorkerCountPrecedenceIsCommandLineSchedulerConfigDefault) {
  struct Row {
    const char* nproc_per_node;  // the command line; nullptr: not given
    int num_processes;           // the command line's total; 0: not given
    const char* scheduler;       // the scheduler's nproc_per_node; nullptr: it says nothing
    int config_total;            // the config file's num_processes; 0: no file
    int expected;
  };
  const Row rows[] = {
      {nullptr, 0, nullptr, 0, 1},  // the default
      {nullptr, 0, nullptr, 6, 3},  // config total over the 2 nodes
      {nullptr, 0, "4", 6, 4},      // scheduler over config
      {nullptr, 8, "3", 6, 4},      // command-line total over scheduler: 8 over 2 nodes
      {nullptr, 10, nullptr, 6, 5},
      {"2", 0, "4", 6, 2},  // --nproc_per_node over everything
      {"2", 4, "4", 6, 2},  // both command-line forms, agreeing
      {"gpu", 0, "4", 6, 3},
      {nullptr, 0, "gpu", 6, 3},  // a scheduler's word may name devices too
  };
  for (const Row& row : rows) {
    LaunchOptions o = program();
    o.nnodes = "2";
    if (row.nproc_per_node) {
      o.nproc_per_node = row.nproc_per_node;
      o.sources["nproc_per_node"] = Source::kCommandLine;
    }
    if (row.num_processes) {
      o.num_processes = row.num_processes;
      o.sources["num_processes"] = Source::kCommandLine;
    }
    if (row.scheduler) {
      ClusterFacts facts;
      facts.nproc_per_node = row.scheduler;
      apply_proposals(scheduler_proposals(facts), o);
      EXPECT_FALSE(o.source_of("nproc_per_node") == Source::kCommandLine && !row.nproc_per_node)
          << "a scheduler's word is not the user's";
    }
    if (row.config_total) {
      acc::config::ClusterConfig config = acc::config::parse_config(
          "distributed_type: MULTI_GPU\nnum_machines: 2\nmain_process_ip: 10.0.0.1\n"
          "main_process_port: 29500\nnum_processes: " +
              std::to_string(row.config_total) + "\n",
          "c.yaml");
      merge_config(config, MergeEnvironment{}, o);
    }
    const std::string where = std::string("nproc_per_node=") +
                              (row.nproc_per_node ? row.nproc_per_node : "-") +
                              " num_processes=" + std::to_string(row.num_processes) +
                              " scheduler=" + (row.scheduler ? row.scheduler : "-") +
                              " config=" + std::to_string(row.config_total);
    EXPECT_EQ(build_plan(o, host(8, 3)).nproc_per_node, row.expected) << where;
  }
  LaunchOptions contradicting = program();
  contradicting.nproc_per_node = "2";
  contradicting.num_processes = 6;
  contradicting.sources = {{"nproc_per_node", Source::kCommandLine},
                           {"num_processes", Source::kCommandLine}};
  EXPECT_THROW(build_plan(contradicting, host()), ConfigError);
}

}  // namespace
}  // namespace acc::launcher
