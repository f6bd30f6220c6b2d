#pragma once

// An io_uring, mapped into this process by raw system calls (liburing is not a dependency): a
// submission queue to fill, io_uring_enter, a completion queue to read. The store server's
// SendRing is built on it, and store_bench's all-io_uring yardstick. Where io_uring is missing or
// forbidden (old kernels, kernel.io_uring_disabled, container seccomp profiles) ok() is false.
// Not thread-safe; the ring's descriptor is close-on-exec.

#include <linux/io_uring.h>

#include <cstddef>

namespace acc::rendezvous::detail {

class Uring {
 public:
  // At least `entries` submissions (the kernel rounds up to a power of two); `params` carries
  // setup flags and sizes (IORING_SETUP_*), as io_uring_setup takes them.
  explicit Uring(unsigned entries, io_uring_params params = {});
  ~Uring();
  Uring(const Uring&) = delete;
  Uring& operator=(const Uring&) = delete;

  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // Submissions that fit in the queue, and those queued and not yet taken by enter().
  unsigned entries() const { return entries_; }
  unsigned queued() const { return queued_; }

  // A zeroed submission at the queue's tail, counted as queued. Only when ok() and
  // queued() < entries().
  io_uring_sqe& queue();

  // Submits what is queued and waits for `wait` completions (none: returns at once). Returns how
  // many submissions the kernel took (they leave queued()), or -1 with errno.
  long enter(unsigned wait);

  // The oldest completion not yet popped, or nullptr.
  const io_uring_cqe* next_completion() const {
    const unsigned head = *cq_head_;
    if (head == __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE)) return nullptr;
    return &cqes_[head & cq_mask_];
  }
  void pop_completion() { __atomic_store_n(cq_head_, *cq_head_ + 1, __ATOMIC_RELEASE); }

  // Unmaps the rings and closes the descriptor; ok() turns false.
  void close();

 private:
  void* map(std::size_t bytes, long offset);

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

}  // namespace acc::rendezvous::detail
