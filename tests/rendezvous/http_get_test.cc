#include "acc/rendezvous/http_get.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "refusing_port.h"

namespace acc::rendezvous {
namespace {

using namespace std::chrono_literals;

// A loopback server for one connection: reads the request's head, then writes `answer` (nothing
// where it is empty) and closes, as a status server, a server that goes, or one of another
// protocol would.
class OneReplyHttpServer {
 public:
  explicit OneReplyHttpServer(std::string answer) : answer_(std::move(answer)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    ::bind(listener_, reinterpret_cast<sockaddr*>(&address), length);
    ::listen(listener_, 1);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    address_ = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
    thread_ = std::thread([this] { serve(); });
  }
  ~OneReplyHttpServer() {
    ::shutdown(listener_, SHUT_RDWR);  // where no client came, accept() returns
    if (thread_.joinable()) thread_.join();
    ::close(listener_);
  }
  OneReplyHttpServer(const OneReplyHttpServer&) = delete;
  OneReplyHttpServer& operator=(const OneReplyHttpServer&) = delete;

  const std::string& address() const { return address_; }
  // The request's head as it came, once the server has answered it.
  const std::string& request() {
    thread_.join();
    return request_;
  }

 private:
  void serve() {
    const int client = ::accept(listener_, nullptr, nullptr);
    if (client < 0) return;
    char buffer[4096];
    while (request_.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::read(client, buffer, sizeof buffer);
      if (n <= 0) break;
      request_.append(buffer, static_cast<size_t>(n));
    }
    if (!answer_.empty()) ::send(client, answer_.data(), answer_.size(), MSG_NOSIGNAL);
    ::close(client);
  }

  std::string answer_;
  int listener_ = -1;
  std::string address_;
  std::string request_;
  std::thread thread_;
};

HttpGet get_from(const std::string& address) {
  HttpGet request;
  request.address = address;
  request.target = "/api/job";
  request.server = "the status server";
  request.timeout = 5s;
  return request;
}

// The failure http_get throws for `request`; fails the test where it returns.
HttpError failure_of_get(const HttpGet& request) {
  try {
    http_get(request);
  } catch (const HttpError& e) {
    return e;
  }
  ADD_FAILURE() << "http_get returned";
  return HttpError(HttpFailure::kBadReply, "", "");
}

TEST(HttpGetTest, ReturnsAReplyOfAnyStatusWithItsReasonAndBody) {
  OneReplyHttpServer server(
      "HTTP/1.1 401 Unauthorized\r\nContent-Length: 12\r\nConnection: close\r\n\r\nno secret\r\n!");
  HttpGet request = get_from(server.address());
  request.headers = {{"Authorization", "Bearer t0k3n"}};
  const HttpReply reply = http_get(request);
  EXPECT_EQ(reply.status, 401);
  EXPECT_EQ(reply.reason, "Unauthorized");
  EXPECT_EQ(reply.body, "no secret\r\n!");
  const std::string& sent = server.request();
  EXPECT_EQ(sent.rfind("GET /api/job HTTP/1.1\r\n", 0), 0u) << sent;
  EXPECT_NE(sent.find("\r\nHost: 127.0.0.1\r\n"), std::string::npos) << sent;
  EXPECT_NE(sent.find("\r\nAuthorization: Bearer t0k3n\r\n"), std::string::npos) << sent;
  EXPECT_NE(sent.find("\r\nConnection: close\r\n"), std::string::npos) << sent;
  EXPECT_EQ(sent.find("Content-"), std::string::npos) << sent;  // a GET has no body
}

TEST(HttpGetTest, APortNobodyListensOnIsUnreachable) {
  const acc::testing::RefusingPort port;
  const HttpError e = failure_of_get(get_from(port.address()));
  EXPECT_EQ(e.failure(), HttpFailure::kUnreachable);
  EXPECT_EQ(std::string(e.what()).rfind("the status server at " + port.address() + ": ", 0), 0u)
      << e.what();
}

TEST(HttpGetTest, AServerThatClosesWithoutAReplyIsClosed) {
  OneReplyHttpServer server("");
  const HttpError e = failure_of_get(get_from(server.address()));
  EXPECT_EQ(e.failure(), HttpFailure::kClosed) << e.what();
}

TEST(HttpGetTest, AnAnswerThatIsNotHttpIsABadReply) {
  OneReplyHttpServer server("SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n");
  const HttpError e = failure_of_get(get_from(server.address()));
  EXPECT_EQ(e.failure(), HttpFailure::kBadReply) << e.what();
  EXPECT_FALSE(e.reason().empty());
  EXPECT_NE(std::string(e.what()).find(e.reason()), std::string::npos) << e.what();
}

TEST(HttpGetTest, AServerThatAcceptsAndNeverAnswersIsAReplyTimeoutAfterTheTimeout) {
  acc::testing::RefusingPort port;
  port.listen();  // the kernel accepts; nobody reads or answers
  HttpGet request = get_from(port.address());
  request.timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  const HttpError e = failure_of_get(request);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(e.failure(), HttpFailure::kReplyTimeout) << e.what();
  EXPECT_EQ(e.reason(), "timed out");
  EXPECT_EQ(std::string(e.what()),
            "the status server at " + port.address() + ": reply failed: timed out");
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 10s);  // a hang guard
}

TEST(HttpGetTest, AnAddressWithoutAHostIsAConfigError) {
  EXPECT_THROW(http_get(get_from(":8080")), ConfigError);
}

}  // namespace
}  // namespace acc::rendezvous
