// Accelerator::save_state / load_state: the checkpoint directory and its atomic replacement.

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <mutex>
#include <string>

#include "acc/common/error.h"
#include "accelerator_impl.h"
#include "log.h"
#include "remove_tree.h"

namespace acc {
namespace fs = std::filesystem;
namespace {

using runtime::detail::remove_tree;

std::string indexed(const std::string& stem, size_t i) {
  return i == 0 ? stem + ".pt" : stem + "_" + std::to_string(i) + ".pt";
}

// Parameters and buffers by name, on the CPU so a checkpoint loads on any device.
void save_module(const torch::nn::Module& module, const fs::path& path) {
  torch::serialize::OutputArchive archive;
  for (const auto& item : module.named_parameters()) {
    archive.write(item.key(), item.value().detach().cpu());
  }
  for (const auto& item : module.named_buffers()) {
    archive.write(item.key(), item.value().detach().cpu(), /*is_buffer=*/true);
  }
  archive.save_to(path.string());
}

// Copies into the existing tensors rather than replacing them: the Reducer and the optimizer
// hold these very tensors.
void load_module(torch::nn::Module& module, const fs::path& path) {
  torch::serialize::InputArchive archive;
  archive.load_from(path.string());
  torch::NoGradGuard no_grad;
  for (const auto& item : module.named_parameters()) {
    torch::Tensor value;
    archive.read(item.key(), value);
    item.value().copy_(value);
  }
  for (const auto& item : module.named_buffers()) {
    torch::Tensor value;
    archive.read(item.key(), value, /*is_buffer=*/true);
    item.value().copy_(value);
  }
}

// The default generator of `device`'s type (CPU, or that CUDA device's).
torch::Tensor rng_state(torch::Device device) {
  auto generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_rng_state(torch::Device device, const torch::Tensor& state) {
  auto generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

}  // namespace

void Accelerator::save_state(const std::string& dir) {
  const fs::path final_dir(dir);
  const fs::path tmp_dir = final_dir.string() + ".tmp";
  const fs::path old_dir = final_dir.string() + ".old";
  if (is_main_process()) {
    remove_tree(tmp_dir);
    fs::create_directories(tmp_dir);
  }
  wait_for_everyone();

  // Every rank's own RNG state: dropout on rank 1 draws differently from rank 0.
  {
    torch::serialize::OutputArchive archive;
    archive.write("cpu_rng_state", rng_state(torch::kCPU));
    if (device_.is_cuda()) archive.write("cuda_rng_state", rng_state(device_));
    archive.write("step", torch::tensor({step_}));
    auto epochs = torch::zeros({static_cast<int64_t>(impl_->loader_epochs.size())}, torch::kLong);
    for (size_t i = 0; i < impl_->loader_epochs.size(); ++i)
      epochs[static_cast<int64_t>(i)] = static_cast<int64_t>(*impl_->loader_epochs[i]);
    archive.write("loader_epochs", epochs);
    archive.write("accumulation_counter", torch::tensor({accumulation_counter_}));
    archive.save_to(
        (tmp_dir / ("random_states_" + std::to_string(process_index()) + ".pt")).string());
  }
  if (is_main_process()) {
    for (size_t i = 0; i < impl_->models.size(); ++i)
      save_module(*impl_->models[i], tmp_dir / indexed("model", i));
    for (size_t i = 0; i < impl_->optimizers.size(); ++i)
      torch::save(*impl_->optimizers[i], (tmp_dir / indexed("optimizer", i)).string());
    if (impl_->scaler) {
      torch::serialize::OutputArchive archive;
      archive.write("scale", impl_->scale.cpu());
      archive.write("growth_tracker", impl_->growth_tracker.cpu());
      archive.save_to((tmp_dir / "scaler.pt").string());
    }
  }
  wait_for_everyone();
  if (is_main_process()) {
    // rename() cannot replace a non-empty directory: move the old one aside first. A crash in
    // between leaves `dir.old` complete, and load_state falls back to it.
    remove_tree(old_dir);
    if (fs::exists(final_dir)) fs::rename(final_dir, old_dir);
    fs::rename(tmp_dir, final_dir);
    remove_tree(old_dir);
  }
  wait_for_everyone();
  runtime::detail::log(*logger_, runtime::detail::LogLevel::kDebug,
                       detail::concat("saved state (step ", step_, ") to ", dir));
}

void Accelerator::load_state(const std::string& dir) {
  fs::path from(dir);
  if (!fs::exists(from / "random_states_0.pt") &&
      fs::exists(fs::path(dir + ".old") / "random_states_0.pt"))
    from = dir + ".old";
  ACC_CHECK(fs::exists(from / "random_states_0.pt"), ConfigError, "load_state: '", dir,
            "' is not a checkpoint written by save_state (no random_states_0.pt)");
  for (size_t i = 0; i < impl_->models.size(); ++i) {
    const auto path = from / indexed("model", i);
    ACC_CHECK(fs::exists(path), ConfigError, "load_state: ", path.string(),
              " is missing; prepare the same models as the run that saved it");
    load_module(*impl_->models[i], path);
  }
  for (size_t i = 0; i < impl_->optimizers.size(); ++i) {
    const auto path = from / indexed("optimizer", i);
    ACC_CHECK(fs::exists(path), ConfigError, "load_state: ", path.string(), " is missing");
    torch::load(*impl_->optimizers[i], path.string());
  }
  if (impl_->scaler && fs::exists(from / "scaler.pt")) {
    torch::serialize::InputArchive archive;
    archive.load_from((from / "scaler.pt").string());
    torch::Tensor scale, tracker;
    archive.read("scale", scale);
    archive.read("growth_tracker", tracker);
    impl_->scale.copy_(scale);
    impl_->growth_tracker.copy_(tracker);
  }
  auto rng_path = from / ("random_states_" + std::to_string(process_index()) + ".pt");
  if (!fs::exists(rng_path)) {
    runtime::detail::log(*logger_, runtime::detail::LogLevel::kWarn,
                         detail::concat(rng_path.string(),
                                        " is missing (the world size "
                                        "changed?): using rank 0's RNG state"));
    rng_path = from / "random_states_0.pt";
  }
  torch::serialize::InputArchive archive;
  archive.load_from(rng_path.string());
  torch::Tensor rng, step, epochs, counter;
  archive.read("cpu_rng_state", rng);
  archive.read("step", step);
  archive.read("loader_epochs", epochs);
  archive.read("accumulation_counter", counter);
  set_rng_state(torch::kCPU, rng);
  if (torch::Tensor cuda_rng; device_.is_cuda() && archive.try_read("cuda_rng_state", cuda_rng))
    set_rng_state(device_, cuda_rng);
  step_ = step.item<int64_t>();
  accumulation_counter_ = counter.item<int64_t>();
  for (size_t i = 0; i < impl_->loader_epochs.size() && static_cast<int64_t>(i) < epochs.numel();
       ++i)
    *impl_->loader_epochs[i] =
        static_cast<uint64_t>(epochs[static_cast<int64_t>(i)].item<int64_t>());
  runtime::detail::log(*logger_, runtime::detail::LogLevel::kDebug,
                       detail::concat("loaded state (step ", step_, ") from ", from.string()));
}

}  // namespace acc
