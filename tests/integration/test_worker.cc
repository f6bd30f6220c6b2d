// A small worker program for the launcher's integration tests. Its first argument picks what it
// does; every mode is something a real training worker can do to its launcher.
//
//   env                      print KEY=VALUE for the contract variables, exit 0
//   environ DIR              write its environment to DIR/worker.<rank> and its parent's (the
//                            launcher's, from /proc) to DIR/launcher.<rank>, NUL-separated
//   exit RANK CODE           rank RANK exits CODE after 50 ms; the others wait to be stopped
//   signal RANK SIG          rank RANK raises SIG; the others wait to be stopped
//   fail-before RESTARTS     print "attempt N"; rank 0 exits 1 while TORCHELASTIC_RESTART_COUNT
//                            < RESTARTS; every other exit is 0 (so only rank 0's failure
//                            can stop the group, after the others have printed)
//   spam LINES               print LINES long numbered lines to stdout and stderr at full speed
//   record                   rank 0 writes a PyTorch @record error file and exits 1
//   wait DIR                 write DIR/<rank>.pid, a grandchild's DIR/<rank>.child, then block;
//                            on SIGUSR1 write DIR/<rank>.usr1 and go on; on SIGTERM write
//                            DIR/<rank>.term and exit 0
//   ignore-term DIR          like wait, but ignore SIGTERM
//   quiet SECONDS            print "started", sleep SECONDS without a word (no CPU), print
//                            "done", exit 0
//   affinity                 print "cpus=<the CPUs it may run on> omp=<OMP_NUM_THREADS>"
//   flight-recorder MS       act as PyTorch's NCCL group does for its Flight Recorder: make the
//                            dump pipe $TORCH_NCCL_DEBUG_INFO_PIPE_FILE<rank>.pipe, read it
//                            every 200 ms, and when a byte comes write the dump
//                            $TORCH_FR_DUMP_TEMP_FILE<rank> in place in two halves, MS apart;
//                            then wait to be stopped, saying nothing
//   chorus DIR LINES         once every local rank has written DIR/<rank>.ready, print LINES
//                            lines "shared line I" that every rank prints, and after every
//                            hundredth one "rank R private I" that only this rank prints

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

namespace {

int rank() {
  return std::atoi(std::getenv("RANK") ? std::getenv("RANK") : "0");
}

std::string dir_of_test;

void touch(const std::string& name, const std::string& content = "") {
  std::ofstream(dir_of_test + "/" + name) << content;
}

void on_usr1(int) {
  touch(std::to_string(rank()) + ".usr1");
}
void on_term(int) {
  touch(std::to_string(rank()) + ".term");
  _exit(0);
}

[[noreturn]] void block_forever() {
  for (;;) pause();
}

void write_pids_and_fork_grandchild() {
  touch(std::to_string(rank()) + ".pid", std::to_string(getpid()));
  const pid_t child = fork();
  if (child == 0) {
    signal(SIGTERM, SIG_DFL);
    signal(SIGUSR1, SIG_IGN);
    block_forever();
  }
  touch(std::to_string(rank()) + ".child", std::to_string(child));
  touch(std::to_string(rank()) + ".ready");
}

// Every local rank has started: their lines then reach the launcher at about the same time.
void wait_for_all_local_ranks(const std::string& dir) {
  touch(std::to_string(rank()) + ".ready");
  const int ranks =
      std::atoi(std::getenv("LOCAL_WORLD_SIZE") ? std::getenv("LOCAL_WORLD_SIZE") : "1");
  for (int waited_ms = 0; waited_ms < 30000; ++waited_ms) {
    int ready = 0;
    for (int r = 0; r < ranks; ++r)
      ready += std::filesystem::exists(dir + "/" + std::to_string(r) + ".ready");
    if (ready == ranks) return;
    usleep(1000);
  }
}

// PyTorch's heartbeat thread: the pipe is polled, the dump written with an ofstream (no
// temporary file, no rename), so a reader that comes too early sees a partial file.
[[noreturn]] void flight_recorder(int dump_ms) {
  const char* pipe_prefix = std::getenv("TORCH_NCCL_DEBUG_INFO_PIPE_FILE");
  const char* dump_prefix = std::getenv("TORCH_FR_DUMP_TEMP_FILE");
  if (pipe_prefix == nullptr || dump_prefix == nullptr) {
    std::fprintf(stderr, "test_worker: no Flight Recorder variables\n");
    std::exit(3);
  }
  const std::string pipe = pipe_prefix + std::to_string(rank()) + ".pipe";
  const std::string dump = dump_prefix + std::to_string(rank());
  unlink(pipe.c_str());
  if (mkfifo(pipe.c_str(), 0600) != 0) std::exit(3);
  const int fd = open(pipe.c_str(), O_RDONLY | O_NONBLOCK);
  for (char byte = 0;; usleep(200'000)) {
    if (read(fd, &byte, 1) != 1) continue;
    std::ofstream out(dump, std::ios::binary);
    out << "flight recorder of rank " << rank() << ", first half\n" << std::flush;
    usleep(static_cast<useconds_t>(dump_ms) * 1000);
    out << "second half, end\n";
  }
}

std::string cpus_of_this_process() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof(set), &set);
  std::string text;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) text += (text.empty() ? "" : ",") + std::to_string(cpu);
  return text;
}

