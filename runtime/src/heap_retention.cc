#include "heap_retention.h"

#include <cstdlib>
#include <cstring>
#include <initializer_list>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace acc::runtime::detail {
namespace {

// glibc's own ceiling for its dynamic mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX):
// larger blocks are still mapped and returned at once, as they would be without us.
constexpr int kMmapThresholdBytes = 32 << 20;
constexpr int kTrimThresholdBytes = 256 << 20;

bool user_configured_malloc() {
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"})
    if (std::getenv(name) != nullptr) return true;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  return tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr;
}

}  // namespace

bool retain_freed_heap_memory() {
#if defined(__GLIBC__)
  if (user_configured_malloc()) return false;
  // Setting either disables the dynamic adjustment of both, which is the point: the thresholds
  // no longer depend on which blocks happened to be freed first.
  return mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes) == 1 &&
         mallopt(M_TRIM_THRESHOLD, kTrimThresholdBytes) == 1;
#else
  return false;
#endif
}

}  // namespace acc::runtime::detail
