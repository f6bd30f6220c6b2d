// store_scale: N simulated ranks, each doing on the wire what a PyTorch 2.x worker's
// init_process_group and its store-based barrier do, against a store server in a process of its
// own: acc-launch's (`acc-launch rendezvous serve`) and PyTorch 2.x's libuv TCPStore server,
// one after the other at each count.
//
// One rank, over its own TCP connection (the bytes of torch/csrc/distributed/c10d/TCPStore.cpp,
// 2.2+ dialect, and of _store_based_barrier in distributed_c10d.py):
//   connect; VALIDATE (no reply) + PING, echo read       the 2.x client's handshake
//   ADD "init/" 1                                        TCPStore(world_size=...)'s check-in
//   ADD "/default_pg/store_based_barrier_key:0" 1        _store_based_barrier
//   ADD the same key 0 (the count); the rank that reads N SETs "...:last_worker" "1"
//   WAIT ["...:last_worker"], its STOP_WAITING read     the rank is past the barrier
// Every rank then keeps its connection open, as a worker does, until the count is done.
//
// The client is one thread over one epoll set, a few dozen bytes per rank, so that at 100,000
// ranks it measures the server rather than itself. Connections come from several loopback source
// addresses (127.0.X.Y, IP_BIND_ADDRESS_NO_PORT: the port is chosen per 4-tuple at connect) so
// that the ~28,000 ephemeral ports of one address do not run out. At most --window ranks are
// between their connect and their PING's echo at once: a listener's accept queue holds
// somaxconn (4096 by default) connections, and a handshake past it is dropped and retried by the
// kernel a second later, which would measure the SYN retransmission timer, not the server.
//
// Per count and server it prints: seconds from the first connect to the last rank past the
// barrier, the server's CPU seconds (utime + stime from /proc), its resident memory per
// connection (VmRSS at the end less VmRSS before the first connect, over N) and the kernel's
// slab growth per connection (both ends, /proc/meminfo, machine-wide, so approximate), and the
// load average. The last line is
//   store init, N ranks: acc-launch X s, PyTorch 2.x Y s
// for the largest count (Y a phrase where it did not finish in its bound).
//
// Usage: store_scale --acc-launch PATH [--torch-python PY] [--ranks 1000,10000,100000]
//                    [--timeout-s 60] [--torch-timeout-s 120] [--window 500]
// Exit: 0 when acc-launch's server finished every count; 1 otherwise; 2 on bad usage.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "loopback.h"

