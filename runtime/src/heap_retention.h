#pragma once

// Keeping a training step's freed CPU buffers inside the process (private to the runtime).
//
// A CPU step allocates and frees the same few-megabyte tensors (activations, gradients,
// optimizer temporaries) every iteration. LibTorch takes them from glibc malloc, whose dynamic
// thresholds decide whether a freed block is kept or handed back to the kernel (munmap, or brk
// trimming the heap top once more than trim_threshold is free there). Which way it goes depends
// on the heap's history, so an unrelated change can flip it: adding the progress beat did, and
// then every step of libacc's bench trimmed the heap top (brk) and faulted the same pages in
// again, zeroed (~3,000 minor faults a step on BasicNet, a third of the step's CPU time).

namespace acc::runtime::detail {

// Fixes glibc malloc's thresholds so that blocks up to 32 MiB come from the heap and the heap
// top is trimmed only past 256 MiB free: memory a step frees is reused by the next step instead
// of being returned and faulted in again. Leaves malloc as it is where the user configured it
// (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, MALLOC_TOP_PAD_ or glibc.malloc.* tunables
// in GLIBC_TUNABLES) and outside glibc. Returns whether it changed them. Process-wide; cheap and
// idempotent; call before a thread allocates in parallel. Never throws.
bool retain_freed_heap_memory();

}  // namespace acc::runtime::detail
