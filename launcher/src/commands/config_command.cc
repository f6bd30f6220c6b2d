// `acc-launch config`: the questionnaire and `config default|show|validate|update`
// (accelerate/commands/config/{config,default,update}.py).

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "acc/common/error.h"
#include "acc/config/cluster_config.h"
#include "acc/config/paths.h"
#include "acc/config/questionnaire.h"
#include "acc/launcher/host/host.h"
#include "cli/flag_spelling.h"
#include "commands/command_line.h"
#include "commands/commands.h"
#include "output/log.h"

namespace acc::launcher {
namespace {

namespace cfg = acc::config;

const char* kFooter =
    "FILE defaults to $HF_HOME/accelerate/default_config.yaml (else $XDG_CACHE_HOME/huggingface/\n"
    "accelerate, else ~/.cache/huggingface/accelerate), as Accelerate's. Without a subcommand:\n"
    "ask the questions and write FILE.";

struct ConfigArgs {
  std::string config_file;
  std::string mixed_precision = "no";
};

int wizard(const ConfigArgs& a) {
  std::unique_ptr<cfg::Prompter> prompter = cfg::make_prompter(STDIN_FILENO, STDOUT_FILENO);
  cfg::ClusterConfig config = cfg::run_questionnaire(*prompter, {detect_host().gpu_count});
  // Accelerate creates the cache directory for the default file, and writes an explicit path as
  // is (its directory must exist).
  const std::string path = a.config_file.empty() ? cfg::default_config_path() : a.config_file;
  cfg::save_config(config, path, a.config_file.empty());
  std::cout << "accelerate configuration saved at " << path << std::endl;
  return 0;
}

int write_default(const ConfigArgs& a) {
  const std::string path = a.config_file.empty() ? cfg::default_config_path() : a.config_file;
  if (cfg::file_exists(path)) {
    std::cout << "Configuration already exists at " << path
              << ", will not override. Run `acc-launch config` manually or pass a different "
                 "`--config_file`."
              << std::endl;
    return 0;
  }
  // write_basic_config(): every local GPU, else one CPU process; always JSON, even in a .yaml.
  const int gpus = detect_host().gpu_count;
  cfg::ClusterConfig config;
  config.set("compute_environment", cfg::Value::of_string("LOCAL_MACHINE"));
  config.set("debug", cfg::Value::of_bool(false));
  config.set("distributed_type", cfg::Value::of_string(gpus > 1 ? "MULTI_GPU" : "NO"));
  config.set("downcast_bf16", cfg::Value::of_bool(false));
  config.set("enable_cpu_affinity", cfg::Value::of_bool(false));
  config.set("machine_rank", cfg::Value::of_int(0));
  config.set("main_training_function", cfg::Value::of_string("main"));
  config.set("mixed_precision", cfg::Value::of_string(a.mixed_precision));
  config.set("num_machines", cfg::Value::of_int(1));
  config.set("num_processes", cfg::Value::of_int(gpus > 0 ? gpus : 1));
  config.set("rdzv_backend", cfg::Value::of_string("static"));
  config.set("same_network", cfg::Value::of_bool(false));
  config.set("tpu_use_cluster", cfg::Value::of_bool(false));
  config.set("tpu_use_sudo", cfg::Value::of_bool(false));
  config.set("use_cpu", cfg::Value::of_bool(gpus == 0));
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::ofstream out(path, std::ios::trunc);
  out << cfg::to_json(config);
  out.close();
  ACC_CHECK(out.good(), ConfigError, "cannot write the config file ", path,
            "; check that its directory is writable");
  std::cout << "accelerate configuration saved at " << path << std::endl;
  return 0;
}

// The config file named (or the default one), which must not be a directory.
std::string chosen_path(const ConfigArgs& a) {
  const std::string path = a.config_file.empty() ? cfg::default_config_path() : a.config_file;
  std::error_code error;
  ACC_CHECK(!std::filesystem::is_directory(path, error), ConfigError, "the config file ", path,
            " is a directory; name the config file itself, or write one with `acc-launch config`");
  return path;
}

std::string existing_path(const ConfigArgs& a) {
  const std::string path = chosen_path(a);
  ACC_CHECK(cfg::file_exists(path), ConfigError, "the config file ", path,
            " does not exist; write one with `acc-launch config` or `acc-launch config default`");
  return path;
}

void print_warnings(const cfg::ClusterConfig& config) {
  for (const std::string& warning : config.warnings()) log::warn(warning);
}

int show_file(const ConfigArgs& a) {
  const cfg::ClusterConfig config = cfg::load_config(existing_path(a));
  print_warnings(config);
  std::cout << "# " << config.path() << "\n" << cfg::to_yaml(config);
  return 0;
}

int validate_file(const ConfigArgs& a) {
  const cfg::ClusterConfig config = cfg::load_config(existing_path(a));
  print_warnings(config);
  const int n = config.num_processes();
  std::cout << config.path() << ": valid: distributed_type " << config.distributed_type() << ", "
            << (n == -1 ? std::string("num_processes not set (pass --num_processes)")
                        : std::to_string(n) + " process(es)")
            << " on " << config.num_machines() << " machine(s), mixed precision "
            << config.mixed_precision().value_or("no") << std::endl;
  return 0;
}

int update_file(const ConfigArgs& a) {
  const std::string path = chosen_path(a);
  ACC_CHECK(cfg::file_exists(path), ConfigError, "The passed config file located at ", path,
            " doesn't exist; pass an existing file to --config_file");
  const cfg::ClusterConfig config = cfg::load_config(path);
  print_warnings(config);
  cfg::save_config(config, path, false);
  std::cout << "Successfully updated the configuration file at " << path << "." << std::endl;
  return 0;
}

}  // namespace

int run_config_command(const std::vector<std::string>& args) {
  ConfigArgs a;
  CLI::App app{"Write, show, check or update the Accelerate config file", "acc-launch config"};
  app.require_subcommand(0, 1);
  // --config_file goes on each subcommand too, so that it may come before or after the name.
  auto config_file = [&](CLI::App& command) {
    command.add_option(flag_spellings("config_file"), a.config_file, "the config file")
        ->type_name("FILE");
  };
  config_file(app);
  CLI::App* defaults =
      app.add_subcommand("default", "write a config for this machine without asking");
  config_file(*defaults);
  defaults->add_option(flag_spellings("mixed_precision"), a.mixed_precision,
                       "no (the default), fp16, bf16 or fp8");
  CLI::App* show = app.add_subcommand("show", "print the config file as YAML");
  config_file(*show);
  CLI::App* validate = app.add_subcommand("validate", "check a config file; say what it launches");
  config_file(*validate);
  validate->add_option("FILE", a.config_file, "the config file (or --config_file)");
  CLI::App* update =
      app.add_subcommand("update", "rewrite a config file of an older Accelerate version");
  config_file(*update);
  app.footer(kFooter);  // after the subcommands, which would inherit it
  if (std::optional<int> exit_code = parse_command_line(app, args)) return *exit_code;

  ACC_CHECK(a.mixed_precision == "no" || a.mixed_precision == "fp16" ||
                a.mixed_precision == "bf16" || a.mixed_precision == "fp8",
            ConfigError, "--mixed_precision ", a.mixed_precision,
            ": expected no, fp16, bf16 or fp8");
  if (*defaults) return write_default(a);
  if (*show) return show_file(a);
  if (*validate) return validate_file(a);
  if (*update) return update_file(a);
  return wizard(a);
}

}  // namespace acc::launcher
