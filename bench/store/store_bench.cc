// Store throughput, latency and server CPU: LibTorch's own C++ client, c10d::TCPStore, with 1, 8
// and 32 client threads (one connection each) doing set, get and add in turn, against our
// StoreServer and against PyTorch's TCPStore server in the same run. Each server runs in a process
// of its own, so that its CPU time (utime + stime from /proc/<pid>/stat, before and after the
// load) is the server's alone. Prints ops/s, p50, p99 and server CPU per operation per server,
// and the ratios.
//
// Usage: store_bench [--seconds S] [--clients 1,8,32] [--rounds R] [--minimal 0|1]
//                    [--start_after S]  (idle S seconds after forking the servers, for a
//                                       profiler to attach to them: bench/store/profile.sh)

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "acc/rendezvous/protocol.h"
#include "acc/rendezvous/store_server.h"
#include "send_ring.h"  // the store server's own, for the yardstick that batches its sends

namespace {

using Clock = std::chrono::steady_clock;

// utime + stime of a process, in seconds, from /proc/<pid>/stat (fields 14 and 15, counted
// after the command name, which may hold spaces and parentheses).
double process_cpu_seconds(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const std::size_t end_of_name = stat.rfind(')');
  if (end_of_name == std::string::npos) return 0;
  const char* p = stat.c_str() + end_of_name + 1;
  // Fields 3 (state) to 13 come first: skip 11 of them.
  for (int field = 3; field <= 13; ++field) p = std::strchr(p + 1, ' ');
  char* next = nullptr;
  const unsigned long long utime = std::strtoull(p, &next, 10);
  const unsigned long long stime = std::strtoull(next, nullptr, 10);
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// A server in a process of its own: `serve` starts it and returns its port; the process then
// lives until the bench closes its end of the control pipe.
class ServerProcess {
 public:
  explicit ServerProcess(const std::function<int()>& serve) {
    int port_pipe[2], control[2];
    if (::pipe(port_pipe) != 0 || ::pipe(control) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(port_pipe[0]);
      ::close(control[1]);
      const int port = serve();
      [[maybe_unused]] auto n = ::write(port_pipe[1], &port, sizeof(port));
      char byte;
      while (::read(control[0], &byte, 1) > 0) {
      }
      ::_exit(0);  // the server's threads die with the process
    }
    ::close(port_pipe[1]);
    ::close(control[0]);
    if (::read(port_pipe[0], &port_, sizeof(port_)) != sizeof(port_)) std::abort();
    ::close(port_pipe[0]);
    control_ = control[1];
  }
  ~ServerProcess() {
    ::close(control_);
    ::waitpid(pid_, nullptr, 0);
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int control_ = -1;
};

struct Result {
  double server_cpu_us_per_op = 0;  // the server process's utime + stime, per operation
  double ops_per_second = 0;
  double p50_us = 0;
  double p99_us = 0;
};

std::unique_ptr<c10d::TCPStore> connect(int port) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = false;
  options.timeout = std::chrono::seconds(60);
  return std::make_unique<c10d::TCPStore>("127.0.0.1", options);
}

double percentile(std::vector<std::int64_t>& ns, double p) {
  if (ns.empty()) return 0;
  auto index = static_cast<std::size_t>(p * static_cast<double>(ns.size() - 1));
  std::nth_element(ns.begin(), ns.begin() + static_cast<std::ptrdiff_t>(index), ns.end());
  return static_cast<double>(ns[index]) / 1000.0;
}

// Every client thread connects first; all start together and run for `seconds`.
Result measure(const ServerProcess& server, int clients, double seconds) {
  std::vector<std::unique_ptr<c10d::TCPStore>> stores;
  for (int i = 0; i < clients; ++i) stores.push_back(connect(server.port()));
  std::vector<std::vector<std::int64_t>> latencies(clients);
  std::atomic<bool> go{false};
  std::atomic<long> ops{0};
  auto duration =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      c10d::TCPStore& store = *stores[i];
      std::string key = "bench/" + std::to_string(i);
      std::vector<uint8_t> value(64, static_cast<uint8_t>('a' + i % 26));
      auto& mine = latencies[i];
      mine.reserve(1 << 20);
      while (!go.load()) std::this_thread::yield();
      auto end = Clock::now() + duration;
      long done = 0;
      for (Clock::time_point now = Clock::now(); now < end;) {
        // set is one-way in the protocol; the get that follows is what waits for it to land.
        auto t0 = now;
        store.set(key, value);
        auto t1 = Clock::now();
        store.get(key);
        auto t2 = Clock::now();
        store.add("bench/counter", 1);
        now = Clock::now();
        mine.push_back((t1 - t0).count());
        mine.push_back((t2 - t1).count());
        mine.push_back((now - t2).count());
        done += 3;
      }
      ops += done;
    });
  }
  auto start = Clock::now();
  const double server_cpu_start = process_cpu_seconds(server.pid());
  go = true;
  for (auto& thread : threads) thread.join();
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const double server_cpu = process_cpu_seconds(server.pid()) - server_cpu_start;
  std::vector<std::int64_t> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  Result result;
  result.ops_per_second = static_cast<double>(ops.load()) / elapsed;
  result.p50_us = percentile(all, 0.50);
  result.p99_us = percentile(all, 0.99);
  result.server_cpu_us_per_op = server_cpu * 1e6 / static_cast<double>(std::max(1L, ops.load()));
  return result;
}

