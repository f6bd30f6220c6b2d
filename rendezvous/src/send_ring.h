#pragma once

// Sends to many sockets in one system call: an io_uring whose submissions are IORING_OP_SEND
// with MSG_DONTWAIT, submitted and completed together by flush(). The store server answers a poll
// round's requests through it. Waking a client is most of what a send costs, and a woken client
// often preempts its waker on the way out of the system call; one submission for the whole round
// is preempted at most once (bench/README.md, "Store server CPU per operation").
//
// Built on Uring (uring.h). Where io_uring is missing or forbidden (old kernels,
// kernel.io_uring_disabled, container seccomp profiles) ok() is false and the caller sends one by
// one. Not thread-safe.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "uring.h"

namespace acc::rendezvous::detail {

class SendRing {
 public:
  // Up to `entries` sends per flush (rounded up to a power of two by the kernel).
  explicit SendRing(unsigned entries) : ring_(entries) {}

  bool ok() const { return ring_.ok(); }
  // Sends that fit before a flush() is needed.
  bool full() const { return ring_.queued() == ring_.entries(); }

  // Queues a send of [data, data + size) to `fd`, tagged `tag`. The bytes must stay in place
  // until flush() returns. Call only when ok() and not full().
  void send(int fd, const char* data, std::size_t size, std::uint64_t tag);

  // Submits every queued send and waits for all of them (with MSG_DONTWAIT none waits for room:
  // a full socket completes at once with -EAGAIN), calling on_done(tag, result) for each one
  // that completed, result being the bytes sent or -errno. If the kernel refuses the submission
  // (it should not: completions are reaped at every flush), the ring disables itself and ok()
  // turns false; a send without on_done sent nothing, and the caller sends it itself.
  template <typename OnDone>
  void flush(OnDone&& on_done) {
    if (ring_.queued() == 0) return;
    const bool submitted = submit_and_wait();
    while (const io_uring_cqe* cqe = ring_.next_completion()) {
      on_done(cqe->user_data, cqe->res);
      ring_.pop_completion();
    }
    if (!submitted) ring_.close();
  }

 private:
  bool submit_and_wait();

  Uring ring_;
};

// Chooses, by measurement, whether a round's replies go out together through the SendRing or with
// one send each. Batching pays where a woken client preempts the server after each send (clients
// sharing the server's cores: on 2 cores, 0.15-0.75 involuntary context switches per reply with
// one send each, at 8 and 32 clients); where clients wake on cores of their own, one send each
// was measured cheaper (16 cores: 7.2 against 8.3 us of server CPU per operation). So the
// server measures that cause directly: it counts how often it was preempted (the loop thread's
// involuntary context switches, passed in) over each epoch of kEpochReplies replies sent each,
// and batches when that was at least kPreemptionsPerReply per reply. While it sends each, every
// epoch is such a measurement. While it batches, it sends each for one epoch now and then to
// measure again: after kExploitEpochs batched epochs, then twice as many after each measurement
// that agrees, up to kMaxExploitEpochs, since a measured epoch costs (one send each is 1.6x the
// CPU per reply on 2 cores). (Comparing the thread's CPU time per reply in the two modes was
// tried first: under this machine's load it chose one send each for 1.13 clients at 32 clients,
// where that costs 1.6x.) Pure logic: the counter is passed in. Not thread-safe.
class BatchingChoice {
 public:
  static constexpr std::size_t kEpochReplies = 1024;
  static constexpr int kExploitEpochs = 30;
  static constexpr int kMaxExploitEpochs = 480;
  static constexpr double kPreemptionsPerReply = 0.1;

  // `preemptions`: the involuntary context switches so far of the thread that sends (e.g.
  // getrusage(RUSAGE_THREAD).ru_nivcsw); read once per epoch.
  explicit BatchingChoice(std::function<double()> preemptions)
      : preemptions_(std::move(preemptions)) {}

  // Whether the next round's replies should go out together.
  bool batch() const { return batch_; }

  // Counts a round's replies (sent in the mode batch() gave); ends an epoch every kEpochReplies.
  void sent(std::size_t replies) {
    replies_ += replies;
    if (replies_ < kEpochReplies) return;
    const double now = preemptions_();
    const double per_reply = (now - epoch_start_) / static_cast<double>(replies_);
    epoch_start_ = now;
    replies_ = 0;
    if (batch_) {
      batch_ = --exploit_left_ > 0;  // at 0, the next epoch sends each and is measured
      return;
    }
    measured_ = per_reply;
    if (per_reply < kPreemptionsPerReply) {
      exploit_epochs_ = kExploitEpochs;  // batching, when it comes back, is checked soon
      return;
    }
    batch_ = true;
    exploit_left_ = exploit_epochs_;
    exploit_epochs_ = std::min(2 * exploit_epochs_, kMaxExploitEpochs);
  }

  // Preemptions per reply in the last measured epoch of one send each (-1 before the first).
  double measured() const { return measured_; }

 private:
  std::function<double()> preemptions_;
  bool batch_ = false;  // the first epoch sends each, and is measured
  std::size_t replies_ = 0;
  double epoch_start_ = 0;
  double measured_ = -1;
  int exploit_left_ = 0;
  int exploit_epochs_ = kExploitEpochs;  // batched epochs after the next measurement that batches
};

}  // namespace acc::rendezvous::detail
