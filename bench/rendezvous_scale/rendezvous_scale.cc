// One elastic rendezvous round of N simulated nodes over real TCP: each node is a thread with its
// own connection (StoreClient) running ElasticRendezvous::next_rendezvous() against the real
// `acc-launch rendezvous serve` in another process, with --nnodes N:N. Prints, per N, the time to
// connect every node, the time from the round's start to the last node holding its rank, and
// each node's store requests and bytes (measured by its client), then checks that the ranks are
// 0..N-1 once each.
//
// Usage: rendezvous_scale ACC_LAUNCH [--nodes 100,1000,10000] [--timeout-s 60]

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "acc/rendezvous/elastic_rendezvous.h"
#include "acc/rendezvous/store_client.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace rdzv = acc::rendezvous;

// `acc-launch rendezvous serve` on a free port, stopped by the destructor.
class Server {
 public:
  explicit Server(const std::string& launcher) {
    int out[2];
    if (pipe(out) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      execl(launcher.c_str(), launcher.c_str(), "rendezvous", "serve", "--host", "127.0.0.1",
            "--port", "0", static_cast<char*>(nullptr));
      std::perror("exec acc-launch");
      _exit(127);
    }
    close(out[1]);
    std::string line;
    char c = 0;
    while (read(out[0], &c, 1) == 1 && c != '\n') line += c;
    close(out[0]);
    // "acc-launch rendezvous: store listening on 127.0.0.1:PORT (...)"
    const auto colon = line.find("127.0.0.1:");
    if (colon == std::string::npos) throw std::runtime_error("the server said: " + line);
    port_ = std::atoi(line.c_str() + colon + 10);
  }
  ~Server() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

// Every node connects, then all start together. Blocking waits, not polling: ten thousand
// threads polling a flag would starve the ones still connecting.
struct StartLine {
  std::mutex mutex;
  std::condition_variable changed;
  int connected = 0;
  bool go = false;
};

struct Node {
  int index = 0;
  int port = 0;
  int nodes = 0;
  std::chrono::milliseconds timeout{60'000};
  StartLine* start = nullptr;
  // Results.
  bool ok = false;
  std::string error;
  rdzv::RendezvousInfo info;
  Clock::time_point connected_at, done_at;
  rdzv::StoreClient::Traffic traffic;
};

void* run_node(void* arg) {
  auto& node = *static_cast<Node*>(arg);
  try {
    rdzv::StoreClientOptions options;
    options.port = node.port;
    options.connect_timeout = node.timeout;
    options.timeout = node.timeout;
    rdzv::StoreClient client(options);
    node.connected_at = Clock::now();
    {
      std::unique_lock lock(node.start->mutex);
      ++node.start->connected;
      node.start->changed.notify_all();
      node.start->changed.wait(lock, [&] { return node.start->go; });
    }
    const auto before = client.traffic();
    rdzv::RendezvousOptions ro;
    ro.run_id = "scale";
    ro.min_nodes = ro.max_nodes = node.nodes;
    ro.join_timeout = node.timeout;
    rdzv::ElasticRendezvous rendezvous(client, ro,
                                       "10.0." + std::to_string(node.index / 250) + "." +
                                           std::to_string(node.index % 250) + ":" +
                                           std::to_string(1000 + node.index));
    node.info = rendezvous.next_rendezvous();
    node.done_at = Clock::now();
    node.traffic.requests = client.traffic().requests - before.requests;
    node.traffic.bytes_sent = client.traffic().bytes_sent - before.bytes_sent;
    node.traffic.bytes_received = client.traffic().bytes_received - before.bytes_received;
    node.ok = true;
  } catch (const std::exception& e) {
    node.error = e.what();
  }
  return nullptr;
}

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

struct Stats {
  double mean = 0;
  std::int64_t max = 0;
};

template <typename F>
Stats stats(const std::vector<Node>& nodes, F field) {
  Stats s;
  for (const auto& n : nodes) {
    s.mean += static_cast<double>(field(n));
    s.max = std::max<std::int64_t>(s.max, field(n));
  }
  s.mean /= static_cast<double>(nodes.size());
  return s;
}

// Returns false when the round did not complete correctly.
// A count this process cannot hold (a descriptor and a thread per node) or the server cannot (a
// descriptor per node) is one line naming the limit instead of a failed round. The server raises
// its soft open-file limit to the same hard one.
bool fits(int count) {
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  long long pid_max = 0;
  if (FILE* f = std::fopen("/proc/sys/kernel/pid_max", "r")) {
    if (std::fscanf(f, "%lld", &pid_max) != 1) pid_max = 0;
    std::fclose(f);
  }
  if (files.rlim_max != RLIM_INFINITY && static_cast<long long>(files.rlim_max) < count + 64LL) {
    std::printf(
        "%7d  acc-launch  not run: a node per connection needs %d open files in one process, "
        "the hard limit is %llu (raising it takes CAP_SYS_RESOURCE)\n",
        count, count + 64, static_cast<unsigned long long>(files.rlim_max));
    return false;
  }
  if (pid_max > 0 && pid_max < count + 1024LL) {
    std::printf("%7d  acc-launch  not run: a thread per node, and kernel.pid_max is %lld\n", count,
                pid_max);
    return false;
  }
  return true;
}

bool measure(const std::string& launcher, int count, std::chrono::milliseconds timeout) {
  if (!fits(count)) return false;
  Server server(launcher);
  StartLine line;
  std::vector<Node> nodes(static_cast<std::size_t>(count));
  std::vector<pthread_t> threads(nodes.size());
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 128 * 1024);
  const auto start_connect = Clock::now();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].index = static_cast<int>(i);
    nodes[i].port = server.port();
    nodes[i].nodes = count;
    nodes[i].timeout = timeout;
    nodes[i].start = &line;
    if (pthread_create(&threads[i], &attr, run_node, &nodes[i]) != 0) {
      std::fprintf(stderr, "rendezvous_scale: cannot start thread %zu: %s\n", i,
                   std::strerror(errno));
      std::exit(1);
    }
  }
  Clock::time_point start;
  {
    std::unique_lock lock(line.mutex);
    line.changed.wait_for(lock, timeout, [&] { return line.connected == count; });
    start = Clock::now();
    line.go = true;
    line.changed.notify_all();
  }
  for (auto& t : threads) pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);

  std::vector<int> seen(nodes.size(), 0);
  bool ok = true;
  Clock::time_point last = start;
  for (const auto& n : nodes) {
    if (!n.ok) {
      if (ok) std::fprintf(stderr, "rendezvous_scale: node %d: %s\n", n.index, n.error.c_str());
      ok = false;
      continue;
    }
    last = std::max(last, n.done_at);
    if (n.info.num_nodes != count || n.info.node_rank < 0 || n.info.node_rank >= count ||
        seen[static_cast<std::size_t>(n.info.node_rank)]++ != 0) {
      std::fprintf(stderr, "rendezvous_scale: node %d got rank %d of %d\n", n.index,
                   n.info.node_rank, n.info.num_nodes);
      ok = false;
    }
  }
  Clock::time_point connected_all = start_connect;
  for (const auto& n : nodes) connected_all = std::max(connected_all, n.connected_at);
  if (!ok) {
    std::printf("%7d  acc-launch: FAILED (see stderr)\n", count);
    return false;
  }
  const auto requests = stats(nodes, [](const Node& n) { return n.traffic.requests; });
  const auto bytes =
      stats(nodes, [](const Node& n) { return n.traffic.bytes_sent + n.traffic.bytes_received; });
  std::printf(
      "%7d  acc-launch  connect %7.3f s  round %7.3f s  requests/node %5.2f (max %3lld)"
      "  bytes/node %7.1f (max %5lld)\n",
      count, seconds(connected_all - start_connect), seconds(last - start), requests.mean,
      static_cast<long long>(requests.max), bytes.mean, static_cast<long long>(bytes.max));
  std::fflush(stdout);
  return true;
}

void raise_fd_limit() {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: rendezvous_scale ACC_LAUNCH [--nodes 100,1000,10000] "
                 "[--timeout-s 60]\n");
    return 2;
  }
  const std::string launcher = argv[1];
  std::vector<int> counts = {100, 1000, 10000};
  std::chrono::milliseconds timeout{60'000};
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--nodes") {
      counts.clear();
      std::stringstream list(argv[i + 1]);
      for (std::string item; std::getline(list, item, ',');) counts.push_back(std::stoi(item));
    } else if (flag == "--timeout-s") {
      timeout = std::chrono::seconds(std::stoi(argv[i + 1]));
    }
  }
  raise_fd_limit();
  signal(SIGPIPE, SIG_IGN);
  bool ok = true;
  for (int count : counts) ok = measure(launcher, count, timeout) && ok;
  return ok ? 0 : 1;
}
