// Store throughput, latency and server CPU: LibTorch's own C++ client, c10d::TCPStore (of the
// LibTorch this is built against: Debian's 1.13, or the one inside a PyTorch 2.x wheel), with 8
// and 32 client threads (one connection each) doing set, get and add in turn, against our
// StoreServer and against that LibTorch's own TCPStore server (2.x: the libuv one, its default) in
// the same run. Each server runs in a process of its own, so that its CPU time (utime + stime from
// /proc/<pid>/stat, before and after the load) is the server's alone. Prints ops/s, p50, p99 and
// server CPU per operation per server and round, the ratios ours/PyTorch, and their medians.
//
// Usage: store_bench [--seconds S] [--clients 8,32] [--rounds R] [--yardsticks 0|1]
//                    (yardsticks: ours batching always, ours with one send each, the minimal
//                     server both ways and all through io_uring; the least of the minimal
//                     servers' CPU per operation, over PyTorch's, is printed as the floor)
//                    [--classic 0|1]   (2.x: also PyTorch's older, non-libuv server)
//                    [--timeout S]     (bound on each step beyond its planned time; default 60)
//                    [--start_after S] (idle S seconds after forking the servers, for a profiler
//                                       to attach to them: bench/store/profile.sh)
// Every wait is bounded: a step that does not finish in time prints one line naming it and the
// bench exits 124; a client that fails prints one line and the bench exits 1.

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "acc/rendezvous/store_server.h"
#include "minimal_server.h"
#include "minimal_uring_server.h"
#include "server_process.h"

namespace {

using Clock = std::chrono::steady_clock;
using acc::bench::ServerProcess;

const std::string kTorchVersion =
    std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);

// Ends the bench when a step outlives its deadline: one line on stderr naming the step, every
// server process killed, exit 124. Started once the servers are forked (a fork after it would
// copy a process with a second thread).
class Watchdog {
 public:
  explicit Watchdog(std::vector<pid_t> servers)
      : servers_(std::move(servers)), thread_([this] { run(); }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }

  // `what` must finish within `limit` from now.
  void arm(std::string what, std::chrono::duration<double> limit) {
    std::lock_guard lock(mutex_);
    what_ = std::move(what);
    limit_ = limit.count();
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(limit);
    armed_ = true;
    changed_.notify_all();
  }
  void disarm() {
    std::lock_guard lock(mutex_);
    armed_ = false;
  }

  // Ends the bench now: `line` on stderr, every server killed, exit `code`. Nothing waits: a
  // client thread may still be blocked in a receive.
  [[noreturn]] void fail(const std::string& line, int code) {
    static std::atomic<bool> failing{false};
    if (failing.exchange(true)) {  // the other thread's line is being printed: let it finish
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    std::fflush(stdout);
    std::fprintf(stderr, "store_bench: %s\n", line.c_str());
    for (pid_t pid : servers_) ::kill(pid, SIGKILL);
    std::_Exit(code);
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (done_) return;
      if (!armed_) {
        changed_.wait(lock);
        continue;
      }
      if (changed_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ &&
          Clock::now() >= deadline_) {
        char limit[32];
        std::snprintf(limit, sizeof(limit), "%.0f", limit_);
        fail("timed out: " + what_ + " did not finish in " + limit + " s", 124);
      }
    }
  }

  std::vector<pid_t> servers_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool armed_ = false;
  bool done_ = false;
  std::string what_;
  double limit_ = 0;
  Clock::time_point deadline_;
  std::thread thread_;
};

struct Result {
  double server_cpu_us_per_op = 0;  // the server process's utime + stime, per operation
  double ops_per_second = 0;
  double p50_us = 0;
  double p99_us = 0;
};

double percentile(std::vector<std::int64_t>& ns, double p) {
  if (ns.empty()) return 0;
  auto index = static_cast<std::size_t>(p * static_cast<double>(ns.size() - 1));
  std::nth_element(ns.begin(), ns.begin() + static_cast<std::ptrdiff_t>(index), ns.end());
  return static_cast<double>(ns[index]) / 1000.0;
}

