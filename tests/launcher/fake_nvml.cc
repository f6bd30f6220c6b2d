// A stand-in for NVIDIA's libnvidia-ml.so, for machines without a GPU: the launcher loads it
// through ACC_NVML_LIBRARY exactly as it loads the real one. What it reports comes from
// ACC_FAKE_NVML:
//   busy       one GPU, on which every child of the calling process (the launcher's workers)
//              runs kernels at 87% of the SMs
//   idle       one GPU that ran nothing (no samples: NVML_ERROR_NOT_FOUND)
//   no_driver  nvmlInit_v2 fails as it does where the kernel module is not loaded
// Only the functions the launcher resolves are here, with the signatures and structures of
// nvml.h.

#include <dirent.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kNotFound = 6;
constexpr int kInsufficientSize = 7;
constexpr int kDriverNotLoaded = 9;

struct Sample {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};

std::string mode() {
  const char* value = std::getenv("ACC_FAKE_NVML");
  return value ? value : "busy";
}

int parent_of(int pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  FILE* file = std::fopen(path.c_str(), "r");
  if (!file) return -1;
  char text[512] = {};
  const size_t n = std::fread(text, 1, sizeof(text) - 1, file);
  std::fclose(file);
  text[n] = '\0';
  const char* close = std::strrchr(text, ')');
  char state = 0;
  int ppid = -1;
  if (!close || std::sscanf(close + 1, " %c %d", &state, &ppid) != 2) return -1;
  return ppid;
}

std::vector<unsigned int> children_of_caller() {
  std::vector<unsigned int> children;
  DIR* proc = ::opendir("/proc");
  if (!proc) return children;
  const int self = ::getpid();
  while (const dirent* entry = ::readdir(proc)) {
    const int pid = std::atoi(entry->d_name);
    if (pid > 0 && parent_of(pid) == self) children.push_back(static_cast<unsigned int>(pid));
  }
  ::closedir(proc);
  return children;
}

unsigned long long now_us() {
  timeval tv{};
  ::gettimeofday(&tv, nullptr);
  return static_cast<unsigned long long>(tv.tv_sec) * 1000000ULL +
         static_cast<unsigned long long>(tv.tv_usec);
}

int device_token = 0;

}  // namespace

extern "C" {

int nvmlInit_v2() {
  return mode() == "no_driver" ? kDriverNotLoaded : kSuccess;
}

int nvmlShutdown() {
  return kSuccess;
}

const char* nvmlErrorString(int result) {
  switch (result) {
    case kSuccess:
      return "Success";
    case kNotFound:
      return "Not Found";
    case kInsufficientSize:
      return "Insufficient Size";
    case kDriverNotLoaded:
      return "Driver Not Loaded";
    default:
      return "Unknown Error";
  }
}

int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = 1;
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index != 0) return kInvalidArgument;
  *device = &device_token;
  return kSuccess;
}

int nvmlDeviceGetProcessUtilization(void* device, Sample* samples, unsigned int* count,
                                    unsigned long long /*last_seen*/) {
  if (device != &device_token || count == nullptr) return kInvalidArgument;
  if (mode() != "busy") return kNotFound;
  const std::vector<unsigned int> pids = children_of_caller();
  if (pids.empty()) return kNotFound;
  if (samples == nullptr || *count < pids.size()) {
    *count = static_cast<unsigned int>(pids.size());
    return kInsufficientSize;
  }
  const unsigned long long stamp = now_us();
  for (size_t i = 0; i < pids.size(); ++i) samples[i] = Sample{pids[i], stamp, 87, 20, 0, 0};
  *count = static_cast<unsigned int>(pids.size());
  return kSuccess;
}

}  // extern "C"
