// A stand-in for NVIDIA's libnvidia-ml.so, for machines without a GPU: the launcher loads it
// through ACC_NVML_LIBRARY exactly as it loads the real one. It has ACC_FAKE_NVML_GPUS GPUs (1
// unless set), GPU i with UUID GPU-0000000i-fake-..., and what it reports comes from
// ACC_FAKE_NVML:
//   busy       every child of the calling process (the launcher's workers) runs kernels at 87% of
//              the SMs of each GPU (the default)
//   idle       no GPU ran anything (no samples: NVML_ERROR_NOT_FOUND)
//   no_driver  nvmlInit_v2 fails as it does where the kernel module is not loaded
//   healthy    idle, and every health query answers that all is well (so do busy and idle)
// and, each for the last GPU only (idle otherwise, the other GPUs healthy):
//   ecc              2 uncorrected volatile ECC errors
//   retired_pending  pages wait to be retired
//   remap_pending    rows wait to be remapped
//   remap_failed     a row remapping failed
//   reset_required   the recovery action field asks for a GPU reset
//   lost             every query of the GPU answers NVML_ERROR_GPU_IS_LOST
//   not_supported    every health query answers NVML_ERROR_NOT_SUPPORTED (no fault: cannot say)
//   slow_release     healthy; GPU 0's compute processes are the pids listed in the file
//                    ACC_FAKE_NVML_PIDS (a number a line; the tests' workers append their own),
//                    each holding 1 GiB while it lives and for ACC_FAKE_NVML_RELEASE_MS (0 unless
//                    set) after the fake first finds it gone. Each such query appends its answer
//                    to that file, "nvml: held PID..." or "nvml: free", so that a test reads in
//                    one file whether the next worker started before the memory was let go.
// Only the functions the launcher resolves are here, with the signatures, enum values and
// structures of nvml.h (CUDA 13.0).

#include <dirent.h>
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kNotFound = 6;
constexpr int kInsufficientSize = 7;
constexpr int kDriverNotLoaded = 9;
constexpr int kGpuIsLost = 15;
constexpr int kUncorrected = 1;                 // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileEcc = 0;                 // NVML_VOLATILE_ECC
constexpr unsigned kRecoveryActionField = 230;  // NVML_FI_DEV_GET_GPU_RECOVERY_ACTION
constexpr int kValueTypeUnsignedInt = 1;        // NVML_VALUE_TYPE_UNSIGNED_INT
constexpr unsigned kMaxGpus = 16;

struct Sample {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};

struct ProcessInfo {  // nvmlProcessInfo_v2_t
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

union Value {  // nvmlValue_t
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
};

struct FieldValue {  // nvmlFieldValue_t
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;
  int nvmlReturn;
  Value value;
};

std::string mode() {
  const char* value = std::getenv("ACC_FAKE_NVML");
  return value ? value : "busy";
}

unsigned gpu_count() {
  const char* value = std::getenv("ACC_FAKE_NVML_GPUS");
  const int count = value ? std::atoi(value) : 1;
  return count > 0 && count <= static_cast<int>(kMaxGpus) ? static_cast<unsigned>(count) : 1;
}

// A device handle is a pointer to its index.
unsigned device_tokens[kMaxGpus] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

int index_of(void* device) {
  for (unsigned i = 0; i < gpu_count(); ++i)
    if (device == &device_tokens[i]) return static_cast<int>(i);
  return -1;
}

// Whether `device` is the faulty GPU of a fault mode named `fault`.
bool faulty(void* device, const char* fault) {
  return mode() == fault && index_of(device) == static_cast<int>(gpu_count()) - 1;
}

// The health queries' common answer before their own: an unknown device, a lost GPU, no support.
int health_status(void* device) {
  if (index_of(device) < 0) return kInvalidArgument;
  if (faulty(device, "lost")) return kGpuIsLost;
  if (faulty(device, "not_supported")) return kNotSupported;
  return kSuccess;
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

bool alive(unsigned int pid) {
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// slow_release: the pids of ACC_FAKE_NVML_PIDS still holding memory, each query's answer appended
// to the same file.
std::vector<unsigned int> memory_holders() {
  static std::map<unsigned int, unsigned long long> gone_since_us;
  const char* path = std::getenv("ACC_FAKE_NVML_PIDS");
  if (path == nullptr) return {};
  const char* release = std::getenv("ACC_FAKE_NVML_RELEASE_MS");
  const unsigned long long release_us = release ? std::strtoull(release, nullptr, 10) * 1000 : 0;
  std::vector<unsigned int> held;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto pid = static_cast<unsigned int>(std::strtoul(line.c_str(), nullptr, 10));
    if (!alive(pid)) {
      const unsigned long long gone = gone_since_us.emplace(pid, now_us()).first->second;
      if (now_us() - gone >= release_us) continue;
    }
    held.push_back(pid);
  }
  std::string answer = held.empty() ? "nvml: free" : "nvml: held";
  for (unsigned int pid : held) answer += " " + std::to_string(pid);
  std::ofstream(path, std::ios::app) << answer << "\n";
  return held;
}

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
  *count = gpu_count();
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index >= gpu_count()) return kInvalidArgument;
  *device = &device_tokens[index];
  return kSuccess;
}

