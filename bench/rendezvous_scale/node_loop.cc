#include "node_loop.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "loopback.h"

namespace acc::bench {
namespace {

using Step = SimulatedNode::Step;

int millis_until(NodeLoop::Clock::time_point deadline, int most) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - NodeLoop::Clock::now());
  return static_cast<int>(std::clamp<long long>(left.count(), 0, most));
}

}  // namespace

NodeLoop::NodeLoop(NodeLoopOptions options, NodeOutcome* outcomes)
    : options_(std::move(options)), outcomes_(outcomes), buffer_(1 << 16) {
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  nodes_.reserve(static_cast<std::size_t>(options_.count));
  for (int i = 0; i < options_.count; ++i) {
    nodes_.emplace_back(
        SimulatedNode(options_.run_id, options_.nodes, simulated_node_id(options_.first + i)));
    pending_.push_back(i);
  }
}

NodeLoop::~NodeLoop() {
  for (Node& node : nodes_)
    if (node.fd >= 0) close_with_reset(node.fd);
  ::close(epoll_);
}

void NodeLoop::watch(int i, bool out) {
  Node& node = nodes_[static_cast<std::size_t>(i)];
  epoll_event event{};
  event.events = EPOLLIN | (out ? EPOLLOUT : 0u);
  event.data.u32 = static_cast<std::uint32_t>(i);
  ::epoll_ctl(epoll_, EPOLL_CTL_MOD, node.fd, &event);
  node.writing = out;
}

void NodeLoop::start_connect(int i) {
  Node& node = nodes_[static_cast<std::size_t>(i)];
  std::string error;
  node.fd = acc::bench::start_connect(loopback_source(options_.block, options_.first + i),
                                      options_.port, error);
  ++in_handshake_;
  if (node.fd < 0) return retry(i, error);
  epoll_event event{};
  event.events = EPOLLOUT | EPOLLIN;
  event.data.u32 = static_cast<std::uint32_t>(i);
  ::epoll_ctl(epoll_, EPOLL_CTL_ADD, node.fd, &event);
  node.writing = true;
  node.connecting = true;
}

// A connection refused or reset before its handshake's echo is what PyTorch's client and ours
// retry (the listener's queue overflowed); so does this one, 20 times at most, 100 ms apart.
void NodeLoop::retry(int i, const std::string& why) {
  Node& node = nodes_[static_cast<std::size_t>(i)];
  --in_handshake_;
  if (node.fd >= 0) {
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, node.fd, nullptr);
    close_with_reset(node.fd);
    node.fd = -1;
  }
  node.connecting = false;
  node.in.clear();
  node.out.clear();
  node.out_at = 0;
  if (++node.retries > 20) {
    if (first_error_.empty())
      first_error_ = "node " + std::to_string(options_.first + i) + ": " + why + " (20 retries)";
    return;
  }
  retry_.push_back({Clock::now() + std::chrono::milliseconds(100), i});
}

bool NodeLoop::receive(int i) {
  Node& node = nodes_[static_cast<std::size_t>(i)];
  const ssize_t n = ::recv(node.fd, buffer_.data(), buffer_.size(), 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  if (n <= 0) return false;
  node.in.append(buffer_.data(), static_cast<std::size_t>(n));
  if (node.sim.step() != Step::kHandshake) outcomes_[i].bytes += static_cast<std::int64_t>(n);
  return true;
}

void NodeLoop::flush(int i) {
  Node& node = nodes_[static_cast<std::size_t>(i)];
  while (node.out_at < node.out.size()) {
    const ssize_t n =
        ::send(node.fd, node.out.data() + node.out_at, node.out.size() - node.out_at, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) return;  // the receive side sees the end
    node.out_at += static_cast<std::size_t>(n);
  }
  const bool left = node.out_at < node.out.size();
  if (!left) {
    node.out.clear();
    node.out_at = 0;
  }
  if (left != node.writing) watch(i, left);
}

void NodeLoop::on_connect_event(int i, std::uint32_t events) {
  Node& node = nodes_[static_cast<std::size_t>(i)];
  if (node.fd < 0) return;
  if (node.connecting) {
    int error = 0;
    socklen_t length = sizeof(error);
    ::getsockopt(node.fd, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) return retry(i, "connect: " + std::string(std::strerror(error)));
    if (!(events & EPOLLOUT)) return;
    node.connecting = false;
    node.sim.start_handshake(static_cast<std::uint32_t>(options_.first + i), node.out);
    return flush(i);
  }
  if (events & EPOLLOUT) flush(i);
  if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return;
  if (!receive(i)) return retry(i, "handshake: the server closed or reset the connection");
  std::string none;
  if (!node.sim.on_reply(node.in, none)) return;
  if (node.sim.step() != Step::kConnected) return retry(i, node.sim.error());
  --in_handshake_;
  ++connected_;
}

std::string NodeLoop::connect(Clock::time_point deadline) {
  std::vector<epoll_event> events(4096);
  while (connected_ < options_.count && Clock::now() < deadline) {
    while (!pending_.empty() && in_handshake_ < options_.window) {
      const int i = pending_.front();
      pending_.pop_front();
      start_connect(i);
    }
    if (pending_.empty() && retry_.empty() && in_handshake_ == 0) break;  // gave up on some
    const int ready = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()),
                                   millis_until(deadline, retry_.empty() ? 50 : 5));
    for (int e = 0; e < ready; ++e)
      on_connect_event(static_cast<int>(events[e].data.u32), events[e].events);
    const auto now = Clock::now();
    while (!retry_.empty() && retry_.front().first <= now) {
      pending_.push_back(retry_.front().second);
      retry_.pop_front();
    }
  }
  if (connected_ == options_.count) return "";
  if (!first_error_.empty()) return first_error_;
  return std::to_string(connected_) + " of " + std::to_string(options_.count) +
         " nodes connected by the deadline";
}

