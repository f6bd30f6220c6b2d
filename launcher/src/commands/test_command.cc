// `acc-launch test`: launches acc-launch itself as the workers of the configured run
// (/proc/self/exe __test_worker). Each worker checks the environment contract, then the ranks
// meet through the store at MASTER_ADDR:MASTER_PORT as env:// would make them (a single process
// of distributed_type NO only checks that it got no distributed variables); passes when every
// worker passes, as `accelerate test` does with its test script.

#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "acc/common/error.h"
#include "acc/rendezvous/store_client.h"
#include "cli/flag_spelling.h"
#include "commands/command_line.h"
#include "commands/commands.h"
#include "process/real_os.h"

namespace acc::launcher {
namespace {

std::optional<long> env_int(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (*end != '\0') return std::nullopt;
  return parsed;
}

// The meeting env:// makes, through the store the launcher serves at MASTER_ADDR:MASTER_PORT
// (the agent store, as torchrun's): every rank adds itself to a counter and waits until all
// WORLD_SIZE ranks have. Returns "" or the problem.
std::string meet(const std::string& addr, long port, long world) {
  try {
    rendezvous::StoreClientOptions options;
    options.host = addr;
    options.port = static_cast<int>(port);
    options.connect_timeout = std::chrono::seconds(30);
    options.timeout = std::chrono::seconds(60);
    rendezvous::StoreClient store(options);
    if (store.add("acc-launch/test/arrived", 1) == world) store.set("acc-launch/test/all", "1");
    store.wait({"acc-launch/test/all"});
    return "";
  } catch (const Error& e) {
    return std::string("the ranks did not meet through the store at MASTER_ADDR:MASTER_PORT: ") +
           e.what();
  }
}

// Accelerate's simple launcher (distributed_type NO): one process, no torchrun variables.
int check_single_process() {
  for (const char* name : {"WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"}) {
    if (std::getenv(name)) {
      std::cout << "FAIL: RANK is missing but " << name << " is set\n";
      return 1;
    }
  }
  if (!std::getenv("ACCELERATE_MIXED_PRECISION")) {
    std::cout << "FAIL: ACCELERATE_MIXED_PRECISION is missing\n";
    return 1;
  }
  std::cout << "ok: one process (distributed_type NO: no process group, as under accelerate "
               "launch), mixed precision "
            << std::getenv("ACCELERATE_MIXED_PRECISION") << std::endl;
  return 0;
}

}  // namespace

int run_test_worker(const std::vector<std::string>&) {
  if (!std::getenv("RANK")) return check_single_process();
  std::vector<std::string> problems;
  auto need = [&](const char* name) {
    auto v = env_int(name);
    if (!v) problems.push_back(std::string(name) + " is missing or not an integer");
    return v.value_or(-1);
  };
  const long rank = need("RANK"), world = need("WORLD_SIZE"), local = need("LOCAL_RANK"),
             local_world = need("LOCAL_WORLD_SIZE"), group = need("GROUP_RANK"),
             port = need("MASTER_PORT");
  const char* addr = std::getenv("MASTER_ADDR");
  if (!addr || !*addr) problems.push_back("MASTER_ADDR is missing");
  if (problems.empty()) {
    if (rank < 0 || rank >= world) problems.push_back("RANK is not within [0, WORLD_SIZE)");
    if (local < 0 || local >= local_world)
      problems.push_back("LOCAL_RANK is not within [0, LOCAL_WORLD_SIZE)");
    if (world % local_world != 0)
      problems.push_back("WORLD_SIZE is not a multiple of LOCAL_WORLD_SIZE");
    if (rank != group * local_world + local)
      problems.push_back("RANK != GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK");
    if (port < 1 || port > 65535) problems.push_back("MASTER_PORT is not a TCP port");
    if (!std::getenv("ACCELERATE_MIXED_PRECISION"))
      problems.push_back("ACCELERATE_MIXED_PRECISION is missing");
  }
  if (problems.empty())
    if (std::string problem = meet(addr, port, world); !problem.empty())
      problems.push_back(problem);
  if (!problems.empty()) {
    for (const std::string& p : problems) std::cout << "FAIL: " << p << "\n";
    return 1;
  }
  std::cout << "ok: rank " << rank << " of " << world << ", local rank " << local << " of "
            << local_world << ", met the other ranks at " << addr << ":" << port
            << ", mixed precision " << std::getenv("ACCELERATE_MIXED_PRECISION") << std::endl;
  return 0;
}

int run_test_command(const std::vector<std::string>& args) {
  std::string config_file;
  CLI::App app{"Launch a check of the worker environment over the configured workers",
               "acc-launch test"};
  app.add_option(flag_spellings("config_file"), config_file,
                 "the config file to launch with (default: Accelerate's)")
      ->type_name("FILE");
  if (std::optional<int> exit_code = parse_command_line(app, args)) return *exit_code;
  RealOs os;
  const std::string self = os.proc().executable();
  ACC_CHECK(!self.empty(), SystemError, "cannot find this executable through /proc/self/exe");
  std::vector<std::string> argv = {self};
  if (!config_file.empty()) argv.insert(argv.end(), {"--config_file", config_file});
  argv.insert(argv.end(), {"--no_python", self, kTestWorkerCommand});
  std::cout << "Running: acc-launch";
  for (size_t i = 1; i < argv.size(); ++i) std::cout << " " << argv[i];
  std::cout << std::endl;

  const int status = os.run_program(argv);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    std::cout << "Test is a success! You are ready for your distributed training!" << std::endl;
    return 0;
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::cout << "Test failed (exit code " << code << "); see the lines above." << std::endl;
  return code == 2 ? 2 : 1;
}

}  // namespace acc::launcher
