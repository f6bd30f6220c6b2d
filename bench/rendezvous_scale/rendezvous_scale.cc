// One elastic rendezvous round of N simulated nodes over real TCP, against the real
// `acc-launch rendezvous serve` in another process, with --nnodes N:N. Each node is a
// SimulatedNode over its own connection: on the wire, request for request, what
// ElasticRendezvous::next_rendezvous() sends over a StoreClient (faithfulness_test compares the
// two). The nodes are driven by epoll loops, one per client process of at most 16,000
// connections (under the per-process descriptor limit), from source addresses 127.<b>.x.y so
// that ports do not run out. Every node connects and shakes hands first; then all begin the
// round together.
//
// Prints, per N: the time to connect every node, the time from the round's start to the last
// node placed, each node's store requests and bytes in the round (mean and max), the server's
// CPU seconds and the load average; then checks that the ranks are 0..N-1 once each.
//
// Usage: rendezvous_scale ACC_LAUNCH [--nodes 100,1000,10000] [--timeout-s 60] [--window 500]
// Exit: 0 when every count's round completed with correct ranks, 1 otherwise, 2 on bad usage.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "loopback.h"
#include "node_loop.h"

namespace {

using Clock = std::chrono::steady_clock;
using acc::bench::NodeOutcome;
using acc::bench::SimulatedNode;

// `acc-launch rendezvous serve` on a free port, stopped by the destructor.
class Server {
 public:
  explicit Server(const std::string& launcher) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::execl(launcher.c_str(), launcher.c_str(), "rendezvous", "serve", "--host", "127.0.0.1",
              "--port", "0", static_cast<char*>(nullptr));
      std::perror("exec acc-launch");
      ::_exit(127);
    }
    ::close(out[1]);
    std::string line;
    char c = 0;
    while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
    ::close(out[0]);
    // "acc-launch rendezvous: store listening on 127.0.0.1:PORT (...)"
    const auto at = line.find("127.0.0.1:");
    if (at == std::string::npos) throw std::runtime_error("the server said: " + line);
    port_ = std::atoi(line.c_str() + at + 10);
  }
  ~Server() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

// What a client process tells the driver, once connected and once its nodes are done.
struct Report {
  std::int64_t at_ns = 0;  // steady_clock: when it got there
  char error[240] = {};    // empty: every node connected, or placed
};

struct Client {
  pid_t pid = -1;
  int report = -1;  // read end
};

double seconds(std::int64_t ns) {
  return static_cast<double>(ns) / 1e9;
}

std::int64_t now_ns() {
  return Clock::now().time_since_epoch().count();
}

double children_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(usage.ru_utime) + s(usage.ru_stime);
}

void send_report(int fd, const std::string& error) {
  Report report;
  report.at_ns = now_ns();
  std::snprintf(report.error, sizeof(report.error), "%s", error.c_str());
  [[maybe_unused]] auto n = ::write(fd, &report, sizeof(report));
}

