#include "uring.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace acc::rendezvous::detail {

Uring::Uring(unsigned entries, io_uring_params params) {
  const long fd = ::syscall(__NR_io_uring_setup, entries, &params);
  if (fd < 0) return;
  fd_ = static_cast<int>(fd);
  entries_ = params.sq_entries;
  sq_ring_bytes_ = params.sq_off.array + params.sq_entries * sizeof(unsigned);
  cq_ring_bytes_ = params.cq_off.cqes + params.cq_entries * sizeof(io_uring_cqe);
  sqes_bytes_ = params.sq_entries * sizeof(io_uring_sqe);
  sq_ring_ = map(sq_ring_bytes_, IORING_OFF_SQ_RING);
  cq_ring_ = map(cq_ring_bytes_, IORING_OFF_CQ_RING);
  sqes_ = static_cast<io_uring_sqe*>(map(sqes_bytes_, IORING_OFF_SQES));
  if (!sq_ring_ || !cq_ring_ || !sqes_) {
    close();
    return;
  }
  auto* sq = static_cast<char*>(sq_ring_);
  auto* cq = static_cast<char*>(cq_ring_);
  sq_tail_ = reinterpret_cast<unsigned*>(sq + params.sq_off.tail);
  sq_mask_ = *reinterpret_cast<unsigned*>(sq + params.sq_off.ring_mask);
  sq_array_ = reinterpret_cast<unsigned*>(sq + params.sq_off.array);
  cq_head_ = reinterpret_cast<unsigned*>(cq + params.cq_off.head);
  cq_tail_ = reinterpret_cast<unsigned*>(cq + params.cq_off.tail);
  cq_mask_ = *reinterpret_cast<unsigned*>(cq + params.cq_off.ring_mask);
  cqes_ = reinterpret_cast<io_uring_cqe*>(cq + params.cq_off.cqes);
}

Uring::~Uring() {
  close();
}

void* Uring::map(std::size_t bytes, long offset) {
  void* ring =
      ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, offset);
  return ring == MAP_FAILED ? nullptr : ring;
}

void Uring::close() {
  if (sqes_) ::munmap(sqes_, sqes_bytes_);
  if (cq_ring_) ::munmap(cq_ring_, cq_ring_bytes_);
  if (sq_ring_) ::munmap(sq_ring_, sq_ring_bytes_);
  if (fd_ >= 0) ::close(fd_);
  sqes_ = nullptr;
  cq_ring_ = sq_ring_ = nullptr;
  fd_ = -1;
}

io_uring_sqe& Uring::queue() {
  const unsigned tail = *sq_tail_;  // only this thread writes it
  const unsigned index = tail & sq_mask_;
  io_uring_sqe& sqe = sqes_[index];
  std::memset(&sqe, 0, sizeof(sqe));
  sq_array_[index] = index;
  __atomic_store_n(sq_tail_, tail + 1, __ATOMIC_RELEASE);
  ++queued_;
  return sqe;
}

long Uring::enter(unsigned wait) {
  long taken;
  do {
    taken = ::syscall(__NR_io_uring_enter, fd_, queued_, wait, wait ? IORING_ENTER_GETEVENTS : 0,
                      nullptr, 0);
  } while (taken < 0 && errno == EINTR);
  if (taken > 0) queued_ -= static_cast<unsigned>(taken);
  return taken;
}

}  // namespace acc::rendezvous::detail
