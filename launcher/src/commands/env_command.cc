// `acc-launch env`: what a bug report needs (accelerate/commands/env.py), found without loading
// LibTorch or CUDA: libraries and headers are looked up on disk.

#include <sys/utsname.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "acc/common/error.h"
#include "acc/config/cluster_config.h"
#include "acc/config/paths.h"
#include "acc/launcher/cli/cli.h"
#include "acc/launcher/cli/version.h"
#include "acc/launcher/host/host.h"
#include "acc/launcher/host/python_torch.h"
#include "cli/flag_spelling.h"
#include "commands/command_line.h"
#include "commands/commands.h"
#include "process/proc.h"

namespace acc::launcher {
namespace {

namespace fs = std::filesystem;
namespace cfg = acc::config;

std::vector<std::string> library_dirs(const std::map<std::string, std::string>& environment) {
  auto variable = [&](const char* name) -> const char* {
    auto it = environment.find(name);
    return it == environment.end() ? nullptr : it->second.c_str();
  };
  std::vector<std::string> dirs;
  if (const char* ld = variable("LD_LIBRARY_PATH")) {
    std::stringstream in(ld);
    std::string dir;
    while (std::getline(in, dir, ':'))
      if (!dir.empty()) dirs.push_back(dir);
  }
  // The machine's own multiarch and CUDA target directories only: an aarch64 acc-launch on a
  // host that has x86-64 libraries too (multiarch, an emulator) must not report those.
#if defined(__aarch64__)
  const char* multiarch = "/usr/lib/aarch64-linux-gnu";
  const char* cuda_target = "/usr/local/cuda/targets/sbsa-linux/lib";
#else
  const char* multiarch = "/usr/lib/x86_64-linux-gnu";
  const char* cuda_target = "/usr/local/cuda/targets/x86_64-linux/lib";
#endif
  for (const char* dir : {"/usr/local/lib", multiarch, "/usr/lib", "/usr/local/cuda/lib64",
                          cuda_target, "/opt/libtorch/lib", "/usr/local/libtorch/lib"})
    dirs.push_back(dir);
  if (const char* torch = variable("Torch_DIR"))
    dirs.push_back(std::string(torch) + "/../../../lib");
  // A pip-installed PyTorch ships its libraries in site-packages/torch/lib.
  std::error_code ec;
  for (const char* root : {"/usr/lib", "/usr/local/lib"}) {
    for (const auto& entry : fs::directory_iterator(root, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("python3", 0) != 0) continue;
      for (const char* site : {"dist-packages", "site-packages"})
        dirs.push_back((entry.path() / site / "torch" / "lib").string());
    }
  }
  return dirs;
}

// The first file in `dirs` whose name starts with `prefix` (libnccl.so matches libnccl.so.2).
std::string find_library(const std::vector<std::string>& dirs, const std::string& prefix) {
  std::error_code ec;
  for (const std::string& dir : dirs)
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.path().filename().string().rfind(prefix, 0) == 0) return entry.path().string();
  return "";
}

std::string find_header(const std::vector<std::string>& candidates) {
  std::error_code ec;
  for (const std::string& path : candidates)
    if (fs::exists(path, ec)) return path;
  return "";
}

std::string found(const std::string& path) {
  return path.empty() ? "not found" : "found (" + path + ")";
}

std::string self_path() {
  const std::string self = proc::Reader::machine().executable();
  return self.empty() ? "unknown" : self;
}

// The interpreter a launch of a .py script runs, and why, as the launch picks it (cli.h:
// --python, $PYTHON_EXEC, the python beside acc-launch, python3 on PATH): "/venv/bin/python
// (beside acc-launch)".
LaunchOptions worker_python(const std::string& python) {
  std::vector<std::string> args;
  if (!python.empty()) args = {"--python", python};
  args.push_back("train.py");
  ParseResult parsed = parse_launch_args(args, proc::Reader::machine().executable());
  if (!parsed.exit_now) return parsed.options;
  // A launch would refuse a PET_* variable: the interpreter is found all the same.
  LaunchOptions options;
  options.python = python;
  if (python.empty())
    resolve_python(options, "");
  else
    options.python_source = "--python";
  return options;
}

// Which PyTorch that interpreter imports, and from where (host/python_torch.h).
std::string python_torch(const std::string& python,
                         const std::map<std::string, std::string>& environment) {
  const std::optional<PythonTorch> torch = find_python_torch(python, environment);
  if (!torch) return "not found (the workers get renamed variables under both names)";
  return torch->version_text + " (" + torch->version_py + ")";
}

}  // namespace

