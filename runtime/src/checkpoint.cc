// Accelerator::save_state / load_state: the checkpoint directory and its atomic replacement, and
// under acc-launch the node's memory that outlives a restart.

#include <ATen/CPUGeneratorImpl.h>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "acc/common/clock.h"
#include "acc/common/error.h"
#include "acc/common/files.h"
#include "accelerator_impl.h"
#include "remove_tree.h"

namespace acc {
namespace fs = std::filesystem;
namespace {

using runtime::detail::remove_tree;

// Rank `rank`'s own file of a save (its RNG states and counters).
std::string random_states_file(size_t rank) {
  return "random_states_" + std::to_string(rank) + ".pt";
}

std::string indexed(const std::string& stem, size_t i) {
  return i == 0 ? stem + ".pt" : stem + "_" + std::to_string(i) + ".pt";
}

// `archive` as the file `path`, written over the bytes a file already there holds rather than
// into new pages: in a slot of the node's memory, where each save replaces the one two saves
// before it, that is half the cost of the save (the pages are not freed and made again).
void save_archive(torch::serialize::OutputArchive& archive, const fs::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ACC_CHECK(fd >= 0, SystemError, "cannot write ", path.string(), ": ", std::strerror(errno));
  off_t offset = 0;
  int error = 0;
  try {
    archive.save_to([&](const void* data, size_t size) -> size_t {
      for (size_t done = 0; done < size && error == 0;) {
        const ssize_t n = ::pwrite(fd, static_cast<const char*>(data) + done, size - done, offset);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) error = n < 0 ? errno : ENOSPC;
        if (n > 0) done += static_cast<size_t>(n), offset += n;
      }
      return error == 0 ? size : 0;
    });
  } catch (const c10::Error&) {
    if (error == 0) {
      ::close(fd);
      throw;
    }
  }
  if (error == 0 && ::ftruncate(fd, offset) != 0) error = errno;
  ::close(fd);
  ACC_CHECK(error == 0, SystemError, "cannot write ", path.string(), ": ", std::strerror(error));
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
  save_archive(archive, path);
}

// "a, b, c" of at most 8 names, then how many more.
std::string name_list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 8; ++i) out += (i > 0 ? ", " : "") + names[i];
  if (names.size() > 8) out += detail::concat(" and ", names.size() - 8, " more");
  return out;
}

// LibTorch's own errors (a file that is not a LibTorch archive, an optimizer of another kind)
// as one line naming the file and the fix, without the C++ backtrace.
template <typename F>
void loading(const fs::path& path, F&& load) {
  try {
    load();
  } catch (const c10::Error& e) {
    throw ConfigError(detail::concat("load_state: cannot load ", path.string(), ": ",
                                     e.what_without_backtrace(),
                                     " (prepare the same objects, in the same order, as the run "
                                     "that saved it)"));
  }
}

// Copies into the existing tensors rather than replacing them: the Reducer and the optimizer
// hold these very tensors. Names and shapes are checked first, so that another model's file is
// refused whole, with every name that differs, before anything is copied.
void load_module(torch::nn::Module& module, const fs::path& path) {
  torch::serialize::InputArchive archive;
  loading(path, [&] { archive.load_from(path.string()); });
  std::vector<std::pair<std::string, torch::Tensor>> mine;
  for (const auto& item : module.named_parameters()) mine.emplace_back(item.key(), item.value());
  const size_t parameters = mine.size();
  for (const auto& item : module.named_buffers()) mine.emplace_back(item.key(), item.value());

  std::set<std::string> saved;
  for (const std::string& key : archive.keys()) saved.insert(key);
  std::vector<std::string> missing;
  std::vector<std::string> mismatched;
  std::vector<torch::Tensor> values(mine.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    const auto& [name, tensor] = mine[i];
    bool read = false;
    if (saved.erase(name) != 0)
      loading(path,
              [&] { read = archive.try_read(name, values[i], /*is_buffer=*/i >= parameters); });
    if (!read) {
      missing.push_back(name);
    } else if (values[i].sizes() != tensor.sizes()) {
      mismatched.push_back(detail::concat(name, " ", values[i].sizes(), " for ", tensor.sizes()));
    }
  }
  // The archive's own attribute, not a tensor of the model.
  saved.erase("training");
  const std::vector<std::string> unexpected(saved.begin(), saved.end());
  ACC_CHECK(missing.empty() && unexpected.empty(), ConfigError, "load_state: ", path.string(),
            " is not this model's checkpoint: missing ", missing.size(), " (", name_list(missing),
            "), unexpected ", unexpected.size(), " (", name_list(unexpected),
            "); load a checkpoint of the same model, with the models prepared in the same order "
            "as the run that saved it");
  ACC_CHECK(mismatched.empty(), ConfigError, "load_state: ", path.string(),
            " holds other shapes than this model: ", name_list(mismatched),
            "; load a checkpoint of the same model, built with the same sizes");
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < mine.size(); ++i) mine[i].second.copy_(values[i]);
}

