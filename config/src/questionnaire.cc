#include "acc/config/questionnaire.h"
#include "acc/common/strings.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <optional>

#include "acc/common/error.h"
#include "acc/config/paths.h"
#include "acc/config/schema.h"

namespace acc::config {
namespace {

// The machine types of Accelerate's menu, in its order, and the distributed_type of each.
const std::vector<std::string> kMachineTypes = {"No distributed training",
                                                "multi-CPU",
                                                "multi-XPU",
                                                "multi-HPU",
                                                "multi-GPU",
                                                "multi-NPU",
                                                "multi-MLU",
                                                "multi-SDAA",
                                                "multi-MUSA",
                                                "multi-NEURON",
                                                "TPU"};
const std::vector<std::string> kMachineDistributedTypes = {
    "NO",        "MULTI_CPU",  "MULTI_XPU",  "MULTI_HPU",    "MULTI_GPU", "MULTI_NPU",
    "MULTI_MLU", "MULTI_SDAA", "MULTI_MUSA", "MULTI_NEURON", "XLA"};
// config_utils.py DYNAMO_BACKENDS, lower-cased as the menu shows them (its TORHCHXLA typo is
// fixed here: choosing that item fails in Accelerate).
const std::vector<std::string> kDynamoBackends = {"eager",
                                                  "aot_eager",
                                                  "inductor",
                                                  "aot_ts_nvfuser",
                                                  "nvprims_nvfuser",
                                                  "cudagraphs",
                                                  "ofi",
                                                  "fx2trt",
                                                  "onnxrt",
                                                  "tensorrt",
                                                  "aot_torchxla_trace_once",
                                                  "torchxla_trace_once",
                                                  "tvm"};

// _ask_field(): asks until `convert` accepts the answer; an empty answer takes the default. Gives
// up after kMaxInvalidAnswers (Accelerate asks forever: `yes garbage | accelerate config` never
// ends).
template <typename T>
T ask_field(Prompter& p, const std::string& prompt,
            const std::function<std::optional<T>(const std::string&)>& convert,
            std::optional<T> fallback, const std::string& error) {
  for (int attempt = 1;; ++attempt) {
    const std::string answer = p.ask(prompt);
    if (answer.empty() && fallback) return *fallback;
    if (auto value = convert(answer)) return *value;
    if (attempt == kMaxInvalidAnswers) give_up(prompt);
    p.say(error);
  }
}

bool ask_yes_no(Prompter& p, const std::string& prompt, bool fallback) {
  // Accelerate's converter: "yes" or "no" in any case; y/n are refused and asked again.
  return ask_field<bool>(
      p, prompt,
      [](const std::string& answer) -> std::optional<bool> {
        const std::string a = to_lower(answer);
        if (a == "yes") return true;
        if (a == "no") return false;
        return std::nullopt;
      },
      fallback, "Please enter yes or no.");
}

std::optional<int> to_int(const std::string& text) {
  const std::optional<int> value = parse_int(trim(text));
  if (!value || *value < 0 || *value > 1000000) return std::nullopt;
  return value;
}

int ask_int(Prompter& p, const std::string& prompt, std::optional<int> fallback, int minimum,
            int maximum, const std::string& error) {
  return ask_field<int>(
      p, prompt,
      [&](const std::string& answer) -> std::optional<int> {
        auto v = to_int(answer);
        if (v && *v >= minimum && *v <= maximum) return v;
        return std::nullopt;
      },
      fallback, error);
}

bool valid_gpu_ids(const std::string& text) {
  if (text == "all") return true;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string part = text.substr(start, comma - start);
    if (part.empty() || !std::all_of(part.begin(), part.end(), ::isdigit)) return false;
    start = comma + 1;
  }
  return true;
}

int count_ids(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), ',')) + 1;
}

std::string device_word(const std::string& type) {
  if (type == "MULTI_CPU") return "processes";
  if (type == "MULTI_NEURON") return "NEURON cores";
  if (type.rfind("MULTI_", 0) == 0 && type != "MULTI_GPU") return type.substr(6) + "(s)";
  return "GPU(s)";
}

