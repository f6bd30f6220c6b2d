#include "acc/config/launch_env.h"
#include "acc/common/strings.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "acc/common/error.h"
#include "acc/config/schema.h"

namespace acc::config {
namespace {

// The argparse namespace of one section: Accelerate's flag defaults (as argparse stores them),
// then the config's keys under their canonical names (launch.py _validate_launch_command).
class Args {
 public:
  void set(const std::string& name, Value value) { values_[name] = std::move(value); }
  void overlay(const ClusterConfig& config, const std::string& section) {
    for (const auto& [key, value] : config.section(section).entries)
      values_[canonical_section_key(section, key)] = value;
  }
  const Value* get(const std::string& name) const {
    auto it = values_.find(name);
    return it == values_.end() ? nullptr : &it->second;
  }
  bool is_set(const std::string& name) const {
    const Value* v = get(name);
    return v && !v->is_null();
  }
  std::string str(const std::string& name) const {
    const Value* v = get(name);
    return v ? v->python_str() : "None";
  }
  long long integer(const std::string& name, long long fallback) const {
    const Value* v = get(name);
    if (!v) return fallback;
    if (v->kind == Value::Kind::kInt) return v->integer;
    try {
      return std::stoll(v->text);
    } catch (const std::exception&) {
      return fallback;
    }
  }
  const std::map<std::string, Value>& all() const { return values_; }

