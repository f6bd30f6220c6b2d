#include "hangs/python_stack_hook.h"

#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "acc/common/error.h"
#include "acc/common/files.h"
#include "acc/common/progress_file.h"
#include "hangs/python_files.h"

namespace acc::launcher {
namespace {

// chain=False on purpose: with chain=True faulthandler re-raises the signal to the handler it
// replaced, here the default one, which ends the process. The file is opened per process (its
// name has the pid), so a Python child that inherits the environment writes its own file and
// never truncates its parent's.
constexpr const char* kSitecustomize =
    R"PY(# Written by acc-launch: on the signal in ACC_STACK_SIGNAL, every thread's traceback goes to
# $ACC_STACK_DIR/python_stacks.<pid>.txt (read by the launcher's hang report and
# `acc-launch stacks`); torch.distributed's calls are recorded in $ACC_PROGRESS_FILE (acc_launch/).
# Then the sitecustomize this one shadows, if any, runs as usual.
import os as _acc_os
import sys as _acc_sys


def _acc_register_stack_dump():
    directory = _acc_os.environ.get("ACC_STACK_DIR")
    signal_number = _acc_os.environ.get("ACC_STACK_SIGNAL")
    if not directory or not signal_number:
        return
    try:
        import faulthandler
        stream = open(_acc_os.path.join(directory, "python_stacks.%d.txt" % _acc_os.getpid()), "w")
        faulthandler.register(int(signal_number), file=stream, all_threads=True, chain=False)
        _acc_sys.modules[__name__]._acc_stack_stream = stream  # kept open for the handler
    except Exception:
        pass


def _acc_run_shadowed_sitecustomize():
    import importlib.machinery
    import importlib.util
    here = _acc_os.path.dirname(_acc_os.path.abspath(__file__))
    rest = [p for p in _acc_sys.path if _acc_os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def _acc_start_recorder():
    # acc_launch/, beside this file: torch.distributed's calls into $ACC_PROGRESS_FILE.
    if not _acc_os.environ.get("ACC_PROGRESS_FILE"):
        return
    try:
        import acc_launch
        acc_launch._hook._start()
    except Exception:
        pass


def _acc_serve_as_standby():
    # A warm worker's standby waits here, torch imported, for the worker it becomes (acc_launch/).
    if "ACC_STANDBY_FD" in _acc_os.environ:
        import acc_launch
        acc_launch._hook._serve_as_standby()


_acc_serve_as_standby()
_acc_register_stack_dump()
# A forked child (a DataLoader worker) runs no sitecustomize: it would dump into its parent's file.
_acc_os.register_at_fork(after_in_child=_acc_register_stack_dump)
_acc_start_recorder()
_acc_run_shadowed_sitecustomize()
)PY";

}  // namespace

int stack_dump_signal() {
  return SIGRTMIN + 7;
}

std::string python_stack_file(const std::string& worker_dir, int pid) {
  return worker_dir + "/python_stacks." + std::to_string(pid) + ".txt";
}

std::string progress_file_path(const std::string& worker_dir) {
  return worker_dir + "/progress";
}

std::string install_python_stack_hook(const std::string& run_dir) {
  const std::string dir = run_dir + "/python";
  const std::string package = dir + "/acc_launch";
  ::mkdir(dir.c_str(), 0777);  // a failure shows as the first file's
  ::mkdir(package.c_str(), 0777);
  std::vector<std::pair<std::string, std::string>> files = {
      {dir + "/sitecustomize.py", kSitecustomize}};
  for (int i = 0; i < kAccLaunchPackageSize; ++i)
    files.emplace_back(package + "/" + kAccLaunchPackage[i].name, kAccLaunchPackage[i].text);
  for (const auto& [path, text] : files) {
    const int error = write_file(path, text);
    ACC_CHECK(error == 0, LaunchError, "cannot write ", path, ": ", std::strerror(error));
  }
  return dir;
}

EnvList python_stack_hook_env(const std::string& hook_dir, const std::string& worker_dir,
                              const std::string& pythonpath, bool has_faulthandler_setting) {
  EnvList env;
  env.emplace_back("PYTHONPATH", pythonpath.empty() ? hook_dir : hook_dir + ":" + pythonpath);
  env.emplace_back("ACC_STACK_DIR", worker_dir);
  env.emplace_back("ACC_STACK_SIGNAL", std::to_string(stack_dump_signal()));
  if (!has_faulthandler_setting) env.emplace_back("PYTHONFAULTHANDLER", "1");
  return env;
}

}  // namespace acc::launcher