void NodeLoop::settle(int i) {
  Node& node = nodes_[static_cast<std::size_t>(i)];
  NodeOutcome& outcome = outcomes_[i];
  outcome.step = static_cast<std::int32_t>(node.sim.step());
  outcome.requests = static_cast<std::int32_t>(node.sim.requests());
  outcome.slot = node.sim.slot();
  outcome.bytes += node.sim.bytes_sent();
  if (node.sim.step() == Step::kDone) {
    outcome.rank = node.sim.rank();
    outcome.num_nodes = node.sim.num_nodes();
    outcome.done_ns = Clock::now().time_since_epoch().count();
  } else if (first_error_.empty()) {
    first_error_ = "node " + std::to_string(options_.first + i) + ": " + node.sim.error();
  }
  node.settled = true;
  ++settled_;
}

void NodeLoop::on_round_event(int i, std::uint32_t events) {
  Node& node = nodes_[static_cast<std::size_t>(i)];
  if (node.fd < 0) return;
  if (events & EPOLLOUT) flush(i);
  const auto finished = [&] {
    return node.sim.step() == Step::kDone || node.sim.step() == Step::kFailed;
  };
  if (finished()) {
    // Its last requests may still be going out (the first arrival's ranks: megabytes); a node
    // is placed once they are all written, as the blocking client returns from its send.
    if (!node.settled && node.out.empty()) settle(i);
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && node.out.empty()) {
      // Bytes or an end where none is due: the server going away after the round.
      ::epoll_ctl(epoll_, EPOLL_CTL_DEL, node.fd, nullptr);
    }
    return;
  }
  if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return;
  if (!receive(i)) {
    if (first_error_.empty())
      first_error_ = "node " + std::to_string(options_.first + i) + ": the server closed the " +
                     "connection " + SimulatedNode::step_name(node.sim.step());
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, node.fd, nullptr);
    ::close(node.fd);
    node.fd = -1;
    node.settled = true;
    ++settled_;  // not placed, and never will be: the round need not wait for it
    return;
  }
  while (!finished() && node.sim.on_reply(node.in, node.out)) {
  }
  flush(i);
  if (node.sim.joined() && outcomes_[i].joined_ns == 0)
    outcomes_[i].joined_ns = Clock::now().time_since_epoch().count();
  if (node.sim.slot() > 0 && node.sim.step() > Step::kRankWait && outcomes_[i].ranked_ns == 0)
    outcomes_[i].ranked_ns = Clock::now().time_since_epoch().count();
  if (finished() && node.out.empty()) settle(i);
}

std::string NodeLoop::run_round(Clock::time_point deadline) {
  int begun = 0;
  auto begin_more = [&] {
    while (begun < options_.count) {
      if (options_.one_at_a_time && begun > 0 &&
          !nodes_[static_cast<std::size_t>(begun - 1)].sim.joined())
        return;
      Node& node = nodes_[static_cast<std::size_t>(begun)];
      if (node.sim.step() == Step::kConnected) {
        node.sim.begin_round(node.out);
        flush(begun);
      }
      ++begun;
    }
  };
  begin_more();
  std::vector<epoll_event> events(4096);
  while (settled_ < connected_ && Clock::now() < deadline) {
    const int ready = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()),
                                   millis_until(deadline, 50));
    for (int e = 0; e < ready; ++e)
      on_round_event(static_cast<int>(events[e].data.u32), events[e].events);
    begin_more();
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Step step = nodes_[i].sim.step();
    if (step != Step::kDone && step != Step::kFailed) outcomes_[i].step = static_cast<int>(step);
  }
  const int placed = [&] {
    int n = 0;
    for (const Node& node : nodes_) n += node.sim.step() == Step::kDone ? 1 : 0;
    return n;
  }();
  if (placed == options_.count) return "";
  if (!first_error_.empty()) return first_error_;
  return std::to_string(placed) + " of " + std::to_string(options_.count) + " nodes placed";
}

}  // namespace acc::bench
