// The floor of any launcher on this machine: starts N copies of a program with posix_spawn and
// waits for them, and nothing else (no plan, no store, no output handling). bench.py times it
// beside acc-launch and torchrun, so the start-up ratio can be read against the best any launcher
// could do here.
//
// With --nvml, first the NVML calls that acc-launch's GPU health pre-flight cannot do without
// (docs/launch.md, "GPU health"): load libnvidia-ml.so.1, nvmlInit, and for each GPU its handle,
// UUID, uncorrected ECC count, pending page retirements and row remappings. That is the floor of
// a launcher that checks the GPUs before it starts workers; it exits 3 where NVML cannot load.
//
// With --threads T, the N copies are spawned from T threads at once (this one and T-1 more; each
// posix_spawn waits only for its own child's exec): the floor of a launcher that spawns in
// parallel, which a host with more CPUs than workers could reach.
//
// Usage: spawn_floor [--nvml] [--threads T] N PROGRAM
#include <dlfcn.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern char** environ;  // NOLINT: POSIX

namespace {

// NVML's C interface, the calls used here: each returns 0 on success. Devices are opaque.
using Init = int (*)();
using Count = int (*)(unsigned*);
using Handle = int (*)(unsigned, void**);
using Uuid = int (*)(void*, char*, unsigned);
using Ecc = int (*)(void*, int, int, unsigned long long*);
using Pending = int (*)(void*, int*);
using Remapped = int (*)(void*, unsigned*, unsigned*, unsigned*, unsigned*);

template <typename F>
F symbol(void* library, const char* name) {
  return reinterpret_cast<F>(dlsym(library, name));
}

bool ask_nvml() {
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml == nullptr) return false;
  const auto init = symbol<Init>(nvml, "nvmlInit_v2");
  const auto count = symbol<Count>(nvml, "nvmlDeviceGetCount_v2");
  const auto handle = symbol<Handle>(nvml, "nvmlDeviceGetHandleByIndex_v2");
  const auto uuid = symbol<Uuid>(nvml, "nvmlDeviceGetUUID");
  const auto ecc = symbol<Ecc>(nvml, "nvmlDeviceGetTotalEccErrors");
  const auto retired = symbol<Pending>(nvml, "nvmlDeviceGetRetiredPagesPendingStatus");
  const auto remapped = symbol<Remapped>(nvml, "nvmlDeviceGetRemappedRows");
  unsigned devices = 0;
  if (!init || !count || !handle || !uuid || !ecc || !retired || !remapped || init() != 0 ||
      count(&devices) != 0)
    return false;
  for (unsigned i = 0; i < devices; ++i) {
    void* device = nullptr;
    if (handle(i, &device) != 0) continue;
    char id[96];
    unsigned long long errors = 0;
    int pending = 0;
    unsigned rows[4];
    uuid(device, id, sizeof id);
    ecc(device, /*uncorrected*/ 1, /*volatile*/ 1, &errors);
    retired(device, &pending);
    remapped(device, &rows[0], &rows[1], &rows[2], &rows[3]);
  }
  return true;  // no nvmlShutdown: acc-launch leaves it to the process's end too
}

// Spawns copies first, first + step, ... below count of `program`; a thread's body.
struct Share {
  char* program;
  int first, step, count;
  int failed = 0;
};

void* spawn_share(void* arg) {
  Share& share = *static_cast<Share*>(arg);
  char* child_argv[] = {share.program, nullptr};
  for (int i = share.first; i < share.count; i += share.step) {
    pid_t pid;
    if (posix_spawn(&pid, child_argv[0], nullptr, nullptr, child_argv, environ) != 0) {
      perror("posix_spawn");
      share.failed = 1;
    }
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  int at = 1;
  const bool nvml = at < argc && std::strcmp(argv[at], "--nvml") == 0;
  at += nvml;
  int threads = 1;
  if (at + 1 < argc && std::strcmp(argv[at], "--threads") == 0) {
    threads = atoi(argv[at + 1]);
    at += 2;
  }
  if (argc != at + 2 || threads < 1 || threads > 64) {
    fprintf(stderr, "usage: spawn_floor [--nvml] [--threads T] N PROGRAM\n");
    return 2;
  }
  if (nvml && !ask_nvml()) {
    fprintf(stderr, "spawn_floor: NVML cannot be loaded or initialised here\n");
    return 3;
  }
  const int n = atoi(argv[at]);
  Share shares[64];
  pthread_t helpers[64];
  for (int t = 0; t < threads; ++t) shares[t] = {argv[at + 1], t, threads, n};
  for (int t = 1; t < threads; ++t)
    if (pthread_create(&helpers[t], nullptr, spawn_share, &shares[t]) != 0) {
      fprintf(stderr, "spawn_floor: cannot start a thread\n");
      return 1;
    }
  spawn_share(&shares[0]);
  int failed = 0;
  for (int t = 1; t < threads; ++t) pthread_join(helpers[t], nullptr);
  for (int t = 0; t < threads; ++t) failed |= shares[t].failed;
  for (int status; wait(&status) > 0;) failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  return failed;
}
