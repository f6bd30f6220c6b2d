#pragma once

// What the runtime's process tests share: running a shell command (acc-launch over a worker
// program) and keeping its output and exit status, the command line of such a launch, a file's
// bytes, and a temporary directory. Header-only: each test file is its own translation unit of
// runtime_tests.

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace acc::testing {

struct Result {
  int exit_code;
  std::string output;  // stdout and stderr together
};

inline Result run(const std::string& command) {
  Result result{-1, ""};
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

#ifdef ACC_LAUNCH_BIN
// "acc-launch --nproc_per_node N EXTRA WORKER ARGS" (in the test binaries that know acc-launch).
inline std::string launch_command(int nproc, const std::string& worker, const std::string& args,
                                  const std::string& extra = "") {
  return std::string(ACC_LAUNCH_BIN) + " --nproc_per_node " + std::to_string(nproc) + " " + extra +
         " " + worker + " " + args;
}
#endif

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/acc-runtime-test-XXXXXX";
    path_ = mkdtemp(pattern);
  }
  // Not std::filesystem::remove_all: a PyTorch wheel's libtorch.so brings its own, which crashes.
  ~TempDir() { [[maybe_unused]] int rc = std::system(("rm -rf '" + path_ + "'").c_str()); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// As under acc-launch: ACC_CHECKPOINT_MEMORY names `dir` (the node's memory for checkpoints) while
// it lives.
class MemoryUnderTest {
 public:
  explicit MemoryUnderTest(const std::string& dir) { setenv(kVar, dir.c_str(), 1); }
  ~MemoryUnderTest() { unsetenv(kVar); }
  MemoryUnderTest(const MemoryUnderTest&) = delete;
  MemoryUnderTest& operator=(const MemoryUnderTest&) = delete;

 private:
  static constexpr char kVar[] = "ACC_CHECKPOINT_MEMORY";
};

}  // namespace acc::testing