// A client process: connects its nodes, reports, waits for the start (the go pipe's end), runs
// the round, reports, and holds its connections until released (the release pipe's end).
[[noreturn]] void client_main(const acc::bench::NodeLoopOptions& options, NodeOutcome* outcomes,
                              std::chrono::seconds timeout, int report, int go, int release) {
  {
    acc::bench::NodeLoop loop(options, outcomes);
    send_report(report, loop.connect(Clock::now() + timeout));
    char byte;
    while (::read(go, &byte, 1) > 0) {
    }
    send_report(report, loop.run_round(Clock::now() + timeout));
    pollfd released{release, POLLIN, 0};
    ::poll(&released, 1, 60'000);
  }
  ::_exit(0);
}

// Reads one Report from each client by `deadline`; the latest time and the first error.
bool collect(std::vector<Client>& clients, Clock::time_point deadline, std::int64_t& last,
             std::string& error) {
  bool all = true;
  for (Client& client : clients) {
    pollfd ready{client.report, POLLIN, 0};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    Report report;
    if (::poll(&ready, 1, static_cast<int>(std::max<long long>(left, 0))) != 1 ||
        ::read(client.report, &report, sizeof(report)) != sizeof(report)) {
      all = false;
      if (error.empty()) error = "a client process did not report in time";
      continue;
    }
    last = std::max(last, report.at_ns);
    if (report.error[0] != 0) {
      all = false;
      if (error.empty()) error = report.error;
    }
  }
  return all;
}

// "12 in WAIT closed, 3 in ADD joined": where the nodes of an unfinished round stopped.
std::string where(const NodeOutcome* outcomes, int count) {
  int at[SimulatedNode::kSteps] = {};
  for (int i = 0; i < count; ++i) ++at[std::clamp(outcomes[i].step, 0, SimulatedNode::kSteps - 1)];
  std::string text;
  for (int s = 0; s < SimulatedNode::kSteps; ++s) {
    if (at[s] == 0 || s == static_cast<int>(SimulatedNode::Step::kDone)) continue;
    text += (text.empty() ? "" : ", ") + std::to_string(at[s]) + " " +
            SimulatedNode::step_name(static_cast<SimulatedNode::Step>(s));
  }
  return text;
}

// The ranks 0..count-1 once each, every node told count: "" or what is wrong.
std::string check_ranks(const NodeOutcome* outcomes, int count) {
  std::vector<char> seen(static_cast<std::size_t>(count), 0);
  for (int i = 0; i < count; ++i) {
    const NodeOutcome& n = outcomes[i];
    if (n.num_nodes != count || n.rank < 0 || n.rank >= count ||
        seen[static_cast<std::size_t>(n.rank)]++ != 0) {
      return "node " + std::to_string(i) + " got rank " + std::to_string(n.rank) + " of " +
             std::to_string(n.num_nodes);
    }
  }
  return "";
}

struct Options {
  std::string launcher;
  std::vector<int> counts = {100, 1000, 10000};
  std::chrono::seconds timeout{60};
  int window = 500;
};

// The round's times from each node's outcome (ns on the monotonic clock).
struct RoundTimes {
  std::int64_t last = 0, joined = 0, published = 0, first_ranked = 0;
};

RoundTimes round_times(const NodeOutcome* outcomes, int count, std::int64_t start) {
  RoundTimes t{start, start, start, 0};
  for (int i = 0; i < count; ++i) {
    t.last = std::max(t.last, outcomes[i].done_ns);
    t.joined = std::max(t.joined, outcomes[i].joined_ns);
    if (outcomes[i].slot == 0) t.published = outcomes[i].done_ns;
    if (outcomes[i].ranked_ns != 0 &&
        (t.first_ranked == 0 || outcomes[i].ranked_ns < t.first_ranked))
      t.first_ranked = outcomes[i].ranked_ns;
  }
  return t;
}

// Forks the client processes, each driving its share of the `count` nodes; they connect at once
// and begin their round when `go` closes, and leave when `release` closes.
std::vector<Client> start_clients(const Options& options, int count, int block, int port,
                                  NodeOutcome* outcomes, const int go[2], const int release[2]) {
  const int per_client = acc::bench::connections_per_process();
  const int clients = (count + per_client - 1) / per_client;
  std::vector<Client> running;
  for (int c = 0; c < clients; ++c) {
    acc::bench::NodeLoopOptions loop;
    loop.port = port;
    loop.block = block;
    loop.first = c * per_client;
    loop.count = std::min(per_client, count - loop.first);
    loop.nodes = count;
    loop.window = std::max(1, options.window / clients);
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) std::abort();
    const pid_t pid = ::fork();
    if (pid < 0) std::abort();
    if (pid == 0) {
      ::close(report[0]);
      ::close(go[1]);
      ::close(release[1]);
      for (const Client& other : running) ::close(other.report);
      client_main(loop, outcomes + loop.first, options.timeout, report[1], go[0], release[0]);
    }
    ::close(report[1]);
    running.push_back({pid, report[0]});
  }
  return running;
}

// Each client reaped, within 10 s, then killed.
void stop_clients(std::vector<Client>& running) {
  for (Client& client : running) {
    ::close(client.report);
    acc::bench::reap_or_kill(client.pid);
  }
}

