#include "host/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "acc/common/error.h"

namespace acc::launcher {
namespace {

// NVML's C interface, as nvml.h declares it (the parts used here; stable since NVML 5).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kNotFound = 6;           // NVML_ERROR_NOT_FOUND: no sample since then
constexpr nvmlReturn_t kInsufficientSize = 7;   // NVML_ERROR_INSUFFICIENT_SIZE
constexpr nvmlReturn_t kGpuIsLost = 15;         // NVML_ERROR_GPU_IS_LOST
constexpr nvmlReturn_t kResetRequired = 16;     // NVML_ERROR_RESET_REQUIRED
constexpr int kUncorrected = 1;                 // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileEcc = 0;                 // NVML_VOLATILE_ECC
constexpr int kFeatureEnabled = 1;              // NVML_FEATURE_ENABLED
constexpr unsigned kRecoveryActionField = 230;  // NVML_FI_DEV_GET_GPU_RECOVERY_ACTION
constexpr unsigned kUuidBufferSize = 96;        // NVML_DEVICE_UUID_V2_BUFFER_SIZE
struct nvmlProcessUtilizationSample_t {
  unsigned int pid;
  unsigned long long timeStamp;  // CPU time stamp, microseconds
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};
struct nvmlProcessInfo_t {  // nvmlProcessInfo_v2_t, which the _v3 query fills
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes; NVML_VALUE_NOT_AVAILABLE (all ones) where unknown
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
union nvmlValue_t {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
};
struct nvmlFieldValue_t {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;            // nvmlValueType_t
  nvmlReturn_t nvmlReturn;  // this field's own status; value is undefined unless success
  nvmlValue_t value;
};

}  // namespace

struct Nvml::Api {
  nvmlReturn_t (*init)();
  nvmlReturn_t (*shutdown)();
  const char* (*error_string)(nvmlReturn_t);
  nvmlReturn_t (*device_count)(unsigned int*);
  nvmlReturn_t (*device_by_index)(unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*process_utilization)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned int*,
                                      unsigned long long);
  // Optional: null where the driver predates them (a query it cannot answer, not a fault).
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*total_ecc_errors)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*retired_pages_pending)(nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*remapped_rows)(nvmlDevice_t, unsigned int*, unsigned int*, unsigned int*,
                                unsigned int*) = nullptr;
  nvmlReturn_t (*field_values)(nvmlDevice_t, int, nvmlFieldValue_t*) = nullptr;
  nvmlReturn_t (*compute_processes)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*) = nullptr;
};

namespace {

template <typename Function>
void resolve(void* library, const char* name, Function& function, const std::string& path) {
  function = reinterpret_cast<Function>(::dlsym(library, name));
  ACC_CHECK(function != nullptr, SystemError, path, " has no ", name, " (not NVIDIA's NVML?)");
}

template <typename Function>
void resolve_optional(void* library, const char* name, Function& function) {
  function = reinterpret_cast<Function>(::dlsym(library, name));
}

}  // namespace

std::unique_ptr<Nvml> Nvml::open_machine() {
  const char* configured = std::getenv("ACC_NVML_LIBRARY");
  try {
    return std::make_unique<Nvml>(configured && *configured ? configured : "libnvidia-ml.so.1");
  } catch (const Error&) {
    return nullptr;  // no NVIDIA GPU here, or no driver
  }
}

Nvml* Nvml::machine() {
  // Without one, busy means busy on CPU. Never shut down: nvmlShutdown took 3.4 ms of a 37 ms
  // launch on an H200, and the driver lets go of a process's client when the process ends.
  static Nvml* const nvml = open_machine().release();
  return nvml;
}

Nvml::Nvml(const std::string& library) {
  library_ = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library_ == nullptr) {
    const char* why = ::dlerror();
    throw SystemError("cannot load " + library + ": " + (why ? why : "dlopen failed"));
  }
  auto api = std::make_unique<Api>();
  try {
    resolve(library_, "nvmlInit_v2", api->init, library);
    resolve(library_, "nvmlShutdown", api->shutdown, library);
    resolve(library_, "nvmlErrorString", api->error_string, library);
    resolve(library_, "nvmlDeviceGetCount_v2", api->device_count, library);
    resolve(library_, "nvmlDeviceGetHandleByIndex_v2", api->device_by_index, library);
    resolve(library_, "nvmlDeviceGetProcessUtilization", api->process_utilization, library);
    resolve_optional(library_, "nvmlDeviceGetUUID", api->uuid);
    resolve_optional(library_, "nvmlDeviceGetTotalEccErrors", api->total_ecc_errors);
    resolve_optional(library_, "nvmlDeviceGetRetiredPagesPendingStatus",
                     api->retired_pages_pending);
    resolve_optional(library_, "nvmlDeviceGetRemappedRows", api->remapped_rows);
    resolve_optional(library_, "nvmlDeviceGetFieldValues", api->field_values);
    resolve_optional(library_, "nvmlDeviceGetComputeRunningProcesses_v3", api->compute_processes);
    const nvmlReturn_t init = api->init();
    ACC_CHECK(init == kSuccess, SystemError, library, ": nvmlInit: ", api->error_string(init));
    const nvmlReturn_t count = api->device_count(&device_count_);
    if (count != kSuccess || device_count_ == 0) {
      api->shutdown();
      throw SystemError(library + ": " + (count != kSuccess ? api->error_string(count) : "no GPU"));
    }
  } catch (...) {
    ::dlclose(library_);
    throw;
  }
  api_ = api.release();
}