// The DeepSpeed questions of cluster.py, in order.
void ask_deepspeed(Prompter& p, int num_machines, Value& ds) {
  auto any_text = [](const std::string& a) -> std::optional<std::string> { return a; };
  auto some_text = [](const std::string& a) -> std::optional<std::string> {
    if (a.empty()) return std::nullopt;
    return a;
  };
  if (ask_yes_no(p,
                 "Do you want to specify a json file to a DeepSpeed config? [yes/NO]: ", false)) {
    ds.set("deepspeed_config_file",
           Value::of_string(ask_field<std::string>(
               p, "Please enter the path to the json DeepSpeed config file: ", any_text,
               std::string("none"), "")));
  } else {
    const int stage = p.choose("What should be your DeepSpeed's ZeRO optimization stage?",
                               {"0", "1", "2", "3"}, 2);
    ds.set("zero_stage", Value::of_int(stage));
    const std::vector<std::string> devices = {"none", "cpu", "nvme"};
    if (stage >= 2) {
      const std::string optimizer =
          devices[p.choose("Where to offload optimizer states?", devices, 0)];
      const std::string params = devices[p.choose("Where to offload parameters?", devices, 0)];
      ds.set("offload_optimizer_device", Value::of_string(optimizer));
      ds.set("offload_param_device", Value::of_string(params));
      if (params == "nvme")
        ds.set("offload_param_nvme_path",
               Value::of_string(ask_field<std::string>(p, "Nvme Path to offload parameters?",
                                                       any_text, std::string("/nvme"), "")));
      if (optimizer == "nvme")
        ds.set("offload_optimizer_nvme_path",
               Value::of_string(ask_field<std::string>(p, "Nvme Path to offload optimizer states?",
                                                       any_text, std::string("/nvme"), "")));
    }
    ds.set("gradient_accumulation_steps",
           Value::of_int(ask_int(p,
                                 "How many gradient accumulation steps you're passing in your "
                                 "script? [1]: ",
                                 1, 1, 1000000, "Please enter an integer of at least 1.")));
    if (ask_yes_no(p, "Do you want to use gradient clipping? [yes/NO]: ", false)) {
      ds.set("gradient_clipping", Value::of_float(ask_field<double>(
                                      p, "What is the gradient clipping value? [1.0]: ",
                                      [](const std::string& a) -> std::optional<double> {
                                        char* end = nullptr;
                                        const double v = std::strtod(a.c_str(), &end);
                                        if (a.empty() || *end != '\0' || v <= 0)
                                          return std::nullopt;
                                        return v;
                                      },
                                      1.0, "Please enter a positive number such as 1.0.")));
    }
    if (stage == 3)
      ds.set("zero3_save_16bit_model",
             Value::of_bool(ask_yes_no(
                 p, "Do you want to save 16-bit model weights when using ZeRO Stage-3? [yes/NO]: ",
                 false)));
  }
  ds.set("zero3_init_flag",
         Value::of_bool(ask_yes_no(p,
                                   "Do you want to enable `deepspeed.zero.Init` when using ZeRO "
                                   "Stage-3 for constructing massive models? [yes/NO]: ",
                                   false)));
  if (ask_yes_no(p, "Do you want to enable Mixture-of-Experts training (MoE)? [yes/NO]: ", false))
    ds.set("deepspeed_moe_layer_cls_names",
           Value::of_string(ask_field<std::string>(
               p,
               "Specify the comma-separated list of transformers MoE layer class names "
               "(case-sensitive), e.g :  `MixtralSparseMoeBlock`, `Qwen2MoeSparseMoeBlock`, "
               "`JetMoEAttention,JetMoEBlock` ... : ",
               some_text, std::nullopt, "Please enter at least one class name.")));
  if (num_machines > 1) {
    // acc-launch starts every machine itself, as DeepSpeed's `standard` launcher does; the other
    // launchers' hostfile questions would configure nothing (docs/config.md).
    ds.set("deepspeed_multinode_launcher", Value::of_string("standard"));
    p.say(
        "acc-launch starts DeepSpeed on each machine as its `standard` launcher does; start "
        "acc-launch on every machine.");
  }
}

