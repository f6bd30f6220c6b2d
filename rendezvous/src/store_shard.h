#pragma once

// The pieces of the store server's shards that are not its loop (store_server.cc): how a
// connection's id names its shard, and how a shard's thread gets a descriptor table of its own.
//
// A process holds at most RLIMIT_NOFILE descriptors in one descriptor table (descriptor numbers
// are below the limit), and without CAP_SYS_RESOURCE the hard limit cannot be raised. A thread
// that calls unshare(CLONE_FILES) gets a table of its own: a copy of the one it shared, after
// which what either opens or closes is private to it. So the server serves its connections from
// one or more threads ("shards"), each with its own table: a shard that runs out of descriptors
// stops accepting and the next one starts, and one process holds kMaxShards times the limit.

#include <cstdint>
#include <string>
#include <vector>

namespace acc::rendezvous::detail {

// Most shards of one server: 16 times the open-file limit (320,000 connections at 20,000).
constexpr unsigned kMaxShards = 16;

// A connection id carries its shard in its low bits, so that a reply caused by a request of
// another shard (a WAIT's wake-up, a WATCH_KEY notification) finds the shard that owns it.
constexpr unsigned shard_of(std::uint64_t connection) {
  return static_cast<unsigned>(connection % kMaxShards);
}

// Gives the calling thread a descriptor table of its own (unshare(CLONE_FILES)) and closes in it
// every descriptor but 0, 1, 2 and `keep`. The thread's earlier table (the launcher's, or the
// previous shard's full of its connections) loses nothing: those are copies. Closing them keeps a
// pipe of the launcher's from staying open in a copy of its table (its reader would never see its
// end). Returns an empty string, or what failed.
std::string use_own_descriptor_table(std::vector<int> keep);

}  // namespace acc::rendezvous::detail