// The modes, each given the whole command line (argv[1] is the mode).

int print_env(int argc, char** argv) {
  for (const char* key : {"RANK",
                          "LOCAL_RANK",
                          "WORLD_SIZE",
                          "LOCAL_WORLD_SIZE",
                          "GROUP_RANK",
                          "GROUP_WORLD_SIZE",
                          "ROLE_RANK",
                          "ROLE_NAME",
                          "ROLE_WORLD_SIZE",
                          "MASTER_ADDR",
                          "MASTER_PORT",
                          "TORCHELASTIC_RESTART_COUNT",
                          "TORCHELASTIC_MAX_RESTARTS",
                          "TORCHELASTIC_RUN_ID",
                          "TORCHELASTIC_USE_AGENT_STORE",
                          "TORCHELASTIC_ERROR_FILE",
                          "OMP_NUM_THREADS",
                          "ACCELERATE_MIXED_PRECISION",
                          "CUDA_VISIBLE_DEVICES",
                          "TORCH_NCCL_ASYNC_ERROR_HANDLING"}) {
    const char* value = std::getenv(key);
    std::printf("%s=%s\n", key, value ? value : "<unset>");
  }
  for (int i = 2; i < argc; ++i) std::printf("ARG=%s\n", argv[i]);
  return 0;
}

int write_environs(int, char** argv) {
  const std::string dir = argv[2];
  const std::string suffix = "." + std::to_string(rank());
  std::string own;
  for (char** e = environ; *e; ++e) own += std::string(*e) + '\0';
  std::ofstream(dir + "/worker" + suffix) << own;
  std::ifstream parent("/proc/" + std::to_string(getppid()) + "/environ");
  std::ofstream(dir + "/launcher" + suffix) << parent.rdbuf();
  return 0;
}

// exit and signal.
int exit_or_signal(int, char** argv) {
  if (rank() == std::atoi(argv[2])) {
    usleep(50 * 1000);
    if (std::string(argv[1]) == "exit") return std::atoi(argv[3]);
    raise(std::atoi(argv[3]));
  }
  block_forever();
}

int fail_before(int, char** argv) {
  const int restarts = std::atoi(std::getenv("TORCHELASTIC_RESTART_COUNT"));
  std::printf("attempt %d\n", restarts);
  return rank() == 0 && restarts < std::atoi(argv[2]) ? 1 : 0;
}

int spam(int, char** argv) {
  const int lines = std::atoi(argv[2]);
  std::string payload(200, static_cast<char>('a' + rank() % 26));
  for (int i = 0; i < lines; ++i) {
    // Written in pieces so that only the launcher can make the line whole.
    std::printf("line %d of rank %d ", i, rank());
    std::fflush(stdout);
    std::printf("%s end\n", payload.c_str());
    std::fprintf(stderr, "err %d of rank %d %s end\n", i, rank(), payload.c_str());
  }
  return 0;
}

int record(int, char**) {
  if (rank() != 0) block_forever();
  std::ofstream(std::getenv("TORCHELASTIC_ERROR_FILE"))
      << R"({"message": {"message": "ValueError: loss is nan", "extraInfo": )"
      << R"({"py_callstack": "Traceback (most recent call last):\n  File \"train.py\", )"
      << R"(line 7, in step\nValueError: loss is nan\n", "timestamp": "1700000000"}}})";
  std::fprintf(stderr, "about to fail\n");
  return 1;
}

// wait and ignore-term.
int wait_for_signals(int, char** argv) {
  dir_of_test = argv[2];
  signal(SIGUSR1, on_usr1);
  signal(SIGTERM, std::string(argv[1]) == "wait" ? on_term : SIG_IGN);
  write_pids_and_fork_grandchild();
  block_forever();
}

int quiet(int, char** argv) {
  std::printf("started\n");
  std::fflush(stdout);
  usleep(static_cast<useconds_t>(std::atof(argv[2]) * 1e6));
  std::printf("done\n");
  return 0;
}

int print_affinity(int, char**) {
  const char* omp = std::getenv("OMP_NUM_THREADS");
  std::printf("cpus=%s omp=%s\n", cpus_of_this_process().c_str(), omp ? omp : "<unset>");
  return 0;
}

int chorus(int, char** argv) {
  dir_of_test = argv[2];
  wait_for_all_local_ranks(dir_of_test);
  const int lines = std::atoi(argv[3]);
  for (int i = 0; i < lines; ++i) {
    std::printf("shared line %d\n", i);
    if (i % 100 == 0) std::printf("rank %d private %d\n", rank(), i);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const std::pair<const char*, int (*)(int, char**)> modes[] = {
      {"env", print_env},
      {"environ", write_environs},
      {"exit", exit_or_signal},
      {"signal", exit_or_signal},
      {"fail-before", fail_before},
      {"spam", spam},
      {"record", record},
      {"wait", wait_for_signals},
      {"ignore-term", wait_for_signals},
      {"quiet", quiet},
      {"affinity", print_affinity},
      {"flight-recorder", [](int, char** args) -> int { flight_recorder(std::atoi(args[2])); }},
      {"chorus", chorus}};
  for (const auto& [name, run] : modes)
    if (mode == name) return run(argc, argv);
  std::fprintf(stderr, "test_worker: unknown mode '%s'\n", mode.c_str());
  return 64;
}
