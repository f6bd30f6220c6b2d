// The Trainer's checkpoints: output_dir/checkpoint-<step> holds the Accelerator's state
// (save_state: model, optimizer, every rank's RNG states, the loaders' epochs) and the Trainer's
// own (trainer_state.pt: the step and how far into its epoch the run was), written beside the
// state before the directory appears atomically; a directory without trainer_state.pt (an earlier
// version's, cut by a crash) is incomplete and never resumed from. Under acc-launch a checkpoint
// is saved into the node's memory, and the launcher writes the newest to output_dir: the newest
// checkpoint is then the newest every rank has in memory, or in output_dir.

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
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

// The step of a checkpoint's directory name, checkpoint-<step>; -1 for another name.
int64_t step_of(const std::string& name) {
  const std::string digits = name.rfind(kPrefix, 0) == 0 ? name.substr(std::strlen(kPrefix)) : "";
  if (digits.empty() || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoll(digits);
}

// The complete checkpoints in `dir`, oldest (lowest step) first. Listed with readdir rather than
// fs::directory_iterator: see remove_tree.h on a PyTorch wheel's std::filesystem.
std::vector<std::pair<int64_t, std::string>> complete_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  DIR* stream = opendir(dir.c_str());
  if (stream == nullptr) return found;
  while (const dirent* entry = readdir(stream)) {
    const std::string name = entry->d_name;
    const int64_t step = step_of(name);
    const std::string path = (fs::path(dir) / name).string();
    if (step >= 0 && fs::exists(fs::path(path) / kStateFile)) found.emplace_back(step, path);
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

// The step of `dir` where it is output_dir/checkpoint-<step>, else -1.
int64_t checkpoint_step(const std::string& output_dir, const std::string& dir) {
  const fs::path path(dir);
  if (path.parent_path() != fs::absolute(output_dir).lexically_normal()) return -1;
  return step_of(path.filename().string());
}

}  // namespace

std::string Trainer::latest_checkpoint() {
  Accelerator& acc = *accelerator_;
  int64_t on_storage = -1;
  if (acc.is_main_process()) {
    const auto found = complete_checkpoints(args_.output_dir);
    if (!found.empty()) on_storage = found.back().first;
  }
  int64_t in_memory = -1;
  for (const std::string& dir : acc.saved_for_in_memory())
    in_memory = std::max(in_memory, checkpoint_step(args_.output_dir, dir));
  // The newest on storage, and the newest in memory that every rank's node has (the nodes are a
  // save apart at most, and each keeps its last two).
  const std::vector<int64_t> newest = acc.max_over_ranks({on_storage, -in_memory});
  const int64_t latest = std::max(newest[0], -newest[1]);
  if (latest < 0) return "";
  return (fs::path(args_.output_dir) / (kPrefix + std::to_string(latest))).string();
}

std::string Trainer::save_checkpoint() {
  Accelerator& acc = *accelerator_;
  const std::string dir =
      (fs::path(args_.output_dir) / (kPrefix + std::to_string(state_.global_step))).string();
  acc.save_checkpoint(dir, [&](const std::string& into) { write_trainer_state(into); });
  if (acc.is_main_process() && args_.save_total_limit > 0) prune_checkpoints();
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

// Keeps this step's checkpoint and the newest save_total_limit - 1 others of output_dir. This
// step's counts where it is not there yet: under acc-launch the launcher writes it later.
void Trainer::prune_checkpoints() const {
  const auto found = complete_checkpoints(args_.output_dir);
  const auto keep = static_cast<size_t>(args_.save_total_limit - 1);
  size_t others = 0;
  for (const auto& checkpoint : found) others += checkpoint.first != state_.global_step;
  for (size_t i = 0; i < found.size() && others > keep; ++i) {
    if (found[i].first == state_.global_step) continue;
    runtime::detail::remove_tree(found[i].second);
    --others;
  }
}

void Trainer::resume(const std::string& checkpoint) {
  const auto complete = [&](const std::string& dir) {
    ACC_CHECK(fs::exists(fs::path(dir) / kStateFile), ConfigError, "resume_from_checkpoint: '",
              checkpoint, "' is not a complete Trainer checkpoint (no ", kStateFile,
              "); give a checkpoint-<step> directory, or \"latest\"");
  };
  // Refused before anything is loaded, where it can come only from `checkpoint` (under acc-launch
  // it may be in the node's memory alone).
  if (!accelerator_->saves_in_memory()) complete(checkpoint);
  const std::string from = accelerator_->load_checkpoint(checkpoint);
  complete(from);
  const fs::path state_file = fs::path(from) / kStateFile;
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
