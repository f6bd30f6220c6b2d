#include "hangs/nccl_ras.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

#include "acc/common/strings.h"
#include "acc/common/unique_fd.h"
#include "acc/rendezvous/tcp_connect.h"

namespace acc::launcher {
namespace {

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// "  3 ranks have launched up to operation 58", "  Rank 2 has launched up to operation 57 -- ..",
// "  Rank 2 has not launched any operations -- ..".
void read_op_counts(const std::string& communicator, const std::string& op,
                    const std::vector<std::string>& lines, size_t from, RasStatus& status) {
  std::uint64_t majority = 0;
  size_t majority_ranks = 0;
  std::vector<RasLaggingRank> ranks;
  for (size_t i = from; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (starts_with(line, "Communicator ranks have different")) break;
    const std::vector<std::string> w = words(line);
    if (w.size() >= 8 && w[1] == "ranks" && w[3] == "launched") {
      const size_t count = std::strtoull(w[0].c_str(), nullptr, 10);
      if (count > majority_ranks) {
        majority_ranks = count;
        majority = std::strtoull(w[7].c_str(), nullptr, 10);
      }
    } else if (w.size() >= 5 && w[0] == "Rank" && w[2] == "has") {
      RasLaggingRank r;
      r.communicator = communicator;
      r.op = op;
      r.rank = std::atoi(w[1].c_str());
      if (w[3] == "launched" && w.size() >= 8)
        r.launched = std::strtoull(w[7].c_str(), nullptr, 10);
      ranks.push_back(r);
    }
  }
  for (RasLaggingRank& r : ranks) {
    r.majority_launched = majority;
    status.lagging.push_back(r);
  }
}

void read_block(const RasBlock& block, RasStatus& status) {
  const std::string communicator = block.title.substr(0, block.title.rfind(')') + 1);
  const bool is_comm = starts_with(block.title, "#");
  for (size_t i = 0; i < block.lines.size(); ++i) {
    const std::string& line = block.lines[i];
    constexpr char kDifferent[] = "Communicator ranks have different ";
    if (is_comm && starts_with(line, kDifferent) &&
        line.find(" operation counts") != std::string::npos) {
      const std::string op = words(line.substr(sizeof(kDifferent) - 1)).front();
      read_op_counts(communicator, op, block.lines, i + 1, status);
    }
    if (is_comm && block.title.find("INCOMPLETE") != std::string::npos &&
        starts_with(line, "Rank "))
      status.missing_ranks.push_back(std::atoi(line.c_str() + 5));
  }
}

}  // namespace

RasStatus parse_ras_status(std::string_view text) {
  RasStatus status;
  std::istringstream in{std::string(text)};
  enum class Part { kHead, kCommunicators, kProblems } part = Part::kHead;
  RasBlock* block = nullptr;
  for (std::string raw; std::getline(in, raw);) {
    const std::string line = trim(raw);
    if (starts_with(line, "NCCL version ")) {
      status.nccl_version = words(line)[2];
    } else if (starts_with(line, "Communicators")) {
      part = Part::kCommunicators;
    } else if (line == "Errors" || line == "Warnings") {
      part = Part::kProblems;
      block = nullptr;
    } else if (line.empty() || starts_with(line, "===")) {
      if (line.empty()) block = nullptr;
    } else if (part == Part::kCommunicators) {
      const std::vector<std::string> w = words(line);
      // "    0         1         1         4         4         4   RUNNING      OK"
      if (w.size() == 8 && std::all_of(w[0].begin(), w[0].end(), ::isdigit)) {
        status.communicators += std::atoi(w[1].c_str());
        status.summary.push_back(line);
      }
    } else if (part == Part::kProblems) {
      if (raw.empty() || raw[0] != ' ' || !block) {
        status.problems.push_back({line, {}});
        block = &status.problems.back();
      } else {
        block->lines.push_back(line);
      }
    }
  }
  for (const RasBlock& b : status.problems) read_block(b, status);
  std::sort(status.missing_ranks.begin(), status.missing_ranks.end());
  return status;
}

std::optional<std::string> query_ras(const std::string& address, std::chrono::milliseconds timeout,
                                     const rendezvous::Clock& clock) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  const std::optional<int> port = parse_int(address.substr(colon + 1));
  if (!port) return std::nullopt;
  const rendezvous::TcpResolution resolved =
      rendezvous::resolve_tcp(address.substr(0, colon), *port);
  const auto deadline = clock.now() + timeout;
  const UniqueFd fd = rendezvous::connect_tcp(resolved.addresses, deadline, clock).fd;
  if (!fd) return std::nullopt;
  const std::string request = "CLIENT PROTOCOL 2\nSTATUS\n";
  if (::send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size()))
    return std::nullopt;
  // The server closes the connection once the report is sent.
  std::string reply;
  char buffer[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock.now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::recv(fd.get(), buffer, sizeof buffer, 0);
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    reply.append(buffer, static_cast<size_t>(n));
  }
  // The handshake's answer ("SERVER PROTOCOL n") comes first.
  if (starts_with(reply, "SERVER PROTOCOL")) reply.erase(0, reply.find('\n') + 1);
  return reply;
}

std::string ras_section(const RasStatus& status, const std::string& address) {
  std::string text = "NCCL RAS (" + address +
                     (status.nccl_version.empty() ? "" : ", NCCL " + status.nccl_version) +
                     "): " + std::to_string(status.communicators) +
                     (status.communicators == 1 ? " communicator\n" : " communicators\n");
  for (const RasLaggingRank& r : status.lagging)
    text += "  rank " + std::to_string(r.rank) + " of communicator " + r.communicator +
            " launched " + std::to_string(r.launched) + " " + r.op + " where most launched " +
            std::to_string(r.majority_launched) + "\n";
  if (!status.missing_ranks.empty()) {
    text += "  no answer from communicator ranks";
    for (size_t i = 0; i < status.missing_ranks.size(); ++i)
      text += (i ? ", " : " ") + std::to_string(status.missing_ranks[i]);
    text += "\n";
  }
  for (const RasBlock& block : status.problems) {
    text += "  " + block.title + "\n";
    for (const std::string& line : block.lines) text += "    " + line + "\n";
  }
  if (status.problems.empty()) text += "  no errors, no warnings\n";
  return text;
}

}  // namespace acc::launcher
