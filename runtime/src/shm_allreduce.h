#pragma once

// The gradient all-reduce of ranks that all run on one machine, through shared memory instead of
// Gloo's sockets (private to the runtime). Each rank copies its share of a bucket (divided by the
// world size, as DDP's default hook divides) into its slot of one segment; after a barrier each
// rank sums one slice over every slot into a result area; after a second barrier each reads the
// whole result back. No socket, no kernel copy, no Gloo thread: on a 2-core machine a 4.8 MB
// all-reduce took 6.3 ms of wall and 3 ms of CPU a rank through Gloo, and about 1 ms as copies
// and adds. Where it applies, DataParallel installs it as the Reducer's comm hook; every rank
// gets the same sums (one rank adds each element, in rank order).

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace acc::runtime::detail {

class ShmAllreduce {
 public:
  // Every rank calls it, with the same `key` (one per prepared model). Rank 0 makes the segment
  // (in /dev/shm, its pages reserved up front, so that a full tmpfs shows here and not as a
  // SIGBUS later) and names it to the others through `store`; the others open it; once each has
  // said through `store` whether it could, the name is removed (the memory goes with the last
  // rank). Null on every rank when one could not: they all-reduce through Gloo then. Blocks on
  // `store` (its own timeout). Throws what the store throws.
  static std::unique_ptr<ShmAllreduce> open(c10d::Store& store, const std::string& key, int rank,
                                            int world_size, std::chrono::milliseconds timeout);
  ~ShmAllreduce();
  ShmAllreduce(const ShmAllreduce&) = delete;
  ShmAllreduce& operator=(const ShmAllreduce&) = delete;

  // Replaces `buffer` (contiguous, on the CPU, of the same size and type on every rank) by its
  // mean over the ranks. Blocks until every rank has called it for its buffer. Throws
  // acc::BackendError, naming the rank, when another rank died, or when `timeout` passed.
  void average(at::Tensor& buffer);

  // Where it applies: every rank on this machine, more than one, on the CPU, and not turned off
  // by ACC_SHM_ALLREDUCE=0.
  static bool applies(int world_size, int local_world_size, bool cpu);

 private:
  struct Header;
  ShmAllreduce(int rank, int world_size, std::chrono::milliseconds timeout);
  void barrier();
  void* slot(int rank) const;

  int rank_;
  int world_size_;
  std::chrono::milliseconds timeout_;
  size_t bytes_ = 0;
  void* base_ = nullptr;
  Header* header_ = nullptr;
};

}  // namespace acc::runtime::detail