namespace {

using acc::bench::load_average;

using Clock = std::chrono::steady_clock;

// --- /proc readings of the server process and the machine.

double process_cpu_seconds(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const std::size_t end_of_name = stat.rfind(')');
  if (end_of_name == std::string::npos) return 0;
  const char* p = stat.c_str() + end_of_name + 1;
  for (int field = 3; field <= 13 && p; ++field) p = std::strchr(p + 1, ' ');
  if (!p) return 0;
  char* next = nullptr;
  const unsigned long long utime = std::strtoull(p, &next, 10);
  const unsigned long long stime = std::strtoull(next, nullptr, 10);
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// A "Name:   123 kB" field of /proc/<pid>/status or /proc/meminfo, in bytes.
long long kb_field(const std::string& path, const std::string& name) {
  std::ifstream file(path);
  for (std::string line; std::getline(file, line);) {
    if (line.compare(0, name.size(), name) == 0 && line.size() > name.size() &&
        line[name.size()] == ':') {
      return std::atoll(line.c_str() + name.size() + 1) * 1024;
    }
  }
  return 0;
}

long long rss_bytes(pid_t pid) {
  return kb_field("/proc/" + std::to_string(pid) + "/status", "VmRSS");
}

long long slab_bytes() {
  return kb_field("/proc/meminfo", "Slab");
}

// --- The server under test, in a process of its own.

class ServerProcess {
 public:
  // Runs argv with a pipe as stdin (closed to stop a server that reads it) and its stdout read
  // until a line gives the port: after `port_after` when set, else the line's first number.
  ServerProcess(const std::vector<std::string>& argv, const std::string& port_after, bool quiet) {
    int out[2], in[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(in, O_CLOEXEC) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ < 0) std::abort();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(in[0], STDIN_FILENO);
      if (quiet) {
        const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
        ::dup2(null, STDERR_FILENO);
      }
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      std::fprintf(stderr, "store_scale: cannot run %s: %s\n", args[0], std::strerror(errno));
      ::_exit(127);
    }
    ::close(out[1]);
    ::close(in[0]);
    stdin_ = in[1];
    // Bounded: a server that prints nothing for 60 s, or exits, ends the wait.
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    std::string line;
    ::fcntl(out[0], F_SETFL, O_NONBLOCK);
    while (Clock::now() < deadline && port_ == 0) {
      char c;
      const ssize_t n = ::read(out[0], &c, 1);
      if (n == 0) break;
      if (n < 0) {
        if (errno != EAGAIN) break;
        ::usleep(2000);
        continue;
      }
      if (c != '\n') {
        line += c;
        continue;
      }
      const std::size_t at =
          port_after.empty() ? line.find_first_of("0123456789") : line.find(port_after);
      if (at != std::string::npos) {
        port_ = std::atoi(line.c_str() + at + port_after.size());
      }
      line.clear();
    }
    ::close(out[0]);
  }
  ~ServerProcess() {
    ::close(stdin_);
    ::kill(pid_, SIGTERM);
    acc::bench::reap_or_kill(pid_, 5'000);
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  int port_ = 0;
};

// --- The wire: PyTorch 2.2+ TCPStore requests (docs/rendezvous.md, "Protocol").

constexpr std::uint8_t kValidate = 0, kSet = 1, kAdd = 4, kWait = 6, kPing = 13;
constexpr std::uint32_t kValidationMagic = 0x3C85F7CE;

void put_u8(std::string& out, std::uint8_t v) {
  out.push_back(static_cast<char>(v));
}
template <typename T>
void put_raw(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));  // host order, as PyTorch's client
}
void put_string(std::string& out, const std::string& s) {
  put_raw<std::uint64_t>(out, s.size());
  out += s;
}

const std::string kInitKey = "init/";
const std::string kBarrierKey = "/default_pg/store_based_barrier_key:0";
const std::string kLastWorkerKey = kBarrierKey + ":last_worker";

std::string handshake(std::uint32_t nonce) {
  std::string out;
  put_u8(out, kValidate);
  put_raw(out, kValidationMagic);
  put_u8(out, kPing);
  put_raw(out, nonce);
  return out;
}
std::string add(const std::string& key, std::int64_t delta) {
  std::string out;
  put_u8(out, kAdd);
  put_string(out, key);
  put_raw(out, delta);
  return out;
}
std::string wait_last_worker(bool set_first) {
  std::string out;
  if (set_first) {
    put_u8(out, kSet);
    put_string(out, kLastWorkerKey);
    put_string(out, "1");
  }
  put_u8(out, kWait);
  put_raw<std::uint64_t>(out, 1);
  put_string(out, kLastWorkerKey);
  return out;
}

// --- The ranks.

enum class Step : std::uint8_t {
  kIdle,        // not yet connecting, or waiting to retry
  kConnecting,  // connect() in progress
  kPing,        // VALIDATE + PING sent, echo awaited (4 bytes)
  kAddInit,     // ADD init/ 1 sent (8 bytes)
  kAddJoin,     // ADD barrier 1 sent (8 bytes)
  kAddCount,    // ADD barrier 0 sent (8 bytes)
  kWait,        // WAIT last_worker sent (1 byte)
  kDone,        // past the barrier; connection held open
  kFailed,
};

struct Rank {
  int fd = -1;
  Step step = Step::kIdle;
  std::uint8_t have = 0;  // reply bytes read so far
  std::uint8_t retries = 0;
  char reply[8];
};

std::size_t reply_size(Step step) {
  switch (step) {
    case Step::kPing:
      return 4;
    case Step::kAddInit:
    case Step::kAddJoin:
    case Step::kAddCount:
      return 8;
    case Step::kWait:
      return 1;
    default:
      return 0;
  }
}

constexpr int kWaitingSteps = 7;  // Step::kIdle to Step::kWait

// "12 connecting, 3 in the handshake, ...": where the ranks of an unfinished run stopped.
std::string where(const int (&waiting)[kWaitingSteps]) {
  static const char* const kNames[] = {"not connected",          "connecting",
                                       "in the handshake",       "in ADD init/",
                                       "in the barrier's ADD 1", "in the barrier's ADD 0",
                                       "in the barrier's WAIT"};
  std::string text;
  for (int s = 0; s < kWaitingSteps; ++s) {
    if (waiting[s] == 0) continue;
    text += (text.empty() ? "" : ", ") + std::to_string(waiting[s]) + " " + kNames[s];
  }
  return text;
}

struct Result {
  int waiting[kWaitingSteps] = {};  // ranks neither done nor failed, by step
  bool finished = false;
  int done = 0;
  int failed = 0;
  int retries = 0;
  double seconds = 0;
  double server_cpu = 0;
  double client_cpu = 0;  // the client processes', all of them
  long long rss_per_connection = 0;
  long long slab_per_connection = 0;
  std::string first_error;
};

class Run {
 public:
  // Ranks [first, first + count) of `total`, from `start` on.
  Run(int first, int count, int total, int port, int source_block, int window,
      Clock::time_point start, std::chrono::seconds timeout)
      : ranks_(static_cast<std::size_t>(count)),
        first_(first),
        count_(count),
        n_(total),
        port_(port),
        source_block_(source_block),
        window_(window),
        timeout_(timeout),
        start_(start) {
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < count_; ++i) pending_.push_back(i);
  }
  ~Run() {
    // A reset, not a FIN: no TIME_WAIT left to hold this run's ports, and the server sees its
    // connections end at once.
    linger hard{1, 0};
    for (Rank& rank : ranks_) {
      if (rank.fd < 0) continue;
      ::setsockopt(rank.fd, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
      ::close(rank.fd);
    }
    ::close(epoll_);
  }

  // Drives every rank until all are past the barrier or the bound passes.
  Result go() {
    Result result;
    const auto deadline = start_ + timeout_;
    std::vector<epoll_event> events(4096);
    while (done_ + failed_ < count_ && Clock::now() < deadline) {
      start_connects();
      const bool retrying = !retry_.empty();
      const int ready =
          ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), retrying ? 5 : 50);
      for (int i = 0; i < ready; ++i) serve(events[i].data.u32, events[i].events);
      requeue_retries();
    }
    result.seconds = std::chrono::duration<double>(last_done_ - start_).count();
    result.finished = done_ == count_;
    result.done = done_;
    result.failed = failed_;
    result.retries = retries_;
    result.first_error = first_error_;
    for (const Rank& rank : ranks_) {
      if (static_cast<int>(rank.step) < kWaitingSteps)
        ++result.waiting[static_cast<int>(rank.step)];
    }
    return result;
  }

 private:
  void start_connects() {
    while (!pending_.empty() && in_handshake_ < window_) {
      const int i = pending_.front();
      pending_.pop_front();
      connect_rank(i);
    }
  }

  void connect_rank(int i) {
    Rank& rank = ranks_[static_cast<std::size_t>(i)];
    std::string error;
    rank.fd = acc::bench::start_connect(acc::bench::loopback_source(source_block_, first_ + i),
                                        port_, error);
    ++in_handshake_;
    rank.step = Step::kConnecting;
    rank.have = 0;
    if (rank.fd < 0) {
      // A connect refused at once is worth a retry; a socket or address that fails is not.
      if (error.rfind("connect:", 0) == 0) return retry_or_fail(i, error);
      return fail(i, error);
    }
    epoll_event event{};
    event.events = EPOLLOUT | EPOLLIN;
    event.data.u32 = static_cast<std::uint32_t>(i);
    if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, rank.fd, &event) != 0) {
      return fail(i, "epoll_ctl: " + std::string(std::strerror(errno)));
    }
  }

  void serve(std::uint32_t i, std::uint32_t events) {
    Rank& rank = ranks_[i];
    if (rank.fd < 0) return;
    if (rank.step == Step::kConnecting) {
      int error = 0;
      socklen_t length = sizeof(error);
      ::getsockopt(rank.fd, SOL_SOCKET, SO_ERROR, &error, &length);
      if (error != 0) {
        return retry_or_fail(static_cast<int>(i), "connect: " + std::string(std::strerror(error)));
      }
      if (!(events & EPOLLOUT)) return;
      epoll_event event{};
      event.events = EPOLLIN;
      event.data.u32 = i;
      ::epoll_ctl(epoll_, EPOLL_CTL_MOD, rank.fd, &event);
      return send_step(static_cast<int>(i), Step::kPing,
                       handshake(static_cast<std::uint32_t>(first_) + i));
    }
    if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return;
    const std::size_t want = reply_size(rank.step);
    if (want == 0) {
      // Bytes or an end where none is due: a done rank's server closing is the end of the run.
      char byte;
      if (::recv(rank.fd, &byte, 1, MSG_DONTWAIT) <= 0 && rank.step == Step::kDone) {
        ::epoll_ctl(epoll_, EPOLL_CTL_DEL, rank.fd, nullptr);
      }
      return;
    }
    const ssize_t n = ::recv(rank.fd, rank.reply + rank.have, want - rank.have, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
      const std::string why = n == 0 ? "the server closed the connection" : std::strerror(errno);
      // Reset before the handshake's echo: the accept queue overflowed; the client retries.
      if (rank.step == Step::kPing) return retry_or_fail(static_cast<int>(i), "handshake: " + why);
      return fail(static_cast<int>(i),
                  "in step " + std::to_string(static_cast<int>(rank.step)) + ": " + why);
    }
    rank.have = static_cast<std::uint8_t>(rank.have + n);
    if (rank.have < want) return;
    rank.have = 0;
    advance(static_cast<int>(i));
  }

  void advance(int i) {
    Rank& rank = ranks_[static_cast<std::size_t>(i)];
    switch (rank.step) {
      case Step::kPing: {
        std::uint32_t echo;
        std::memcpy(&echo, rank.reply, sizeof(echo));
        if (echo != static_cast<std::uint32_t>(first_ + i))
          return fail(i, "PING echoed the wrong nonce");
        --in_handshake_;
        return send_step(i, Step::kAddInit, add(kInitKey, 1));
      }
      case Step::kAddInit:
        return send_step(i, Step::kAddJoin, add(kBarrierKey, 1));
      case Step::kAddJoin:
        return send_step(i, Step::kAddCount, add(kBarrierKey, 0));
      case Step::kAddCount: {
        std::int64_t count;
        std::memcpy(&count, rank.reply, sizeof(count));
        return send_step(i, Step::kWait, wait_last_worker(count == n_));
      }
      case Step::kWait:
        if (rank.reply[0] != 0) return fail(i, "WAIT answered other than STOP_WAITING");
        rank.step = Step::kDone;
        ++done_;
        last_done_ = Clock::now();
        return;
      default:
        return;
    }
  }

  void send_step(int i, Step next, const std::string& bytes) {
    Rank& rank = ranks_[static_cast<std::size_t>(i)];
    rank.step = next;
    // A few dozen bytes into an empty socket buffer: whole, or the connection is gone.
    const ssize_t n = ::send(rank.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n != static_cast<ssize_t>(bytes.size())) {
      if (next == Step::kPing) return retry_or_fail(i, "handshake send failed");
      fail(i, "send: " + std::string(n < 0 ? std::strerror(errno) : "short"));
    }
  }

  void drop_socket(Rank& rank) {
    if (rank.fd >= 0) {
      ::epoll_ctl(epoll_, EPOLL_CTL_DEL, rank.fd, nullptr);
      linger hard{1, 0};
      ::setsockopt(rank.fd, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
      ::close(rank.fd);
      rank.fd = -1;
    }
  }

  // A connection refused or reset before its handshake completed is what PyTorch's client
  // retries (with backoff); so does this one, 20 times at most, 100 ms apart.
  void retry_or_fail(int i, const std::string& why) {
    Rank& rank = ranks_[static_cast<std::size_t>(i)];
    if (rank.retries >= 20) return fail(i, why + " (after 20 retries)");
    if (rank.step == Step::kConnecting || rank.step == Step::kPing) --in_handshake_;
    drop_socket(rank);
    rank.step = Step::kIdle;
    ++rank.retries;
    ++retries_;
    if (first_error_.empty()) first_error_ = "retried: " + why;
    retry_.push_back({Clock::now() + std::chrono::milliseconds(100), i});
  }

  void fail(int i, const std::string& why) {
    Rank& rank = ranks_[static_cast<std::size_t>(i)];
    if (rank.step == Step::kConnecting || rank.step == Step::kPing) --in_handshake_;
    drop_socket(rank);
    rank.step = Step::kFailed;
    ++failed_;
    if (first_error_.empty() || first_error_.rfind("retried: ", 0) == 0) {
      first_error_ = "rank " + std::to_string(first_ + i) + ": " + why;
    }
  }

  void requeue_retries() {
    const auto now = Clock::now();
    while (!retry_.empty() && retry_.front().first <= now) {
      pending_.push_back(retry_.front().second);
      retry_.pop_front();
    }
  }

  std::vector<Rank> ranks_;
  int first_;
  int count_;
  int n_;
  int port_;
  int source_block_;
  int window_;
  std::chrono::seconds timeout_;
  int epoll_ = -1;
  std::deque<int> pending_;
  std::deque<std::pair<Clock::time_point, int>> retry_;
  int in_handshake_ = 0;
  int done_ = 0;
  int failed_ = 0;
  int retries_ = 0;
  std::string first_error_;
  Clock::time_point start_;
  Clock::time_point last_done_;
};

