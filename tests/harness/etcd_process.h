#pragma once

// A real single-member etcd on loopback for a test (Debian's etcd-server, or the binary named by
// ACC_ETCD): its ports held by RefusingPorts (etcd cannot listen on port 0: its HTTP gateway
// dials the configured address), its log drained by a thread (etcd blocks once the pipe is
// full), killed and its data dir removed when the object goes. Header-only.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "refusing_port.h"

namespace acc::testing {

class EtcdProcess {
 public:
  static std::string binary() {
    const char* chosen = std::getenv("ACC_ETCD");
    return chosen && *chosen ? chosen : "/usr/bin/etcd";
  }
  static bool installed() { return ::access(binary().c_str(), X_OK) == 0; }

  EtcdProcess() = default;
  ~EtcdProcess() {
    kill();
    if (!data_dir_.empty()) std::filesystem::remove_all(data_dir_);
  }

  // SIGKILLs the member (its data stays, for start() again on the same ports).
  void kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    if (drain_.joinable()) drain_.join();
  }
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  // Starts etcd (again, after kill(): the same member, ports and data) and reads its log until
  // it serves clients (true) or exits (false; `log` holds what it wrote).
  bool start(std::string& log) {
    if (data_dir_.empty()) {
      char dir[] = "/tmp/acc-etcd-test-XXXXXX";
      if (!::mkdtemp(dir)) return false;
      data_dir_ = dir;
    }
    endpoint_ = client_port_.address();
    const std::string peer = "http://" + peer_port_.address();
    const std::string client = "http://" + endpoint_;
    int out[2];
    if (::pipe(out) != 0) return false;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDERR_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      const std::string cluster = "m=" + peer;
      const std::string etcd = binary();
      ::execl(etcd.c_str(), etcd.c_str(), "--name", "m", "--data-dir",
              (data_dir_ + "/m.etcd").c_str(), "--listen-client-urls", client.c_str(),
              "--advertise-client-urls", client.c_str(), "--listen-peer-urls", peer.c_str(),
              "--initial-advertise-peer-urls", peer.c_str(), "--initial-cluster", cluster.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    FILE* stream = ::fdopen(out[0], "r");
    char line[4096];
    bool serving = false;
    while (!serving && std::fgets(line, sizeof line, stream)) {
      log += line;
      serving = std::strstr(line, "serving insecure client requests on") != nullptr;
    }
    if (!serving) {
      std::fclose(stream);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
      return false;
    }
    drain_ = std::thread([stream] {
      char buffer[4096];
      while (std::fread(buffer, 1, sizeof buffer, stream) > 0) {
      }
      std::fclose(stream);
    });
    return true;
  }

  // Its client address, host:port.
  const std::string& endpoint() const { return endpoint_; }

 private:
  pid_t pid_ = -1;
  std::thread drain_;
  std::string data_dir_;
  RefusingPort client_port_;
  RefusingPort peer_port_;
  std::string endpoint_;
};

}  // namespace acc::testing
