// `acc-launch test`: launches acc-launch itself as the workers of the configured run
// (/proc/self/exe __test_worker). Each worker checks the environment contract, then the ranks
// meet at MASTER_ADDR:MASTER_PORT as env:// would make them; passes when every worker passes, as
// `accelerate test` does with its test script.

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>
#include <thread>

#include "acc/common/error.h"
#include "commands.h"

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

// Connects to host:port within `timeout_ms`; false when nothing listens there.
bool reachable(const std::string& host, long port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return false;
  bool ok = false;
  for (addrinfo* a = found; a && !ok; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int error = 0;
      socklen_t len = sizeof error;
      ok = ::poll(&p, 1, timeout_ms) == 1 &&
           ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return ok;
}

// A line from `fd`, waiting until `deadline`; "" on timeout or a closed socket.
std::string read_line(int fd, std::chrono::steady_clock::time_point deadline) {
  std::string line;
  char c;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) return "";
    if (::read(fd, &c, 1) != 1) return "";
    if (c == '\n') return line;
    line += c;
  }
}

void send_line(int fd, const std::string& line) {
  const std::string text = line + "\n";
  (void)!::write(fd, text.data(), text.size());
}

// The rendezvous torch.distributed's env:// does, without PyTorch: rank 0 listens on
// MASTER_PORT, every other rank connects to MASTER_ADDR:MASTER_PORT and says its rank; rank 0
// answers once it has heard from every rank exactly once. Returns "" or the problem.
std::string rendezvous(const std::string& addr, long port, long rank, long world) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  if (rank == 0) {
    const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(server, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_port = htons(static_cast<uint16_t>(port));
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    if (::bind(server, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0 ||
        ::listen(server, 128) != 0) {
      const std::string error = std::strerror(errno);
      ::close(server);
      return "rank 0 cannot listen on MASTER_PORT " + std::to_string(port) + ": " + error;
    }
    std::vector<int> peers;
    std::set<long> seen;
    std::string problem;
    while (static_cast<long>(seen.size()) < world - 1 && problem.empty()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      pollfd p{server, POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) {
        problem = "only " + std::to_string(seen.size() + 1) + " of " + std::to_string(world) +
                  " ranks reached rank 0 within 60 s";
        break;
      }
      const int peer = ::accept4(server, nullptr, nullptr, SOCK_CLOEXEC);
      if (peer < 0) continue;
      peers.push_back(peer);
      const std::string hello = read_line(peer, deadline);
      char* end = nullptr;
      const long other = std::strtol(hello.c_str() + std::min<size_t>(hello.size(), 5), &end, 10);
      if (hello.rfind("rank ", 0) != 0 || other < 1 || other >= world || !seen.insert(other).second)
        problem = "rank 0 got an unexpected hello '" + hello + "' (a rank twice, or out of range)";
    }
    for (int peer : peers) {
      send_line(peer, problem.empty() ? "ok" : "fail");
      ::close(peer);
    }
    ::close(server);
    return problem;
  }
  while (std::chrono::steady_clock::now() < deadline) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &found) != 0)
      return "MASTER_ADDR " + addr + " does not resolve";
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool connected = ::connect(fd, found->ai_addr, found->ai_addrlen) == 0;
    ::freeaddrinfo(found);
    if (connected) {
      send_line(fd, "rank " + std::to_string(rank));
      const std::string answer = read_line(fd, deadline);
      ::close(fd);
      return answer == "ok" ? "" : "rank 0 did not confirm the rendezvous";
    }
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0 is not listening yet
  }
  return "could not reach rank 0 at " + addr + ":" + std::to_string(port) + " within 60 s";
}

}  // namespace

int run_test_worker(const std::vector<std::string>&) {
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
  if (problems.empty()) {
    const char* agent_store = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
    if (agent_store && std::string(agent_store) == "True") {
      // The launcher serves a store there: it must answer.
      if (!reachable(addr, port, 5000))
        problems.push_back("the store at MASTER_ADDR:MASTER_PORT is not reachable");
    } else if (std::string problem = rendezvous(addr, port, rank, world); !problem.empty()) {
      problems.push_back(problem);
    }
  }
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
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  ACC_CHECK(!ec, LaunchError, "cannot find this executable through /proc/self/exe: ", ec.message());
  std::vector<std::string> argv = {self};
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config_file" || args[i] == "--config-file") {
      ACC_CHECK(i + 1 < args.size(), ConfigError, "--config_file: expected a value");
      argv.push_back("--config_file");
      argv.push_back(args[++i]);
    } else if (args[i].rfind("--config_file=", 0) == 0) {
      argv.push_back(args[i]);
    } else {
      throw ConfigError("test: unknown argument " + args[i] +
                        "; usage: acc-launch test [--config_file FILE]");
    }
  }
  argv.insert(argv.end(), {"--no_python", self, kTestWorkerCommand});
  std::cout << "Running: acc-launch";
  for (size_t i = 1; i < argv.size(); ++i) std::cout << " " << argv[i];
  std::cout << std::endl;

  const pid_t child = ::fork();
  ACC_CHECK(child >= 0, LaunchError, "fork failed: ", std::strerror(errno));
  if (child == 0) {
    std::vector<char*> raw;
    for (std::string& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    ::execv(self.c_str(), raw.data());
    _exit(127);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    std::cout << "Test is a success! You are ready for your distributed training!" << std::endl;
    return 0;
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::cout << "Test failed (exit code " << code << "); see the lines above." << std::endl;
  return code == 2 ? 2 : 1;
}

}  // namespace acc::launcher
