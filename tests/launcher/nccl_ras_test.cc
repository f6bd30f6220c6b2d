// The RAS client against a fake RAS server that replays replies in the format of NCCL's
// src/ras/client_support.cc (NCCL 2.24+): the handshake, then the STATUS report, then close.

#include "hangs/nccl_ras.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace acc::launcher {
namespace {

const char kMismatchReport[] =
    "NCCL version 2.24.3+cuda12.4 compiled with CUDA 12.4\n"
    "CUDA runtime version 12040, driver version 12040\n"
    "\n"
    "Job summary\n"
    "===========\n"
    "\n"
    "  Nodes  Processes         GPUs  Processes     GPUs\n"
    "(total)   per node  per process    (total)  (total)\n"
    "      1          4            1          4        4\n"
    "\n"
    "Communicators... (0.004s)\n"
    "=============\n"
    "\n"
    "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
    "    #  in group  per comm  per node  per comm  in group\n"
    "    0         1         1         4         4         4   RUNNING  MISMATCH\n"
    "\n"
    "Errors\n"
    "======\n"
    "\n"
    "Warnings\n"
    "========\n"
    "\n"
    "#0-0 (27a079b828ff1a75) MISMATCH\n"
    "  Communicator ranks have different AllReduce operation counts\n"
    "  3 ranks have launched up to operation 58\n"
    "  Rank 2 has launched up to operation 57 -- GPU 2 managed by process 31337 on node n1\n"
    "\n";

const char kIncompleteReport[] =
    "NCCL version 2.26.2+cuda12.8 compiled with CUDA 12.8\n"
    "\n"
    "Communicators... (5.002s)\n"
    "=============\n"
    "\n"
    "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
    "    #  in group  per comm  per node  per comm  in group\n"
    "    0         2         2         2         4         4   RUNNING  INCOMPLETE\n"
    "\n"
    "Errors\n"
    "======\n"
    "\n"
    "INCOMPLETE\n"
    "  Missing communicator data from 1 job process\n"
    "  Process 4242 on node n2 managing GPU 1\n"
    "\n"
    "#0-0 (27a079b828ff1a75) INCOMPLETE\n"
    "  Missing communicator data from 1 rank\n"
    "  Rank 3 -- GPU 1 managed by process 4242 on node n2\n"
    "\n"
    "Warnings\n"
    "========\n"
    "\n"
    "TIMEOUT\n"
    "  Encountered 1 communication timeout while gathering communicator data\n"
    "\n";

TEST(NcclRasTest, ParsesTheCommunicatorsAndTheRankThatLaunchedFewerCollectives) {
  const RasStatus status = parse_ras_status(kMismatchReport);
  EXPECT_EQ(status.nccl_version, "2.24.3+cuda12.4");
  EXPECT_EQ(status.communicators, 1);
  ASSERT_EQ(status.lagging.size(), 1u);
  EXPECT_EQ(status.lagging[0].rank, 2);
  EXPECT_EQ(status.lagging[0].op, "AllReduce");
  EXPECT_EQ(status.lagging[0].launched, 57u);
  EXPECT_EQ(status.lagging[0].majority_launched, 58u);
  EXPECT_EQ(status.lagging[0].communicator, "#0-0 (27a079b828ff1a75)");
  EXPECT_TRUE(status.missing_ranks.empty());
  const std::string section = ras_section(status, "localhost:28028");
  EXPECT_NE(section.find("rank 2 of communicator #0-0 (27a079b828ff1a75) launched 57 AllReduce "
                         "where most launched 58"),
            std::string::npos)
      << section;
}

TEST(NcclRasTest, ParsesTheRanksThatDidNotAnswer) {
  const RasStatus status = parse_ras_status(kIncompleteReport);
  EXPECT_EQ(status.communicators, 2);
  EXPECT_EQ(status.missing_ranks, std::vector<int>{3});
  ASSERT_EQ(status.problems.size(), 3u);
  EXPECT_EQ(status.problems[0].title, "INCOMPLETE");
  EXPECT_EQ(status.problems[2].title, "TIMEOUT");
  EXPECT_NE(ras_section(status, "a:1").find("no answer from communicator ranks 3"),
            std::string::npos);
}

// A fake RAS server on a loopback port: answers the handshake and STATUS, then closes.
class FakeRasServer {
 public:
  explicit FakeRasServer(std::string report) : report_(std::move(report)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), len), 0);
    EXPECT_EQ(::listen(listener_, 1), 0);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeRasServer() {
    thread_.join();
    ::close(listener_);
  }
  int port() const { return port_; }
  const std::string& received() const { return received_; }

 private:
  void serve() {
    const int client = ::accept(listener_, nullptr, nullptr);
    if (client < 0) return;
    char buffer[256];
    while (received_.find("STATUS\n") == std::string::npos) {
      const ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      received_.append(buffer, static_cast<size_t>(n));
    }
    const std::string reply = "SERVER PROTOCOL 2\n" + report_;
    ::send(client, reply.data(), reply.size(), MSG_NOSIGNAL);
    ::close(client);
  }

  std::string report_;
  int listener_ = -1;
  int port_ = 0;
  std::string received_;
  std::thread thread_;
};

TEST(NcclRasTest, TheClientSpeaksTheProtocolAndReturnsTheReport) {
  std::optional<std::string> reply;
  {
    FakeRasServer server(kMismatchReport);
    reply = query_ras("127.0.0.1:" + std::to_string(server.port()), std::chrono::seconds(30));
  }
  ASSERT_TRUE(reply);
  EXPECT_EQ(*reply, kMismatchReport);
  EXPECT_EQ(parse_ras_status(*reply).lagging.size(), 1u);
}

TEST(NcclRasTest, TheClientSendsTheHandshakeBeforeStatus) {
  FakeRasServer server(kIncompleteReport);
  ASSERT_TRUE(query_ras("127.0.0.1:" + std::to_string(server.port()), std::chrono::seconds(30)));
  // The server thread wrote what it received before it replied.
  EXPECT_EQ(server.received(), "CLIENT PROTOCOL 2\nSTATUS\n");
}

TEST(NcclRasTest, NothingListeningIsNoReplyAtOnce) {
  // A port that was just free: bound, read, closed.
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(s);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(
      query_ras("127.0.0.1:" + std::to_string(ntohs(addr.sin_port)), std::chrono::seconds(30)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace acc::launcher
