#pragma once

// Runs the real acc-launch binary as a user would, and looks at what it left behind in /proc:
// the one harness of the tests that drive the binary (tests/launcher, tests/config,
// tests/integration). A run is hermetic: no scheduler (SLURM, mpirun, Kubernetes), torchrun
// variable or `accelerate config` file of the machine running the tests leaks into it.

#include <sys/types.h>

#include <chrono>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace acc::testing {

struct LaunchRun {
  int exit_code = -1;  // 128+N when ended by signal N
  std::string out;
  std::string err;
  std::chrono::milliseconds elapsed{0};
};

// The built binaries (absolute paths).
std::string launcher_binary();
std::string worker_binary();

// Runs acc-launch with `args` (and `extra_env`; an empty value unsets) to the end (a hang guard
// kills it after `timeout`), stdin at end of file.
LaunchRun run_launcher(const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& extra_env = {},
                       std::chrono::seconds timeout = std::chrono::seconds(60));
// The same with `input` on its stdin (answers to `acc-launch config`'s questions).
LaunchRun run_launcher(const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& extra_env,
                       const std::string& input,
                       std::chrono::seconds timeout = std::chrono::seconds(60));

// Starts acc-launch in the background, output to files in `dir`. Returns its pid.
pid_t start_launcher(const std::vector<std::string>& args, const std::string& dir);
// The same with `extra_env` (an empty value unsets).
pid_t start_launcher(const std::vector<std::string>& args, const std::string& dir,
                     const std::map<std::string, std::string>& extra_env);
// Waits for the launcher started above; returns its exit status as run_launcher does.
int wait_launcher(pid_t pid, std::chrono::seconds timeout = std::chrono::seconds(60));

// Waits until `path` exists.
bool wait_for_file(const std::string& path, std::chrono::seconds timeout);

// Pids of live (not zombie) processes whose command line mentions `marker`.
std::vector<pid_t> processes_mentioning(const std::string& marker);

// Exited children of the test process that nobody reaped. The test process is a subreaper:
// whatever the launcher orphans comes here, so after the launcher has been reaped this is
// empty unless it left something behind.
std::vector<pid_t> zombie_children();

// Reaps every child that has exited (the test process is a subreaper, so orphans come here).
void reap_exited_children();

// Reaps children until this process has none left, or `limit` passes; true when none is left.
// After the launcher is killed its watchdog, workers and their children come here one by one:
// an exiting process's cmdline is already empty while it is not yet a zombie, so "nothing
// mentions the marker" alone does not mean "nothing is left to reap".
bool reap_until_no_children(std::chrono::milliseconds limit);

// A fresh empty directory under the test temp dir.
std::string make_temp_dir();

// A loopback port nobody listens on now (bound, read and released: another process may take it).
int unused_port();

// A fresh directory, removed with everything in it when the object goes.
class TempDir {
 public:
  TempDir() : path_(make_temp_dir()) {}
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // Writes `text` to the file `name` in the directory; returns its path.
  std::string file(const std::string& name, const std::string& text) const;

 private:
  std::string path_;
};

// The Accelerate config files of ../shared next to the source tree (real users' files).
std::string shared_configs();

// The PyTorch peers that Python worker tests run under: Debian's 1.13 (/usr/bin/python3) and
// PyTorch 2.x from PyPI (the ACC_TORCH2_PYTHON of the build, scripts/install-python-peers.sh).
struct TorchPython {
  std::string name;    // "torch1_13", "torch2": a test-name suffix
  std::string python;  // the interpreter ("" where the build has none)
};
std::vector<TorchPython> torch_pythons();
// GoogleTest prints a parameter through this (its name and interpreter, not its bytes).
void PrintTo(const TorchPython& peer, std::ostream* os);
std::string torch2_python();
// Whether `python` imports torch.distributed (asked once per interpreter). Tests skip without.
bool python_has_torch(const std::string& python);

// What `acc-launch --dry_run` printed: its header, each worker's KEY=VALUE lines and commands.
struct DryRun {
  std::string header;  // "# acc-launch dry run: ..."
  std::vector<std::map<std::string, std::string>> workers;
  std::vector<std::string> commands;
};
DryRun parse_dry_run(const std::string& out);

// `launcher_args`, then `--no_python`, the test worker binary and `worker_args`.
std::vector<std::string> worker(std::vector<std::string> launcher_args,
                                const std::vector<std::string>& worker_args);

// Waits (10 s at most) until no process mentions `marker`, then expects none and no unreaped
// child of the test process; reaps the exited ones.
void expect_nothing_left(const std::string& marker);

// The whole of a file ("" when it cannot be read).
std::string read_text(const std::string& path);

// Lines of `text`.
std::vector<std::string> lines_of(const std::string& text);

}  // namespace acc::testing
