// The stack dumper (observe/stack_dump.h) over a fake Os: which way each worker's stack is taken
// (the Python hook's signal, eu-stack, gdb, /proc), how long it waits for each on the Os's clock,
// and what it does with a debugger that overruns. The parsers are tested in hang_report_test.cc;
// tests/integration/stall_test.cc takes real workers' stacks.

#include "hangs/stack_dump.h"

#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "fake_os.h"
#include "hangs/python_stack_hook.h"
#include "launcher_harness.h"

namespace acc::launcher {
namespace {

using namespace std::chrono_literals;
using testing::FakeOs;
using testing::Script;

constexpr int kWorker = 4242;
constexpr int kChild = 4300;

struct Fixture {
  Fixture() {
    os.fake_proc.set(kWorker).thread_files[kWorker] = {{"comm", "python3\n"},
                                                       {"wchan", "do_sys_poll\n"}};
    os.fake_proc.set(kChild, "S", 0, kWorker).thread_files[kChild] = {{"comm", "pt_loader\n"},
                                                                      {"wchan", "pipe_read\n"}};
  }
  WorkerStack collect(const StackTarget& target, std::chrono::milliseconds budget = 3s) {
    const std::vector<WorkerStack> stacks = collect_stacks({target}, budget, os);
    EXPECT_EQ(stacks.size(), 1u);
    return stacks.empty() ? WorkerStack{} : stacks[0];
  }
  // A debugger that writes `output` and exits `after` its start.
  void debugger_takes(std::chrono::milliseconds after, const std::string& output) {
    os.helper = [after, output](const std::vector<std::string>&) {
      Script script;
      script.exit_after = after;
      script.output = output;
      return script;
    };
  }
  bool signalled(int pid, int sig) const {
    return std::find(os.signalled.begin(), os.signalled.end(), std::pair(pid, sig)) !=
           os.signalled.end();
  }

