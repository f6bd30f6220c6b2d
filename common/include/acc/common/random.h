#pragma once

// Random identifiers straight from the kernel.

#include <cstdint>

namespace acc {

// A uniformly random 64-bit value from the kernel's generator (getrandom(2)), for identifiers
// that must differ between processes and runs: a run id, a rendezvous id, an etcd receipt key.
// Not std::random_device: the one in GCC 12's static libstdc++ calls arc4random (glibc 2.36),
// which alone would keep acc-launch from glibc 2.34/2.35 systems (RHEL 9, Ubuntu 22.04).
// Blocks only while the kernel's pool is uninitialised early at boot. Thread-safe. Throws
// acc::SystemError where the kernel refuses (no getrandom: Linux before 3.17).
std::uint64_t random_u64();

}  // namespace acc
