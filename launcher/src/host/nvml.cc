#include "host/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#include "acc/common/error.h"

namespace acc::launcher {
namespace {

// NVML's C interface, as nvml.h declares it (the parts used here; stable since NVML 5).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kNotFound = 6;          // NVML_ERROR_NOT_FOUND: no sample since then
constexpr nvmlReturn_t kInsufficientSize = 7;  // NVML_ERROR_INSUFFICIENT_SIZE
struct nvmlProcessUtilizationSample_t {
  unsigned int pid;
  unsigned long long timeStamp;  // CPU time stamp, microseconds
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
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
};

namespace {

template <typename Function>
void resolve(void* library, const char* name, Function& function, const std::string& path) {
  function = reinterpret_cast<Function>(::dlsym(library, name));
  ACC_CHECK(function != nullptr, SystemError, path, " has no ", name, " (not NVIDIA's NVML?)");
}

}  // namespace

Nvml* Nvml::machine() {
  static const std::unique_ptr<Nvml> nvml = []() -> std::unique_ptr<Nvml> {
    const char* configured = std::getenv("ACC_NVML_LIBRARY");
    try {
      return std::make_unique<Nvml>(configured && *configured ? configured : "libnvidia-ml.so.1");
    } catch (const Error&) {
      return nullptr;  // no NVIDIA GPU here, or no driver: busy means busy on CPU
    }
  }();
  return nvml.get();
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

}  // namespace acc::launcher
