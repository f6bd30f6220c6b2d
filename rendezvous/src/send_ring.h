#pragma once

// Sends to many sockets in one system call: an io_uring whose submissions are IORING_OP_SEND
// with MSG_DONTWAIT, submitted and completed together by flush(). The store server answers a poll
// round's requests through it. Waking a client is most of what a send costs, and a woken client
// often preempts its waker on the way out of the system call; one submission for the whole round
// is preempted at most once (bench/README.md, "Store server CPU per operation").
//
// Raw system calls (liburing is not a dependency). Where io_uring is missing or forbidden (old
// kernels, kernel.io_uring_disabled, container seccomp profiles) ok() is false and the caller
// sends one by one. Not thread-safe; the ring's descriptor is close-on-exec.

#include <linux/io_uring.h>

#include <cstddef>
#include <cstdint>
#include <functional>

namespace acc::rendezvous::detail {

class SendRing {
 public:
  // Up to `entries` sends per flush (rounded up to a power of two by the kernel).
  explicit SendRing(unsigned entries);
  ~SendRing();
  SendRing(const SendRing&) = delete;
  SendRing& operator=(const SendRing&) = delete;

  bool ok() const { return fd_ >= 0; }
  // Sends that fit before a flush() is needed.
  bool full() const { return queued_ == entries_; }

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
    if (queued_ == 0) return;
    const bool submitted = submit_and_wait();
    while (const io_uring_cqe* cqe = next_completion()) {
      on_done(cqe->user_data, cqe->res);
      pop_completion();
    }
    if (!submitted) close();
  }

 private:
  bool submit_and_wait();
  void close();
  const io_uring_cqe* next_completion() const;
  void pop_completion();

  int fd_ = -1;
  unsigned entries_ = 0;
  unsigned queued_ = 0;
  void* sq_ring_ = nullptr;
  std::size_t sq_ring_bytes_ = 0;
  void* cq_ring_ = nullptr;
  std::size_t cq_ring_bytes_ = 0;
  io_uring_sqe* sqes_ = nullptr;
  std::size_t sqes_bytes_ = 0;
  unsigned* sq_tail_ = nullptr;
  unsigned sq_mask_ = 0;
  unsigned* sq_array_ = nullptr;
  unsigned* cq_head_ = nullptr;
  unsigned* cq_tail_ = nullptr;
  unsigned cq_mask_ = 0;
  io_uring_cqe* cqes_ = nullptr;
};

// Chooses, by measurement, whether a round's replies go out together through the SendRing or with
// one send each. Batching pays where a woken client would preempt the server after each send
// (clients sharing the server's cores: 2-core machines, many clients); where clients wake on
// cores of their own, one send each was measured cheaper (16 cores: 7.2 against 8.3 us of server
// CPU per operation). So the server measures its own CPU time per reply in each mode, an epoch of
// kEpochReplies replies each, and uses the cheaper one for the next kExploitEpochs epochs before
// measuring both again; each mode's cost is a running mean of its measurements, so one noisy
// epoch does not decide alone. Measuring the worse mode one epoch in 32 costs a few percent
// (32 clients on 2 cores: one send each costs 1.8x, so about 2.5%). Pure logic: the CPU clock
// is passed in. Not thread-safe.
class BatchingChoice {
 public:
  static constexpr std::size_t kEpochReplies = 1024;
  static constexpr int kExploitEpochs = 30;

  // `cpu_seconds`: the CPU time of the thread that sends, e.g. CLOCK_THREAD_CPUTIME_ID; read
  // once per epoch.
  explicit BatchingChoice(std::function<double()> cpu_seconds)
      : cpu_seconds_(std::move(cpu_seconds)) {}

  // Whether the next round's replies should go out together.
  bool batch() const { return batch_; }

  // Counts a round's replies (sent in the mode batch() gave); ends an epoch every kEpochReplies.
  void sent(std::size_t replies) {
    replies_ += replies;
    if (replies_ < kEpochReplies) return;
    const double now = cpu_seconds_();
    if (started_) end_epoch((now - epoch_start_) / static_cast<double>(replies_));
    started_ = true;
    epoch_start_ = now;
    replies_ = 0;
  }

  // The running means of CPU seconds per reply so far (0 before a mode was measured).
  double batched_cost() const { return cost_[1]; }
  double each_cost() const { return cost_[0]; }

 private:
  void end_epoch(double per_reply) {
    double& cost = cost_[batch_ ? 1 : 0];
    cost = cost == 0 ? per_reply : (cost + per_reply) / 2;
    switch (phase_) {
      case Phase::kMeasureBatched:
        phase_ = Phase::kMeasureEach;
        batch_ = false;
        break;
      case Phase::kMeasureEach:
        phase_ = Phase::kExploit;
        exploit_left_ = kExploitEpochs;
        batch_ = cost_[1] <= cost_[0];
        break;
      case Phase::kExploit:
        if (--exploit_left_ > 0) break;
        phase_ = Phase::kMeasureBatched;
        batch_ = true;
        break;
    }
  }

  enum class Phase { kMeasureBatched, kMeasureEach, kExploit };
  std::function<double()> cpu_seconds_;
  Phase phase_ = Phase::kMeasureBatched;
  bool batch_ = true;
  bool started_ = false;
  std::size_t replies_ = 0;
  double epoch_start_ = 0;
  double cost_[2] = {0, 0};  // [0]: one send each, [1]: batched
  int exploit_left_ = 0;
};

}  // namespace acc::rendezvous::detail
