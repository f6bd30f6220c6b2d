#include "hangs/stack_dump.h"

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "hangs/python_stack_hook.h"
#include "process/proc.h"

#include "acc/common/strings.h"

namespace acc::launcher {
namespace {

std::string read_text(const std::string& path, off_t from = 0) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return "";
  file.seekg(from);
  std::ostringstream out;
  out << file.rdbuf();
  return out.str();
}

off_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Each thread's state and the kernel function it sleeps in: all there is without a debugger.
WorkerStack proc_stack(proc::Reader& proc, int pid, const std::string& why) {
  WorkerStack stack;
  stack.source = "/proc (" + why + ")";
  for (int tid : proc.threads(pid)) {
    const proc::Stat stat = proc.thread_stat(pid, tid);
    const std::string state = stat.ok ? stat.state : "?";
    std::string wchan = acc::trim(proc.thread_file(pid, tid, "wchan"));
    if (wchan.empty() || wchan == "0") wchan = "-";
    const std::string line = "thread " + acc::trim(proc.thread_file(pid, tid, "comm")) +
                             (tid == pid ? " (main)" : "") + ": state " + state + ", wchan " +
                             wchan;
    stack.lines.push_back(line);
    if (tid == pid) stack.main_thread.push_back(line);
  }
  if (stack.lines.empty()) stack.lines.push_back("(process gone)");
  return stack;
}

struct Collection {
  StackTarget target;
  enum class Kind { kPython, kTool, kDone } kind = Kind::kDone;
  std::string file;
  off_t start = 0;
  off_t last_size = -1;
  int stable_polls = 0;
  pid_t tool = -1;
  std::string tool_name;
  WorkerStack result;
};

void start(Os& os, Collection& c, const std::string& eu_stack, const std::string& all_gdb) {
  const std::string gdb = c.target.descendant ? "" : all_gdb;
  const int pid = c.target.pid;
  if (os.proc().catches_signal(pid, stack_dump_signal())) {
    c.kind = Collection::Kind::kPython;
    c.file = python_stack_file(c.target.worker_dir, pid);
    c.start = file_size(c.file);
    os.signal_process(pid, stack_dump_signal());
    return;
  }
  std::vector<std::string> argv;
  if (!eu_stack.empty()) {
    c.tool_name = "eu-stack";
    // -s: each frame's source file:line where debug information has it.
    argv = {eu_stack, "-s", "-p", std::to_string(pid)};
  } else if (!gdb.empty()) {
    c.tool_name = "gdb";
    argv = {gdb,
            "-nx",
            "-batch",
            "-iex",
            "set debuginfod enabled off",
            "-p",
            std::to_string(pid),
            "-ex",
            "thread apply all bt"};
  }
  if (!argv.empty()) {
    c.file = c.target.worker_dir + "/native_stack." + std::to_string(pid) + ".txt";
    c.tool = os.start_program(argv, c.file);
    if (c.tool > 0) {
      c.kind = Collection::Kind::kTool;
      return;
    }
  }
  c.result = proc_stack(os.proc(), pid,
                        !argv.empty() ? c.tool_name + " did not start"
                        : c.target.descendant && !all_gdb.empty()
                            ? "no eu-stack; gdb is kept for the workers"
                            : "neither eu-stack nor gdb is installed");
}

void poll(Os& os, Collection& c) {
  if (c.kind == Collection::Kind::kPython) {
    // faulthandler writes from its signal handler; the dump is whole once the file stops growing.
    const off_t size = file_size(c.file);
    if (size > c.start && size == c.last_size && ++c.stable_polls >= 3) {
      c.result = parse_faulthandler(read_text(c.file, c.start));
      c.kind = Collection::Kind::kDone;
    }
    if (size != c.last_size) c.stable_polls = 0;
    c.last_size = size;
  } else if (c.kind == Collection::Kind::kTool) {
    if (!os.exit_status(c.tool)) return;
    const std::string text = read_text(c.file);
    c.result = c.tool_name == "gdb" ? parse_gdb(text) : parse_eu_stack(text, c.target.pid);
    if (c.result.lines.empty())
      c.result = proc_stack(os.proc(), c.target.pid,
                            c.tool_name + " could not attach (ptrace not allowed?)");
    c.kind = Collection::Kind::kDone;
  }
}

void give_up(Os& os, Collection& c) {
  if (c.kind == Collection::Kind::kPython) {
    c.result = proc_stack(os.proc(), c.target.pid, "the Python traceback did not come in time");
  } else if (c.kind == Collection::Kind::kTool) {
    os.signal_process(c.tool, SIGKILL);
    os.reap(c.tool);
    // A debugger killed while attached may leave the worker stopped.
    os.signal_process(c.target.pid, SIGCONT);
    c.result = proc_stack(os.proc(), c.target.pid, c.tool_name + " took too long");
  }
  c.kind = Collection::Kind::kDone;
}

// "#3  0x00007f... in ns::f(int) (x=1, y=0x...) at file.cc:12" -> "ns::f(int) at file.cc:12";
// "... from /lib/x86_64-linux-gnu/libc.so.6" keeps the library's name alone.
std::string normalize_native_frame(std::string frame) {
  if (starts_with(frame, "#")) {
    const size_t space = frame.find_first_of(" \t");
    frame = acc::trim(space == std::string::npos ? "" : frame.substr(space));
  }
  if (starts_with(frame, "0x")) {
    const size_t in = frame.find(" in ");
    frame = in == std::string::npos ? frame.substr(frame.find(' ') + 1) : frame.substr(in + 4);
  }
  std::string where;
  for (const char* marker : {" at ", " from "}) {
    const size_t at = frame.rfind(marker);
    if (at != std::string::npos) {
      where = frame.substr(at);
      frame.resize(at);
      if (std::string(marker) == " from ") {
        const size_t slash = where.rfind('/');
        if (slash != std::string::npos) where = " from " + where.substr(slash + 1);
      }
      break;
    }
  }
  const size_t args = frame.rfind(" (");
  if (args != std::string::npos) frame.resize(args);
  frame = acc::trim(frame);
  // A frame without a symbol is only an address, different in every process (ASLR).
  if (starts_with(frame, "0x") || frame.empty()) frame = "??";
  return frame + where;
}

}  // namespace