// The FSDP questions of cluster.py, in order.
void ask_fsdp(Prompter& p, Value& f) {
  const std::vector<std::string> strategies = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD",
                                               "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"};
  const std::vector<std::string> wraps = {"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"};
  const std::vector<std::string> prefetch = {"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"};
  const int version = p.choose("What should be your FSDP version? [2]: ", {"1", "2"}, 1) + 1;
  f.set("fsdp_version", Value::of_int(version));
  if (version == 1)
    f.set("fsdp_reshard_after_forward",
          Value::of_string(
              strategies[p.choose("What should be your sharding strategy?", strategies, 0)]));
  else
    f.set("fsdp_reshard_after_forward",
          Value::of_bool(
              ask_yes_no(p, "Do you want to enable resharding after forward? [YES/no]: ", true)));
  f.set("fsdp_offload_params",
        Value::of_bool(ask_yes_no(
            p, "Do you want to offload parameters and gradients to CPU? [yes/NO]: ", false)));
  const std::string wrap = wraps[p.choose("What should be your auto wrap policy?", wraps, 0)];
  f.set("fsdp_auto_wrap_policy", Value::of_string(wrap));
  if (wrap == wraps[0]) {
    if (!ask_yes_no(p,
                    "Do you want to use the model's `_no_split_modules` to wrap. Only applicable "
                    "for \xf0\x9f\xa4\x97 Transformers [yes/NO]: ",
                    false))
      f.set("fsdp_transformer_layer_cls_to_wrap",
            Value::of_string(ask_field<std::string>(
                p,
                "Specify the comma-separated list of transformer layer class names "
                "(case-sensitive) to wrap ,e.g, :`BertLayer`, `GPTJBlock`, `T5Block`, "
                "`BertLayer,BertEmbeddings,BertSelfOutput` ...? : ",
                [](const std::string& a) -> std::optional<std::string> {
                  if (a.empty()) return std::nullopt;
                  return a;
                },
                std::nullopt, "Please enter at least one class name.")));
  } else if (wrap == wraps[1]) {
    f.set("fsdp_min_num_params",
          Value::of_int(ask_int(p,
                                "What should be your FSDP's minimum number of parameters for "
                                "Default Auto Wrapping Policy? [1e8]: ",
                                100000000, 1, 2000000000, "Please enter an integer.")));
  }
  if (version == 1)
    f.set("fsdp_backward_prefetch",
          Value::of_string(prefetch[p.choose("What should be your FSDP's backward prefetch policy?",
                                             prefetch, 0)]));
  const std::vector<std::string> state_dicts =
      version == 1
          ? std::vector<std::string>{"FULL_STATE_DICT", "LOCAL_STATE_DICT", "SHARDED_STATE_DICT"}
          : std::vector<std::string>{"SHARDED_STATE_DICT", "FULL_STATE_DICT"};
  f.set("fsdp_state_dict_type",
        Value::of_string(
            state_dicts[p.choose("What should be your FSDP's state dict type?", state_dicts, 0)]));
  if (version == 1) {
    f.set("fsdp_forward_prefetch",
          Value::of_bool(ask_yes_no(
              p, "Do you want to enable FSDP's forward prefetch policy? [yes/NO]: ", false)));
    f.set("fsdp_use_orig_params",
          Value::of_bool(ask_yes_no(
              p, "Do you want to enable FSDP's `use_orig_params` feature? [YES/no]: ", true)));
  }
  const bool ram = ask_yes_no(p,
                              "Do you want to enable CPU RAM efficient model loading? Only "
                              "applicable for \xf0\x9f\xa4\x97 Transformers models. [YES/no]: ",
                              true);
  f.set("fsdp_cpu_ram_efficient_loading", Value::of_bool(ram));
  if (version == 1)
    f.set("fsdp_sync_module_states",
          Value::of_bool(ram || ask_yes_no(p,
                                           "Do you want each individually wrapped FSDP unit to "
                                           "broadcast module parameters from rank 0 at the "
                                           "start? [YES/no]: ",
                                           true)));
  f.set("fsdp_activation_checkpointing",
        Value::of_bool(ask_yes_no(
            p, "Do you want to enable FSDP activation checkpointing? [yes/NO]: ", false)));
}

