#pragma once

// A wait on a store key that ends in the caller's own poll loop: the agent's loop, which waits on
// its workers' exits and output, also waits on this descriptor, so that a key another node sets
// (its workers failed: the job restarts; it ended the job; it opened a new round) wakes this node
// at once instead of at its next keep-alive tick. One connection of its own, one WAIT on it
// (StoreClient::begin_wait); no thread.

#include <memory>
#include <string>

#include "acc/common/unique_fd.h"

namespace acc::rendezvous {
class StoreClient;
}

namespace acc::launcher {

class StoreWatch {
 public:
  // Connects to the store at host:port (at most `connect_timeout_ms`) and waits there for `key`.
  // Throws NetworkError or TimeoutError when the store cannot be reached.
  StoreWatch(const std::string& host, int port, const std::string& key, int connect_timeout_ms);
  ~StoreWatch();
  StoreWatch(const StoreWatch&) = delete;
  StoreWatch& operator=(const StoreWatch&) = delete;

  // Readable when the key has been set or the connection broke. The same descriptor for the
  // watch's life: once fired() has said so, it is never readable again (it then stands for a
  // pipe nobody writes), so a poll loop that keeps it does not spin.
  int fd() const { return fd_.get(); }
  // Never blocks: true once, when the key has been set or the store connection broke (the caller
  // then looks at the store and learns which); false otherwise.
  bool fired();

 private:
  void quiet();

  std::unique_ptr<rendezvous::StoreClient> client_;
  UniqueFd fd_;     // a duplicate of the client's socket, then of quiet_
  UniqueFd quiet_;  // the read end of a pipe whose write end quiet_writer_ holds
  UniqueFd quiet_writer_;
};

}  // namespace acc::launcher
