#include "shm_allreduce.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "acc/common/clock.h"
#include "acc/common/error.h"
#include "acc/common/processes.h"

namespace acc::runtime::detail {
namespace {

// One rank's share of a bucket goes through in pieces of at most this: (ranks + 1) slots in all,
// 36 MiB for 8 ranks, within a container's default 64 MiB /dev/shm.
constexpr size_t kSlotBytes = size_t{4} << 20;
constexpr size_t kHeaderBytes = 4096;
constexpr int kMaxRanks = 256;
// A barrier looks this many times before it sleeps: the ranks arrive within microseconds of
// each other when both compute, and a spin would take the CPU a rank still computing needs.
constexpr int kSpins = 256;
constexpr std::chrono::milliseconds kLookStep{50};

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::milliseconds wait) {
  timespec ts{static_cast<time_t>(wait.count() / 1000),
              static_cast<long>((wait.count() % 1000) * 1000000)};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

std::string text_of(const std::vector<uint8_t>& bytes) {
  return {bytes.begin(), bytes.end()};
}
std::vector<uint8_t> bytes_of(const std::string& text) {
  return {text.begin(), text.end()};
}

}  // namespace

struct ShmAllreduce::Header {
  alignas(64) std::atomic<uint32_t> arrived;
  alignas(64) std::atomic<uint32_t> generation;  // the futex word: bumped as a barrier opens
  alignas(64) pid_t pids[kMaxRanks];             // each rank's, to tell a rank that died
};
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
static_assert(std::atomic<uint32_t>::is_always_lock_free);

bool ShmAllreduce::applies(int world_size, int local_world_size, bool cpu) {
  const char* off = std::getenv("ACC_SHM_ALLREDUCE");
  if (off && std::string(off) == "0") return false;
  return cpu && world_size > 1 && world_size == local_world_size && world_size <= kMaxRanks;
}

std::unique_ptr<ShmAllreduce> ShmAllreduce::open(c10d::Store& store, const std::string& key,
                                                 int rank, int world_size,
                                                 std::chrono::milliseconds timeout) {
  const size_t bytes = kHeaderBytes + (static_cast<size_t>(world_size) + 1) * kSlotBytes;
  // Rank 0 makes the segment and names it, or names none ("") when it cannot: every rank then
  // all-reduces through Gloo.
  std::string name;
  if (rank == 0) {
    static std::atomic<int> made{0};
    name = "/acc-ddp-" + std::to_string(::getpid()) + "-" + std::to_string(made++);
    const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    const int error = fd < 0 ? errno : ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    if (fd >= 0) ::close(fd);
    if (error != 0) {
      ::shm_unlink(name.c_str());
      name.clear();
    }
    store.set(key, bytes_of(name));
  } else {
    name = text_of(store.get(key));
  }
  if (name.empty()) return nullptr;

  auto shm = std::unique_ptr<ShmAllreduce>(new ShmAllreduce(rank, world_size, timeout));
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd >= 0) {
    void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (base != MAP_FAILED) {
      shm->base_ = base;
      shm->bytes_ = bytes;
      shm->header_ = static_cast<Header*>(base);  // zeros from posix_fallocate: atomics at 0
      shm->header_->pids[rank] = ::getpid();
    }
  }
  // Every rank says whether it has the segment; all use it only if all have it.
  store.set(key + "/" + std::to_string(rank), bytes_of(shm->base_ ? "1" : "0"));
  bool everyone = true;
  for (int r = 0; r < world_size; ++r)
    everyone = text_of(store.get(key + "/" + std::to_string(r))) == "1" && everyone;
  if (rank == 0) ::shm_unlink(name.c_str());  // every rank has it open, or gave up
  return everyone ? std::move(shm) : nullptr;
}

ShmAllreduce::ShmAllreduce(int rank, int world_size, std::chrono::milliseconds timeout)
    : rank_(rank), world_size_(world_size), timeout_(timeout) {}

ShmAllreduce::~ShmAllreduce() {
  if (base_) ::munmap(base_, bytes_);
}

void* ShmAllreduce::slot(int rank) const {
  return static_cast<char*>(base_) + kHeaderBytes + static_cast<size_t>(rank) * kSlotBytes;
}

void ShmAllreduce::barrier() {
  std::atomic<uint32_t>& generation = header_->generation;
  const uint32_t mine = generation.load(std::memory_order_acquire);
  if (header_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 ==
      static_cast<uint32_t>(world_size_)) {
    header_->arrived.store(0, std::memory_order_relaxed);
    generation.fetch_add(1, std::memory_order_release);
    futex_wake_all(&generation);
    return;
  }
  for (int i = 0; i < kSpins; ++i) {
    if (generation.load(std::memory_order_acquire) != mine) return;
    cpu_relax();
  }
  const auto deadline = acc::Clock::machine().now() + timeout_;
  while (generation.load(std::memory_order_acquire) == mine) {
    futex_wait(&generation, mine, kLookStep);
    if (generation.load(std::memory_order_acquire) != mine) return;
    for (int r = 0; r < world_size_; ++r) {
      const pid_t pid = header_->pids[r];
      ACC_CHECK(r == rank_ || processes::exists(pid), BackendError, "rank ", r, " (pid ", pid,
                ") ended while rank ", rank_,
                " waited for it in the gradient all-reduce (shared memory)");
    }
    ACC_CHECK(acc::Clock::machine().now() < deadline, BackendError, "rank ", rank_, " waited ",
              timeout_.count(),
              " ms for the other ranks in the gradient all-reduce (shared memory)");
  }
}

void ShmAllreduce::average(at::Tensor& buffer) {
  ACC_ASSERT(buffer.device().is_cpu() && buffer.is_contiguous());
  const at::Tensor flat = buffer.view({-1});
  const int64_t size = flat.numel();
  const int64_t element = flat.element_size();
  const int64_t piece = static_cast<int64_t>(kSlotBytes) / element;
  const auto options = flat.options();
  const at::Tensor share = torch::scalar_tensor(1.0 / world_size_, torch::kDouble);
  auto at = [&](void* base, int64_t offset, int64_t count) {
    return torch::from_blob(static_cast<char*>(base) + offset * element, {count}, options);
  };
  void* result = slot(world_size_);
  for (int64_t start = 0; start < size; start += piece) {
    const int64_t count = std::min(piece, size - start);
    // This rank's part, divided as DDP's default hook divides before it sums.
    at::Tensor mine = at(slot(rank_), 0, count);
    at::mul_out(mine, flat.narrow(0, start, count), share);
    barrier();
    // This rank's slice of the sums, added in rank order.
    const int64_t begin = count * rank_ / world_size_;
    const int64_t end = count * (rank_ + 1) / world_size_;
    if (end > begin) {
      at::Tensor sums = at(result, begin, end - begin);
      at::add_out(sums, at(slot(0), begin, end - begin), at(slot(1), begin, end - begin));
      for (int r = 2; r < world_size_; ++r) sums.add_(at(slot(r), begin, end - begin));
    }
    barrier();
    flat.narrow(0, start, count).copy_(at(result, 0, count));
  }
}

}  // namespace acc::runtime::detail