  acc::testing::TempDir dir;
  FakeOs os;
};

const char* const kFaulthandler =
    "Thread 0x00007f0000000001 (most recent call first):\n"
    "  File \"/usr/lib/python3/threading.py\", line 320 in wait\n"
    "\n"
    "Current thread 0x00007f0000000002 (most recent call first):\n"
    "  File \"train.py\", line 12 in step\n"
    "  File \"train.py\", line 30 in <module>\n";

// The hook's worker gets the signal and writes its traceback; the dumper takes the file once it
// has stopped growing for three polls of 20 ms (faulthandler writes it from a signal handler).
TEST(StackDumpTest, APythonWorkerIsSignalledAndItsTracebackTakenOnceTheFileStopsGrowing) {
  Fixture f;
  f.os.fake_proc.at(kWorker).catches.insert(stack_dump_signal());
  f.os.installed["eu-stack"] = "/usr/bin/eu-stack";
  f.os.on_signal = [&f](pid_t pid, int sig) {
    if (pid == kWorker && sig == stack_dump_signal())
      std::ofstream(python_stack_file(f.dir.path(), kWorker)) << kFaulthandler;
  };
  const WorkerStack stack = f.collect({kWorker, f.dir.path()});
  EXPECT_TRUE(f.signalled(kWorker, stack_dump_signal()));
  EXPECT_EQ(stack.source, "python faulthandler");
  EXPECT_EQ(stack.main_thread,
            (std::vector<std::string>{"File \"train.py\", line 12 in step",
                                      "File \"train.py\", line 30 in <module>"}));
  EXPECT_EQ(f.os.elapsed(), 80ms) << "one poll to see it, three more to see it whole";
  EXPECT_TRUE(f.os.processes().empty()) << "no debugger for a worker with the hook";
}

TEST(StackDumpTest, ANativeWorkerIsReadWithEuStackWhenItIsInstalledAndTheToolIsReaped) {
  Fixture f;
  f.os.installed["eu-stack"] = "/usr/bin/eu-stack";
  f.os.installed["gdb"] = "/usr/bin/gdb";
  f.debugger_takes(100ms,
                   "PID 4242 - process\nTID 4242:\n#0  0x00007f00 __poll\n"
                   "#1  0x00005500 main\n");
  const WorkerStack stack = f.collect({kWorker, f.dir.path()});
  EXPECT_EQ(stack.source, "eu-stack");
  EXPECT_EQ(stack.main_thread, (std::vector<std::string>{"__poll", "main"}));
  ASSERT_EQ(f.os.processes().size(), 1u);
  EXPECT_EQ(f.os.processes()[0]->request.argv,
            (std::vector<std::string>{"/usr/bin/eu-stack", "-s", "-p", "4242"}));
  EXPECT_TRUE(f.os.processes()[0]->reaped);
  EXPECT_EQ(f.os.elapsed(), 100ms);
}

TEST(StackDumpTest, WithoutEuStackAWorkerIsReadWithGdbButItsDescendantsFromProc) {
  Fixture f;
  f.os.installed["gdb"] = "/usr/bin/gdb";
  f.debugger_takes(40ms,
                   "Thread 1 (Thread 0x7f (LWP 4242) \"python3\"):\n"
                   "#0  0x00007f00 in __poll (fds=0x1) at poll.c:29\n");
  const std::vector<WorkerStack> stacks =
      collect_stacks({{kWorker, f.dir.path()}, {kChild, f.dir.path(), true}}, 3s, f.os);
  ASSERT_EQ(stacks.size(), 2u);
  EXPECT_EQ(stacks[0].source, "gdb");
  EXPECT_EQ(stacks[0].main_thread, (std::vector<std::string>{"__poll at poll.c:29"}));
  EXPECT_EQ(stacks[1].source, "/proc (no eu-stack; gdb is kept for the workers)");
  EXPECT_EQ(stacks[1].lines,
            (std::vector<std::string>{"thread pt_loader (main): state S, wchan pipe_read"}));
  ASSERT_EQ(f.os.processes().size(), 1u) << "one gdb, for the worker only";
  EXPECT_EQ(f.os.processes()[0]->request.argv.front(), "/usr/bin/gdb");
}

TEST(StackDumpTest, ADebuggerThatOverrunsTheBudgetIsKilledAndTheWorkerContinued) {
  Fixture f;
  f.os.installed["eu-stack"] = "/usr/bin/eu-stack";
  f.os.helper = [](const std::vector<std::string>&) { return Script{}; };  // never ends
  const WorkerStack stack = f.collect({kWorker, f.dir.path()}, 1500ms);
  EXPECT_EQ(f.os.elapsed(), 1500ms);
  ASSERT_EQ(f.os.processes().size(), 1u);
  EXPECT_TRUE(f.os.processes()[0]->got(SIGKILL));
  EXPECT_TRUE(f.os.processes()[0]->reaped);
  EXPECT_TRUE(f.signalled(kWorker, SIGCONT));
  EXPECT_EQ(stack.source, "/proc (eu-stack took too long)");
  EXPECT_EQ(stack.lines,
            (std::vector<std::string>{"thread python3 (main): state S, wchan do_sys_poll"}));
}

TEST(StackDumpTest, ADebuggerThatCannotAttachOrStartLeavesTheProcView) {
  Fixture f;
  f.os.installed["eu-stack"] = "/usr/bin/eu-stack";
  f.debugger_takes(20ms, "eu-stack: dwfl_linux_proc_attach pid 4242: Operation not permitted\n");
  EXPECT_EQ(f.collect({kWorker, f.dir.path()}).source,
            "/proc (eu-stack could not attach (ptrace not allowed?))");
  f.os.helper = [](const std::vector<std::string>&) {
    Script script;
    script.cannot_exec = "Permission denied";
    return script;
  };
  EXPECT_EQ(f.collect({kWorker, f.dir.path()}).source, "/proc (eu-stack did not start)");
}

TEST(StackDumpTest, APythonWorkerThatNeverWritesItsTracebackIsReadFromProcAtTheBudget) {
  Fixture f;
  f.os.fake_proc.at(kWorker).catches.insert(stack_dump_signal());
  const WorkerStack stack = f.collect({kWorker, f.dir.path()}, 2s);
  EXPECT_EQ(f.os.elapsed(), 2s);
  EXPECT_EQ(stack.source, "/proc (the Python traceback did not come in time)");
}

TEST(StackDumpTest, AProcessThatIsGoneSaysSo) {
  Fixture f;
  f.os.fake_proc.remove(kWorker);
  const WorkerStack stack = f.collect({kWorker, f.dir.path()});
  EXPECT_EQ(stack.source, "/proc (neither eu-stack nor gdb is installed)");
  EXPECT_EQ(stack.lines, (std::vector<std::string>{"(process gone)"}));
  EXPECT_EQ(f.os.elapsed(), 0ms);
}

}  // namespace
}  // namespace acc::launcher