[[noreturn]] void client_failed(Watchdog& watchdog, const ServerProcess& server, int clients,
                                const std::string& what) {
  watchdog.fail("a client of '" + server.name() + "' (" + std::to_string(clients) +
                    " clients) failed: " + what.substr(0, what.find('\n')),
                1);
}

// Every client thread connects first; all start together and run for `seconds`.
Result measure(const ServerProcess& server, int clients, double seconds, double timeout,
               Watchdog& watchdog) {
  const std::string step = std::to_string(clients) + " clients of '" + server.name() + "'";
  watchdog.arm("connecting " + step, std::chrono::duration<double>(timeout));
  std::vector<std::unique_ptr<c10d::TCPStore>> stores;
  try {
    for (int i = 0; i < clients; ++i) {
      c10d::TCPStoreOptions options;
      options.port = static_cast<std::uint16_t>(server.port());
      options.isServer = false;
      options.waitWorkers = false;
      options.timeout = std::chrono::milliseconds(static_cast<long long>(timeout * 1000));
      stores.push_back(std::make_unique<c10d::TCPStore>("127.0.0.1", options));
    }
  } catch (const std::exception& error) {
    client_failed(watchdog, server, clients, std::string("connect: ") + error.what());
  }
  watchdog.arm("the load of " + step, std::chrono::duration<double>(seconds + timeout));
  std::vector<std::vector<std::int64_t>> latencies(clients);
  std::atomic<bool> go{false};
  std::atomic<long> ops{0};
  std::mutex error_mutex;
  std::string error;
  std::atomic<bool> failed{false};
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
      try {
        for (Clock::time_point now = Clock::now(); now < end && !failed.load();) {
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
      } catch (const std::exception& e) {
        std::lock_guard lock(error_mutex);
        if (error.empty()) error = e.what();
        failed = true;
      }
      ops += done;
    });
  }
  auto start = Clock::now();
  const double server_cpu_start = acc::bench::process_cpu_seconds(server.pid());
  go = true;
  for (auto& thread : threads) thread.join();
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const double server_cpu = acc::bench::process_cpu_seconds(server.pid()) - server_cpu_start;
  if (failed) client_failed(watchdog, server, clients, error);
  watchdog.arm("closing " + step, std::chrono::duration<double>(timeout));
  stores.clear();
  watchdog.disarm();
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

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

enum class Sends { kAdaptive, kBatched, kEach };

int serve_ours(Sends sends) {
  acc::rendezvous::StoreServerOptions options;
  options.host = "127.0.0.1";
  options.batch_sends = sends != Sends::kEach;
  options.adapt_batching = sends == Sends::kAdaptive;
  auto* server = new acc::rendezvous::StoreServer(options);
  server->start();
  return server->port();
}

int serve_torch([[maybe_unused]] bool libuv) {
  c10d::TCPStoreOptions options;
  options.port = 0;
  options.isServer = true;
  options.waitWorkers = false;
#if TORCH_VERSION_MAJOR >= 2
  options.useLibUV = libuv;
#endif
  auto* server = new c10d::TCPStore("127.0.0.1", options);
  return static_cast<int>(server->getPort());
}

