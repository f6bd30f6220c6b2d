#include "send_ring.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace acc::rendezvous::detail {
namespace {

void* map_ring(int fd, std::size_t bytes, off_t offset) {
  void* ring =
      ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, offset);
  return ring == MAP_FAILED ? nullptr : ring;
}

}  // namespace

SendRing::SendRing(unsigned entries) {
  io_uring_params params{};
  const long fd = ::syscall(__NR_io_uring_setup, entries, &params);
  if (fd < 0) return;
  fd_ = static_cast<int>(fd);
  entries_ = params.sq_entries;
  sq_ring_bytes_ = params.sq_off.array + params.sq_entries * sizeof(unsigned);
  cq_ring_bytes_ = params.cq_off.cqes + params.cq_entries * sizeof(io_uring_cqe);
  sqes_bytes_ = params.sq_entries * sizeof(io_uring_sqe);
  sq_ring_ = map_ring(fd_, sq_ring_bytes_, IORING_OFF_SQ_RING);
  cq_ring_ = map_ring(fd_, cq_ring_bytes_, IORING_OFF_CQ_RING);
  sqes_ = static_cast<io_uring_sqe*>(map_ring(fd_, sqes_bytes_, IORING_OFF_SQES));
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

SendRing::~SendRing() {
  close();
}

void SendRing::close() {
  if (sqes_) ::munmap(sqes_, sqes_bytes_);
  if (cq_ring_) ::munmap(cq_ring_, cq_ring_bytes_);
  if (sq_ring_) ::munmap(sq_ring_, sq_ring_bytes_);
  if (fd_ >= 0) ::close(fd_);
  sqes_ = nullptr;
  cq_ring_ = sq_ring_ = nullptr;
  fd_ = -1;
}

void SendRing::send(int fd, const char* data, std::size_t size, std::uint64_t tag) {
  const unsigned tail = *sq_tail_;  // only this thread writes it
  const unsigned index = tail & sq_mask_;
  io_uring_sqe& sqe = sqes_[index];
  std::memset(&sqe, 0, sizeof(sqe));
  sqe.opcode = IORING_OP_SEND;
  sqe.fd = fd;
  sqe.addr = reinterpret_cast<std::uint64_t>(data);
  sqe.len = static_cast<std::uint32_t>(size > 0x7fffffff ? 0x7fffffff : size);
  // MSG_DONTWAIT: a full socket completes with -EAGAIN instead of parking the send in the ring.
  sqe.msg_flags = MSG_NOSIGNAL | MSG_DONTWAIT;
  sqe.user_data = tag;
  sq_array_[index] = index;
  __atomic_store_n(sq_tail_, tail + 1, __ATOMIC_RELEASE);
  ++queued_;
}

bool SendRing::submit_and_wait() {
  const unsigned count = queued_;
  long done;
  do {
    done = ::syscall(__NR_io_uring_enter, fd_, count, count, IORING_ENTER_GETEVENTS, nullptr, 0);
  } while (done < 0 && errno == EINTR);
  queued_ = 0;
  // Fewer taken than queued would leave stale submissions in the ring: the ring is closed then.
  return done >= 0 && static_cast<unsigned>(done) == count;
}

const io_uring_cqe* SendRing::next_completion() const {
  const unsigned head = *cq_head_;
  if (head == __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE)) return nullptr;
  return &cqes_[head & cq_mask_];
}

void SendRing::pop_completion() {
  __atomic_store_n(cq_head_, *cq_head_ + 1, __ATOMIC_RELEASE);
}

}  // namespace acc::rendezvous::detail