int nvmlDeviceGetUUID(void* device, char* uuid, unsigned int length) {
  const int index = index_of(device);
  if (index < 0 || uuid == nullptr) return kInvalidArgument;
  const std::string text =
      "GPU-" + std::string(7, '0') + std::to_string(index) + "-fake-4000-8000-000000000000";
  if (length < text.size() + 1) return kInsufficientSize;
  std::memcpy(uuid, text.c_str(), text.size() + 1);
  return kSuccess;
}

int nvmlDeviceGetTotalEccErrors(void* device, int error_type, int counter_type,
                                unsigned long long* count) {
  if (const int status = health_status(device); status != kSuccess) return status;
  if (count == nullptr) return kInvalidArgument;
  const bool asked = error_type == kUncorrected && counter_type == kVolatileEcc;
  *count = faulty(device, "ecc") && asked ? 2 : 0;
  return kSuccess;
}

int nvmlDeviceGetRetiredPagesPendingStatus(void* device, int* is_pending) {
  if (const int status = health_status(device); status != kSuccess) return status;
  if (is_pending == nullptr) return kInvalidArgument;
  *is_pending = faulty(device, "retired_pending") ? 1 : 0;  // NVML_FEATURE_ENABLED : _DISABLED
  return kSuccess;
}

int nvmlDeviceGetRemappedRows(void* device, unsigned int* corrected, unsigned int* uncorrected,
                              unsigned int* is_pending, unsigned int* failure_occurred) {
  if (const int status = health_status(device); status != kSuccess) return status;
  if (!corrected || !uncorrected || !is_pending || !failure_occurred) return kInvalidArgument;
  *corrected = 0;
  *uncorrected = faulty(device, "remap_pending") ? 1 : 0;
  *is_pending = faulty(device, "remap_pending") ? 1 : 0;
  *failure_occurred = faulty(device, "remap_failed") ? 1 : 0;
  return kSuccess;
}

int nvmlDeviceGetFieldValues(void* device, int count, FieldValue* values) {
  if (index_of(device) < 0 || count <= 0 || values == nullptr) return kInvalidArgument;
  if (faulty(device, "lost")) return kGpuIsLost;
  for (int i = 0; i < count; ++i) {
    FieldValue& field = values[i];
    field.timestamp = 0;
    field.latencyUsec = 0;
    if (field.fieldId != kRecoveryActionField || faulty(device, "not_supported")) {
      field.nvmlReturn = kNotSupported;
      continue;
    }
    field.valueType = kValueTypeUnsignedInt;
    field.nvmlReturn = kSuccess;
    field.value.uiVal = faulty(device, "reset_required") ? 1 : 0;  // ..._GPU_RESET : _NONE
  }
  return kSuccess;
}

int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned int* count, ProcessInfo* infos) {
  if (index_of(device) < 0 || count == nullptr) return kInvalidArgument;
  const std::vector<unsigned int> pids = index_of(device) == 0 && mode() == "slow_release"
                                             ? memory_holders()
                                             : std::vector<unsigned>{};
  if (*count < pids.size() || (infos == nullptr && !pids.empty())) {
    *count = static_cast<unsigned int>(pids.size());
    return kInsufficientSize;
  }
  for (size_t i = 0; i < pids.size(); ++i)
    infos[i] = ProcessInfo{pids[i], 1ull << 30, 0xFFFFFFFF, 0xFFFFFFFF};
  *count = static_cast<unsigned int>(pids.size());
  return kSuccess;
}

int nvmlDeviceGetProcessUtilization(void* device, Sample* samples, unsigned int* count,
                                    unsigned long long /*last_seen*/) {
  if (index_of(device) < 0 || count == nullptr) return kInvalidArgument;
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
