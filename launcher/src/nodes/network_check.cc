#include "nodes/network_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "nodes/store_json.h"

namespace acc::launcher {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PeerMeasure, node, reached, bytes_per_second, latency_seconds)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(NodeMeasures, node, host, serves_rendezvous, compute_seconds,
                                   peers)

namespace {

constexpr StoreFormat kNetworkMeasuresFormat{"acc-network-check", 1};

// The pair (a, b) as both of its ends measured it.
struct Pair {
  double bytes_per_second = 0;
  double latency_seconds = std::numeric_limits<double>::infinity();
};

const PeerMeasure* measure_towards(const NodeMeasures* from, int to) {
  if (!from) return nullptr;
  for (const PeerMeasure& peer : from->peers)
    if (peer.node == to && peer.reached) return &peer;
  return nullptr;
}

Pair pair_of(const NodeMeasures* a, int a_rank, const NodeMeasures* b, int b_rank) {
  const PeerMeasure* there = measure_towards(a, b_rank);
  const PeerMeasure* back = measure_towards(b, a_rank);
  if (!there || !back) return {};
  return {std::min(there->bytes_per_second, back->bytes_per_second),
          std::max(there->latency_seconds, back->latency_seconds)};
}

// The lower middle value: of 3 nodes the second, so that one bad node never moves it far.
double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[(values.size() - 1) / 2];
}

double upper_median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

std::string milliseconds_text(double seconds) {
  return fmt::format("{:.2f} ms", seconds * 1000);
}

// `node`'s best pair among the pairs it measured (its probe_peers): {0, 0} where none came back.
Pair best_pair(const std::map<int, const NodeMeasures*>& by_node, const NodeMeasures& own) {
  Pair best;
  for (const PeerMeasure& measured : own.peers) {
    const auto other = by_node.find(measured.node);
    if (measured.node == own.node || other == by_node.end()) continue;
    const Pair pair = pair_of(&own, own.node, other->second, measured.node);
    best.bytes_per_second = std::max(best.bytes_per_second, pair.bytes_per_second);
    best.latency_seconds = std::min(best.latency_seconds, pair.latency_seconds);
  }
  if (std::isinf(best.latency_seconds)) best.latency_seconds = 0;
  return best;
}

// Each node's best pair, and its computation, before any verdict.
std::vector<NodeJudgement> best_pairs(const std::map<int, const NodeMeasures*>& by_node,
                                      int num_nodes) {
  std::vector<NodeJudgement> rows;
  for (int node = 0; node < num_nodes; ++node) {
    NodeJudgement row;
    row.node = node;
    const auto found = by_node.find(node);
    if (found == by_node.end()) {
      row.verdict = NetworkVerdict::kNoMeasures;
    } else {
      const NodeMeasures& own = *found->second;
      row.host = own.host;
      row.compute_seconds = own.compute_seconds;
      row.serves_rendezvous = own.serves_rendezvous;
      const Pair best = best_pair(by_node, own);
      row.bytes_per_second = best.bytes_per_second;
      row.latency_seconds = best.latency_seconds;
    }
    rows.push_back(row);
  }
  return rows;
}

// A slow computation is named before the links: a throttled CPU also slows the node's sends.
void judge_row(NodeJudgement& row, double factor, double bandwidth, double latency,
               double compute) {
  if (row.verdict == NetworkVerdict::kNoMeasures) {
    row.why = "its measures did not come within the check's time";
  } else if (row.bytes_per_second <= 0) {
    row.verdict = NetworkVerdict::kUnreachable;
    row.why = "it cannot exchange data with any other node";
  } else if (row.compute_seconds > compute * factor) {
    row.verdict = NetworkVerdict::kSlowCompute;
    row.why =
        fmt::format("its computation took {}, over {:g} times the median node's {}",
                    milliseconds_text(row.compute_seconds), factor, milliseconds_text(compute));
  } else if (row.bytes_per_second * factor < bandwidth) {
    row.verdict = NetworkVerdict::kSlowLink;
    row.why = fmt::format("its best link carries {}, under 1/{:g} of the median node's {}",
                          bandwidth_text(row.bytes_per_second), factor, bandwidth_text(bandwidth));
  } else if (row.latency_seconds > kLatencyFloor && row.latency_seconds > latency * factor) {
    row.verdict = NetworkVerdict::kSlowLink;
    row.why =
        fmt::format("its best link's latency is {}, over {:g} times the median node's {}",
                    milliseconds_text(row.latency_seconds), factor, milliseconds_text(latency));
  }
}

const char* verdict_name(NetworkVerdict verdict) {
  switch (verdict) {
    case NetworkVerdict::kOk:
      return "ok";
    case NetworkVerdict::kSlowLink:
      return "slow link";
    case NetworkVerdict::kSlowCompute:
      return "slow compute";
    case NetworkVerdict::kUnreachable:
      return "unreachable";
    case NetworkVerdict::kNoMeasures:
      return "no measures";
  }
  return "?";
}

}  // namespace

std::vector<int> probe_peers(int node, int num_nodes) {
  std::vector<int> peers;
  const auto add = [&](int peer) {
    if (peer != node && std::find(peers.begin(), peers.end(), peer) == peers.end())
      peers.push_back(peer);
  };
  const int reach = std::min(kProbeReach, num_nodes / 2);
  for (int step = 1; step <= reach; ++step) add((node + step) % num_nodes);
  for (int step = 1; step <= reach; ++step)
    add(((node - step) % num_nodes + num_nodes) % num_nodes);
  return peers;
}

