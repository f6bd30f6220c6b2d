// Accelerate config files (config/src/cluster_config.cc): parse_config, the entry point of
// load_config and of every launch with --config_file, on the bytes after the first: YAML, or JSON
// when the first byte is 'j' (a .json path reads numbers with json.load's rules). Then every typed
// accessor of what it accepted. A config it accepted must be written back (to_yaml) into one it
// accepts again. ConfigError is the parser's answer to bad input; anything else escaping is a bug.

#include <cstddef>
#include <cstdint>
#include <string>

#include "acc/common/error.h"
#include "acc/config/cluster_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string path = data[0] == 'j' ? "fuzz.json" : "fuzz.yaml";
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  acc::config::ClusterConfig config;
  try {
    config = acc::config::parse_config(text, path);
  } catch (const acc::ConfigError&) {
    return 0;
  }
  config.compute_environment();
  config.distributed_type();
  config.mixed_precision();
  config.use_cpu();
  config.debug();
  config.num_processes();
  config.machine_rank();
  config.num_machines();
  config.gpu_ids();
  config.main_process_ip();
  config.main_process_port();
  config.rdzv_backend();
  config.same_network();
  config.enable_cpu_affinity();
  config.section("fsdp_config");
  config.section("deepspeed_config");
  const std::string written = acc::config::to_yaml(config);
  acc::config::to_json(config);
  try {
    acc::config::parse_config(written, "written.yaml");
  } catch (const acc::ConfigError& e) {
    // What we write, we read: a config accepted once is accepted as written back.
    __builtin_trap();
  }
  return 0;
}
