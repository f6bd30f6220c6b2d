// Every `accelerate launch` flag through the real acc-launch binary: `--dry_run` shows what a
// worker would get, compared with what Accelerate's launch.py gives for the same flags
// (accelerate/launch_flags.tsv, expectations written from Accelerate's code).

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launcher_harness.h"

namespace acc::testing {
namespace {
namespace fs = std::filesystem;

// Every option string of Accelerate 1.15's launch_command_parser() (commands/launch.py; its
// `grep -oE '"--[a-z0-9_-]+"'` less --help and the names that only tpu_pod_launcher() and
// _filter_args() pass to other parsers: --positional, --restart-tpuvm-pod-server,
// --training_script, --training_script_args), and its short forms.
const std::vector<std::string> kAccelerateFlags = {
    "--aws_access_key_id",
    "--aws_secret_access_key",
    "--config_file",
    "--cpu",
    "--debug",
    "--deepspeed_config_file",
    "--deepspeed_exclusion_filter",
    "--deepspeed_hostfile",
    "--deepspeed_inclusion_filter",
    "--deepspeed_moe_layer_cls_names",
    "--deepspeed_multinode_launcher",
    "--downcast_bf16",
    "--dynamo_backend",
    "--dynamo_mode",
    "--dynamo_use_dynamic",
    "--dynamo_use_fullgraph",
    "--dynamo_use_regional_compilation",
    "--enable_cpu_affinity",
    "--env",
    "--fp8_amax_compute_algo",
    "--fp8_amax_history_len",
    "--fp8_backend",
    "--fp8_enable_fsdp_float8_all_gather",
    "--fp8_format",
    "--fp8_interval",
    "--fp8_margin",
    "--fp8_opt_level",
    "--fp8_override_linear_precision",
    "--fp8_pad_inner_dim",
    "--fp8_use_autocast_during_eval",
    "--fsdp_activation_checkpointing",
    "--fsdp_activation_checkpointing_offload",
    "--fsdp_auto_wrap_policy",
    "--fsdp_backward_prefetch",
    "--fsdp_cpu_ram_efficient_loading",
    "--fsdp_forward_prefetch",
    "--fsdp_min_num_params",
    "--fsdp_offload_params",
    "--fsdp_reshard_after_forward",
    "--fsdp_sharding_strategy",
    "--fsdp_state_dict_type",
    "--fsdp_sync_module_states",
    "--fsdp_transformer_layer_cls_to_wrap",
    "--fsdp_use_orig_params",
    "--fsdp_version",
    "--gpu_ids",
    "--gradient_accumulation_steps",
    "--gradient_clipping",
    "--help",
    "--log_dir",
    "--machine_rank",
    "--main_process_ip",
    "--main_process_port",
    "--main_training_function",
    "--max_restarts",
    "--megatron_lm_attention_backend",
    "--megatron_lm_attention_dropout",
    "--megatron_lm_attention_softmax_in_fp32",
    "--megatron_lm_calculate_per_token_loss",
    "--megatron_lm_context_parallel_size",
    "--megatron_lm_decoder_last_pipeline_num_layers",
    "--megatron_lm_eod_mask_loss",
    "--megatron_lm_expert_model_parallel_size",
    "--megatron_lm_expert_tensor_parallel_size",
    "--megatron_lm_gradient_clipping",
    "--megatron_lm_hidden_dropout",
    "--megatron_lm_no_load_optim",
    "--megatron_lm_no_save_optim",
    "--megatron_lm_num_micro_batches",
    "--megatron_lm_optimizer_cpu_offload",
    "--megatron_lm_overlap_cpu_optimizer_d2h_h2d",
    "--megatron_lm_pp_degree",
    "--megatron_lm_recompute_activations",
    "--megatron_lm_recompute_granularity",
    "--megatron_lm_recompute_method",
    "--megatron_lm_recompute_num_layers",
    "--megatron_lm_sequence_parallelism",
    "--megatron_lm_tp_degree",
    "--megatron_lm_use_custom_fsdp",
    "--megatron_lm_use_distributed_optimizer",
    "--megatron_lm_use_precision_aware_optimizer",
    "--megatron_lm_use_rotary_position_embeddings",
    "--mixed_precision",
    "--module",
    "--monitor_interval",
    "--mpirun_hostfile",
    "--multi_gpu",
    "--no_python",
    "--no_tpu_cluster",
    "--num_cpu_threads_per_process",
    "--num_machines",
    "--num_processes",
    "--offload_optimizer_device",
    "--offload_optimizer_nvme_path",
    "--offload_param_device",
    "--offload_param_nvme_path",
    "--parallelism_config_cp_backend",
    "--parallelism_config_cp_comm_strategy",
    "--parallelism_config_cp_size",
    "--parallelism_config_dp_replicate_size",
    "--parallelism_config_dp_shard_size",
    "--parallelism_config_sp_attn_implementation",
    "--parallelism_config_sp_backend",
    "--parallelism_config_sp_seq_length",
    "--parallelism_config_sp_seq_length_is_variable",
    "--parallelism_config_sp_size",
    "--parallelism_config_tp_size",
    "--quiet",
    "--rdzv_backend",
    "--rdzv_conf",
    "--role",
    "--same_network",
    "--tee",
    "--tpu",
    "--tpu_cluster",
    "--tpu_use_sudo",
    "--use_deepspeed",
    "--use_fsdp",
    "--use_megatron_lm",
    "--use_parallelism_config",
    "--vm",
    "--zero3_init_flag",
    "--zero3_save_16bit_model",
    "--zero_stage",
    "-m",
    "-q",
    "-t",
};

struct FlagCase {
  std::string name;
  std::vector<std::string> args;
  std::vector<std::string> expectations;
};

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

std::vector<FlagCase> load_cases() {
  std::vector<FlagCase> cases;
  std::ifstream in(std::string(ACC_FLAGS_DATA_DIR) + "/launch_flags.tsv");
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> columns;
    std::istringstream fields(line);
    for (std::string column; std::getline(fields, column, '\t');) columns.push_back(column);
    if (columns.size() != 3) {
      cases.push_back({"malformed_line", {}, {"malformed: " + line}});
      continue;
    }
    cases.push_back({columns[0], words(columns[1]), words(columns[2])});
  }
  return cases;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// The first worker block of a dry run: its variables and its command's arguments.
struct DryRunWorker {
  std::map<std::string, std::string> env;
  std::vector<std::string> command;
};

DryRunWorker first_worker(const std::string& out) {
  DryRunWorker worker;
  bool inside = false;
  for (const std::string& line : lines_of(out)) {
    if (line.rfind("# rank ", 0) == 0) {
      if (inside) break;
      inside = true;
    } else if (inside && line.rfind("command:", 0) == 0) {
      worker.command = words(line.substr(8));
      break;
    } else if (inside && !line.empty() && line[0] != '#') {
      const size_t eq = line.find('=');
      if (eq != std::string::npos) worker.env[line.substr(0, eq)] = line.substr(eq + 1);
    }
  }
  return worker;
}

// Failures name the case, not its bytes.
void PrintTo(const FlagCase& c, std::ostream* out) {
  *out << c.name;
}

class AccelerateFlagTest : public ::testing::TestWithParam<FlagCase> {};

TEST_P(AccelerateFlagTest, WorkerGetsWhatAccelerateLaunchGives) {
  const FlagCase& c = GetParam();
  const std::string tmp = make_temp_dir();
  const std::string hf_home = tmp + "/hf_home";
  fs::create_directories(hf_home);
  auto expand = [&](const std::string& text) {
    std::string out = replace_all(text, "{data}", ACC_FLAGS_DATA_DIR);
    out = replace_all(out, "{cwd}", fs::current_path().string());
    return replace_all(out, "{tmp}", tmp);
  };

  std::map<std::string, std::string> env = {
      {"HF_HOME", hf_home}, {"OMP_NUM_THREADS", ""}, {"PYTHONPATH", ""}};
  int expected_exit = 0;
  std::vector<std::string> checks;
  for (const std::string& raw : c.expectations) {
    const std::string e = expand(raw);
    if (e.rfind("exit=", 0) == 0) {
      expected_exit = std::stoi(e.substr(5));
    } else if (e[0] == '$') {
      const size_t eq = e.find('=');
      env[e.substr(1, eq - 1)] = e.substr(eq + 1);
    } else {
      checks.push_back(e);
    }
  }
  std::vector<std::string> args = {"--dry_run"};
  for (const std::string& arg : c.args) args.push_back(expand(arg));

  LaunchRun run = run_launcher(args, env, std::chrono::seconds(30));
  ASSERT_EQ(run.exit_code, expected_exit) << run.err << run.out;
  EXPECT_EQ(run.err.find("unknown"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("unrecognized"), std::string::npos) << run.err;
  if (expected_exit != 0) {
    ASSERT_EQ(lines_of(run.err).size(), 1u) << run.err;
    EXPECT_EQ(run.err.rfind("acc-launch: error: ", 0), 0u) << run.err;
    EXPECT_TRUE(zombie_children().empty());
    return;
  }

  // What the worker sees: the launcher's environment, then what the dry run says it sets.
  DryRunWorker worker = first_worker(run.out);
  for (const auto& [key, value] : env)
    if (!value.empty() && key != "HF_HOME") worker.env.try_emplace(key, value);
  // acc-launch's Python hook goes first on PYTHONPATH (Accelerate has none): the rest is what
  // Accelerate's launch gives.
  const std::string hook = "<run dir>/python";
  if (auto it = worker.env.find("PYTHONPATH");
      it != worker.env.end() && it->second.rfind(hook, 0) == 0) {
    if (it->second == hook)
      worker.env.erase(it);
    else
      it->second = it->second.substr(hook.size() + 1);
  }
  for (const std::string& e : checks) {
    if (e.rfind("stderr~", 0) == 0) {
      EXPECT_NE(run.err.find(e.substr(7)), std::string::npos) << e << "\n" << run.err;
    } else if (e[0] == '@') {
      EXPECT_NE(std::find(worker.command.begin(), worker.command.end(), e.substr(1)),
                worker.command.end())
          << e << "\n"
          << run.out;
    } else if (e[0] == '!') {
      EXPECT_EQ(worker.env.count(e.substr(1)), 0u)
          << e << ": set to " << worker.env.at(e.substr(1)) << "\n"
          << run.out;
    } else {
      const size_t eq = e.find('=');
      ASSERT_NE(eq, std::string::npos) << "bad expectation " << e;
      const std::string key = e.substr(0, eq);
      auto it = worker.env.find(key);
      if (it == worker.env.end())
        ADD_FAILURE() << key << " not set\n" << run.out;
      else
        EXPECT_EQ(it->second, e.substr(eq + 1)) << key << "\n" << run.out;
    }
  }
  EXPECT_TRUE(zombie_children().empty());
}

INSTANTIATE_TEST_SUITE_P(LaunchPy, AccelerateFlagTest, ::testing::ValuesIn(load_cases()),
                         [](const ::testing::TestParamInfo<FlagCase>& info) {
                           return info.param.name;
                         });

TEST(AccelerateFlagCoverageTest, EveryAccelerateLaunchFlagHasACase) {
  std::set<std::string> used;
  for (const FlagCase& c : load_cases()) {
    for (const std::string& arg : c.args) {
      if (arg.empty() || arg[0] != '-') continue;
      used.insert(arg.substr(0, arg.find('=')));
    }
  }
  EXPECT_GE(kAccelerateFlags.size(), 123u);
  for (const std::string& flag : kAccelerateFlags)
    EXPECT_TRUE(used.count(flag)) << flag << " has no case in launch_flags.tsv";
}

// `accelerate config default && accelerate launch`'s own check, `accelerate test`, in a fresh
// HF_HOME: the file written is the one the check reads, and the check passes.
TEST(AccelerateCommandsTest, ConfigDefaultThenTestSucceeds) {
  const std::string hf_home = make_temp_dir() + "/hf_home";
  const std::map<std::string, std::string> env = {{"HF_HOME", hf_home}, {"OMP_NUM_THREADS", ""}};
  LaunchRun config = run_launcher({"config", "default"}, env);
  ASSERT_EQ(config.exit_code, 0) << config.err << config.out;
  ASSERT_TRUE(fs::exists(hf_home + "/accelerate/default_config.yaml")) << config.out;

  LaunchRun test = run_launcher({"test"}, env, std::chrono::seconds(90));
  EXPECT_EQ(test.exit_code, 0) << test.err << test.out;
  EXPECT_NE(test.out.find("Test is a success!"), std::string::npos) << test.out << test.err;
  EXPECT_TRUE(zombie_children().empty());
  reap_exited_children();
}

}  // namespace
}  // namespace acc::testing
