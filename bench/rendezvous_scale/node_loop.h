#pragma once

// Many simulated rendezvous nodes (SimulatedNode), each over its own TCP connection, driven by one
// epoll loop in the calling thread: a few dozen bytes of state per node besides its socket, so
// that 16,000 nodes per process measure the server rather than the client.

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "simulated_node.h"

namespace acc::bench {

// What became of one node, written where the caller says (rendezvous_scale: memory shared with
// its client processes).
struct NodeOutcome {
  std::int32_t rank = -1;
  std::int32_t num_nodes = 0;
  std::int32_t step = 0;  // SimulatedNode::Step at the end
  std::int32_t requests = 0;
  std::int32_t slot = -1;      // its arrival slot; slot 0 sorts the ids and publishes the ranks
  std::int64_t bytes = 0;      // sent and received in the round (the handshake's not counted)
  std::int64_t ranked_ns = 0;  // when the WAIT for its rank ended (not slot 0): steady_clock
  std::int64_t joined_ns = 0;  // when its ADD's answer (its slot) came: steady_clock's count
  std::int64_t done_ns = 0;  // when it was placed: steady_clock's count, the same in every process
};

struct NodeLoopOptions {
  int port = 0;   // the server's, on 127.0.0.1
  int block = 1;  // source addresses 127.<block>.x.y (loopback_source)
  int first = 0;  // the index of this loop's first node among all
  int count = 0;  // nodes in this loop
  int nodes = 0;  // nodes in the round (--nnodes N:N)
  std::string run_id = "scale";
  int window = 500;  // most connections between their connect and their handshake's echo
  // Each node begins its round only once the node before it has its slot: the arrival order is
  // the nodes' order (for comparing runs request by request).
  bool one_at_a_time = false;
};

class NodeLoop {
 public:
  using Clock = std::chrono::steady_clock;

  // `outcomes` holds options.count entries, this loop's nodes', and must outlive it.
  NodeLoop(NodeLoopOptions options, NodeOutcome* outcomes);
  // Closes every connection with a reset.
  ~NodeLoop();
  NodeLoop(const NodeLoop&) = delete;
  NodeLoop& operator=(const NodeLoop&) = delete;

  // Connects every node and does its handshake, retrying a connection reset or refused before
  // its echo (20 times, 100 ms apart), until `deadline`. Returns "" when all are connected, else
  // what stopped them.
  std::string connect(Clock::time_point deadline);
  // Runs every connected node's round until each is placed or failed, or `deadline` passes.
  // Returns "" when every node was placed, else the first error or where the nodes stopped.
  std::string run_round(Clock::time_point deadline);

 private:
  struct Node {
    int fd = -1;
    int retries = 0;
    bool connecting = false;  // connect() in progress
    bool writing = false;     // EPOLLOUT armed: bytes of `out` wait for room
    bool settled = false;     // placed or failed, its last request written: counted in settled_
    std::size_t out_at = 0;
    std::string in, out;
    SimulatedNode sim;
    explicit Node(SimulatedNode s) : sim(std::move(s)) {}
  };

  void start_connect(int i);
  void on_connect_event(int i, std::uint32_t events);
  void retry(int i, const std::string& why);
  bool receive(int i);  // false: the connection ended or failed
  void flush(int i);
  void on_round_event(int i, std::uint32_t events);
  void settle(int i);  // records a placed or failed node
  void watch(int i, bool out);

  NodeLoopOptions options_;
  NodeOutcome* outcomes_;
  std::vector<Node> nodes_;
  int epoll_ = -1;
  int in_handshake_ = 0;
  int connected_ = 0;
  int settled_ = 0;
  std::deque<int> pending_;  // to connect, in order
  std::deque<std::pair<Clock::time_point, int>> retry_;
  std::string first_error_;
  std::vector<char> buffer_;
};

}  // namespace acc::bench