std::vector<int> NetworkJudgement::faulty() const {
  std::vector<int> ranks;
  for (const NodeJudgement& row : nodes)
    if (row.verdict != NetworkVerdict::kOk) ranks.push_back(row.node);
  return ranks;
}

NetworkJudgement judge_network(const std::vector<NodeMeasures>& measures, int num_nodes,
                               double factor) {
  std::map<int, const NodeMeasures*> by_node;
  for (const NodeMeasures& m : measures)
    if (m.node >= 0 && m.node < num_nodes) by_node.emplace(m.node, &m);
  NetworkJudgement judgement;
  judgement.factor = factor;
  judgement.nodes = best_pairs(by_node, num_nodes);
  judgement.judged = num_nodes >= 3;
  if (!judgement.judged) {
    for (NodeJudgement& row : judgement.nodes) row.verdict = NetworkVerdict::kOk;
    return judgement;
  }
  std::vector<double> bandwidths, latencies, computes;
  for (const NodeJudgement& row : judgement.nodes) {
    if (row.verdict == NetworkVerdict::kNoMeasures) continue;
    bandwidths.push_back(row.bytes_per_second);
    if (row.latency_seconds > 0) latencies.push_back(row.latency_seconds);
    computes.push_back(row.compute_seconds);
  }
  // The lower median of bandwidths and the upper of times: where half the nodes are slow, the
  // comparison is with a slow one, and nobody is left out on a tie.
  const double bandwidth = median_of(bandwidths);
  const double latency = upper_median_of(latencies);
  const double compute = upper_median_of(computes);
  for (NodeJudgement& row : judgement.nodes) judge_row(row, factor, bandwidth, latency, compute);
  return judgement;
}

std::vector<std::string> network_table(const NetworkJudgement& judgement) {
  std::vector<std::string> lines = {fmt::format("{:<5} {:<20} {:>12} {:>10} {:>11}  {}", "node",
                                                "host", "bandwidth", "latency", "compute",
                                                "verdict")};
  for (const NodeJudgement& row : judgement.nodes) {
    const bool came = row.verdict != NetworkVerdict::kNoMeasures;
    const std::string verdict = row.why.empty()
                                    ? verdict_name(row.verdict)
                                    : std::string(verdict_name(row.verdict)) + ": " + row.why;
    lines.push_back(
        fmt::format("{:<5} {:<20} {:>12} {:>10} {:>11}  {}", row.node, came ? row.host : "?",
                    bandwidth_text(row.bytes_per_second),
                    row.latency_seconds > 0 ? milliseconds_text(row.latency_seconds) : "-",
                    came ? milliseconds_text(row.compute_seconds) : "-", verdict));
  }
  if (!judgement.judged)
    lines.push_back(
        fmt::format("with {} nodes no node can be told apart from the others (3 at "
                    "least): none is judged",
                    judgement.nodes.size()));
  return lines;
}

namespace {

// Why the job cannot go on without the faulty nodes; "" where it can.
std::string why_needed(const NetworkJudgement& judgement, const std::vector<int>& faulty,
                       int min_nodes, bool elastic) {
  if (!elastic) return "a static job needs every node";
  const int left = static_cast<int>(judgement.nodes.size() - faulty.size());
  if (left < min_nodes)
    return fmt::format("{} node(s) would be left, under --nnodes MIN ({})", left, min_nodes);
  for (int node : faulty)
    if (judgement.nodes[static_cast<size_t>(node)].serves_rendezvous)
      return fmt::format("node {} serves the rendezvous store", node);
  return "";
}

}  // namespace

NetworkDecision decide_network(const NetworkJudgement& judgement, int min_nodes, bool elastic) {
  NetworkDecision decision;
  const std::vector<int> faulty = judgement.faulty();
  if (faulty.empty()) return decision;
  std::string named;
  for (int node : faulty) {
    const NodeJudgement& row = judgement.nodes[static_cast<size_t>(node)];
    if (!named.empty()) named += "; ";
    named +=
        fmt::format("node {}{}: {}", node, row.host.empty() ? "" : " (" + row.host + ")", row.why);
  }
  decision.why = "--network_check: " + named;
  const std::string needed = why_needed(judgement, faulty, min_nodes, elastic);
  decision.job_ends = !needed.empty();
  if (decision.job_ends)
    decision.why += "; the job cannot go on without it: " + needed;
  else
    decision.left_out = faulty;
  return decision;
}

std::string bandwidth_text(double bytes_per_second) {
  if (bytes_per_second >= 1e9) return fmt::format("{:.2f} GB/s", bytes_per_second / 1e9);
  if (bytes_per_second >= 1e6) return fmt::format("{:.1f} MB/s", bytes_per_second / 1e6);
  if (bytes_per_second > 0) return fmt::format("{:.0f} kB/s", bytes_per_second / 1e3);
  return "-";
}

std::string encode_node_measures(const NodeMeasures& measures) {
  return to_store_json(measures, kNetworkMeasuresFormat);
}

std::optional<NodeMeasures> decode_node_measures(std::string_view text) {
  return from_store_json<NodeMeasures>(text, kNetworkMeasuresFormat);
}

}  // namespace acc::launcher
