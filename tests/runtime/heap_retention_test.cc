// A training step's freed CPU buffers stay in the process: the next step reuses them instead of
// faulting fresh pages in (runtime/src/heap_retention.h).

#include "heap_retention.h"

#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/resource.h>

#include <cstdlib>
#include <vector>

#include "acc/runtime/accelerator.h"

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kBlockBytes = size_t{4} << 20;  // a conv activation or fc1's gradient
constexpr int kBlocksPerStep = 8;
constexpr size_t kPagesPerStep = kBlocksPerStep * kBlockBytes / kPage;

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Minor page faults of `steps` steps after a first one, each allocating kBlocksPerStep blocks,
// writing every page of them, and freeing them all, as a CPU training step does with its
// activations and gradients.
long faults_of_later_steps(int steps) {
  volatile char sink = 0;
  auto step = [&] {
    std::vector<char*> blocks;
    for (int b = 0; b < kBlocksPerStep; ++b) {
      auto* block = static_cast<char*>(std::malloc(kBlockBytes));
      for (size_t i = 0; i < kBlockBytes; i += kPage) block[i] = static_cast<char>(i);
      blocks.push_back(block);
    }
    for (char* block : blocks) {
      sink = static_cast<char>(sink + block[kPage]);
      std::free(block);
    }
  };
  step();
  const long before = minor_faults();
  for (int i = 0; i < steps; ++i) step();
  return minor_faults() - before;
}

// glibc with small fixed thresholds: every block over 128 KiB is mapped and unmapped, as the
// dynamic thresholds end up doing in some heap histories.
void return_freed_memory_at_once() {
  ASSERT_EQ(mallopt(M_MMAP_THRESHOLD, 128 << 10), 1);
  ASSERT_EQ(mallopt(M_TRIM_THRESHOLD, 128 << 10), 1);
}

TEST(HeapRetentionTest, AnAcceleratorKeepsAStepsFreedBuffersForTheNextStep) {
  constexpr int kSteps = 5;
  return_freed_memory_at_once();
  // Without it, each step faults in all its pages again (the test's premise).
  ASSERT_GE(faults_of_later_steps(kSteps), static_cast<long>(kSteps * kPagesPerStep * 9 / 10));

  acc::AcceleratorOptions options;
  options.cpu = true;
  options.apply_omp_num_threads = false;
  options.env = acc::WorkerEnv{};
  acc::Accelerator accelerator(options);
  ASSERT_EQ(accelerator.num_processes(), 1);
  EXPECT_LT(faults_of_later_steps(kSteps), static_cast<long>(kSteps * kPagesPerStep / 20));
}

TEST(HeapRetentionTest, LeavesMallocAloneWhereTheUserConfiguredIt) {
  ASSERT_EQ(setenv("MALLOC_TRIM_THRESHOLD_", "131072", 1), 0);
  EXPECT_FALSE(acc::runtime::detail::retain_freed_heap_memory());
  ASSERT_EQ(unsetenv("MALLOC_TRIM_THRESHOLD_"), 0);
  ASSERT_EQ(setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=131072", 1), 0);
  EXPECT_FALSE(acc::runtime::detail::retain_freed_heap_memory());
  ASSERT_EQ(unsetenv("GLIBC_TUNABLES"), 0);
  EXPECT_TRUE(acc::runtime::detail::retain_freed_heap_memory());
}

}  // namespace
