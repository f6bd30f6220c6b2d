// The Trainer's checkpoints: output_dir/checkpoint-<step> holds the Accelerator's state
// (save_state: model, optimizer, every rank's RNG states, the loaders' epochs) and the Trainer's
// own (trainer_state.pt: the step and how far into its epoch the run was). save_state makes the
// directory appear atomically; trainer_state.pt is renamed into it last, so a checkpoint without
// it (a crash in between) is incomplete and never resumed from.

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "acc/common/error.h"
#include "acc/runtime/trainer.h"
#include "remove_tree.h"

namespace acc {
namespace fs = std::filesystem;
namespace {

constexpr const char* kStateFile = "trainer_state.pt";
constexpr const char* kPrefix = "checkpoint-";

// The complete checkpoints in `dir`, oldest (lowest step) first. Listed with readdir rather than
// fs::directory_iterator: see remove_tree.h on a PyTorch wheel's std::filesystem.
std::vector<std::pair<int64_t, std::string>> complete_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  DIR* stream = opendir(dir.c_str());
  if (stream == nullptr) return found;
  const std::string prefix = kPrefix;
  while (const dirent* entry = readdir(stream)) {
    const std::string name = entry->d_name;
    if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) continue;
    const std::string digits = name.substr(prefix.size());
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    const std::string path = (fs::path(dir) / name).string();
    if (fs::exists(fs::path(path) / kStateFile)) found.emplace_back(std::stoll(digits), path);
  }
  closedir(stream);
  std::sort(found.begin(), found.end());
  return found;
}

// Writes `contents` to `path` through a temporary file and a rename.
template <typename Write>
void write_atomically(const fs::path& path, Write&& write) {
  const fs::path tmp = path.string() + ".tmp";
  write(tmp);
  fs::rename(tmp, path);
}

}  // namespace

std::string Trainer::latest_checkpoint() {
  std::string latest;
  if (accelerator_->is_main_process()) {
    const auto found = complete_checkpoints(args_.output_dir);
    if (!found.empty()) latest = found.back().second;
  }
  return accelerator_->broadcast_string(latest);
}

std::string Trainer::save_checkpoint() {
  Accelerator& acc = *accelerator_;
  const std::string dir =
      (fs::path(args_.output_dir) / (kPrefix + std::to_string(state_.global_step))).string();
  // To storage, under acc-launch too: trainer_state.pt goes beside the Accelerator's state, and
  // a save in the node's memory would be written to `dir` without it.
  acc.save_state_to_storage(dir);
  if (acc.is_main_process()) {
    write_trainer_state(dir);
    if (args_.save_total_limit > 0) prune_checkpoints();
  }
  acc.wait_for_everyone();
  last_saved_step_ = state_.global_step;
  for (auto& callback : callbacks_) callback->on_save(args_, state_, control_, dir);
  return dir;
}

// trainer_state.json for people (transformers' name and fields), then trainer_state.pt, the
// one that is read back and marks the checkpoint complete.
void Trainer::write_trainer_state(const std::string& dir) const {
  write_atomically(fs::path(dir) / "trainer_state.json", [&](const fs::path& tmp) {
    // Metric names are the user's (compute_metrics): any bytes, escaped by the library; a
    // NaN or infinite value is written as null.
    nlohmann::ordered_json state = {{"global_step", state_.global_step},
                                    {"epoch", state_.epoch},
                                    {"max_steps", state_.max_steps},
                                    {"num_train_epochs", state_.num_train_epochs},
                                    {"batches_in_epoch", state_.batches_in_epoch},
                                    {"log_history", nlohmann::ordered_json::array()}};
    for (const auto& entry : state_.log_history) state["log_history"].push_back(entry);
    std::ofstream out(tmp);
    // Bytes that are not UTF-8 become U+FFFD rather than an exception.
    out << state.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << '\n';
    ACC_CHECK(out.good(), ConfigError, "cannot write ", tmp.string(),
              "; check that output_dir is writable and has space");
  });
  write_atomically(fs::path(dir) / kStateFile, [&](const fs::path& tmp) {
    torch::serialize::OutputArchive archive;
    archive.write("global_step", torch::tensor({state_.global_step}));
    archive.write("batches_in_epoch", torch::tensor({state_.batches_in_epoch}));
    archive.write("epoch", torch::tensor({state_.epoch}, torch::kDouble));
    archive.save_to(tmp.string());
  });
}

void Trainer::prune_checkpoints() const {
  auto found = complete_checkpoints(args_.output_dir);
  const auto keep = static_cast<size_t>(args_.save_total_limit);
  for (size_t i = 0; i + keep < found.size(); ++i) {
    if (found[i].first == state_.global_step) continue;
    runtime::detail::remove_tree(found[i].second);
  }
}

void Trainer::resume(const std::string& checkpoint) {
  const fs::path state_file = fs::path(checkpoint) / kStateFile;
  ACC_CHECK(fs::exists(state_file), ConfigError, "resume_from_checkpoint: '", checkpoint,
            "' is not a complete Trainer checkpoint (no ", kStateFile,
            "); give a checkpoint-<step> directory, or \"latest\"");
  accelerator_->load_state(checkpoint);
  torch::serialize::InputArchive archive;
  archive.load_from(state_file.string());
  torch::Tensor step, batches, epoch;
  archive.read("global_step", step);
  archive.read("batches_in_epoch", batches);
  archive.read("epoch", epoch);
  state_.global_step = step.item<int64_t>();
  state_.batches_in_epoch = batches.item<int64_t>();
  state_.epoch = epoch.item<double>();
  last_saved_step_ = state_.global_step;
  accelerator_->print("resuming from ", checkpoint, " (step ", state_.global_step, ", epoch ",
                      state_.epoch, ")");
}

}  // namespace acc