std::vector<WorkerStack> collect_stacks(const std::vector<StackTarget>& targets,
                                        std::chrono::milliseconds budget, Os& os) {
  const auto deadline = os.now() + budget;
  const std::string eu_stack = os.find_program("eu-stack");
  const std::string gdb = os.find_program("gdb");
  std::vector<Collection> collections(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    collections[i].target = targets[i];
    start(os, collections[i], eu_stack, gdb);
  }
  auto pending = [&] {
    return std::any_of(collections.begin(), collections.end(),
                       [](const Collection& c) { return c.kind != Collection::Kind::kDone; });
  };
  while (pending() && os.now() < deadline) {
    os.sleep_for(std::chrono::milliseconds(20));
    for (Collection& c : collections) poll(os, c);
  }
  std::vector<WorkerStack> stacks;
  for (Collection& c : collections) {
    give_up(os, c);
    if (c.kind == Collection::Kind::kDone && c.result.source.empty()) c.result.source = "?";
    stacks.push_back(std::move(c.result));
  }
  return stacks;
}

namespace {

// The recorder's wrapper (acc_launch/_hook.py's `recorded`) stands between torch's function and the
// user's line in every recorded call: the launcher's frame, not the program's.
bool is_recorder_frame(const std::string& line) {
  return line.find("acc_launch/_hook.py\", line ") != std::string::npos && line.size() >= 12 &&
         line.compare(line.size() - 12, 12, " in recorded") == 0;
}

}  // namespace

WorkerStack parse_faulthandler(std::string_view text) {
  WorkerStack stack;
  stack.source = "python faulthandler";
  bool in_main = false;
  for (const std::string& raw : split_lines(text)) {
    std::string line = acc::trim(raw);
    if (line.empty()) continue;
    if (starts_with(line, "Thread 0x") || starts_with(line, "Current thread 0x")) {
      // The signal runs its handler in the main thread, which faulthandler calls "current".
      in_main = starts_with(line, "Current thread");
      stack.lines.push_back(in_main ? "main thread:" : "thread:");
      continue;
    }
    if (is_recorder_frame(line)) continue;
    stack.lines.push_back("  " + line);
    if (in_main) stack.main_thread.push_back(line);
  }
  return stack;
}

WorkerStack parse_gdb(std::string_view text) {
  WorkerStack stack;
  stack.source = "gdb";
  bool in_main = false;
  for (const std::string& raw : split_lines(text)) {
    const std::string line = acc::trim(raw);
    if (starts_with(line, "Thread ")) {
      // "Thread 2 (Thread 0x7f.. (LWP 123) "name"):" -> "thread 2 "name":"
      const size_t paren = line.find(" (");
      const size_t quote = line.find('"');
      std::string header = "thread " + line.substr(7, paren == std::string::npos ? 0 : paren - 7);
      if (quote != std::string::npos)
        header += " " + line.substr(quote, line.rfind('"') - quote + 1);
      in_main = starts_with(line, "Thread 1 ");
      stack.lines.push_back(header + ":");
      continue;
    }
    if (!starts_with(line, "#")) continue;
    const std::string frame = normalize_native_frame(line);
    stack.lines.push_back("  " + frame);
    if (in_main) stack.main_thread.push_back(frame);
  }
  return stack;
}

WorkerStack parse_eu_stack(std::string_view text, int pid) {
  WorkerStack stack;
  stack.source = "eu-stack";
  bool in_main = false;
  bool after_frame = false;
  for (const std::string& raw : split_lines(text)) {
    const std::string line = acc::trim(raw);
    if (starts_with(line, "TID ")) {
      in_main = std::atoi(line.c_str() + 4) == pid;
      stack.lines.push_back(in_main ? "main thread:" : "thread:");
      after_frame = false;
      continue;
    }
    // `eu-stack -s` puts a frame's "file:line:column" on the line below it.
    if (after_frame && !line.empty() && !starts_with(line, "#") && !starts_with(line, "PID ")) {
      std::string where = line;
      const size_t last = where.rfind(':');
      if (last != std::string::npos && where.find(':') != last) where.resize(last);
      stack.lines.back() += " at " + where;
      if (in_main) stack.main_thread.back() += " at " + where;
      after_frame = false;
      continue;
    }
    after_frame = false;
    if (!starts_with(line, "#")) continue;
    after_frame = true;
    const std::string frame = normalize_native_frame(line);
    stack.lines.push_back("  " + frame);
    if (in_main) stack.main_thread.push_back(frame);
  }
  return stack;
}

}  // namespace acc::launcher
