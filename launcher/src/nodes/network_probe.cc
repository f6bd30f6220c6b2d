#include "nodes/network_probe.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "acc/common/endpoint.h"
#include "acc/common/error.h"
#include "acc/common/strings.h"
#include "acc/common/unique_fd.h"
#include "acc/rendezvous/key_value_store.h"
#include "acc/rendezvous/tcp_connect.h"
#include "nodes/socket_bytes.h"
#include "output/log.h"

namespace acc::launcher {
namespace {

using std::chrono::milliseconds;

constexpr char kEcho = 'L';
constexpr char kSink = 'B';
constexpr std::size_t kChunk = 64 << 10;
// The sender's socket buffer: small, so that what it holds when the time is up drains within a
// fraction of the measure even on a slow link (the kernel doubles it).
constexpr int kSendBuffer = 128 << 10;
// How long either end waits for the other inside one measure, and for a connect.
constexpr int kSocketTimeoutSeconds = 3;
constexpr milliseconds kConnectBound{2000};
// How long after its own bound a node waits for node 0's list of the measures that count.
constexpr milliseconds kCountedGrace{2000};

void set_timeouts(int fd) {
  set_socket_timeouts(fd, kSocketTimeoutSeconds);
}

// One connection to the probe: an echo of single bytes, or a sink that answers with the count
// it read once the peer has shut its side.
void serve_probe(UniqueFd fd) {
  set_timeouts(fd.get());
  char mode = 0;
  if (!read_all_bytes(fd.get(), &mode, 1)) return;
  if (mode == kEcho) {
    char byte = 0;
    while (read_all_bytes(fd.get(), &byte, 1) && write_all_bytes(fd.get(), &byte, 1)) {
    }
    return;
  }
  if (mode != kSink) return;
  std::vector<char> buffer(kChunk);
  std::uint64_t count = 0;
  for (;;) {
    const ssize_t n = ::recv(fd.get(), buffer.data(), buffer.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;
    if (n == 0) break;
    count += static_cast<std::uint64_t>(n);
  }
  write_all_bytes(fd.get(), reinterpret_cast<const char*>(&count), sizeof count);
}

UniqueFd listen_any(int& port) {
  // Dual-stack where the machine has IPv6, so that a peer that resolves this host to either
  // family reaches it.
  UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd) {
    int off = 0;
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_addr = in6addr_any;
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) fd.reset();
  }
  if (!fd) {
    fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    ACC_CHECK(fd && ::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0,
              NetworkError,
              "--network_check: cannot bind its probe's socket: ", std::strerror(errno));
  }
  ACC_CHECK(::listen(fd.get(), 16) == 0, NetworkError,
            "--network_check: cannot listen on its probe's socket: ", std::strerror(errno));
  port = bound_port(fd.get());
  return fd;
}

}  // namespace

class ProbeServer::Impl {
 public:
  explicit Impl(UniqueFd listener) : listener_(std::move(listener)), acceptor_([this] { run(); }) {}

  ~Impl() {
    stop_ = true;
    acceptor_.join();
    for (std::thread& t : connections_) t.join();
  }

 private:
  // Polls in 100 ms slices so that the destructor's stop is seen.
  void run() {
    while (!stop_) {
      pollfd entry{listener_.get(), POLLIN, 0};
      if (::poll(&entry, 1, 100) <= 0) continue;
      UniqueFd connection(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!connection) continue;
      connections_.emplace_back(serve_probe, std::move(connection));
    }
  }

  UniqueFd listener_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> connections_;  // the acceptor's only, until it is joined
  std::thread acceptor_;
};

ProbeServer::ProbeServer() {
  UniqueFd listener = listen_any(port_);
  impl_ = std::make_unique<Impl>(std::move(listener));
}

ProbeServer::~ProbeServer() = default;

