#pragma once

// --network_check's verdict (docs/clusters.md, "Checking the nodes' network"): every node of a
// round measures each link to the other nodes (bandwidth and latency over TCP) and times a short
// computation (network_probe.h); from every node's measures, each node judges the same way which
// nodes are faulty, so that all of them agree without a further exchange. Pure.
//
// A pair of nodes is as fast as the slower of its two directions (a collective uses both), and a
// node as fast as its best pair: a node is faulty when even its best pair is slower than the
// median node's best pair by the factor (bandwidth; latency too, above kLatencyFloor), or its
// computation takes the factor times the median node's. With fewer than 3 nodes there is no
// majority to compare with, and no node is judged.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace acc::launcher {

// How far round the ring of the round's nodes each node measures its links: to the kProbeReach
// nodes after it and the kProbeReach before it, every node where the round has no more than
// 2 * kProbeReach + 1. A node is then in up to 2 * kProbeReach pairs whatever the round's size,
// so that the check takes the same time for 3 nodes as for thousands; and a faulty node is slow
// in every pair it is in, while its good neighbours still have a good pair with the others.
inline constexpr int kProbeReach = 2;

// The nodes that `node` measures its links to, in a round of `num_nodes`: the nodes after it
// first (so that the nodes do not all measure the same peer at once), then those before it.
std::vector<int> probe_peers(int node, int num_nodes);

// Latencies under this are never judged: the jitter of a loaded machine, not a bad link.
inline constexpr double kLatencyFloor = 0.001;  // seconds

// What one node measured towards one other node.
struct PeerMeasure {
  int node = 0;                 // the peer's node rank in the round
  bool reached = false;         // false: it could not connect, or the peer broke off
  double bytes_per_second = 0;  // this node -> peer
  double latency_seconds = 0;   // the median round trip of one byte
};

// What one node measured: its peers and its computation. Sent to the others as JSON.
struct NodeMeasures {
  int node = 0;
  std::string host;
  bool serves_rendezvous = false;  // the job cannot go on without it
  double compute_seconds = 0;      // the computation's best time of a few
  std::vector<PeerMeasure> peers;
};

enum class NetworkVerdict { kOk, kSlowLink, kSlowCompute, kUnreachable, kNoMeasures };

// One row of the table.
struct NodeJudgement {
  int node = 0;
  std::string host;             // "" when its measures never came
  double bytes_per_second = 0;  // its best pair's
  double latency_seconds = 0;   // its best pair's; 0 where it reached none
  double compute_seconds = 0;   // 0 where its measures never came
  bool serves_rendezvous = false;
  NetworkVerdict verdict = NetworkVerdict::kOk;
  std::string why;  // one line for a faulty node, "" for a good one
};

struct NetworkJudgement {
  std::vector<NodeJudgement> nodes;  // node rank order, one per node of the round
  bool judged = false;               // false with fewer than 3 nodes
  double factor = 0;
  // The faulty nodes' ranks, ascending.
  std::vector<int> faulty() const;
};

// The verdicts over every node's measures (`measures` may lack a node whose measures never
// came: that node is kNoMeasures) for a round of `num_nodes` nodes. Deterministic: the order of
// `measures` does not matter.
NetworkJudgement judge_network(const std::vector<NodeMeasures>& measures, int num_nodes,
                               double factor);

// The table printed on every node: a header line, one line per node, and a last line where no
// node could be judged.
std::vector<std::string> network_table(const NetworkJudgement& judgement);

// What the round does with its faulty nodes.
struct NetworkDecision {
  std::vector<int> left_out;  // the faulty nodes, which stay out (elastic, with room)
  bool job_ends = false;      // a faulty node the job cannot go on without
  // One line naming the faulty nodes and the reason, and why the job cannot go on without them
  // where it ends; "" when none is faulty.
  std::string why;
};

// An elastic job leaves its faulty nodes out where the others are at least `min_nodes` and none
// of them serves the rendezvous store; otherwise (or in a static job) the job ends naming them.
NetworkDecision decide_network(const NetworkJudgement& judgement, int min_nodes, bool elastic);

// "1.25 GB/s", "980 kB/s".
std::string bandwidth_text(double bytes_per_second);

std::string encode_node_measures(const NodeMeasures& measures);
// nullopt for anything encode_node_measures did not write (store_json.h's strict reading).
std::optional<NodeMeasures> decode_node_measures(std::string_view text);

}  // namespace acc::launcher
