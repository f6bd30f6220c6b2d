#include "process_group.h"

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

// A PyTorch wheel's LibTorch is built with Gloo but ships no gloo headers, which
// ProcessGroupGloo.hpp includes: there the runtime has NCCL only.
#if __has_include(<gloo/algorithm.h>)
#define ACC_WITH_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#else
#define ACC_WITH_GLOO 0
#endif

#if ACC_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cstdlib>
#include <string>

#include "acc/common/error.h"

namespace acc::runtime::detail {
namespace {

c10::intrusive_ptr<c10d::Store> connect_store(const WorkerEnv& env,
                                              std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(env.master_port);
  // torch's env:// hosts the store on rank 0 unless the elastic agent already serves one.
  opts.isServer = !env.use_agent_store && env.rank == 0;
  opts.numWorkers = static_cast<std::size_t>(env.world_size);
  opts.waitWorkers = false;
  opts.timeout = timeout;
  opts.multiTenant = true;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, opts);
  } catch (const c10::Error& e) {
    throw TimeoutError(
        acc::detail::concat("rank ", env.rank, ": cannot reach the store at ", env.master_addr, ":",
                            env.master_port, " (", e.what_without_backtrace(),
                            "); check MASTER_ADDR/MASTER_PORT and that rank 0 started"));
  }
  // A restarted group must never read the keys its failed predecessor left behind.
  return c10::make_intrusive<c10d::PrefixStore>(
      "/worker/attempt_" + std::to_string(env.restart_count), store);
}

#if ACC_WITH_GLOO
std::shared_ptr<::gloo::transport::Device> gloo_device(const WorkerEnv& env) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname)
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  // On one host the loopback always works, whatever the hostname resolves to.
  if (env.master_addr == "127.0.0.1" || env.master_addr == "localhost")
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}
#endif

// LibTorch 1.x: ProcessGroupGloo/NCCL are ProcessGroups. 2.x: they are Backends that a
// ProcessGroup dispatches to, registered as distributed_c10d.py's _new_process_group_helper
// does. (The 2.x branch is compiled against a PyTorch 2.x LibTorch only; CI has 1.13.)
template <typename BackendT>
c10::intrusive_ptr<c10d::ProcessGroup> as_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, const WorkerEnv& env,
    c10::intrusive_ptr<BackendT> backend, bool cuda, std::chrono::milliseconds timeout) {
#if TORCH_VERSION_MAJOR >= 2
  const auto type =
      cuda ? c10d::ProcessGroup::BackendType::NCCL : c10d::ProcessGroup::BackendType::GLOO;
#if TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 6
  (void)timeout;
  auto pg = c10::make_intrusive<c10d::ProcessGroup>(store, env.rank, env.world_size);
#else
  auto options = c10::make_intrusive<c10d::ProcessGroup::Options>(cuda ? "nccl" : "gloo", timeout);
  auto pg = c10::make_intrusive<c10d::ProcessGroup>(store, env.rank, env.world_size, options);
#endif
  pg->setDefaultBackend(type);
  pg->setBackend(cuda ? c10::DeviceType::CUDA : c10::DeviceType::CPU, type, backend);
  return pg;
#else
  (void)store;
  (void)env;
  (void)cuda;
  (void)timeout;
  return backend;
#endif
}

}  // namespace

GroupHandle join_group(const WorkerEnv& env, bool cuda, std::chrono::milliseconds timeout) {
  GroupHandle handle;
  handle.store = connect_store(env, timeout);
  auto pg_store = c10::make_intrusive<c10d::PrefixStore>("default_pg/", handle.store);
  try {
    if (cuda) {
#if ACC_WITH_NCCL
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = timeout;
      auto nccl =
          c10::make_intrusive<c10d::ProcessGroupNCCL>(pg_store, env.rank, env.world_size, opts);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
      handle.shutdown = [nccl] { nccl->shutdown(); };
#endif
      handle.group = as_process_group(pg_store, env, nccl, true, timeout);
#else
      throw BackendError(
          "this LibTorch has no NCCL: run on CPU (ACCELERATE_USE_CPU=1) for the Gloo backend");
#endif
    } else {
#if ACC_WITH_GLOO
      auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
      opts->devices.push_back(gloo_device(env));
      opts->threads = 2;
      handle.group = as_process_group(
          pg_store, env,
          c10::make_intrusive<c10d::ProcessGroupGloo>(pg_store, env.rank, env.world_size, opts),
          false, timeout);
#else
      throw BackendError(
          "the CPU backend (Gloo) is not compiled in: this LibTorch ships no gloo headers (a "
          "PyTorch wheel's); run on GPUs (NCCL) or build against a LibTorch with gloo headers");
#endif
    }
  } catch (const acc::Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw BackendError(
        acc::detail::concat("rank ", env.rank, " of ", env.world_size,
                            ": cannot create the process group: ", e.what_without_backtrace()));
  }
  return handle;
}

}  // namespace acc::runtime::detail
