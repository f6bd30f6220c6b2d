#include "nodes/store_watch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "acc/common/error.h"
#include "acc/rendezvous/store_client.h"

namespace acc::launcher {

StoreWatch::StoreWatch(const std::string& host, int port, const std::string& key,
                       int connect_timeout_ms) {
  int pipe_fds[2];
  ACC_CHECK(::pipe2(pipe_fds, O_CLOEXEC) == 0, SystemError,
            "cannot make a pipe: ", std::strerror(errno));
  quiet_.reset(pipe_fds[0]);
  quiet_writer_.reset(pipe_fds[1]);
  rendezvous::StoreClientOptions options;
  options.host = host;
  options.port = port;
  options.connect_timeout = std::chrono::milliseconds(connect_timeout_ms);
  options.handshake_timeout = std::chrono::milliseconds(connect_timeout_ms);
  client_ = std::make_unique<rendezvous::StoreClient>(options);
  client_->begin_wait({key});
  // A duplicate, so that the descriptor the caller polls stays ours when the client closes its
  // own after an error.
  fd_.reset(::fcntl(client_->fd(), F_DUPFD_CLOEXEC, 0));
  ACC_CHECK(fd_.get() >= 0, SystemError, "cannot duplicate a descriptor: ", std::strerror(errno));
}

StoreWatch::~StoreWatch() = default;

bool StoreWatch::fired() {
  if (!client_) return false;
  try {
    if (!client_->wait_ended()) return false;
  } catch (const Error&) {
    // The store went away: the caller's next request to it says so.
  }
  quiet();
  return true;
}

void StoreWatch::quiet() {
  client_.reset();
  // dup3 onto the same number: the caller's poll set stays valid and never wakes again.
  ::dup3(quiet_.get(), fd_.get(), O_CLOEXEC);
}

}  // namespace acc::launcher