// "model.pt, model_1.pt" (or optimizer...) that `dir` holds: stem.pt then stem_1.pt, ... until
// one is missing.
size_t count_indexed(const fs::path& dir, const std::string& stem) {
  size_t n = 0;
  while (fs::exists(dir / indexed(stem, n))) ++n;
  return n;
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

// ---- the node's memory under acc-launch (ACC_CHECKPOINT_MEMORY; docs/checkpoints.md) ----

constexpr char kMemoryVar[] = "ACC_CHECKPOINT_MEMORY";
constexpr char kSavePrefix[] = "libacc.";
// In a save in memory: the absolute path of the directory save_state was given.
constexpr char kSavedFor[] = "saved-for";
// In a directory the launcher wrote from memory: the save's number in the job (load_state's sign
// of which write it read).
constexpr char kWriteTag[] = "acc-seq";
constexpr int kLoadTries = 20;

std::string checkpoint_memory() {
  const char* memory = std::getenv(kMemoryVar);
  return memory ? memory : "";
}

std::string memory_save_dir(const std::string& memory, int64_t seq) {
  return memory + "/" + kSavePrefix + std::to_string(seq);
}

// Whether `name` is a file of save_state's directory (written over by each save).
bool is_state_file(const std::string& name) {
  for (const char* prefix : {"model", "optimizer", "random_states_", "scaler.pt", kSavedFor})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

// The slot save <seq> is written into, in the memory directory: libacc.slot0 or libacc.slot1.
std::string memory_slot(int64_t seq) {
  return detail::concat(kSavePrefix, "slot", seq % 2);
}

std::string absolute_path(const std::string& dir) {
  return fs::absolute(fs::path(dir)).lexically_normal().string();
}

struct MemorySave {
  int64_t seq;
  std::string saved_for;
};

// The saves committed in `memory` (the links libacc.<seq>; the slots are libacc.slot<0|1>).
std::vector<MemorySave> memory_saves(const std::string& memory) {
  std::vector<MemorySave> saves;
  for (const std::string& name : names_in(memory, kSavePrefix)) {
    const std::string digits = name.substr(sizeof(kSavePrefix) - 1);
    if (digits.empty() || digits.size() > 18 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    saves.push_back({std::stoll(digits), read_file(memory + "/" + name + "/" + kSavedFor)});
  }
  return saves;
}

// Whether save <seq> holds rank `rank`'s own file (each rank writes its own).
bool holds_rank(const std::string& memory, int64_t seq, size_t rank) {
  return fs::exists(fs::path(memory_save_dir(memory, seq)) / random_states_file(rank));
}

// One line for the node (the first rank to find no room makes the file no-room, as
// acc_launch.checkpoint does), naming the room left and the fix.
void say_no_room(const std::string& memory, const std::string& dir, const std::exception& e) {
  const auto* torch_error = dynamic_cast<const c10::Error*>(&e);
  std::string error = torch_error ? torch_error->what_without_backtrace() : e.what();
  error = error.substr(0, error.find('\n'));
  const int fd = ::open((memory + "/no-room").c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd < 0 && errno == EEXIST) return;
  if (fd >= 0) ::close(fd);
  struct statvfs room {};
  const double free_mb =
      ::statvfs(memory.c_str(), &room) == 0 ? room.f_bavail * room.f_frsize / 1e6 : 0.0;
  std::fprintf(stderr,
               "acc-launch: checkpoint: no room for save_state in %s (%.1f MB free: %s); the "
               "saves go to %s as without acc-launch. A container's /dev/shm is often 64 MB: "
               "docker run --shm-size=16g (or more) gives it room\n",
               fs::path(memory).parent_path().c_str(), free_mb, error.c_str(), dir.c_str());
}

}  // namespace

// The agreements of the saves in memory: counts, seqs and flags.
std::vector<int64_t> Accelerator::max_over_ranks(const std::vector<int64_t>& values) {
  const torch::Tensor reduced =
      reduce(torch::tensor(values).to(device()), Reduction::kMax).cpu().contiguous();
  const int64_t* data = reduced.data_ptr<int64_t>();
  return std::vector<int64_t>(data, data + reduced.numel());
}

bool Accelerator::saves_in_memory() const {
  return !checkpoint_memory().empty();
}

void Accelerator::save_state(const std::string& dir) {
  if (!checkpoint_memory().empty() && !impl_->memory_full && is_main_process()) {
    // As after a save to storage, `dir` is there: a restart's `if exists(dir) load_state(dir)`.
    std::error_code ignored;
    fs::create_directories(dir, ignored);
  }
  save_checkpoint(dir, {});
}

void Accelerator::save_checkpoint(const std::string& dir, const CheckpointFiles& files) {
  if (const std::string memory = checkpoint_memory(); !memory.empty() && !impl_->memory_full)
    if (save_state_in_memory(memory, dir, files)) return;
  save_state_to_storage(dir, files);
}

void Accelerator::save_state_to_storage(const std::string& dir, const CheckpointFiles& files) {
  const fs::path final_dir(dir);
  const fs::path tmp_dir = final_dir.string() + ".tmp";
  const fs::path old_dir = final_dir.string() + ".old";
  if (is_main_process()) {
    remove_tree(tmp_dir);
    fs::create_directories(tmp_dir);
  }
  wait_for_everyone();
  write_state(tmp_dir.string(), is_main_process());
  if (is_main_process() && files) files(tmp_dir.string());
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
  log_debug(detail::concat("saved state (step ", step_, ") to ", dir), false);
}

// This rank's RNG states and counters, and with `replicated_parts` the models, optimizers and
// scaler (the same on every rank: one process writes them).
void Accelerator::write_state(const std::string& into, bool replicated_parts) {
  const fs::path dir(into);
  {
    // Every rank's own RNG state: dropout on rank 1 draws differently from rank 0.
    torch::serialize::OutputArchive archive;
    archive.write("cpu_rng_state", rng_state(torch::kCPU));
    if (device_.is_cuda()) archive.write("cuda_rng_state", rng_state(device_));
    archive.write("step", torch::tensor({step_}));
    auto epochs = torch::zeros({static_cast<int64_t>(impl_->loader_epochs.size())}, torch::kLong);
    for (size_t i = 0; i < impl_->loader_epochs.size(); ++i)
      epochs[static_cast<int64_t>(i)] = static_cast<int64_t>(*impl_->loader_epochs[i]);
    archive.write("loader_epochs", epochs);
    archive.write("accumulation_counter", torch::tensor({accumulation_counter_}));
    save_archive(archive, dir / random_states_file(process_index()));
  }
  if (!replicated_parts) return;
  for (size_t i = 0; i < impl_->models.size(); ++i)
    save_module(*impl_->models[i], dir / indexed("model", i));
  for (size_t i = 0; i < impl_->optimizers.size(); ++i) {
    torch::serialize::OutputArchive archive;
    impl_->optimizers[i]->save(archive);
    save_archive(archive, dir / indexed("optimizer", i));
  }
  if (impl_->scaler) {
    torch::serialize::OutputArchive archive;
    archive.write("scale", impl_->scale.cpu());
    archive.write("growth_tracker", impl_->growth_tracker.cpu());
    save_archive(archive, dir / "scaler.pt");
  }
}

// The save as libacc.<seq> in the node's memory: a link to the slot that holds it,
// libacc.slot<seq % 2>/, a save_state directory written in place over the save two before it. Its
// link goes first (a link never names a slot being written); each node's local main process
// writes the replicated parts, each rank its own; the link libacc.<seq> commits it. Each node
// keeps its last two, so that the nodes, a save apart at most after a crash, share one. False
// where a rank found no room (one line for the node): nothing is committed, and this save and
// the next go to storage.
bool Accelerator::save_state_in_memory(const std::string& memory, const std::string& dir,
                                       const CheckpointFiles& files) {
  if (impl_->memory_seq == 0) {
    int64_t newest = 0;
    for (const MemorySave& save : memory_saves(memory)) newest = std::max(newest, save.seq);
    impl_->memory_seq = max_over_ranks({newest})[0] + 1;
  }
  const int64_t seq = impl_->memory_seq++;
  const std::string slot = memory + "/" + memory_slot(seq);
  int64_t failed = 0;
  const auto trying = [&](auto&& step) {
    try {
      if (!failed) step();
    } catch (const std::exception& e) {
      failed = 1;
      say_no_room(memory, dir, e);
    }
  };
  if (is_local_main_process())
    trying([&] {
      for (const MemorySave& old : memory_saves(memory))
        if (old.seq < seq - 1) fs::remove(memory_save_dir(memory, old.seq));
      fs::create_directories(slot);
      // The files of the save the slot held that this one does not write over (another save's
      // checkpoint files).
      for (const std::string& name : names_in(slot))
        if (!is_state_file(name)) acc::remove_tree(slot + "/" + name);
      ACC_CHECK(write_file(slot + "/" + kSavedFor, absolute_path(dir)) == 0, SystemError,
                "cannot write ", slot, "/", kSavedFor);
    });
  wait_for_everyone();
  trying([&] {
    write_state(slot, is_local_main_process());
    if (is_local_main_process() && files) files(slot);
  });
  if (max_over_ranks({failed})[0] != 0) {
    impl_->memory_full = true;
    if (is_local_main_process()) acc::remove_tree(slot);
    return false;
  }
  if (is_local_main_process()) {
    const std::string link = memory_save_dir(memory, seq);
    std::error_code ignored;
    fs::remove(link, ignored);  // a link of an earlier job's attempt that counted further
    fs::create_directory_symlink(memory_slot(seq), link);  // the commit
  }
  log_debug(detail::concat("saved state (step ", step_, ") to memory for ", dir), false);
  return true;
}

// The newest save of `dir` that every rank has in its node's memory, as a directory there; ""
// where some rank has none. Collective.
std::string Accelerator::saved_in_memory(const std::string& memory, const std::string& dir) {
  const std::string wanted = absolute_path(dir);
  std::set<int64_t> have;
  int64_t newest_any = 0;
  for (const MemorySave& save : memory_saves(memory)) {
    newest_any = std::max(newest_any, save.seq);
    if (save.saved_for == wanted && holds_rank(memory, save.seq, process_index()))
      have.insert(save.seq);
  }
  const int64_t newest = have.empty() ? 0 : *have.rbegin();
  const std::vector<int64_t> agreed = max_over_ranks({-newest, newest_any});
  const int64_t common = -agreed[0];
  impl_->memory_seq = agreed[1] + 1;
  if (max_over_ranks({common > 0 && have.count(common) ? 0 : 1})[0] != 0) return "";
  return memory_save_dir(memory, common);
}

std::vector<std::string> Accelerator::saved_for_in_memory() const {
  const std::string memory = checkpoint_memory();
  if (memory.empty()) return {};
  std::vector<std::string> dirs;
  for (const MemorySave& save : memory_saves(memory))
    if (holds_rank(memory, save.seq, process_index())) dirs.push_back(save.saved_for);
  return dirs;
}

void Accelerator::load_state(const std::string& dir) {
  load_checkpoint(dir);
}

std::string Accelerator::load_checkpoint(const std::string& dir) {
  const std::string memory = checkpoint_memory();
  if (memory.empty()) {
    const std::string from = checkpoint_in(dir);
    read_state(from);
    return from;
  }
  if (const std::string saved = saved_in_memory(memory, dir); !saved.empty()) {
    read_state(saved);
    return saved;
  }
  // From `dir`, which the launcher's helper may be replacing (after a failure, while the next
  // attempt's ranks load): every rank reads the same write of it (the tag the helper leaves in
  // it, before and after the read); where the ranks saw different writes, or a read failed while
  // a write was under way (dir.acc-writing or dir.acc-old there), all read again, 0.5 s later,
  // at most kLoadTries times.
  for (int attempt = 1;; ++attempt) {
    const std::string before = read_file(dir + "/" + kWriteTag);
    std::exception_ptr error;
    std::string from;
    try {
      from = checkpoint_in(dir);
      read_state(from);
    } catch (const std::exception&) {
      error = std::current_exception();
    }
    const bool one_write =
        before == read_file(dir + "/" + kWriteTag) && broadcast_string(before) == before;
    const bool writing = fs::exists(dir + ".acc-writing") || fs::exists(dir + ".acc-old");
    const std::vector<int64_t> seen = max_over_ranks({error != nullptr, !one_write, writing});
    const bool failed = seen[0] != 0, torn = seen[1] != 0;
    if (!failed && !torn) return from;
    if (attempt == kLoadTries || (!torn && seen[2] == 0)) {
      if (error) std::rethrow_exception(error);
      throw ConfigError(detail::concat(
          "load_state: ", dir,
          torn ? ": the ranks read different writes of it while it was being replaced"
               : ": another rank could not load it"));
    }
    acc::Clock::machine().sleep_for(std::chrono::milliseconds(500));
  }
}

// `dir`, or `dir.old` where a save_state to storage crashed between its renames.
std::string Accelerator::checkpoint_in(const std::string& dir) {
  fs::path from(dir);
  if (!fs::exists(from / random_states_file(0)) &&
      fs::exists(fs::path(dir + ".old") / random_states_file(0)))
    from = dir + ".old";
  ACC_CHECK(fs::exists(from / random_states_file(0)), ConfigError, "load_state: '", dir,
            "' is not a checkpoint written by save_state (no random_states_0.pt)");
  return from.string();
}

void Accelerator::read_state(const std::string& from_dir) {
  const fs::path from(from_dir);
  const size_t models = count_indexed(from, "model");
  const size_t optimizers = count_indexed(from, "optimizer");
  ACC_CHECK(
      models == impl_->models.size() && optimizers == impl_->optimizers.size(), ConfigError,
      "load_state: ", from.string(), " holds ", models, " model(s) and ", optimizers,
      " optimizer(s), but ", impl_->models.size(), " and ", impl_->optimizers.size(),
      " are prepared",
      impl_->models.empty() && impl_->optimizers.empty() ? " (load_state before prepare)" : "",
      "; prepare the same objects, in the same order, as the run that saved it, then call "
      "load_state");
  for (size_t i = 0; i < impl_->models.size(); ++i)
    load_module(*impl_->models[i], from / indexed("model", i));
  for (size_t i = 0; i < impl_->optimizers.size(); ++i) {
    const auto path = from / indexed("optimizer", i);
    loading(path, [&] { torch::load(*impl_->optimizers[i], path.string()); });
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
  auto rng_path = from / random_states_file(process_index());
  if (!fs::exists(rng_path)) {
    log_warning(detail::concat(rng_path.string(),
                               " is missing (the world size changed?): using rank 0's RNG state"));
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
  log_debug(detail::concat("loaded state (step ", step_, ") from ", from.string()), false);
}

}  // namespace acc