// A server that accepts and never answers: what a server that does not speak the clients'
// dialect looks like to them. Only for the test that the bench ends instead of hanging.
int serve_silent() {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  ::listen(listener, 4096);  // the kernel completes the handshakes; nobody reads
  socklen_t length = sizeof(address);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

void print_row(int clients, const std::string& name, const Result& r) {
  std::printf("%8d %-24s %10.0f %9.1f %9.1f %9.2f\n", clients, name.c_str(), r.ops_per_second,
              r.p50_us, r.p99_us, r.server_cpu_us_per_op);
}

void print_ratio(int clients, const std::string& name, const Result& a, const Result& b) {
  std::printf("%8d %-24s %9.2fx %8.2fx %8.2fx %8.2fx\n", clients, name.c_str(),
              a.ops_per_second / b.ops_per_second, a.p50_us / b.p50_us, a.p99_us / b.p99_us,
              a.server_cpu_us_per_op / b.server_cpu_us_per_op);
}

struct Options {
  double seconds = 3.0;
  int rounds = 2;
  std::vector<int> client_counts = {8, 32};
  bool yardsticks = true;
  bool classic = false;
  bool silent = false;
  double timeout = 60;
  double start_after = 0;
};

// The flags, each with its value; nothing (after one line on stderr) for a bad one.
std::optional<Options> parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i += 2) {
    const char* flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "store_bench: %s needs a value\n", flag);
      return std::nullopt;
    }
    const char* value = argv[i + 1];
    if (std::strcmp(flag, "--seconds") == 0)
      o.seconds = std::atof(value);
    else if (std::strcmp(flag, "--clients") == 0)
      o.client_counts = parse_list(value);
    else if (std::strcmp(flag, "--rounds") == 0)
      o.rounds = std::atoi(value);
    else if (std::strcmp(flag, "--start_after") == 0)
      o.start_after = std::atof(value);
    else if (std::strcmp(flag, "--timeout") == 0)
      o.timeout = std::atof(value);
    else if (std::strcmp(flag, "--yardsticks") == 0 || std::strcmp(flag, "--minimal") == 0)
      o.yardsticks = std::strcmp(value, "0") != 0;
    else if (std::strcmp(flag, "--classic") == 0)
      o.classic = std::strcmp(value, "0") != 0;
    else if (std::strcmp(flag, "--silent_server") == 0)
      o.silent = std::strcmp(value, "0") != 0;
    else {
      std::fprintf(stderr, "store_bench: unknown flag %s (see the usage at the top of %s)\n", flag,
                   __FILE__);
      return std::nullopt;
    }
  }
  return o;
}

// Ours first, torch's second (the ratios' rows), then those the options ask for. Forked before
// this process starts any thread; each child keeps its server until the end. A server that could
// not start on this kernel (port 0) is left out, with a line that says so.
std::vector<std::unique_ptr<ServerProcess>> start_servers(const Options& o) {
  const std::string torch_name =
      "torch " + kTorchVersion + (TORCH_VERSION_MAJOR >= 2 ? " libuv" : "");
  std::vector<std::unique_ptr<ServerProcess>> servers;
  servers.push_back(
      std::make_unique<ServerProcess>("acc", [] { return serve_ours(Sends::kAdaptive); }));
  servers.push_back(
      std::make_unique<ServerProcess>(torch_name, [] { return serve_torch(/*libuv=*/true); }));
  if (o.classic && TORCH_VERSION_MAJOR >= 2) {
    servers.push_back(std::make_unique<ServerProcess>("torch " + kTorchVersion + " classic",
                                                      [] { return serve_torch(/*libuv=*/false); }));
  }
  if (o.yardsticks) {
    // Ours with every round batched and with one send per reply, and the yardstick both ways:
    // what the batching buys, and what the adaptive choice between them keeps of it.
    servers.push_back(std::make_unique<ServerProcess>("acc, batch always",
                                                      [] { return serve_ours(Sends::kBatched); }));
    servers.push_back(
        std::make_unique<ServerProcess>("acc, send each", [] { return serve_ours(Sends::kEach); }));
    servers.push_back(std::make_unique<ServerProcess>(
        "minimal", [] { return (new acc::bench::MinimalServer(false))->port(); }));
    servers.push_back(std::make_unique<ServerProcess>(
        "minimal io_uring", [] { return (new acc::bench::MinimalServer(true))->port(); }));
    servers.push_back(std::make_unique<ServerProcess>("minimal all io_uring", [] {
      auto* server = new acc::bench::MinimalUringServer();
      return server->ok() ? server->port() : 0;  // 0: this kernel lacks what it needs
    }));
  }
  if (o.silent) servers.push_back(std::make_unique<ServerProcess>("silent", serve_silent));
  std::erase_if(servers, [](const std::unique_ptr<ServerProcess>& server) {
    if (server->port() != 0) return false;
    std::printf("# server '%s': not available here, left out\n", server->name().c_str());
    return true;
  });
  return servers;
}