// FSDP 2's parallelism-config questions of cluster.py.
void ask_parallelism(Prompter& p, Value& pc) {
  if (!ask_yes_no(p, "Do you want to use the parallelism config? [yes/NO]: ", false)) return;
  const std::string prefix = "parallelism_config_";
  const std::pair<const char*, const char*> sizes[] = {
      {"dp_replicate_size", "What is the data parallelism replicate size? [1]: "},
      {"dp_shard_size", "What is the FSDP shard size? [1]: "},
      {"tp_size", "What is the tensor parallelism size? [1]: "},
      {"cp_size", "What is the context parallelism size? [1]: "}};
  for (const auto& [name, prompt] : sizes)
    pc.set(prefix + name,
           Value::of_int(ask_int(p, prompt, 1, 1, 1000000, "Please enter an integer.")));
  if (pc.find(prefix + "cp_size")->integer > 1) {
    const std::vector<std::string> strategies = {"allgather", "alltoall"};
    pc.set(prefix + "cp_comm_strategy",
           Value::of_string(strategies[p.choose(
               "What is the compute parallelism communication strategy?", strategies, 0)]));
  }
}

// The Megatron-LM questions of cluster.py.
void ask_megatron(Prompter& p, Value& m) {
  const int tp = ask_int(p, "What is the Tensor Parallelism degree/size? [1]:", 1, 1, 1000000,
                         "Please enter an integer.");
  m.set("megatron_lm_tp_degree", Value::of_int(tp));
  if (tp > 1)
    m.set("megatron_lm_sequence_parallelism",
          Value::of_bool(
              ask_yes_no(p, "Do you want to enable Sequence Parallelism? [YES/no]: ", true)));
  const int pp = ask_int(p, "What is the Pipeline Parallelism degree/size? [1]:", 1, 1, 1000000,
                         "Please enter an integer.");
  m.set("megatron_lm_pp_degree", Value::of_int(pp));
  if (pp > 1)
    m.set("megatron_lm_num_micro_batches",
          Value::of_int(ask_int(p, "What is the number of micro-batches? [1]:", 1, 1, 1000000,
                                "Please enter an integer.")));
  m.set("megatron_lm_recompute_activations",
        Value::of_bool(ask_yes_no(
            p, "Do you want to enable selective activation recomputation? [YES/no]: ", true)));
  m.set("megatron_lm_use_distributed_optimizer",
        Value::of_bool(ask_yes_no(p,
                                  "Do you want to use distributed optimizer which shards optimizer "
                                  "state and gradients across data parallel ranks? [YES/no]: ",
                                  true)));
  m.set(
      "megatron_lm_gradient_clipping",
      Value::of_float(ask_field<double>(
          p, "What is the gradient clipping value based on global L2 Norm (0 to disable)? [1.0]: ",
          [](const std::string& a) -> std::optional<double> {
            char* end = nullptr;
            const double v = std::strtod(a.c_str(), &end);
            if (a.empty() || *end != '\0' || v < 0) return std::nullopt;
            return v;
          },
          1.0, "Please enter a number such as 1.0.")));
}

// What the answers so far decided; each step below asks its questions in cluster.py's order.
struct Answers {
  std::string type;  // distributed_type of the machine
  int num_machines = 1, machine_rank = 0, port = 0;
  std::string ip, rdzv_backend = "static";
  bool same_network = true, debug = false;
  bool use_cpu = false;
  std::string hostfile;
  Value dynamo = Value::map();
  std::string paradigm;
  Value deepspeed = Value::map();
  Value fsdp = Value::map();
  Value parallelism = Value::map();
  Value megatron = Value::map();
  int num_processes = 1;
  std::string gpu_ids;
  bool numa = false;
  std::string mixed_precision;
  Value fp8 = Value::map();

  bool multi() const { return type != "NO"; }  // a distributed type, not one process
  bool gpu_like() const { return is_multi_device_type(type) || type == "NO"; }
};

// This machine only: SageMaker is asked again, with a pointer to `accelerate config`.
void ask_compute_environment(Prompter& p) {
  const std::string where = "In which compute environment are you running?";
  for (int attempt = 1; p.choose(where, {"This machine", "AWS (Amazon SageMaker)"}, 0) != 0;
       ++attempt) {
    if (attempt == kMaxInvalidAnswers) give_up(where);
    p.say("acc-launch launches on this machine only; for SageMaker use `accelerate config`.");
  }
}