void print_round(const NodeOutcome* outcomes, int count, std::int64_t connect_ns,
                 std::int64_t start, const RoundTimes& t, double server_cpu, double clients_cpu) {
  double requests = 0, traffic = 0;
  long long most_requests = 0, most_bytes = 0;
  for (int i = 0; i < count; ++i) {
    requests += outcomes[i].requests;
    traffic += static_cast<double>(outcomes[i].bytes);
    most_requests = std::max<long long>(most_requests, outcomes[i].requests);
    most_bytes = std::max<long long>(most_bytes, outcomes[i].bytes);
  }
  std::printf(
      "%7d  acc-launch  connect %7.3f s  round %7.3f s  requests/node %5.2f (max %3lld)"
      "  bytes/node %7.1f (max %lld)  last join %.3f s  ranks out %.3f s  first rank read %.3f s"
      "  server CPU %.2f s  clients' CPU %.2f s  load %s\n",
      count, seconds(connect_ns), seconds(t.last - start), requests / count, most_requests,
      traffic / count, most_bytes, seconds(t.joined - start), seconds(t.published - start),
      t.first_ranked ? seconds(t.first_ranked - start) : 0.0, server_cpu, clients_cpu,
      acc::bench::load_average().c_str());
}

bool measure(const Options& options, int count, int block) {
  const std::size_t bytes = sizeof(NodeOutcome) * static_cast<std::size_t>(count);
  void* shared = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) throw std::runtime_error("mmap failed");
  auto* outcomes = static_cast<NodeOutcome*>(shared);
  for (int i = 0; i < count; ++i) new (&outcomes[i]) NodeOutcome();

  std::optional<Server> server(std::in_place, options.launcher);
  int go[2], release[2];
  if (::pipe2(go, O_CLOEXEC) != 0 || ::pipe2(release, O_CLOEXEC) != 0) std::abort();
  const double clients_before = children_cpu_seconds();
  const std::int64_t start_connect = now_ns();
  std::vector<Client> running =
      start_clients(options, count, block, server->port(), outcomes, go, release);
  ::close(go[0]);
  ::close(release[0]);

  std::int64_t connected_ns = start_connect;
  std::string error;
  const auto bound = [&] { return Clock::now() + options.timeout + std::chrono::seconds(10); };
  const bool connected = collect(running, bound(), connected_ns, error);
  const std::int64_t start = now_ns();
  ::close(go[1]);  // every client begins its round
  std::int64_t placed_ns = start;
  bool ok = connected && collect(running, bound(), placed_ns, error);
  const RoundTimes times = round_times(outcomes, count, start);
  if (ok) error = check_ranks(outcomes, count);
  ok = ok && error.empty();

  ::close(release[1]);
  stop_clients(running);
  const double cpu_before = children_cpu_seconds();
  const double clients_cpu = cpu_before - clients_before;
  server.reset();
  const double server_cpu = children_cpu_seconds() - cpu_before;

  if (!ok) {
    const std::string waiting = where(outcomes, count);
    std::printf("%7d  acc-launch  did not finish in %lld s: %s%s%s; server CPU %.2f s  load %s\n",
                count, static_cast<long long>(options.timeout.count()), error.c_str(),
                waiting.empty() ? "" : "; still waiting: ", waiting.c_str(), server_cpu,
                acc::bench::load_average().c_str());
  } else {
    print_round(outcomes, count, connected_ns - start_connect, start, times, server_cpu,
                clients_cpu);
  }
  std::fflush(stdout);
  ::munmap(shared, bytes);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: rendezvous_scale ACC_LAUNCH [--nodes 100,1000,10000] [--timeout-s 60] "
                 "[--window 500]\n");
    return 2;
  }
  Options options;
  options.launcher = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--nodes") {
      options.counts.clear();
      std::stringstream list(argv[i + 1]);
      for (std::string item; std::getline(list, item, ',');)
        options.counts.push_back(std::stoi(item));
    } else if (flag == "--timeout-s") {
      options.timeout = std::chrono::seconds(std::stoi(argv[i + 1]));
    } else if (flag == "--window") {
      options.window = std::stoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "rendezvous_scale: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  acc::bench::begin_run("rendezvous_scale",
                        "one round, --nnodes N:N, every node its own TCP connection", "nodes",
                        options.window);
  bool ok = true;
  int block = 1;  // each count its own source addresses: 127.<block>.0.x
  for (int count : options.counts) ok = measure(options, count, block++) && ok;
  return ok ? 0 : 1;
}