// Every server's rows for `clients` clients in each round, the round's ratio of ours to torch's,
// and the medians over the rounds. The minimal servers (`yardstick_rows`): their least CPU per
// operation in a round is the floor for ours.
void measure_clients(int clients, const std::vector<std::unique_ptr<ServerProcess>>& servers,
                     const std::vector<std::size_t>& yardstick_rows, const Options& o,
                     Watchdog& watchdog) {
  std::vector<double> cpu_ratios, p99_ratios, floor_ratios;
  for (int round = 0; round < o.rounds; ++round) {
    // Rotate which server goes first so none always runs on a warmer machine.
    std::vector<Result> results(servers.size());
    for (std::size_t k = 0; k < servers.size(); ++k) {
      const std::size_t s = (k + static_cast<std::size_t>(round)) % servers.size();
      results[s] = measure(*servers[s], clients, o.seconds, o.timeout, watchdog);
    }
    for (std::size_t s = 0; s < servers.size(); ++s)
      print_row(clients, servers[s]->name(), results[s]);
    print_ratio(clients, "ratio acc/torch " + kTorchVersion, results[0], results[1]);
    cpu_ratios.push_back(results[0].server_cpu_us_per_op / results[1].server_cpu_us_per_op);
    p99_ratios.push_back(results[0].p99_us / results[1].p99_us);
    if (!yardstick_rows.empty()) {
      double floor = results[yardstick_rows[0]].server_cpu_us_per_op;
      for (std::size_t s : yardstick_rows) floor = std::min(floor, results[s].server_cpu_us_per_op);
      floor_ratios.push_back(floor / results[1].server_cpu_us_per_op);
    }
    std::fflush(stdout);
  }
  std::printf("%8d %-24s cpu/op %.2fx, p99 %.2fx (median of %d rounds; the rounds:", clients,
              ("median acc/torch " + kTorchVersion).c_str(), median(cpu_ratios), median(p99_ratios),
              o.rounds);
  for (std::size_t r = 0; r < cpu_ratios.size(); ++r)
    std::printf(" %.2fx/%.2fx", cpu_ratios[r], p99_ratios[r]);
  std::printf(")\n");
  if (!floor_ratios.empty()) {
    std::printf("%8d %-24s cpu/op %.2fx (the least minimal server's in each round, over torch's;",
                clients, ("median floor/torch " + kTorchVersion).c_str(), median(floor_ratios));
    for (double ratio : floor_ratios) std::printf(" %.2fx", ratio);
    std::printf(")\n");
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Options> options = parse_options(argc, argv);
  if (!options) return 2;
  const std::vector<std::unique_ptr<ServerProcess>> servers = start_servers(*options);
  std::vector<std::size_t> yardstick_rows;
  for (std::size_t s = 0; s < servers.size(); ++s)
    if (servers[s]->name().starts_with("minimal")) yardstick_rows.push_back(s);
  std::vector<pid_t> pids;
  for (const auto& server : servers) {
    pids.push_back(server->pid());
    std::printf("# server '%s': pid %d, port %d\n", server->name().c_str(), server->pid(),
                server->port());
  }
  std::fflush(stdout);
  Watchdog watchdog(pids);

  if (options->start_after > 0)
    std::this_thread::sleep_for(std::chrono::duration<double>(options->start_after));
  std::printf(
      "c10d::TCPStore clients of LibTorch %s doing set+get+add for %.1f s each, "
      "%u hardware threads\n",
      TORCH_VERSION, options->seconds, std::thread::hardware_concurrency());
  std::printf("%8s %-24s %10s %9s %9s %9s\n", "clients", "server", "ops/s", "p50 us", "p99 us",
              "cpu us/op");
  for (int clients : options->client_counts)
    measure_clients(clients, servers, yardstick_rows, *options, watchdog);
  return 0;
}