// The machine's distributed_type; TPUs are asked again.
std::string ask_machine_type(Prompter& p) {
  const std::string which = "Which type of machine are you using?";
  for (int attempt = 1;; ++attempt) {
    std::string type = kMachineDistributedTypes[p.choose(which, kMachineTypes, 0)];
    if (type != "XLA") return type;
    if (attempt == kMaxInvalidAnswers) give_up(which);
    p.say("acc-launch does not launch TPU runs; for TPUs use `accelerate config`.");
  }
}

// How many machines, and with more than one, this one's rank and where machine 0 listens.
void ask_machines(Prompter& p, Answers& a) {
  a.num_machines = ask_int(p,
                           "How many different machines will you use (use more than 1 for "
                           "multi-node training)? [1]: ",
                           1, 1, 100000, "Please enter an integer of at least 1.");
  if (a.num_machines > 1) {
    std::vector<std::string> ranks;
    for (int i = 0; i < a.num_machines; ++i) ranks.push_back(std::to_string(i));
    a.machine_rank = p.choose("What is the rank of this machine?", ranks, 0);
    a.ip = ask_field<std::string>(
        p, "What is the IP address of the machine that will host the main process? ",
        [](const std::string& answer) -> std::optional<std::string> {
          if (answer.empty() || answer.find(' ') != std::string::npos) return std::nullopt;
          return answer;
        },
        std::nullopt, "Please enter the address of machine 0, such as 10.0.0.1.");
    a.port = ask_int(p, "What is the port you will use to communicate with the main process? ",
                     std::nullopt, 1, 65535, "Please enter a port between 1 and 65535.");
    a.same_network = ask_yes_no(p,
                                "Are all the machines on the same local network? Answer `no` if "
                                "nodes are on the cloud and/or on different network hosts "
                                "[YES/no]: ",
                                true);
    if (!a.same_network)
      a.rdzv_backend = ask_field<std::string>(
          p, "What rendezvous backend will you use? ('static', 'c10d', ...): ",
          [](const std::string& answer) -> std::optional<std::string> {
            if (answer == "static" || answer == "c10d") return answer;
            return std::nullopt;
          },
          std::string("static"), "Please enter static or c10d.");
  }
  a.debug = ask_yes_no(p,
                       "Should distributed operations be checked while running for errors? This "
                       "can avoid timeout issues but will be slower. [yes/NO]: ",
                       false);
}

// CPU only (asked for no distributed training; multi-CPU is), and multi-CPU's mpirun hostfile.
void ask_cpu(Prompter& p, Answers& a) {
  a.use_cpu = a.type == "MULTI_CPU";
  if (a.type == "NO")
    a.use_cpu = ask_yes_no(p,
                           "Do you want to run your training on CPU only (even if a GPU / Apple "
                           "Silicon / Ascend NPU device is available)? [yes/NO]:",
                           false);
  if (a.type == "MULTI_CPU" &&
      ask_yes_no(p, "Do you want accelerate to launch mpirun? [yes/NO]: ", false))
    a.hostfile = expand_user(ask_field<std::string>(
        p, "Please enter the path to the hostfile to use with mpirun [~/hostfile]: ",
        [](const std::string& answer) -> std::optional<std::string> { return answer; },
        std::string("~/hostfile"), ""));
}