std::vector<int> parse_list(const char* text) {
  std::vector<int> out;
  for (const char* p = text; *p;) {
    out.push_back(std::atoi(p));
    p = std::strchr(p, ',');
    if (!p) break;
    ++p;
  }
  return out;
}

// The ceiling any server could reach with these clients on this machine: one epoll thread
// that parses the same 1.13 frames with our codec and answers at once, with no store behind it
// (GET returns a fixed value, ADD a counter), reading up to 64 KiB and writing its replies once
// per read. Not a store: a yardstick for the row above it.
class MinimalServer {
 public:
  explicit MinimalServer(bool batched = false) : batched_(batched) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    ::listen(listener_, 4096);
    socklen_t length = sizeof(address);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    add(listener_);
    add(wake_);
    thread_ = std::thread([this] { loop(); });
  }
  ~MinimalServer() {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_, &one, sizeof(one));
    thread_.join();
    for (auto& [fd, buffer] : inputs_) ::close(fd);
    ::close(listener_);
    ::close(wake_);
    ::close(epoll_);
  }
  int port() const { return port_; }

 private:
  void add(int fd) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event);
  }

  void loop() {
    namespace rdzv = acc::rendezvous;
    const std::string value(64, 'v');
    std::int64_t counter = 0;
    std::vector<char> chunk(64 * 1024);
    std::string replies;
    rdzv::Request request;
    epoll_event events[256];
    acc::rendezvous::detail::SendRing ring(256);
    std::vector<std::string> round_replies(256);
    for (;;) {
      const int ready = ::epoll_wait(epoll_, events, 256, -1);
      for (int e = 0; e < ready; ++e) {
        const int fd = events[e].data.fd;
        if (fd == wake_) return;
        if (fd == listener_) {
          for (int client; (client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) {
            int on = 1;
            ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
            inputs_[client];
            add(client);
          }
          continue;
        }
        const ssize_t n = ::recv(fd, chunk.data(), chunk.size(), MSG_DONTWAIT);
        if (n <= 0) {
          if (n < 0 && errno == EAGAIN) continue;
          ::close(fd);
          inputs_.erase(fd);
          continue;
        }
        std::string& input = inputs_[fd];
        input.append(chunk.data(), static_cast<std::size_t>(n));
        std::size_t offset = 0;
        replies.clear();
        for (;;) {
          auto parsed = rdzv::parse_request(std::string_view(input).substr(offset),
                                            rdzv::Dialect::kV1_13, rdzv::Limits{}, request);
          if (parsed.status != rdzv::ParseStatus::kComplete) break;
          offset += parsed.consumed;
          if (request.op == rdzv::Op::kGet) {
            rdzv::append_u64(replies, value.size());
            replies += value;
          } else if (request.op == rdzv::Op::kAdd) {
            rdzv::append_i64(replies, ++counter);
          } else if (request.op == rdzv::Op::kWait) {  // the 1.13 client's get() waits first
            rdzv::append_u8(replies, rdzv::kStopWaiting);
          }
        }
        input.erase(0, offset);
        if (replies.empty()) continue;
        if (batched_ && ring.ok()) {
          std::string& kept = round_replies[static_cast<std::size_t>(e)];
          kept.swap(replies);  // stays in place until the ring's flush below
          ring.send(fd, kept.data(), kept.size(), 0);
        } else {
          ::send(fd, replies.data(), replies.size(), MSG_NOSIGNAL);
        }
      }
      ring.flush([](std::uint64_t, int) {});
    }
  }

  int listener_ = -1;
  int epoll_ = -1;
  int wake_ = -1;
  int port_ = 0;
  std::map<int, std::string> inputs_;
  std::thread thread_;
  bool batched_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  double seconds = 2.0;
  int rounds = 1;
  std::vector<int> client_counts = {1, 8, 32};
  bool with_minimal = true;
  double start_after = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seconds") == 0)
      seconds = std::atof(argv[i + 1]);
    else if (std::strcmp(argv[i], "--clients") == 0)
      client_counts = parse_list(argv[i + 1]);
    else if (std::strcmp(argv[i], "--rounds") == 0)
      rounds = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--start_after") == 0)
      start_after = std::atof(argv[i + 1]);
    else if (std::strcmp(argv[i], "--minimal") == 0)
      with_minimal = std::strcmp(argv[i + 1], "0") != 0;
  }

  // Forked before this process starts any thread; each child keeps its server until exit.
  ServerProcess ours([] {
    acc::rendezvous::StoreServerOptions options;
    options.host = "127.0.0.1";
    auto* server = new acc::rendezvous::StoreServer(options);
    server->start();
    return server->port();
  });
  // Ours as it was before its replies were batched: one send per reply.
  ServerProcess ours_unbatched([] {
    acc::rendezvous::StoreServerOptions options;
    options.host = "127.0.0.1";
    options.batch_sends = false;
    auto* server = new acc::rendezvous::StoreServer(options);
    server->start();
    return server->port();
  });
  ServerProcess torch_server([] {
    c10d::TCPStoreOptions torch_options;
    torch_options.port = 0;
    torch_options.isServer = true;
    torch_options.waitWorkers = false;
    auto* server = new c10d::TCPStore("127.0.0.1", torch_options);
    return static_cast<int>(server->getPort());
  });
  ServerProcess minimal([] { return (new MinimalServer)->port(); });
  ServerProcess batched([] { return (new MinimalServer(/*batched=*/true))->port(); });

  if (start_after > 0) std::this_thread::sleep_for(std::chrono::duration<double>(start_after));
  std::printf("c10d::TCPStore clients doing set+get+add for %.1f s each, %u hardware threads\n",
              seconds, std::thread::hardware_concurrency());
  std::printf("%8s %-16s %12s %10s %10s %14s\n", "clients", "server", "ops/s", "p50 us", "p99 us",
              "server cpu us/op");
  for (int clients : client_counts) {
    for (int round = 0; round < rounds; ++round) {
      // Alternate which server goes first so neither always runs on a warmer machine.
      Result mine, theirs;
      if (round % 2 == 0) {
        mine = measure(ours, clients, seconds);
        theirs = measure(torch_server, clients, seconds);
      } else {
        theirs = measure(torch_server, clients, seconds);
        mine = measure(ours, clients, seconds);
      }
      std::printf("%8d %-16s %12.0f %10.1f %10.1f %14.2f\n", clients, "acc StoreServer",
                  mine.ops_per_second, mine.p50_us, mine.p99_us, mine.server_cpu_us_per_op);
      std::printf("%8d %-16s %12.0f %10.1f %10.1f %14.2f\n", clients, "PyTorch TCPStore",
                  theirs.ops_per_second, theirs.p50_us, theirs.p99_us, theirs.server_cpu_us_per_op);
      if (with_minimal) {
        const Result each = measure(ours_unbatched, clients, seconds);
        std::printf("%8d %-16s %12.0f %10.1f %10.1f %14.2f\n", clients, "acc, send each",
                    each.ops_per_second, each.p50_us, each.p99_us, each.server_cpu_us_per_op);
        const Result bound = measure(minimal, clients, seconds);
        std::printf("%8d %-16s %12.0f %10.1f %10.1f %14.2f\n", clients, "minimal (bound)",
                    bound.ops_per_second, bound.p50_us, bound.p99_us, bound.server_cpu_us_per_op);
        const Result uring = measure(batched, clients, seconds);
        std::printf("%8d %-16s %12.0f %10.1f %10.1f %14.2f\n", clients, "minimal io_uring",
                    uring.ops_per_second, uring.p50_us, uring.p99_us, uring.server_cpu_us_per_op);
        std::printf("%8d %-16s %11.2fx %9.2fx %9.2fx %13.2fx\n", clients, "bound/torch",
                    bound.ops_per_second / theirs.ops_per_second, bound.p50_us / theirs.p50_us,
                    bound.p99_us / theirs.p99_us,
                    bound.server_cpu_us_per_op / theirs.server_cpu_us_per_op);
        std::printf("%8d %-16s %11.2fx %9.2fx %9.2fx %13.2fx\n", clients, "io_uring/torch",
                    uring.ops_per_second / theirs.ops_per_second, uring.p50_us / theirs.p50_us,
                    uring.p99_us / theirs.p99_us,
                    uring.server_cpu_us_per_op / theirs.server_cpu_us_per_op);
      }
      std::printf("%8d %-16s %11.2fx %9.2fx %9.2fx %13.2fx\n", clients, "ratio acc/torch",
                  mine.ops_per_second / theirs.ops_per_second, mine.p50_us / theirs.p50_us,
                  mine.p99_us / theirs.p99_us,
                  mine.server_cpu_us_per_op / theirs.server_cpu_us_per_op);
      std::fflush(stdout);
    }
  }
  return 0;
}
