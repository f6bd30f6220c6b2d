#pragma once

// Facts about this machine and its sockets: the OS boundary the plan is made against. Every
// command reads the machine through detect_host(), so tests can give it a fake /proc and /sys.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "acc/common/lazy.h"
#include "acc/launcher/host/python_torch.h"
#include "acc/launcher/host/topology.h"

namespace acc::launcher {

// Facts about the machine the plan is made on (detect_host() below is the only place that reads
// the real ones).
struct HostInfo {
  std::string hostname = "localhost";
  // Read from /proc and /sys when first asked (detect_host()): most launches never ask.
  Lazy<int> cpu_count = 1;       // online CPUs (logical)
  Lazy<int> physical_cores = 1;  // cores, not hyper-threads
  // Accelerators this process may use, as PyTorch counts them: those of the first vendor found
  // (NVIDIA, else AMD, else Intel), restricted by that vendor's visibility variables
  // (CUDA_VISIBLE_DEVICES; HIP_/ROCR_VISIBLE_DEVICES; ZE_AFFINITY_MASK).
  int gpu_count = 0;
  std::string gpu_vendor;              // "nvidia", "amd", "intel", or "" without GPUs
  std::vector<std::string> gpu_names;  // model names of the visible GPUs, where the kernel says
  Lazy<double> memory_gb = 0.0;
  std::string cwd;
  std::map<std::string, std::string> environment;  // the launcher's own environment
  // CPUs, NUMA nodes and the GPUs' nodes, for CPU binding alone: detect_host() leaves them to
  // read_topology (a few sysfs files per CPU), which cpu_topology() calls when a binding is asked;
  // a test's host sets topology itself.
  CpuTopology topology;
  std::function<CpuTopology()> read_topology;
  CpuTopology cpu_topology() const { return read_topology ? read_topology() : topology; }
  // Which PyTorch a Python worker started by `python` would import, and from where
  // (host/python_torch.h): detect_host() sets find_python_torch. Null (a test's host): nobody can
  // tell, and the workers get every name of PyTorch's variables (acc/common/torch_env.h).
  std::optional<PythonTorch> (*python_torch_of)(
      const std::string& python, const std::map<std::string, std::string>& environment) = nullptr;
};

// The directory the host facts are read under: $ACC_HOST_ROOT (a fake root with proc/ and sys/
// for tests and containers), else "/".
std::string host_root();

// Reads the hostname, CPUs (online, physical cores), GPUs (NVIDIA through
// /proc/driver/nvidia/gpus or /dev/nvidiaN, AMD through /dev/kfd and the KFD topology, Intel
// through DRM render nodes; none needs a driver library), memory, the current directory and the
// environment. Files are read under `root`; the environment is this process's. Never throws.
HostInfo detect_host(const std::string& root);
inline HostInfo detect_host() {
  return detect_host(host_root());
}

// How many of `devices` (in index order, each with its ids: "0", a UUID) a visibility variable
// such as CUDA_VISIBLE_DEVICES leaves, as PyTorch parses it: a comma list of indices or (a
// prefix of) UUIDs, read up to the first entry that names no device, is negative or repeats one.
// An empty value hides every device. Pure.
int count_visible(const std::vector<std::vector<std::string>>& devices, const std::string& value);

// True when `host` names an address of this machine: binding a socket to it works only then.
bool is_local_address(const std::string& host);

// Binds port 0 on all interfaces and returns the port the kernel chose. Throws NetworkError.
int pick_free_port();

}  // namespace acc::launcher
