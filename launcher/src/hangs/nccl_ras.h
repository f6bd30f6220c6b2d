#pragma once

// A client of NCCL's RAS service (NCCL >= 2.24): every NCCL process of a job runs it, and any of
// them answers a text protocol on localhost:28028 (NCCL_RAS_ADDR) with the state of the job's
// communicators: their sizes and status, the ranks that did not answer, and, per communicator,
// how many collectives of each kind each rank has launched. At a stall the hang report adds what
// it says. The parser is pure; query_ras() is the socket.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "acc/rendezvous/clock.h"

namespace acc::launcher {

inline constexpr char kRasDefaultAddress[] = "localhost:28028";

// One block of the reply's Errors or Warnings: its title line ("#0-0 (00f3...) MISMATCH",
// "INCOMPLETE", "DEAD", "TIMEOUT") and its indented lines, trimmed.
struct RasBlock {
  std::string title;
  std::vector<std::string> lines;
};

// A rank whose count of one kind of collective differs from its communicator's majority.
struct RasLaggingRank {
  std::string communicator;  // the block's title up to the status ("#0-0 (00f3...)")
  std::string op;            // "AllReduce", ...
  int rank = -1;
  std::uint64_t launched = 0;           // 0: none
  std::uint64_t majority_launched = 0;  // what most ranks of the communicator launched
};

struct RasStatus {
  std::string nccl_version;             // "2.24.3"
  int communicators = 0;                // over all the summary's groups
  std::vector<std::string> summary;     // the communicator table's rows, as printed
  std::vector<RasBlock> problems;       // the Errors and Warnings blocks
  std::vector<RasLaggingRank> lagging;  // from the MISMATCH blocks' operation counts
  std::vector<int> missing_ranks;       // from the INCOMPLETE blocks' "Rank N -- ..." lines
};

// The text of a STATUS reply (what follows the protocol handshake).
RasStatus parse_ras_status(std::string_view text);

// Connects to `address` ("host:port"), sends the handshake and STATUS, and returns the reply's
// report; nullopt when nothing listens there or the reply did not finish within `timeout`. Never
// throws.
std::optional<std::string> query_ras(const std::string& address, std::chrono::milliseconds timeout,
                                     const rendezvous::Clock& clock = rendezvous::Clock::steady());

// The hang report's section, ending in a newline.
std::string ras_section(const RasStatus& status, const std::string& address);

}  // namespace acc::launcher
