#include "acc/launcher/host/host.h"
#include "acc/launcher/host/python_torch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <string_view>
#include <utility>

#include "acc/common/error.h"
#include "acc/common/files.h"
#include "acc/common/int_ranges.h"
#include "acc/common/strings.h"
#include "acc/common/unique_fd.h"
#include "acc/launcher/host/topology.h"
#include "acc/rendezvous/tcp_connect.h"
#include "host/machine_files.h"

extern char** environ;

namespace acc::launcher {
namespace {

namespace fs = std::filesystem;

// Each line of `text`, without its newline, to `visit` (the file readers below: no stream).
template <typename Visit>
void for_each_line(std::string_view text, Visit&& visit) {
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    visit(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
}

// "0-3,8,10-11" (a kernel CPU list) -> how many CPUs it names.
int count_cpu_list(const std::string& list) {
  return static_cast<int>(parse_int_ranges(list).value_or(std::vector<int>{}).size());
}

struct CpuFacts {
  int logical = 0;
  int physical = 0;
};

CpuFacts read_cpus(const MachineFiles& files) {
  CpuFacts cpus;
  std::set<std::pair<std::string, std::string>> cores;
  std::string physical_id = "0";
  for_each_line(files.read("proc/cpuinfo"), [&](std::string_view line) {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return;
    const std::string_view key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const std::string_view value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "processor") ++cpus.logical;
    if (key == "physical id") physical_id = value;
    if (key == "core id") cores.emplace(physical_id, value);
  });
  const int online = count_cpu_list(files.line("sys/devices/system/cpu/online"));
  if (online > 0) cpus.logical = online;
  if (cpus.logical == 0) {
    const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
    cpus.logical = n > 0 ? static_cast<int>(n) : 1;
  }
  cpus.physical = cores.empty() ? cpus.logical : static_cast<int>(cores.size());
  return cpus;
}

double read_memory_gb(const MachineFiles& files) {
  double gb = 0;
  for_each_line(files.read("proc/meminfo"), [&](std::string_view line) {
    if (gb > 0 || !line.starts_with("MemTotal:")) return;
    const std::string kb(line.substr(9));
    gb = static_cast<double>(std::strtoll(kb.c_str(), nullptr, 10)) / 1024.0 / 1024.0;
  });
  return gb;
}

// One GPU as the kernel shows it: its ids for the visibility variables (index, UUID) and name.
struct Gpu {
  std::vector<std::string> ids;
  std::string name;
};

// The value of the first "key value" line of `text` (a driver's information or properties file).
std::string field(std::string_view text, std::string_view key) {
  std::string found;
  bool seen = false;
  for_each_line(text, [&](std::string_view line) {
    if (seen || !line.starts_with(key)) return;
    seen = true;
    const size_t start = line.find_first_not_of(" \t", key.size());
    if (start != std::string_view::npos) found = line.substr(start);
  });
  return found;
}

// NVIDIA: the driver's /proc entries (one per GPU, in bus order), else the /dev/nvidiaN nodes.
std::vector<Gpu> nvidia_gpus(const MachineFiles& files) {
  std::vector<Gpu> gpus;
  for (const fs::path& dir : files.entries("proc/driver/nvidia/gpus")) {
    Gpu gpu;
    gpu.ids = {std::to_string(gpus.size())};
    const std::string information = files.read(dir / "information");
    if (std::string uuid = field(information, "GPU UUID:"); !uuid.empty()) gpu.ids.push_back(uuid);
    gpu.name = field(information, "Model:");
    gpus.push_back(std::move(gpu));
  }
  // Without the driver's control node no process here can use an NVIDIA GPU: /dev (hundreds of
  // entries on a big host) is not listed on every launch for nothing.
  if (!gpus.empty() || !files.exists("dev/nvidiactl")) return gpus;
  // nvidia[0-9]+ (not nvidiactl, nvidia-uvm), checked by hand: a std::regex is compiled at run
  // time, on every launch.
  auto is_device = [](const std::string& name) {
    return name.size() > 6 && name.starts_with("nvidia") &&
           std::all_of(name.begin() + 6, name.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  for (const fs::path& node : files.entries("dev"))
    if (is_device(node.filename().string())) gpus.push_back({{std::to_string(gpus.size())}, ""});
  return gpus;
}

// AMD (ROCm): /dev/kfd, and the KFD topology nodes that have SIMD units (CPU nodes have none).
std::vector<Gpu> amd_gpus(const MachineFiles& files) {
  std::vector<Gpu> gpus;
  if (!files.exists("dev/kfd")) return gpus;
  for (const fs::path& node : files.entries("sys/class/kfd/kfd/topology/nodes")) {
    const std::string properties = files.read(node / "properties");
    const std::string simd = field(properties, "simd_count");
    if (simd.empty() || simd == "0") continue;
    Gpu gpu;
    gpu.ids = {std::to_string(gpus.size())};
    if (std::string id = field(properties, "unique_id"); !id.empty() && id != "0")
      gpu.ids.push_back("GPU-" + id);
    gpu.name = files.line(node / "name");
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

// Intel (XPU): DRM render nodes of Intel's vendor id driven by i915 or xe.
std::vector<Gpu> intel_gpus(const MachineFiles& files) {
  std::vector<Gpu> gpus;
  for (const fs::path& node : files.entries("sys/class/drm")) {
    if (node.filename().string().rfind("renderD", 0) != 0) continue;
    if (files.line(node / "device/vendor") != "0x8086") continue;
    const std::string driver = files.link_target(node / "device/driver").filename().string();
    if (driver != "i915" && driver != "xe") continue;
    gpus.push_back({{std::to_string(gpus.size())}, ""});
  }
  return gpus;
}

std::vector<std::vector<std::string>> ids_of(const std::vector<Gpu>& gpus) {
  std::vector<std::vector<std::string>> ids;
  for (const Gpu& gpu : gpus) ids.push_back(gpu.ids);
  return ids;
}

// The visible GPUs' count after each variable that is set, in order.
int visible(const std::vector<Gpu>& gpus, const std::map<std::string, std::string>& environment,
            std::initializer_list<const char*> variables) {
  int count = static_cast<int>(gpus.size());
  for (const char* name : variables) {
    auto it = environment.find(name);
    if (it == environment.end()) continue;
    std::vector<Gpu> left(gpus.begin(), gpus.begin() + count);
    count = count_visible(ids_of(left), it->second);
  }
  return count;
}

void read_gpus(const MachineFiles& files, HostInfo& host) {
  struct Vendor {
    const char* name;
    std::vector<Gpu> (*find)(const MachineFiles&);
    std::initializer_list<const char*> variables;
  };
  const Vendor vendors[] = {
      {"nvidia", nvidia_gpus, {"CUDA_VISIBLE_DEVICES"}},
      {"amd", amd_gpus, {"ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"}},
      {"intel", intel_gpus, {"ZE_AFFINITY_MASK"}},
  };
  for (const Vendor& vendor : vendors) {
    const std::vector<Gpu> gpus = vendor.find(files);
    if (gpus.empty()) continue;
    host.gpu_vendor = vendor.name;
    host.gpu_count = visible(gpus, host.environment, vendor.variables);
    for (const Gpu& gpu : gpus)
      if (!gpu.name.empty()) host.gpu_names.push_back(gpu.name);
    return;
  }
}

// The leading digits of `text` as a number, or -1 (PyTorch's _strtoul).
long leading_number(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  return parse_int(std::string_view(text).substr(0, digits)).value_or(-1);
}

std::string trimmed(const std::string& text) {
  const size_t start = text.find_first_not_of(" \t");
  if (start == std::string::npos) return "";
  return text.substr(start, text.find_last_not_of(" \t") - start + 1);
}

class Socket {
 public:
  Socket() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    ACC_CHECK(fd_, NetworkError, "cannot create a socket: ", std::strerror(errno));
    int one = 1;
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  }

  // Returns 0 or errno.
  int bind_any(int port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0)
      return errno;
    return ::listen(fd_.get(), 1) == 0 ? 0 : errno;
  }
  int port() const {
    sockaddr_in address{};
    socklen_t length = sizeof(address);
    ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&address), &length);
    return ntohs(address.sin_port);
  }

 private:
  UniqueFd fd_;
};

}  // namespace

std::string host_root() {
  const char* root = std::getenv("ACC_HOST_ROOT");
  return root && *root ? root : "/";
}

int count_visible(const std::vector<std::vector<std::string>>& devices, const std::string& value) {
  std::vector<size_t> chosen;
  size_t start = 0;
  const bool by_uuid = value.rfind("GPU-", 0) == 0 || value.rfind("MIG-", 0) == 0;
  while (start <= value.size() && !value.empty()) {
    size_t comma = value.find(',', start);
    if (comma == std::string::npos) comma = value.size();
    const std::string entry = trimmed(value.substr(start, comma - start));
    start = comma + 1;
    std::vector<size_t> matches;
    if (by_uuid) {
      if (entry.rfind(value.substr(0, 4), 0) != 0) break;
      for (size_t i = 0; i < devices.size(); ++i)
        for (size_t j = 1; j < devices[i].size(); ++j)
          if (devices[i][j].rfind(entry, 0) == 0) matches.push_back(i);
      if (matches.size() > 1) return 0;  // ambiguous: PyTorch sees no device
    } else {
      const long index = leading_number(entry);
      if (index >= 0 && index < static_cast<long>(devices.size()))
        matches.push_back(static_cast<size_t>(index));
      else if (index >= 0 && std::find(chosen.begin(), chosen.end(), index) != chosen.end())
        return 0;
    }
    if (matches.empty()) break;
    if (std::find(chosen.begin(), chosen.end(), matches.front()) != chosen.end()) return 0;
    chosen.push_back(matches.front());
  }
  return static_cast<int>(chosen.size());
}

HostInfo detect_host(const std::string& root_dir) {
  const MachineFiles files(root_dir);
  HostInfo host;
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) == 0) host.hostname = name;
  for (char** entry = environ; *entry; ++entry) {
    const char* equals = std::strchr(*entry, '=');
    if (equals)
      host.environment.emplace(std::string(*entry, static_cast<size_t>(equals - *entry)),
                               std::string(equals + 1));
  }
  // One read of /proc/cpuinfo for both counts, and for the copies of them (MergeEnvironment).
  auto cpus = std::make_shared<Lazy<CpuFacts>>([files] { return read_cpus(files); });
  host.cpu_count = Lazy<int>([cpus] { return cpus->get().logical; });
  host.physical_cores = Lazy<int>([cpus] { return cpus->get().physical; });
  host.memory_gb = Lazy<double>([files] { return read_memory_gb(files); });
  read_gpus(files, host);
  host.read_topology = [root_dir] {
    CpuTopology topology = read_cpu_topology(root_dir);
    topology.allowed_cpus = allowed_cpus_of_this_process();
    return topology;
  };
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd)) host.cwd = cwd;
  host.python_torch_of = find_python_torch;
  return host;
}

bool is_local_address(const std::string& host) {
  for (const rendezvous::TcpAddress& a : rendezvous::resolve_tcp(host, 0).addresses) {
    const UniqueFd fd(::socket(a.address.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (fd && ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&a.address), a.length) == 0)
      return true;
  }
  return false;
}

int pick_free_port() {
  Socket socket;
  const int error = socket.bind_any(0);
  ACC_CHECK(error == 0, NetworkError, "cannot find a free port: ", std::strerror(error));
  return socket.port();
}

}  // namespace acc::launcher