Nvml::~Nvml() {
  api_->shutdown();
  delete api_;
  ::dlclose(library_);
}

std::map<int, unsigned> Nvml::sm_utilization() {
  std::map<int, unsigned> busiest;
  unsigned long long newest = last_seen_us_;
  std::vector<nvmlProcessUtilizationSample_t> samples;
  for (unsigned index = 0; index < device_count_; ++index) {
    nvmlDevice_t device = nullptr;
    if (api_->device_by_index(index, &device) != kSuccess) continue;
    unsigned int count = 0;
    // Asked with no buffer, NVML says how many samples it holds.
    nvmlReturn_t status = api_->process_utilization(device, nullptr, &count, last_seen_us_);
    if (status == kNotFound || (status != kSuccess && status != kInsufficientSize) || count == 0)
      continue;
    samples.resize(count);
    status = api_->process_utilization(device, samples.data(), &count, last_seen_us_);
    if (status != kSuccess) continue;
    for (unsigned k = 0; k < std::min<size_t>(count, samples.size()); ++k) {
      const nvmlProcessUtilizationSample_t& s = samples[k];
      newest = std::max(newest, s.timeStamp);
      if (s.smUtil == 0) continue;
      unsigned& value = busiest[static_cast<int>(s.pid)];
      value = std::max(value, s.smUtil);
    }
  }
  last_seen_us_ = newest;
  return busiest;
}

std::string Nvml::uuid(unsigned index) {
  nvmlDevice_t device = nullptr;
  char text[kUuidBufferSize] = {};
  if (!api_->uuid || api_->device_by_index(index, &device) != kSuccess ||
      api_->uuid(device, text, sizeof(text)) != kSuccess)
    return "";
  return std::string(text, strnlen(text, sizeof(text)));
}

GpuHealthReadings Nvml::health(unsigned index) {
  GpuHealthReadings readings;
  // Any query may say that the GPU is gone or needs a reset: that is the answer, whichever asked.
  auto answered = [&](nvmlReturn_t status) {
    if ((status == kGpuIsLost || status == kResetRequired) && readings.lost.empty())
      readings.lost = status == kGpuIsLost ? "NVML: the GPU has fallen off the bus"
                                           : "NVML: the GPU needs a reset";
    return status == kSuccess;
  };
  nvmlDevice_t device = nullptr;
  if (!answered(api_->device_by_index(index, &device))) return readings;
  if (unsigned long long count = 0;
      api_->total_ecc_errors &&
      answered(api_->total_ecc_errors(device, kUncorrected, kVolatileEcc, &count)))
    readings.uncorrected_ecc_errors = count;
  if (int pending = 0;
      api_->retired_pages_pending && answered(api_->retired_pages_pending(device, &pending)))
    readings.retired_pages_pending = pending == kFeatureEnabled;
  unsigned int corrected = 0, uncorrected = 0, pending = 0, failed = 0;
  if (api_->remapped_rows &&
      answered(api_->remapped_rows(device, &corrected, &uncorrected, &pending, &failed))) {
    readings.remapped_rows_pending = pending != 0;
    readings.row_remapping_failed = failed != 0;
  }
  nvmlFieldValue_t field{};
  field.fieldId = kRecoveryActionField;
  // Drivers before R570 do not know the field: the call or the field's own status says so.
  if (api_->field_values && answered(api_->field_values(device, 1, &field)) &&
      answered(field.nvmlReturn))
    readings.recovery_action = field.value.uiVal;
  return readings;
}

std::map<int, unsigned long long> Nvml::compute_processes() {
  std::map<int, unsigned long long> processes;
  if (!api_->compute_processes) return processes;
  std::vector<nvmlProcessInfo_t> infos;
  for (unsigned index = 0; index < device_count_; ++index) {
    nvmlDevice_t device = nullptr;
    if (api_->device_by_index(index, &device) != kSuccess) continue;
    // Asked with no room, NVML says how many there are; the list may grow before the second
    // call, so a little more room is given.
    unsigned int count = 0;
    nvmlReturn_t status = api_->compute_processes(device, &count, nullptr);
    if (status != kInsufficientSize) continue;  // success with none, or it cannot say
    infos.resize(count + 8);
    count = static_cast<unsigned int>(infos.size());
    if (api_->compute_processes(device, &count, infos.data()) != kSuccess) continue;
    for (unsigned k = 0; k < std::min<size_t>(count, infos.size()); ++k) {
      const unsigned long long used = infos[k].usedGpuMemory;
      processes[static_cast<int>(infos[k].pid)] += used == ~0ull ? 0 : used;
    }
  }
  return processes;
}

}  // namespace acc::launcher