// The server under test: its port and process.
struct Target {
  int port = 0;
  pid_t pid = -1;
};

struct Options {
  std::string acc_launch;
  std::string torch_python;
  std::string torch_server_script;
  std::vector<int> counts = {1000, 10000, 100000};
  int timeout_s = 60;
  int torch_timeout_s = 120;
  int window = 500;
  Target attach;  // --attach PORT:PID: a server already running (a launcher's), alone
};

// utime + stime of the waited-for children: the client processes, and servers already reaped.
double children_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// What one client process tells the driver, over a pipe, once its ranks are past the barrier.
struct Report {
  int done = 0;
  int failed = 0;
  int retries = 0;
  double seconds = 0;
  int waiting[kWaitingSteps] = {};
  char error[240] = {};
};

struct Client {
  pid_t pid = -1;
  int report = -1;   // read end: its Report
  int release = -1;  // write end: closed when its connections may go
};

// A client process: drives its slice of the ranks, reports, and holds its connections open until
// released (or its bound passes), as workers hold theirs for the whole job.
[[noreturn]] void client_main(int first, int count, int total, int port, int block, int window,
                              Clock::time_point start, int timeout_s, int report_fd,
                              int release_fd) {
  {
    Run run(first, count, total, port, block, window, start, std::chrono::seconds(timeout_s));
    const Result r = run.go();
    Report report;
    report.done = r.done;
    report.failed = r.failed;
    report.retries = r.retries;
    report.seconds = r.seconds;
    std::copy(std::begin(r.waiting), std::end(r.waiting), std::begin(report.waiting));
    std::snprintf(report.error, sizeof(report.error), "%s", r.first_error.c_str());
    [[maybe_unused]] auto n = ::write(report_fd, &report, sizeof(report));
    pollfd released{release_fd, POLLIN, 0};
    ::poll(&released, 1, 60'000);
  }
  ::_exit(0);
}

Result measure(const Target& server, int ranks, int source_block, int window, int timeout_s) {
  Result result;
  if (server.port == 0) {
    result.first_error = "the server did not start";
    return result;
  }
  const long long rss_before = rss_bytes(server.pid);
  const long long slab_before = slab_bytes();
  const double cpu_before = process_cpu_seconds(server.pid);
  const double children_before = children_cpu_seconds();
  // The ranks over client processes of at most this many connections each, under the
  // per-process descriptor limit: one epoll thread each.
  const int per_client = acc::bench::connections_per_process();
  const int clients = (ranks + per_client - 1) / per_client;
  const auto start = Clock::now();
  std::vector<Client> running;
  for (int c = 0; c < clients; ++c) {
    const int first = c * per_client;
    const int count = std::min(per_client, ranks - first);
    int report[2], release[2];
    if (::pipe2(report, O_CLOEXEC) != 0 || ::pipe2(release, O_CLOEXEC) != 0) std::abort();
    const pid_t pid = ::fork();
    if (pid < 0) std::abort();
    if (pid == 0) {
      ::close(report[0]);
      ::close(release[1]);
      for (const Client& other : running) ::close(other.release);
      client_main(first, count, ranks, server.port, source_block, std::max(1, window / clients),
                  start, timeout_s, report[1], release[0]);
    }
    ::close(report[1]);
    ::close(release[0]);
    running.push_back({pid, report[0], release[1]});
  }
  // Every client reports within its bound; a margin for the reports themselves.
  const auto deadline = start + std::chrono::seconds(timeout_s + 10);
  int reported = 0;
  double last = 0;
  for (Client& client : running) {
    pollfd ready{client.report, POLLIN, 0};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    Report report;
    if (::poll(&ready, 1, static_cast<int>(std::max<long long>(left.count(), 0))) == 1 &&
        ::read(client.report, &report, sizeof(report)) == sizeof(report)) {
      ++reported;
      result.done += report.done;
      result.failed += report.failed;
      result.retries += report.retries;
      last = std::max(last, report.seconds);
      for (int s = 0; s < kWaitingSteps; ++s) result.waiting[s] += report.waiting[s];
      if (result.first_error.empty() || result.first_error.rfind("retried: ", 0) == 0) {
        if (report.error[0] != 0) result.first_error = report.error;
      }
    }
    ::close(client.report);
  }
  result.finished = reported == clients && result.done == ranks;
  result.seconds = last;
  if (reported < clients && result.first_error.empty()) {
    result.first_error = std::to_string(clients - reported) + " client process(es) did not report";
  }
  // Read while every connection is still open.
  result.server_cpu = process_cpu_seconds(server.pid) - cpu_before;
  const long long open = std::max(result.done, 1);
  result.rss_per_connection = (rss_bytes(server.pid) - rss_before) / open;
  result.slab_per_connection = (slab_bytes() - slab_before) / open;
  for (Client& client : running) ::close(client.release);
  for (Client& client : running) acc::bench::reap_or_kill(client.pid);
  result.client_cpu = children_cpu_seconds() - children_before;
  return result;
}

void print_row(const char* name, int ranks, const Result& r, int timeout_s) {
  if (r.finished) {
    std::printf(
        "%7d  %-11s %8.3f s  server CPU %6.2f s  clients' CPU %6.2f s  server RSS/conn %5lld B  "
        "kernel slab/conn %6lld B  retries %d  load %s\n",
        ranks, name, r.seconds, r.server_cpu, r.client_cpu, r.rss_per_connection,
        r.slab_per_connection, r.retries, load_average().c_str());
  } else {
    const std::string waiting = where(r.waiting);
    std::printf(
        "%7d  %-11s did not finish in %d s: %d past the barrier, %d failed%s%s%s; still "
        "waiting: %s  server CPU %.2f s  load %s\n",
        ranks, name, timeout_s, r.done, r.failed, r.first_error.empty() ? "" : " (",
        r.first_error.c_str(), r.first_error.empty() ? "" : ")",
        waiting.empty() ? "none" : waiting.c_str(), r.server_cpu, load_average().c_str());
  }
  std::fflush(stdout);
}

// "X s", or what happened instead, for the last line.
std::string phrase(const Result& r, int ranks, int timeout_s) {
  char text[256];
  if (r.finished) {
    std::snprintf(text, sizeof(text), "%.3f s", r.seconds);
  } else if (r.first_error == "the server did not start") {
    std::snprintf(text, sizeof(text), "not run (its server did not start)");
  } else {
    std::snprintf(text, sizeof(text), "did not finish in %d s (%d of %d ranks past the barrier)",
                  timeout_s, r.done, ranks);
  }
  return text;
}

// Reads the flags into `options`; false (with a line on stderr) for an unknown one.
bool parse_flags(int argc, char** argv, Options& options) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--acc-launch") {
      options.acc_launch = value;
    } else if (flag == "--torch-python") {
      options.torch_python = value;
    } else if (flag == "--torch-server") {
      options.torch_server_script = value;
    } else if (flag == "--ranks") {
      options.counts.clear();
      std::stringstream list(value);
      for (std::string item; std::getline(list, item, ',');) {
        options.counts.push_back(std::stoi(item));
      }
    } else if (flag == "--timeout-s") {
      options.timeout_s = std::stoi(value);
    } else if (flag == "--torch-timeout-s") {
      options.torch_timeout_s = std::stoi(value);
    } else if (flag == "--attach") {
      options.attach.port = std::stoi(value);
      options.attach.pid = std::stoi(value.substr(value.find(':') + 1));
    } else if (flag == "--window") {
      options.window = std::stoi(value);
    } else {
      std::fprintf(stderr, "store_scale: unknown flag %s\n", flag.c_str());
      return false;
    }
  }
  return true;
}