// torch dynamo's backend and, when asked for, torch.compile's defaults.
void ask_dynamo(Prompter& p, Value& dynamo) {
  if (!ask_yes_no(p, "Do you wish to optimize your script with torch dynamo?[yes/NO]:", false))
    return;
  const int backend = p.choose("Which dynamo backend would you like to use?", kDynamoBackends, 2);
  dynamo.set("dynamo_backend", Value::of_string(to_upper(kDynamoBackends[backend])));
  if (!ask_yes_no(p,
                  "Do you want to customize the defaults sent to torch.compile? [yes/NO]: ", false))
    return;
  const std::vector<std::string> modes = {"default", "reduce-overhead", "max-autotune"};
  dynamo.set("dynamo_mode",
             Value::of_string(modes[p.choose("Which mode do you want to use?", modes, 0)]));
  dynamo.set("dynamo_use_fullgraph",
             Value::of_bool(ask_yes_no(p,
                                       "Do you want the fullgraph mode or it is ok to break "
                                       "model into several subgraphs? [yes/NO]: ",
                                       false)));
  dynamo.set("dynamo_use_dynamic",
             Value::of_bool(
                 ask_yes_no(p, "Do you want to enable dynamic shape tracing? [yes/NO]: ", false)));
  dynamo.set("dynamo_use_regional_compilation",
             Value::of_bool(
                 ask_yes_no(p, "Do you want to enable regional compilation? [yes/NO]: ", false)));
}

// DeepSpeed, FSDP or Megatron-LM: the first one taken, and its questions.
void ask_paradigm(Prompter& p, Answers& a) {
  if (a.gpu_like() && ask_yes_no(p, "Do you want to use DeepSpeed? [yes/NO]: ", false)) {
    a.paradigm = "DEEPSPEED";
    ask_deepspeed(p, a.num_machines, a.deepspeed);
  }
  if (a.paradigm.empty() && is_multi_device_type(a.type) &&
      ask_yes_no(p, "Do you want to use FullyShardedDataParallel? [yes/NO]: ", false)) {
    a.paradigm = "FSDP";
    ask_fsdp(p, a.fsdp);
    if (a.fsdp.find("fsdp_version")->integer == 2) ask_parallelism(p, a.parallelism);
  }
  if (a.paradigm.empty() && a.type == "MULTI_GPU" &&
      ask_yes_no(p, "Do you want to use Megatron-LM ? [yes/NO]: ", false)) {
    a.paradigm = "MEGATRON_LM";
    ask_megatron(p, a.megatron);
  }
}

// The processes of every machine: a multiple of the machines, and more than one for MULTI_GPU
// on one machine without a paradigm.
int ask_num_processes(Prompter& p, const Answers& a) {
  const std::string word = a.paradigm.empty() ? device_word(a.type) : "GPU(s)";
  while (true) {
    const int num_processes =
        ask_int(p, "How many " + word + " should be used for distributed training? [1]:", 1, 1,
                1000000, "Please enter an integer of at least 1.");
    if (num_processes % a.num_machines != 0) {
      p.say("Please enter a multiple of the number of machines (" + std::to_string(a.num_machines) +
            "): it counts the processes of every machine.");
      continue;
    }
    if (a.type == "MULTI_GPU" && a.num_machines == 1 && num_processes == 1 && a.paradigm.empty()) {
      p.say(
          "Specified distributed type MULTI_GPU but only using 1 GPU on a single machine. "
          "Please enter at least 2, or select `No distributed training`.");
      continue;
    }
    return num_processes;
  }
}

// The device ids of this machine: "all", or at least one per process of this machine.
std::string ask_gpu_ids(Prompter& p, const Answers& a) {
  const int per_machine = a.num_processes / a.num_machines;
  return ask_field<std::string>(
      p,
      "What " + device_word(a.type == "NO" ? "MULTI_GPU" : a.type) +
          " (by id) should be used for training on this machine as a comma-separated list? "
          "[all]:",
      [&](const std::string& answer) -> std::optional<std::string> {
        if (!valid_gpu_ids(answer)) return std::nullopt;
        if (answer != "all" && count_ids(answer) < per_machine) return std::nullopt;
        return answer;
      },
      std::string("all"),
      "Please enter all, or at least " + std::to_string(per_machine) +
          " comma-separated ids such as 0,1.");
}

// The devices: how many processes, which ids, NUMA affinity.
void ask_devices(Prompter& p, Answers& a) {
  if (a.multi() || !a.paradigm.empty()) a.num_processes = ask_num_processes(p, a);
  // Asked for the plain types only: DeepSpeed, FSDP and Megatron-LM skip it (cluster.py).
  if (a.gpu_like() && a.paradigm.empty() && !a.use_cpu) a.gpu_ids = ask_gpu_ids(p, a);
  if ((a.type == "NO" || a.type == "MULTI_GPU") && a.paradigm.empty() && !a.use_cpu)
    a.numa = ask_yes_no(p,
                        "Would you like to enable numa efficiency? (Currently only supported on "
                        "NVIDIA hardware). [yes/NO]: ",
                        false);
}

