#pragma once

// Helpers for the config tests: temporary directories, files, and running the real acc-launch.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace acc::config::testing {

inline std::string binary() {
  return std::string(ACC_BINARY_DIR) + "/launcher/acc-launch";
}

inline std::string shared_configs() {
  return std::string(ACC_SOURCE_DIR) + "/../shared/accelerate-configs";
}

// A fresh directory, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "acc-config-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name, const std::string& text) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string drain(int fd) {
  std::string text;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<size_t>(n));
  return text;
}

// Runs acc-launch with `args`, the test's environment plus `env` (an empty value unsets), and
// `input` on stdin. stdout and stderr go to files, so a large output cannot block the child.
inline RunResult run(const std::vector<std::string>& args,
                     const std::map<std::string, std::string>& env = {},
                     const std::string& input = "") {
  TempDir io;
  const std::string in = io.file("in", input), out = io.path() + "/out", err = io.path() + "/err";
  const pid_t child = ::fork();
  if (child == 0) {
    // Hermetic: no scheduler (SLURM, mpirun, Kubernetes), torchrun variables or default config
    // file of the machine running the tests leaks into the launch.
    std::vector<std::string> leaking;
    for (char** e = environ; *e; ++e) {
      const std::string entry = *e;
      const std::string name = entry.substr(0, entry.find('='));
      for (const char* prefix : {"SLURM_", "OMPI_", "PMI_", "PMIX_", "PET_", "KUBERNETES_"})
        if (name.rfind(prefix, 0) == 0) leaking.push_back(name);
      for (const char* exact : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"})
        if (name == exact) leaking.push_back(name);
    }
    for (const std::string& name : leaking) ::unsetenv(name.c_str());
    ::setenv("HF_HOME", "/nonexistent/acc-launch-test-home", 1);
    for (const auto& [k, v] : env) {
      if (v.empty())
        ::unsetenv(k.c_str());
      else
        ::setenv(k.c_str(), v.c_str(), 1);
    }
    std::freopen(in.c_str(), "r", stdin);
    std::freopen(out.c_str(), "w", stdout);
    std::freopen(err.c_str(), "w", stderr);
    std::vector<std::string> argv = {binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> raw;
    for (auto& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    ::execv(raw[0], raw.data());
    _exit(127);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

// One worker of a dry run: its KEY=VALUE lines.
struct DryRun {
  std::string header;  // "# acc-launch dry run: ..."
  std::vector<std::map<std::string, std::string>> workers;
  std::vector<std::string> commands;
};

inline DryRun parse_dry_run(const std::string& out) {
  DryRun d;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# acc-launch dry run:", 0) == 0) {
      d.header = line;
    } else if (line.rfind("# rank ", 0) == 0) {
      d.workers.emplace_back();
    } else if (line.rfind("command:", 0) == 0) {
      d.commands.push_back(line);
    } else if (!d.workers.empty() && line.find('=') != std::string::npos) {
      const size_t eq = line.find('=');
      d.workers.back()[line.substr(0, eq)] = line.substr(eq + 1);
    }
  }
  return d;
}

}  // namespace acc::config::testing