// Each count against a server already running (--attach PORT:PID). 0 when all finished.
int run_attached(const Options& options) {
  bool ok = true;
  int block = 1;  // each run its own source addresses: 127.<block>.0.x
  for (int ranks : options.counts) {
    const Result r = measure(options.attach, ranks, block++, options.window, options.timeout_s);
    print_row("attached", ranks, r, options.timeout_s);
    ok = ok && r.finished;
  }
  return ok ? 0 : 1;
}

// Each count against our server, then PyTorch's, each a process of its own; the summary line
// last. 0 when ours finished at every count.
int run_servers(const Options& options) {
  bool ok = true;
  int block = 1;  // each run its own source addresses: 127.<block>.0.x
  std::string last_ours, last_theirs;
  for (int ranks : options.counts) {
    Result ours;
    {
      ServerProcess server(
          {options.acc_launch, "rendezvous", "serve", "--host", "127.0.0.1", "--port", "0"},
          "127.0.0.1:", /*quiet=*/false);
      ours =
          measure({server.port(), server.pid()}, ranks, block++, options.window, options.timeout_s);
    }
    print_row("acc-launch", ranks, ours, options.timeout_s);
    ok = ok && ours.finished;
    last_ours = phrase(ours, ranks, options.timeout_s);
    if (options.torch_python.empty()) {
      last_theirs = "not run (no PyTorch 2.x python given)";
      continue;
    }
    Result theirs;
    {
      // Quiet: PyTorch's server warns on stderr for every connection whose peer has no name.
      ServerProcess server({options.torch_python, options.torch_server_script}, "",
                           /*quiet=*/true);
      theirs = measure({server.port(), server.pid()}, ranks, block++, options.window,
                       options.torch_timeout_s);
    }
    print_row("PyTorch 2.x", ranks, theirs, options.torch_timeout_s);
    last_theirs = phrase(theirs, ranks, options.torch_timeout_s);
  }
  std::printf("store init, %d ranks: acc-launch %s, PyTorch 2.x %s\n", options.counts.back(),
              last_ours.c_str(), last_theirs.c_str());
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse_flags(argc, argv, options)) return 2;
  if (options.acc_launch.empty() || options.counts.empty()) {
    std::fprintf(stderr,
                 "usage: store_scale --acc-launch PATH [--torch-python PY --torch-server "
                 "SCRIPT] [--ranks 1000,10000,100000] [--timeout-s 60] [--torch-timeout-s 120] "
                 "[--window 500]\n");
    return 2;
  }
  acc::bench::begin_run("store_scale",
                        "init_process_group + store barrier per rank, one connection each", "ranks",
                        options.window);
  return options.attach.port != 0 ? run_attached(options) : run_servers(options);
}
