#include "acc/common/progress_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "acc/common/clock.h"
#include "acc/common/error.h"
#include "acc/common/unique_fd.h"

namespace acc::progress_file {
namespace {

constexpr char kMagic[8] = {'A', 'C', 'C', 'P', 'R', 'O', 'G', '1'};

template <std::size_t N>
void put(char (&field)[N], const std::string& value) {
  std::memset(field, 0, N);
  std::memcpy(field, value.data(), std::min(value.size(), N - 1));
}

template <std::size_t N>
std::string get(const char (&field)[N]) {
  return std::string(field, strnlen(field, N));
}

// The counters are single aligned words shared with another process: atomic_ref-style access
// through std::atomic on the same storage (lock-free for 8-byte words on every target we build).
template <typename T>
std::atomic<T>& shared(T& word) {
  static_assert(sizeof(std::atomic<T>) == sizeof(T) && std::atomic<T>::is_always_lock_free);
  return *reinterpret_cast<std::atomic<T>*>(&word);
}

unsigned char* map_file(const std::string& path, int flags, int protection) {
  UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC));
  ACC_CHECK(fd, SystemError, "cannot open the progress file ", path, ": ", std::strerror(errno));
  void* base = ::mmap(nullptr, kFileSize, protection, MAP_SHARED, fd.get(), 0);
  ACC_CHECK(base != MAP_FAILED, SystemError, "cannot map the progress file ", path, ": ",
            std::strerror(errno));
  const auto* header = static_cast<const Header*>(base);
  if (std::memcmp(header->magic, kMagic, sizeof kMagic) != 0 || header->version != kVersion ||
      header->capacity != kCapacity) {
    ::munmap(base, kFileSize);
    throw SystemError(
        detail::concat(path, " is not an acc-launch progress file of version ", kVersion));
  }
  return static_cast<unsigned char*>(base);
}

}  // namespace

std::int64_t now_ns() {
  // steady_clock is CLOCK_MONOTONIC on Linux, the clock Python's time.monotonic() reads too.
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             Clock::machine().now().time_since_epoch())
      .count();
}

void create(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  ACC_CHECK(fd, SystemError, "cannot create the progress file ", path, ": ", std::strerror(errno));
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.version = kVersion;
  header.capacity = kCapacity;
  ACC_CHECK(::ftruncate(fd.get(), kFileSize) == 0 &&
                ::pwrite(fd.get(), &header, sizeof header, 0) == sizeof header,
            SystemError, "cannot write the progress file ", path, ": ", std::strerror(errno));
}

// --- Reader ------------------------------------------------------------------------------------

Reader::Reader(const std::string& path) : base_(map_file(path, O_RDONLY, PROT_READ)) {}

Reader::~Reader() {
  ::munmap(const_cast<unsigned char*>(base_), kFileSize);
}

std::vector<std::unique_ptr<Reader>> open_readers(const std::vector<std::string>& paths) {
  std::vector<std::unique_ptr<Reader>> readers;
  for (const std::string& path : paths) {
    try {
      readers.push_back(std::make_unique<Reader>(path));
    } catch (const Error&) {
      readers.push_back(nullptr);
    }
  }
  return readers;
}

Snapshot Reader::snapshot(std::size_t newest_calls) const {
  auto& h = *reinterpret_cast<Header*>(const_cast<unsigned char*>(base_));
  Snapshot s;
  s.started = shared(h.started).load(std::memory_order_acquire);
  s.completed = shared(h.completed).load(std::memory_order_acquire);
  s.writer_pid = shared(h.writer_pid).load(std::memory_order_relaxed);
  s.beats = shared(h.beats).load(std::memory_order_relaxed);
  s.last_progress_ns = shared(h.last_progress_ns).load(std::memory_order_relaxed);
  s.in_collective_ns = shared(h.in_collective_ns).load(std::memory_order_relaxed);
  s.section_started_ns = shared(h.section_started_ns).load(std::memory_order_relaxed);
  s.section_deadline_ns = shared(h.section_deadline_ns).load(std::memory_order_relaxed);
  s.section = get(h.section);
  s.total_steps = shared(h.total_steps).load(std::memory_order_relaxed);
  s.step = shared(h.step).load(std::memory_order_relaxed);
  const std::uint64_t kept = std::min<std::uint64_t>(newest_calls, kCapacity);
  const std::uint64_t first = s.started > kept ? s.started - kept : 0;
  for (std::uint64_t n = first; n < s.started; ++n) {
    Record r;
    std::memcpy(&r, base_ + kHeaderSize + (n % kCapacity) * kRecordSize, sizeof r);
    Call c;
    c.seq = r.seq;
    c.start_ns = r.start_ns;
    c.end_ns = r.end_ns;
    c.numel = r.numel;
    c.group_size = r.group_size;
    c.peer = r.peer;
    c.group = get(r.group);
    c.op = get(r.op);
    c.dtype = get(r.dtype);
    c.where = get(r.where);
    s.calls.push_back(std::move(c));
  }
  return s;
}