 private:
  std::map<std::string, Value> values_;
};

Value s(const char* text) {
  return Value::of_string(text);
}

void add_dynamo(const ClusterConfig& config, EnvEntries& env) {
  Args a;
  a.set("dynamo_backend", s("no"));
  a.set("dynamo_mode", s("default"));
  a.set("dynamo_use_fullgraph", Value::of_bool(false));
  a.set("dynamo_use_dynamic", Value::of_bool(false));
  a.set("dynamo_use_regional_compilation", Value::of_bool(false));
  a.overlay(config, "dynamo_config");
  env.emplace_back("ACCELERATE_DYNAMO_BACKEND", to_upper(a.str("dynamo_backend")));
  env.emplace_back("ACCELERATE_DYNAMO_MODE", a.str("dynamo_mode"));
  env.emplace_back("ACCELERATE_DYNAMO_USE_FULLGRAPH", a.str("dynamo_use_fullgraph"));
  env.emplace_back("ACCELERATE_DYNAMO_USE_DYNAMIC", a.str("dynamo_use_dynamic"));
  env.emplace_back("ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION",
                   a.str("dynamo_use_regional_compilation"));
}

// "(false, false, false)" as a string: Accelerate indexes it character by character (a bug,
// reference/accelerate.md §2.2); acc-launch reads the tuple the user meant.
std::vector<std::string> override_precision(const Value& value) {
  std::vector<std::string> out;
  if (value.kind == Value::Kind::kList) {
    for (const Value& item : value.items) out.push_back(item.python_str());
  } else {
    std::string word;
    for (char c : value.text + ",") {
      if (c == ',') {
        const std::string w = to_lower(word);
        out.push_back(w == "true" || w == "1" ? "True" : "False");
        word.clear();
      } else if (std::isalnum(static_cast<unsigned char>(c))) {
        word += c;
      }
    }
  }
  out.resize(3, "False");
  return out;
}

void add_fp8(const ClusterConfig& config, EnvEntries& env) {
  // setup_fp8_env(): every fp8_* argument that is not None, upper-cased. String defaults of
  // str_to_bool arguments are converted by argparse, hence "1".
  Args a;
  a.set("fp8_use_autocast_during_eval", Value::of_bool(false));
  a.set("fp8_margin", Value::of_int(0));
  a.set("fp8_interval", Value::of_int(1));
  a.set("fp8_format", s("HYBRID"));
  a.set("fp8_amax_history_len", Value::of_int(1024));
  a.set("fp8_amax_compute_algo", s("most_recent"));
  a.set("fp8_opt_level", s("O2"));
  a.set("fp8_enable_fsdp_float8_all_gather", Value::of_int(1));
  a.set("fp8_pad_inner_dim", Value::of_int(1));
  a.overlay(config, "fp8_config");
  for (const auto& [name, value] : a.all()) {
    if (value.is_null()) continue;
    if (name == "fp8_override_linear_precision") continue;
    env.emplace_back("ACCELERATE_" + to_upper(name), value.python_str());
  }
  std::vector<std::string> precision = {"False", "False", "False"};
  if (const Value* v = a.get("fp8_override_linear_precision"); v && !v->is_null())
    precision = override_precision(*v);
  env.emplace_back("ACCELERATE_FP8_OVERRIDE_FPROP", precision[0]);
  env.emplace_back("ACCELERATE_FP8_OVERRIDE_DGRAD", precision[1]);
  env.emplace_back("ACCELERATE_FP8_OVERRIDE_WGRAD", precision[2]);
}

void add_fsdp(const ClusterConfig& config, EnvEntries& env) {
  Args a;
  a.set("fsdp_version", s("1"));
  a.set("fsdp_offload_params", s("false"));
  a.set("fsdp_min_num_params", Value::of_int(100000000));
  a.set("fsdp_sharding_strategy", s("FULL_SHARD"));
  a.set("fsdp_reshard_after_forward", s("true"));
  a.set("fsdp_forward_prefetch", s("false"));
  a.set("fsdp_use_orig_params", s("true"));
  a.set("fsdp_cpu_ram_efficient_loading", s("true"));
  a.set("fsdp_sync_module_states", s("true"));
  a.set("fsdp_activation_checkpointing", s("false"));
  a.set("fsdp_activation_checkpointing_offload", s("false"));
  a.overlay(config, "fsdp_config");
  env.emplace_back("ACCELERATE_USE_FSDP", "true");
  env.emplace_back("FSDP_VERSION", a.str("fsdp_version"));
  env.emplace_back("FSDP_SHARDING_STRATEGY", a.str("fsdp_sharding_strategy"));
  env.emplace_back("FSDP_RESHARD_AFTER_FORWARD", to_lower(a.str("fsdp_reshard_after_forward")));
  env.emplace_back("FSDP_OFFLOAD_PARAMS", to_lower(a.str("fsdp_offload_params")));
  env.emplace_back("FSDP_MIN_NUM_PARAMS", a.str("fsdp_min_num_params"));
  const std::pair<const char*, const char*> optional[] = {
      {"fsdp_auto_wrap_policy", "FSDP_AUTO_WRAP_POLICY"},
      {"fsdp_transformer_layer_cls_to_wrap", "FSDP_TRANSFORMER_CLS_TO_WRAP"},
      {"fsdp_backward_prefetch", "FSDP_BACKWARD_PREFETCH"},
      {"fsdp_state_dict_type", "FSDP_STATE_DICT_TYPE"}};
  for (const auto& [name, variable] : optional)
    if (a.is_set(name)) env.emplace_back(variable, a.str(name));
  env.emplace_back("FSDP_FORWARD_PREFETCH", to_lower(a.str("fsdp_forward_prefetch")));
  env.emplace_back("FSDP_USE_ORIG_PARAMS", to_lower(a.str("fsdp_use_orig_params")));
  env.emplace_back("FSDP_CPU_RAM_EFFICIENT_LOADING",
                   to_lower(a.str("fsdp_cpu_ram_efficient_loading")));
  env.emplace_back("FSDP_SYNC_MODULE_STATES", to_lower(a.str("fsdp_sync_module_states")));
  env.emplace_back("FSDP_ACTIVATION_CHECKPOINTING",
                   to_lower(a.str("fsdp_activation_checkpointing")));
  env.emplace_back("FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD",
                   to_lower(a.str("fsdp_activation_checkpointing_offload")));
  if (a.is_set("fsdp_ignored_modules"))
    env.emplace_back("FSDP_IGNORED_MODULES", a.str("fsdp_ignored_modules"));
}

void add_megatron(const ClusterConfig& config, EnvEntries& env) {
  Args a;
  a.set("megatron_lm_tp_degree", Value::of_int(1));
  a.set("megatron_lm_pp_degree", Value::of_int(1));
  a.set("megatron_lm_gradient_clipping", Value::of_float(1.0));
  for (const char* flag :
       {"megatron_lm_use_custom_fsdp", "megatron_lm_no_load_optim", "megatron_lm_eod_mask_loss",
        "megatron_lm_overlap_cpu_optimizer_d2h_h2d", "megatron_lm_no_save_optim",
        "megatron_lm_optimizer_cpu_offload", "megatron_lm_use_precision_aware_optimizer"})
    a.set(flag, Value::of_bool(false));
  a.overlay(config, "megatron_lm_config");
  const std::string p = "MEGATRON_LM_";
  env.emplace_back("ACCELERATE_USE_MEGATRON_LM", "true");
  env.emplace_back(p + "TP_DEGREE", a.str("megatron_lm_tp_degree"));
  env.emplace_back(p + "USE_CUSTOM_FSDP", a.str("megatron_lm_use_custom_fsdp"));
  // The order of utils/launch.py prepare_multi_gpu_env().
  const char* optional_before[] = {"no_load_optim",
                                   "eod_mask_loss",
                                   "no_save_optim",
                                   "optimizer_cpu_offload",
                                   "use_precision_aware_optimizer",
                                   "overlap_cpu_optimizer_d2h_h2d",
                                   "decoder_last_pipeline_num_layers"};
  for (const char* name : optional_before)
    if (a.is_set(std::string("megatron_lm_") + name))
      env.emplace_back(p + to_upper(name), a.str(std::string("megatron_lm_") + name));
  env.emplace_back(p + "PP_DEGREE", a.str("megatron_lm_pp_degree"));
  env.emplace_back(p + "GRADIENT_CLIPPING", a.str("megatron_lm_gradient_clipping"));
  const char* optional_after[] = {"num_micro_batches",          "sequence_parallelism",
                                  "recompute_activations",      "use_distributed_optimizer",
                                  "recompute_granularity",      "recompute_method",
                                  "recompute_num_layers",       "attention_backend",
                                  "expert_model_parallel_size", "context_parallel_size",
                                  "attention_dropout",          "hidden_dropout",
                                  "attention_softmax_in_fp32",  "expert_tensor_parallel_size",
                                  "calculate_per_token_loss",   "use_rotary_position_embeddings"};
  for (const char* name : optional_after)
    if (a.is_set(std::string("megatron_lm_") + name))
      env.emplace_back(p + to_upper(name), a.str(std::string("megatron_lm_") + name));
}

void add_parallelism(const ClusterConfig& config, EnvEntries& env) {
  Args a;
  for (const char* size : {"dp_replicate_size", "dp_shard_size", "tp_size", "cp_size", "sp_size"})
    a.set(std::string("parallelism_config_") + size, Value::of_int(1));
  a.set("parallelism_config_cp_backend", s("torch"));
  a.set("parallelism_config_cp_comm_strategy", s("allgather"));
  a.set("parallelism_config_sp_backend", s("deepspeed"));
  a.set("parallelism_config_sp_seq_length", Value::null());
  a.set("parallelism_config_sp_seq_length_is_variable", Value::of_bool(true));
  a.set("parallelism_config_sp_attn_implementation", s("sdpa"));
  a.overlay(config, "parallelism_config");
  const std::string p = "PARALLELISM_CONFIG_";
  auto put = [&](const char* name) {
    env.emplace_back(p + to_upper(name), a.str(std::string("parallelism_config_") + name));
  };
  env.emplace_back("ACCELERATE_USE_PARALLELISM_CONFIG", "true");
  for (const char* name : {"dp_replicate_size", "dp_shard_size", "tp_size", "cp_size", "cp_backend",
                           "sp_size", "sp_backend"})
    put(name);
  if (a.integer("parallelism_config_cp_size", 1) > 1) put("cp_comm_strategy");
  if (a.integer("parallelism_config_sp_size", 1) > 1) {
    put("sp_seq_length");
    put("sp_seq_length_is_variable");
    put("sp_attn_implementation");
  }
}

void add_deepspeed(const ClusterConfig& config, bool mixed_precision_from_config, EnvEntries& env) {
  const Value& section = config.section("deepspeed_config");
  std::string fields;
  // Accelerate lists the file's deepspeed_config keys: not those only a flag set (no mark).
  for (const auto& [key, value] : section.entries)
    if (value.key_mark.line > 0 || value.mark.line > 0) fields += (fields.empty() ? "" : ",") + key;
  if (mixed_precision_from_config)
    fields += (fields.empty() ? "" : ",") + std::string("mixed_precision");
  Args a;
  a.overlay(config, "deepspeed_config");
  env.emplace_back("ACCELERATE_CONFIG_DS_FIELDS", to_lower(fields));
  env.emplace_back("ACCELERATE_USE_DEEPSPEED", "true");
  const std::pair<const char*, const char*> plain[] = {
      {"zero_stage", "ACCELERATE_DEEPSPEED_ZERO_STAGE"},
      {"gradient_accumulation_steps", "ACCELERATE_GRADIENT_ACCUMULATION_STEPS"}};
  for (const auto& [name, variable] : plain)
    if (a.is_set(name)) env.emplace_back(variable, a.str(name));
  const std::pair<const char*, const char*> lowered[] = {
      {"gradient_clipping", "ACCELERATE_GRADIENT_CLIPPING"},
      {"offload_optimizer_device", "ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE"},
      {"offload_param_device", "ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE"},
      {"zero3_init_flag", "ACCELERATE_DEEPSPEED_ZERO3_INIT"},
      {"zero3_save_16bit_model", "ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL"}};
  for (const auto& [name, variable] : lowered)
    if (a.is_set(name)) env.emplace_back(variable, to_lower(a.str(name)));
  if (a.is_set("deepspeed_config_file"))
    env.emplace_back("ACCELERATE_DEEPSPEED_CONFIG_FILE", a.str("deepspeed_config_file"));
  if (a.is_set("deepspeed_moe_layer_cls_names"))
    env.emplace_back("ACCELERATE_DEEPSPEED_MOE_LAYER_CLS_NAMES",
                     a.str("deepspeed_moe_layer_cls_names"));
}

}  // namespace

LaunchMode launch_mode(const ClusterConfig& config, const ModeFlags& flags) {
  // launch.py _validate_launch_command's sanity checks, in its words.
  ACC_CHECK(flags.cpu + flags.multi_gpu + flags.use_deepspeed + flags.use_fsdp <= 1, ConfigError,
            "You can only use one of --cpu, --multi_gpu, --use_deepspeed, --use_fsdp at a time");
  if (flags.use_parallelism_config) {
    const Value* version = config.section("fsdp_config").find("fsdp_version");
    ACC_CHECK(flags.use_fsdp && version && version->python_str() == "2", ConfigError,
              "--use_parallelism_config needs --use_fsdp and --fsdp_version 2");
  }
  LaunchMode mode;
  if (flags.cpu) return mode;
  if (flags.multi_gpu || flags.use_deepspeed || flags.use_fsdp || flags.use_megatron_lm) {
    mode.path = flags.use_deepspeed ? LaunchPath::kDeepSpeed : LaunchPath::kMultiGpu;
    mode.use_fsdp = flags.use_fsdp;
    mode.use_megatron_lm = flags.use_megatron_lm;
    mode.use_parallelism_config = flags.use_parallelism_config;
    return mode;
  }
  const std::string type = config.distributed_type();
  mode.use_parallelism_config =
      flags.use_parallelism_config || !config.section("parallelism_config").entries.empty();
  if (type == "DEEPSPEED") {
    mode.path = LaunchPath::kDeepSpeed;
  } else if (type == "FSDP") {
    mode.path = LaunchPath::kMultiGpu;
    mode.use_fsdp = true;
  } else if (type == "MEGATRON_LM") {
    mode.path = LaunchPath::kMultiGpu;
    mode.use_megatron_lm = true;
  } else if (is_multi_device_type(type)) {
    mode.path = LaunchPath::kMultiGpu;
  }
  return mode;
}

bool launches_workers(const ClusterConfig& config, const LaunchMode& mode) {
  return mode.path != LaunchPath::kSimple || config.distributed_type() == "MULTI_CPU";
}

std::string visible_devices_variable(const std::string& type) {
  if (type == "MULTI_XPU") return "ZE_AFFINITY_MASK";
  if (type == "MULTI_MLU") return "MLU_VISIBLE_DEVICES";
  if (type == "MULTI_SDAA") return "SDAA_VISIBLE_DEVICES";
  if (type == "MULTI_MUSA") return "MUSA_VISIBLE_DEVICES";
  if (type == "MULTI_NPU") return "ASCEND_RT_VISIBLE_DEVICES";
  if (type == "MULTI_HPU") return "HABANA_VISIBLE_MODULES";
  if (type == "MULTI_NEURON") return "NEURON_RT_VISIBLE_CORES";
  return "CUDA_VISIBLE_DEVICES";
}

EnvEntries section_env(const ClusterConfig& config, const LaunchMode& mode,
                       const std::string& mixed_precision, bool mixed_precision_from_config) {
  EnvEntries env;
  if (mode.path != LaunchPath::kDeepSpeed) add_dynamo(config, env);
  if (mixed_precision == "fp8") add_fp8(config, env);
  if (mode.path == LaunchPath::kMultiGpu) {
    if (mode.use_fsdp) add_fsdp(config, env);
    if (mode.use_megatron_lm) add_megatron(config, env);
  }
  if (mode.path == LaunchPath::kDeepSpeed) add_deepspeed(config, mixed_precision_from_config, env);
  if (mode.path != LaunchPath::kSimple && mode.use_parallelism_config) add_parallelism(config, env);
  if (config.enable_cpu_affinity()) env.emplace_back("ACCELERATE_CPU_AFFINITY", "1");
  return env;
}

}  // namespace acc::config
