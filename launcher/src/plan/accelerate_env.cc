#include "plan/accelerate_env.h"

#include <algorithm>

namespace acc::launcher {
namespace {

bool has(const EnvList& env, const std::string& name) {
  return std::any_of(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
}

// Sets `name`, replacing an earlier entry in place so the order stays stable.
void put(EnvList& env, const std::string& name, const std::string& value) {
  for (auto& entry : env) {
    if (entry.first == name) {
      entry.second = value;
      return;
    }
  }
  env.emplace_back(name, value);
}

}  // namespace

EnvList accelerate_env(const LaunchOptions& options) {
  // Which of accelerate launch's launchers this run stands for (utils/launch.py): DeepSpeed's,
  // torchrun (--multi_gpu, FSDP, Megatron), or the simple one.
  const bool deepspeed = has(options.extra_env, "ACCELERATE_USE_DEEPSPEED");
  const bool simple = !deepspeed && !options.multi_gpu;

  EnvList env;
  if (simple) put(env, "ACCELERATE_USE_CPU", options.cpu ? "True" : "False");
  if (simple && options.cpu) {
    // prepare_simple_launcher_cmd_env(): Intel OpenMP's settings for a CPU run (Accelerate 1.15
    // reads its own ACCELERATE_USE_CPU here; older releases read a variable named "True").
    put(env, "KMP_AFFINITY", "granularity=fine,compact,1,0");
    put(env, "KMP_BLOCKTIME", "1");
  }
  if (options.debug) put(env, "ACCELERATE_DEBUG_MODE", "true");
  if (options.gpu_ids && *options.gpu_ids != "all")
    put(env, "CUDA_VISIBLE_DEVICES", *options.gpu_ids);
  put(env, "ACCELERATE_MIXED_PRECISION", options.mixed_precision.value_or("no"));
  if (!deepspeed) {
    // accelerate launch always exports the dynamo settings; scripts that read them expect them.
    put(env, "ACCELERATE_DYNAMO_BACKEND", "NO");
    put(env, "ACCELERATE_DYNAMO_MODE", "default");
    put(env, "ACCELERATE_DYNAMO_USE_FULLGRAPH", "False");
    put(env, "ACCELERATE_DYNAMO_USE_DYNAMIC", "False");
    put(env, "ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION", "False");
    if (options.num_cpu_threads_per_process)
      put(env, "OMP_NUM_THREADS", std::to_string(*options.num_cpu_threads_per_process));
  }
  for (const auto& [name, value] : options.extra_env) put(env, name, value);
  return env;
}

}  // namespace acc::launcher