// --- Writer ------------------------------------------------------------------------------------

Writer::Writer(const std::string& path) : base_(map_file(path, O_RDWR, PROT_READ | PROT_WRITE)) {
  shared(reinterpret_cast<Header*>(base_)->writer_pid).store(::getpid());
}

std::unique_ptr<Writer> Writer::from_environment() {
  const char* path = std::getenv(kEnvVar);
  if (path == nullptr || *path == '\0') return nullptr;
  try {
    return std::make_unique<Writer>(path);
  } catch (const Error&) {
    return nullptr;
  }
}

Writer::~Writer() {
  ::munmap(base_, kFileSize);
}

void Writer::beat() {
  auto& h = *reinterpret_cast<Header*>(base_);
  shared(h.beats).fetch_add(1, std::memory_order_relaxed);
  shared(h.last_progress_ns).store(now_ns(), std::memory_order_relaxed);
}

void Writer::beat(std::uint64_t step, std::uint64_t total) {
  auto& h = *reinterpret_cast<Header*>(base_);
  shared(h.total_steps).store(total, std::memory_order_relaxed);
  shared(h.step).store(step, std::memory_order_relaxed);
  beat();
}

std::uint64_t Writer::begin(const std::string& group, std::uint64_t seq, const std::string& op,
                            std::uint64_t numel, const std::string& dtype, int group_size, int peer,
                            const std::string& where) {
  auto& h = *reinterpret_cast<Header*>(base_);
  const std::uint64_t slot = shared(h.started).load(std::memory_order_relaxed);
  auto& r = *reinterpret_cast<Record*>(base_ + kHeaderSize + (slot % kCapacity) * kRecordSize);
  r.seq = seq;
  r.start_ns = now_ns();
  r.end_ns = 0;
  r.numel = numel;
  r.group_size = group_size;
  r.peer = peer;
  put(r.group, group);
  put(r.op, op);
  put(r.dtype, dtype);
  put(r.where, where);
  shared(h.started).store(slot + 1, std::memory_order_release);
  return slot;
}

void Writer::end(std::uint64_t slot) {
  auto& h = *reinterpret_cast<Header*>(base_);
  const std::int64_t now = now_ns();
  if (shared(h.started).load(std::memory_order_relaxed) - slot <= kCapacity) {
    auto& r = *reinterpret_cast<Record*>(base_ + kHeaderSize + (slot % kCapacity) * kRecordSize);
    shared(r.end_ns).store(now, std::memory_order_relaxed);
    shared(h.in_collective_ns).fetch_add(now - r.start_ns, std::memory_order_relaxed);
  }
  shared(h.last_progress_ns).store(now, std::memory_order_relaxed);
  shared(h.completed).fetch_add(1, std::memory_order_release);
}

void Writer::open_section(const std::string& name, std::int64_t deadline_ns) {
  auto& h = *reinterpret_cast<Header*>(base_);
  const std::int64_t now = now_ns();
  put(h.section, name);
  shared(h.section_started_ns).store(now, std::memory_order_relaxed);
  shared(h.section_deadline_ns)
      .store(deadline_ns > 0 ? now + deadline_ns : 0, std::memory_order_relaxed);
  shared(h.last_progress_ns).store(now, std::memory_order_relaxed);
}

void Writer::close_section() {
  auto& h = *reinterpret_cast<Header*>(base_);
  shared(h.section_deadline_ns).store(0, std::memory_order_relaxed);
  put(h.section, "");
  shared(h.last_progress_ns).store(now_ns(), std::memory_order_relaxed);
}

}  // namespace acc::progress_file