namespace {

double median_seconds(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  return times.empty() ? 0 : times[times.size() / 2];
}

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

UniqueFd connect_probe(const std::string& host, int port, const rendezvous::Clock& clock,
                       Clock::time_point deadline, char mode) {
  const rendezvous::TcpResolution resolved = rendezvous::resolve_tcp(host, port);
  if (resolved.status != 0) return UniqueFd(-1);
  rendezvous::TcpConnection connection =
      rendezvous::connect_tcp(resolved.addresses, deadline, clock);
  if (!connection.fd) return UniqueFd(-1);
  set_timeouts(connection.fd.get());
  if (!write_all_bytes(connection.fd.get(), &mode, 1)) return UniqueFd(-1);
  return std::move(connection.fd);
}

// The median of one-byte round trips; nullopt where the peer broke off.
std::optional<double> round_trips(int fd, int count, const rendezvous::Clock& clock) {
  std::vector<double> times;
  for (int i = 0; i < count; ++i) {
    char byte = static_cast<char>(i);
    const Clock::time_point start = clock.now();
    if (!write_all_bytes(fd, &byte, 1) || !read_all_bytes(fd, &byte, 1)) return std::nullopt;
    times.push_back(seconds_between(start, clock.now()));
  }
  return median_seconds(times);
}

// Bytes per second into the sink, counted by the sink and timed until its answer: what the
// link carried, not what the sender's buffer took. nullopt where the peer broke off.
std::optional<double> sink_rate(int fd, const ProbeLimits& limits, const rendezvous::Clock& clock) {
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kSendBuffer, sizeof kSendBuffer);
  const std::vector<char> chunk(kChunk, 'x');
  const Clock::time_point start = clock.now();
  for (std::size_t sent = 0; sent < limits.bytes && clock.now() - start < limits.bandwidth_time;
       sent += kChunk)
    if (!write_all_bytes(fd, chunk.data(), chunk.size())) return std::nullopt;
  ::shutdown(fd, SHUT_WR);
  std::uint64_t count = 0;
  if (!read_all_bytes(fd, reinterpret_cast<char*>(&count), sizeof count)) return std::nullopt;
  const double seconds = seconds_between(start, clock.now());
  return seconds > 0 ? static_cast<double>(count) / seconds : 0;
}

}  // namespace

PeerMeasure measure_link(const std::string& host, int port, const rendezvous::Clock& clock,
                         Clock::time_point deadline, const ProbeLimits& limits) {
  PeerMeasure measure;
  const UniqueFd echo = connect_probe(host, port, clock, deadline, kEcho);
  if (!echo) return measure;
  const std::optional<double> latency = round_trips(echo.get(), limits.round_trips, clock);
  const UniqueFd sink = connect_probe(host, port, clock, deadline, kSink);
  if (!latency || !sink) return measure;
  const std::optional<double> rate = sink_rate(sink.get(), limits, clock);
  if (!rate) return measure;
  measure.reached = true;
  measure.latency_seconds = *latency;
  measure.bytes_per_second = *rate;
  return measure;
}

double time_computation(const rendezvous::Clock& clock) {
  constexpr int kSize = 160;
  constexpr int kRepeats = 300;
  std::vector<float> a(kSize * kSize, 1.0001f), b(kSize * kSize, 0.9999f), c(kSize * kSize, 0);
  const Clock::time_point start = clock.now();
  for (int r = 0; r < kRepeats; ++r)
    for (int i = 0; i < kSize; ++i)
      for (int k = 0; k < kSize; ++k) {
        const float x = a[i * kSize + k];
        for (int j = 0; j < kSize; ++j) c[i * kSize + j] += x * b[k * kSize + j];
      }
  const double seconds = seconds_between(start, clock.now());
  // The product is read, so that the compiler cannot drop the loops.
  volatile float sink = c[static_cast<std::size_t>(kSize) * kSize / 2];
  (void)sink;
  return seconds;
}

namespace {

std::string key_of(const RoundStore& round, const char* what, int node) {
  return round.prefix + what + "/" + std::to_string(node);
}

std::vector<std::string> keys_of(const RoundStore& round, const char* what,
                                 const std::vector<int>& nodes) {
  std::vector<std::string> keys;
  for (int node : nodes) keys.push_back(key_of(round, what, node));
  return keys;
}

std::vector<int> every_node(const RoundStore& round) {
  std::vector<int> nodes(static_cast<std::size_t>(round.num_nodes));
  for (int node = 0; node < round.num_nodes; ++node) nodes[static_cast<std::size_t>(node)] = node;
  return nodes;
}

// Waits in 100 ms slices (the stop check between them) until every key exists or `deadline`.
void await_round_keys(const RoundStore& round, const std::vector<std::string>& keys,
                      Clock::time_point deadline, const rendezvous::Clock& clock,
                      const std::function<void()>& stop_check) {
  for (;;) {
    if (stop_check) stop_check();
    const Clock::time_point slice = std::min(deadline, clock.now() + milliseconds(100));
    if (clock.wait_for_keys(*round.store, keys, slice) || clock.now() >= deadline) return;
  }
}

// This node's links to `peers` (probe_peers), whose endpoints are `endpoints` ("" for a peer
// whose endpoint never came), one after the other.
std::vector<PeerMeasure> measure_links(const std::vector<int>& peers,
                                       const std::vector<std::string>& endpoints,
                                       const rendezvous::Clock& clock, const ProbeLimits& limits) {
  std::vector<PeerMeasure> measures;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    PeerMeasure measure;
    if (!endpoints[i].empty()) {
      try {
        const Endpoint peer = parse_endpoint(endpoints[i], 0, "a node's network check endpoint");
        measure = measure_link(peer.host, peer.port, clock, clock.now() + kConnectBound, limits);
      } catch (const ConfigError&) {
        // An endpoint that does not parse reaches nothing: `reached` stays false.
      }
    }
    measure.node = peers[i];
    measures.push_back(measure);
  }
  return measures;
}

