#include "accelerate_env.h"

namespace acc::launcher {

EnvList accelerate_env(const LaunchOptions& options) {
  EnvList env;
  env.emplace_back("ACCELERATE_MIXED_PRECISION", options.mixed_precision.value_or("no"));
  if (options.cpu) env.emplace_back("ACCELERATE_USE_CPU", "True");
  if (options.debug) env.emplace_back("ACCELERATE_DEBUG_MODE", "true");
  // accelerate launch always exports the dynamo defaults; scripts that read them expect them.
  env.emplace_back("ACCELERATE_DYNAMO_BACKEND", "NO");
  env.emplace_back("ACCELERATE_DYNAMO_MODE", "default");
  env.emplace_back("ACCELERATE_DYNAMO_USE_FULLGRAPH", "False");
  env.emplace_back("ACCELERATE_DYNAMO_USE_DYNAMIC", "False");
  env.emplace_back("ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION", "False");
  if (options.gpu_ids && *options.gpu_ids != "all")
    env.emplace_back("CUDA_VISIBLE_DEVICES", *options.gpu_ids);
  if (options.num_cpu_threads_per_process)
    env.emplace_back("OMP_NUM_THREADS", std::to_string(*options.num_cpu_threads_per_process));
  for (const auto& entry : options.extra_env) env.push_back(entry);
  return env;
}

}  // namespace acc::launcher
