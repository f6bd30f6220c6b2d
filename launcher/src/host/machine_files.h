#pragma once

// What the machine says of itself in files, read in one place: /proc's machine-wide entries
// (cpuinfo, meminfo, vmstat, the NVIDIA driver's GPUs, this process's cgroup), the cgroup files,
// /sys's CPUs and GPUs, and /dev's device nodes, all under one root: "/" on the machine, a fake
// tree in the tests and under ACC_HOST_ROOT (a fake machine for the integration tests). The
// host facts (host/host.cc, host/topology.cc) and the OOM counters (agent/failure_cause.cc) read
// through it; what /proc says of processes is proc::Reader's (process/proc.h). Never throws:
// what cannot be read is empty.

#include <filesystem>
#include <string>
#include <vector>

namespace acc::launcher {

class MachineFiles {
 public:
  // Paths are relative to `root`: "proc/cpuinfo", "sys/fs/cgroup/memory.max".
  explicit MachineFiles(std::filesystem::path root = "/") : root_(std::move(root)) {}

  // The file whole; "" when it cannot be read (every reader takes "" as "not there").
  std::string read(const std::filesystem::path& path) const;
  // Its first line, without the newline.
  std::string line(const std::filesystem::path& path) const;
  // The entries of directory `path`, as paths relative to the root, sorted.
  std::vector<std::filesystem::path> entries(const std::filesystem::path& path) const;
  bool exists(const std::filesystem::path& path) const;
  // Where the symbolic link `path` leads; empty when it is none.
  std::filesystem::path link_target(const std::filesystem::path& path) const;

  const std::filesystem::path& root() const { return root_; }

 private:
  std::filesystem::path under_root(const std::filesystem::path& path) const;

  std::filesystem::path root_;
};

}  // namespace acc::launcher