// Mixed precision, FP8's backend, and dynamo's TF32 note.
void ask_precision(Prompter& p, Answers& a) {
  const std::vector<std::string> precisions = {"no", "fp16", "bf16", "fp8"};
  // With a DeepSpeed JSON file, the precision is the JSON file's business (cluster.py).
  const bool ds_json = a.deepspeed.find("deepspeed_config_file") != nullptr;
  a.mixed_precision =
      ds_json ? "" : precisions[p.choose("Do you wish to use mixed precision?", precisions, 0)];
  if (a.mixed_precision == "fp8") {
    const std::vector<std::string> backends = {"ao", "te", "msamp"};
    a.fp8.set("backend",
              Value::of_string(to_upper(
                  backends[p.choose("Which FP8 backend do you want to use?", backends, 0)])));
  }
  if (!a.dynamo.entries.empty() && a.mixed_precision == "no" && !a.use_cpu)
    p.say(
        "Torch dynamo used without mixed precision requires TF32 to be efficient. Accelerate "
        "will enable it by default when launching your scripts.");
}

// What cluster.py returns, as ClusterConfig.to_dict() writes it.
ClusterConfig to_config(const Answers& a) {
  ClusterConfig config;
  config.set("compute_environment", Value::of_string("LOCAL_MACHINE"));
  config.set("debug", Value::of_bool(a.debug));
  config.set("distributed_type", Value::of_string(a.paradigm.empty() ? a.type : a.paradigm));
  config.set("downcast_bf16", Value::of_string("no"));
  config.set("enable_cpu_affinity", Value::of_bool(a.numa));
  if (!a.gpu_ids.empty()) config.set("gpu_ids", Value::of_string(a.gpu_ids));
  config.set("machine_rank", Value::of_int(a.machine_rank));
  if (a.num_machines > 1) {
    config.set("main_process_ip", Value::of_string(a.ip));
    config.set("main_process_port", Value::of_int(a.port));
  }
  config.set("main_training_function", Value::of_string("main"));
  if (!a.mixed_precision.empty())
    config.set("mixed_precision", Value::of_string(a.mixed_precision));
  config.set("num_machines", Value::of_int(a.num_machines));
  config.set("num_processes", Value::of_int(a.num_processes));
  config.set("rdzv_backend", Value::of_string(a.rdzv_backend));
  config.set("same_network", Value::of_bool(a.same_network));
  Value empty_list;
  empty_list.kind = Value::Kind::kList;
  config.set("tpu_env", empty_list);
  config.set("tpu_use_cluster", Value::of_bool(false));
  config.set("tpu_use_sudo", Value::of_bool(false));
  config.set("use_cpu", Value::of_bool(a.use_cpu));
  const std::pair<const char*, const Value*> sections[] = {
      {"dynamo_config", &a.dynamo},           {"fp8_config", &a.fp8},
      {"deepspeed_config", &a.deepspeed},     {"fsdp_config", &a.fsdp},
      {"parallelism_config", &a.parallelism}, {"megatron_lm_config", &a.megatron}};
  for (const auto& [key, section] : sections)
    if (!section->entries.empty()) config.set(key, *section);
  if (!a.hostfile.empty()) {
    Value mpirun = Value::map();
    mpirun.set("mpirun_hostfile", Value::of_string(a.hostfile));
    config.set("mpirun_config", mpirun);
  }
  return config;
}

}  // namespace

ClusterConfig run_questionnaire(Prompter& p, const MachineFacts& facts) {
  (void)facts;
  ask_compute_environment(p);
  Answers a;
  a.type = ask_machine_type(p);
  if (a.multi()) ask_machines(p, a);
  ask_cpu(p, a);
  ask_dynamo(p, a.dynamo);
  ask_paradigm(p, a);
  ask_devices(p, a);
  ask_precision(p, a);
  return to_config(a);
}

}  // namespace acc::config
