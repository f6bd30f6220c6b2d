#include "process/watchdog.h"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <initializer_list>
#include <new>

namespace acc::launcher {
namespace detail {

// After the watchdog's stack: what it needs, written by the launcher. The watchdog reads it only
// once the launcher is dead, so neither side locks or waits.
struct WatchList {
  pid_t launcher = 0;
  int death_signal = 0;  // the one it asks for first; lower ones down to lowest_signal next
  int lowest_signal = 0;
  size_t count = 0;  // groups[0, count) are used; a forgotten one is 0
  pid_t groups[Watchdog::kCapacity];
};

}  // namespace detail

namespace {

using detail::WatchList;

constexpr size_t kStackSize = 16 * 1024;

#if (defined(__x86_64__) || defined(__aarch64__)) && !defined(__SANITIZE_ADDRESS__)
// The watchdog shares the launcher's memory: a clone costs no copy of the launcher's page tables,
// the launcher takes no copy-on-write fault on each page it writes afterwards (as after a fork),
// and the watchdog's exit frees no address space. It then runs with the launcher's thread
// pointer, so it makes bare system calls: libc's wrappers would set the launcher's errno on a
// failure.
constexpr bool kSharesMemory = true;

long bare(long number, long a = 0, long b = 0, long c = 0, long d = 0) {
#if defined(__x86_64__)
  long result;
  register long r10 asm("r10") = d;
  asm volatile("syscall"
               : "=a"(result)
               : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10)
               : "rcx", "r11", "memory");
  return result;
#else
  register long x8 asm("x8") = number;
  register long x0 asm("x0") = a;
  register long x1 asm("x1") = b;
  register long x2 asm("x2") = c;
  register long x3 asm("x3") = d;
  asm volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
  return x0;
#endif
}
#else
// Elsewhere (and under AddressSanitizer, whose runtime a CLONE_VM child would share) a forked
// watchdog, with memory and errno of its own; the list is in shared memory all the same.
constexpr bool kSharesMemory = false;

long bare(long number, long a = 0, long b = 0, long c = 0, long d = 0) {
  const long result = ::syscall(number, a, b, c, d);
  return result < 0 ? -errno : result;
}
#endif

// The kernel's struct sigaction (rt_sigaction), the same on x86-64 and AArch64.
struct KernelSigaction {
  void (*handler)(int) = nullptr;
  unsigned long flags = 0;
  void (*restorer)() = nullptr;
  uint64_t mask = 0;
};
constexpr long kSigsetSize = sizeof(uint64_t);

long address(const void* pointer) {
  return static_cast<long>(reinterpret_cast<uintptr_t>(pointer));
}

// The watchdog: sleeps until the launcher dies, kills the groups still listed, exits.
int watch_until_death(void* arg) {
  const WatchList& list = *static_cast<const WatchList*>(arg);
  // Holds no one's terminal or pipe open.
  for (long fd : {0, 1, 2}) bare(SYS_close, fd);
  // The terminal's signals (Ctrl-C reaches the launcher's whole group) are the launcher's.
  KernelSigaction ignore;
  ignore.handler = SIG_IGN;
  for (long sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2})
    bare(SYS_rt_sigaction, sig, address(&ignore), 0, kSigsetSize);
  // Blocked before it is asked for, so that it is waited for, never acted on. The next lower
  // real-time signal where the system refuses one: qemu-user has no SIGRTMAX (nor the one below).
  uint64_t death = 0;
  for (long sig = list.death_signal; sig >= list.lowest_signal; --sig) {
    death = uint64_t{1} << (sig - 1);
    bare(SYS_rt_sigprocmask, SIG_BLOCK, address(&death), 0, kSigsetSize);
    if (bare(SYS_prctl, PR_SET_PDEATHSIG, sig) == 0) break;
  }
  // A launcher that died before the prctl took hold has left us to another parent already.
  if (bare(SYS_getppid) == list.launcher)
    while (bare(SYS_rt_sigtimedwait, address(&death), 0, 0, kSigsetSize) < 0) {
    }
  for (size_t i = 0; i < list.count; ++i)
    if (list.groups[i] > 0) bare(SYS_kill, -list.groups[i], SIGKILL);
  bare(SYS_exit, 0);
  return 0;
}

}  // namespace

Watchdog::Watchdog() {
  const size_t size = kStackSize + sizeof(WatchList);
  // Shared, so that a forked watchdog sees the list too; pages are taken as the list grows.
  void* region = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (region == MAP_FAILED) return;
  region_ = region;
  list_ = new (static_cast<char*>(region) + kStackSize) WatchList;
  list_->launcher = ::getpid();
  // A signal nobody sends a launcher's group: one that told of its death by mistake would cost
  // the job.
  list_->death_signal = SIGRTMAX;
  list_->lowest_signal = SIGRTMIN;
  bool forked = !kSharesMemory;
  if constexpr (kSharesMemory) {
    pid_ = ::clone(watch_until_death, static_cast<char*>(region) + kStackSize, CLONE_VM | SIGCHLD,
                   list_);
    // qemu-user makes a CLONE_VM child only as a thread of the process and refuses the rest
    // (EINVAL): there the watchdog is a fork, as where sharing is not built in.
    clone_refused_ = pid_ < 0 && (errno == EINVAL || errno == ENOSYS);
    forked = clone_refused_;
  }
  if (forked) {
    pid_ = ::fork();
    if (pid_ == 0) watch_until_death(list_);
  }
  if (pid_ < 0) {
    ::munmap(region_, size);
    region_ = nullptr;
    list_ = nullptr;
  }
}

void Watchdog::dismiss() {
  if (pid_ > 0 && !dismissed_) ::kill(pid_, SIGKILL);
  dismissed_ = true;
}

Watchdog::~Watchdog() {
  if (pid_ > 0) {
    dismiss();
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  if (region_) ::munmap(region_, kStackSize + sizeof(WatchList));
}

void Watchdog::watch(pid_t process_group) {
  if (!list_ || dismissed_) return;
  for (size_t i = 0; i < list_->count; ++i)
    if (list_->groups[i] == 0) {
      list_->groups[i] = process_group;
      return;
    }
  if (list_->count < kCapacity) list_->groups[list_->count++] = process_group;
}

void Watchdog::forget(pid_t process_group) {
  if (!list_) return;
  for (size_t i = 0; i < list_->count; ++i)
    if (list_->groups[i] == process_group) list_->groups[i] = 0;
}

}  // namespace acc::launcher