// The nodes whose measures count, the same on every node: node 0 of the round lists those whose
// measures came by `deadline` (its own wait's end); the others take its list, so that a node whose
// measures came late for some nodes and in time for others is judged the same by all. Where node
// 0's list does not come within kCountedGrace of the deadline, the measures that came here count.
std::vector<int> counted_nodes(const RoundStore& round, Clock::time_point deadline,
                               const rendezvous::Clock& clock,
                               const std::function<void()>& stop_check) {
  const std::string counted = round.prefix + "counted";
  if (round.node_rank == 0) {
    const std::vector<std::string> measures =
        rendezvous::values_where_set(*round.store, keys_of(round, "measures", every_node(round)));
    std::vector<int> came;
    std::string list;
    for (int node = 0; node < round.num_nodes; ++node)
      if (!measures[static_cast<std::size_t>(node)].empty()) {
        came.push_back(node);
        list += (list.empty() ? "" : ",") + std::to_string(node);
      }
    round.store->set(counted, list);
    return came;
  }
  await_round_keys(round, {counted}, deadline + kCountedGrace, clock, stop_check);
  if (!round.store->check({counted})) return every_node(round);
  std::vector<int> came;
  for (const std::string& node : split(round.store->get(counted), ','))
    if (const std::optional<int> rank = parse_int(node)) came.push_back(*rank);
  return came;
}

}  // namespace

std::vector<NodeMeasures> measure_round(const RoundStore& round, const std::string& host,
                                        const rendezvous::Clock& clock,
                                        const std::function<void()>& stop_check,
                                        const ProbeLimits& limits) {
  ACC_ASSERT(round.store != nullptr);
  const Clock::time_point start = clock.now();
  const ProbeServer server;
  round.store->set(key_of(round, "address", round.node_rank),
                   format_endpoint(round.address, server.port()));
  NodeMeasures own;
  own.node = round.node_rank;
  own.host = host;
  own.serves_rendezvous = round.serves_rendezvous;
  own.compute_seconds = time_computation(clock);
  const std::vector<int> peers = probe_peers(round.node_rank, round.num_nodes);
  const std::vector<std::string> address_keys = keys_of(round, "address", peers);
  await_round_keys(round, address_keys, start + limits.address_wait, clock, stop_check);
  own.peers =
      measure_links(peers, rendezvous::values_where_set(*round.store, address_keys), clock, limits);
  round.store->set(key_of(round, "measures", round.node_rank), encode_node_measures(own));
  await_round_keys(round, keys_of(round, "measures", every_node(round)), start + limits.bound,
                   clock, stop_check);
  const std::vector<std::string> counted_keys =
      keys_of(round, "measures", counted_nodes(round, start + limits.bound, clock, stop_check));
  std::vector<NodeMeasures> all;
  for (const std::string& text : rendezvous::values_where_set(*round.store, counted_keys))
    if (std::optional<NodeMeasures> measures = decode_node_measures(text))
      all.push_back(std::move(*measures));
  return all;
}

NetworkOutcome run_network_check(const RoundStore& round, const LaunchPlan& plan,
                                 const rendezvous::Clock& clock,
                                 const std::function<void()>& stop_check) {
  const Clock::time_point start = clock.now();
  const std::vector<NodeMeasures> measures = measure_round(round, plan.hostname, clock, stop_check);
  const NetworkJudgement judgement =
      judge_network(measures, round.num_nodes, plan.network_check_factor);
  log::info(
      "--network_check: {} nodes measured in {:.1f} s (a node {:g} times slower than the "
      "median is faulty)",
      round.num_nodes, std::chrono::duration<double>(clock.now() - start).count(),
      plan.network_check_factor);
  for (const std::string& line : network_table(judgement)) log::info(line);
  NetworkOutcome outcome;
  outcome.decision = decide_network(judgement, plan.min_nodes, plan.rdzv_backend != "static");
  const std::vector<int> faulty = judgement.faulty();
  outcome.this_node_faulty =
      std::find(faulty.begin(), faulty.end(), round.node_rank) != faulty.end();
  return outcome;
}

}  // namespace acc::launcher
