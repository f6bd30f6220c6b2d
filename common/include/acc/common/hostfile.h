#pragma once

// The hostfile of a multi-node job and the --include/--exclude grammar that picks from it, as
// DeepSpeed, Horovod and Open MPI write them:
//
//   # hostfile: "host slots=N" a line, '#' comments
//   worker-1 slots=4
//   worker-2 slots=4
//
//   --include "worker-1:0,2@worker-2"   worker-1's slots 0 and 2, all of worker-2
//   --exclude "worker-1"                all of worker-1 ("w1,w2", commas between hosts, also reads)
//
// Used by the fan-out and by a node reading its own place from the hostfile, so both read the
// same hosts. Pure functions except read_hostfile; thread-safe.

#include <map>
#include <string>
#include <vector>

namespace acc {

struct HostfileEntry {
  std::string host;
  int slots = 1;
  bool operator==(const HostfileEntry& other) const {
    return host == other.host && slots == other.slots;
  }
};

// The entries of hostfile text, in order. Throws ConfigError naming path:line for a malformed
// line, and naming the path when no host is listed.
std::vector<HostfileEntry> parse_hostfile(const std::string& text, const std::string& path);

// Reads and parses the file at `path`. Throws ConfigError "--hostfile PATH: ..." when it is
// missing, a directory or unreadable, or as parse_hostfile.
std::vector<HostfileEntry> read_hostfile(const std::string& path);

// "h1:0,2@h2" -> {h1: [0, 2], h2: []} (an empty list: every slot); "h1,h2" -> {h1: [], h2: []};
// "" -> {}. Throws ConfigError naming `flag` for a slot that is not a number.
std::map<std::string, std::vector<int>> parse_host_filter(const std::string& filter,
                                                          const std::string& flag);

// A host kept by select_hosts and the slots of it kept.
struct SelectedHost {
  std::string host;
  std::vector<int> slots;  // in the order --include gives them, else ascending
  int hostfile_slots = 0;  // all the hostfile gives it
};

// The hosts (and slots) that --include (empty: all) keeps and --exclude does not, in hostfile
// order. Throws ConfigError naming the flag for a host not in the hostfile, a slot it does not
// have, or when nothing is left.
std::vector<SelectedHost> select_hosts(const std::vector<HostfileEntry>& hosts,
                                       const std::string& include, const std::string& exclude);

}  // namespace acc
