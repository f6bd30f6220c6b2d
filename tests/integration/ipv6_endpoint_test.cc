// IPv6 rendezvous endpoints through the real binary: a c10d store at [::1]:PORT is reached and
// the round completes; the ambiguous ::1:PORT is one error line at once, never a wait.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launcher_harness.h"

namespace acc::testing {
namespace {

bool has_ipv6_loopback() {
  std::ifstream interfaces("/proc/net/if_inet6");
  for (std::string line; std::getline(interfaces, line);)
    if (line.rfind("00000000000000000000000000000001", 0) == 0) return true;
  return false;
}

// `acc-launch rendezvous serve --host ::1 --port 0`: it reports the port it bound, so no port is
// picked, released and raced for.
class Ipv6Store {
 public:
  Ipv6Store() {
    int out[2];
    if (::pipe(out) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      const std::string launcher = launcher_binary();
      ::execl(launcher.c_str(), launcher.c_str(), "rendezvous", "serve", "--host", "::1", "--port",
              "0", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    // One line: "acc-launch rendezvous: store listening on [::1]:PORT (...)".
    FILE* stream = ::fdopen(out[0], "r");
    char line[256] = {};
    if (std::fgets(line, sizeof(line), stream)) address_line_ = line;
    std::fclose(stream);
    const size_t at = address_line_.find("[::1]:");
    if (at != std::string::npos) port_ = std::atoi(address_line_.c_str() + at + 6);
  }
  ~Ipv6Store() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  int port() const { return port_; }
  const std::string& address_line() const { return address_line_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string address_line_;
};

TEST(Ipv6EndpointTest, ANodeMeetsAtAStoreGivenAsBracketedIpv6) {
  if (!has_ipv6_loopback()) GTEST_SKIP() << "no IPv6 loopback here";
  Ipv6Store store;
  ASSERT_GT(store.port(), 0) << store.address_line();
  const std::string endpoint = "[::1]:" + std::to_string(store.port());
  const LaunchRun run = run_launcher(
      worker({"--nnodes", "1", "--nproc_per_node", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint",
              endpoint, "--rdzv_conf", "is_host=0,join_timeout=30", "--rdzv_id", "ipv6"},
             {"env"}));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("rendezvous round 0: node 0 of 1"), std::string::npos) << run.err;
  EXPECT_NE(run.out.find("RANK=1"), std::string::npos) << run.out;
}

TEST(Ipv6EndpointTest, AnUnbracketedIpv6AddressWithAPortIsOneLineNotAWait) {
  const LaunchRun run = run_launcher({"--nnodes", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint",
                                      "::1:29400", "--no_python", "/bin/true"},
                                     {}, std::chrono::seconds(30));
  EXPECT_EQ(run.exit_code, 2);
  ASSERT_EQ(lines_of(run.err).size(), 1u) << run.err;
  EXPECT_NE(run.err.find("--rdzv_endpoint ::1:29400"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("[::1]:29400"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace acc::testing