int run_env_command(const std::vector<std::string>& args) {
  std::string config_file;
  std::string python;
  CLI::App app{"Print what a bug report needs: versions, libraries, GPUs, CPUs, memory, config",
               "acc-launch env"};
  app.add_option(flag_spellings("config_file"), config_file,
                 "the config file to show (default: Accelerate's)")
      ->type_name("FILE");
  app.add_option(flag_spellings("python"), python,
                 "the workers' interpreter whose PyTorch to show (default: the one a launch of a "
                 ".py script runs)")
      ->type_name("PYTHON");
  if (std::optional<int> exit_code = parse_command_line(app, args)) return *exit_code;
  utsname host{};
  ::uname(&host);
  const HostInfo machine = detect_host();
  const std::vector<std::string> dirs = library_dirs(machine.environment);
  const std::vector<std::string>& gpus = machine.gpu_names;

  std::ostringstream out;
  out << "\nCopy-and-paste the text below in your GitHub issue\n\n";
  out << "- `acc-launch` version: " << kVersion << "\n";
  out << "- Build: " << __VERSION__ << ", C++" << (__cplusplus / 100 % 100) << "\n";
  out << "- Platform: " << host.sysname << " " << host.release << " " << host.machine << "\n";
  out << "- `acc-launch` location: " << self_path() << "\n";
  const LaunchOptions workers = worker_python(python);
  out << "- Workers' Python: " << workers.python << " (" << workers.python_source << ")\n";
  out << "- Workers' PyTorch: " << python_torch(workers.python, machine.environment) << "\n";
  out << "- LibTorch: " << found(find_library(dirs, "libtorch_cpu.so")) << "\n";
  out << "- LibTorch headers: "
      << found(find_header({"/usr/include/torch/csrc/api/include/torch/torch.h",
                            "/usr/local/include/torch/csrc/api/include/torch/torch.h",
                            "/opt/libtorch/include/torch/csrc/api/include/torch/torch.h"}))
      << "\n";
  out << "- CUDA runtime: " << found(find_library(dirs, "libcudart.so")) << "\n";
  out << "- NCCL: " << found(find_library(dirs, "libnccl.so")) << "\n";
  out << "- GPUs: " << machine.gpu_count
      << (machine.gpu_vendor.empty() ? "" : " " + machine.gpu_vendor);
  for (size_t i = 0; i < gpus.size(); ++i)
    out << (i ? ", " : " (") << gpus[i] << (i + 1 == gpus.size() ? ")" : "");
  out << "\n";
  out << "- CPU cores: " << machine.cpu_count.get() << " logical, " << machine.physical_cores.get()
      << " physical\n";
  char ram[32];
  std::snprintf(ram, sizeof ram, "%.2f", machine.memory_gb.get());
  out << "- System RAM: " << ram << " GB\n";

  const bool passed = !config_file.empty();
  const std::string path = passed ? config_file : cfg::default_config_path();
  out << "- `Accelerate` " << (passed ? "config passed" : "default config") << ": ";
  if (!cfg::file_exists(path)) {
    out << "Not found (" << path << ")\n";
    std::cout << out.str();
    return 0;
  }
  out << path << "\n";
  std::cout << out.str() << std::flush;
  const cfg::ClusterConfig config = cfg::load_config(path);  // a bad file: exit 2 with its lines
  for (const auto& [key, value] : config.root().entries)
    std::cout << "\t- " << key << ": " << value.python_str() << "\n";
  return 0;
}

}  // namespace acc::launcher
