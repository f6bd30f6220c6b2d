// `acc-launch __persist_state MEMORY --keep K` (checkpoint_memory.h): the newest save_state of
// libacc's global rank 0 in the node's memory, copied to the directory it was saved for. The same
// steps as acc_launch.checkpoint's helper (python/acc_launch/checkpoint.py, persist): through
// DIR.acc-writing, DIR moved aside to DIR.acc-old and kept as DIR.<seq> where K is above 1, and
// the file `persisted` in MEMORY naming the seq written.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "acc/common/files.h"
#include "agent/checkpoint_memory.h"

namespace acc::launcher {
namespace {

namespace fs = std::filesystem;

void say(const std::string& line) {
  std::fprintf(stderr, "acc-launch: checkpoint: %s\n", line.c_str());
}

// Keeps the checkpoint `old` as PATH.<seq>, and of the PATH.<number> beside it the newest `count`
// (by their time of writing).
void keep_older(const fs::path& old, const fs::path& path, long seq, int count) {
  const fs::path kept = path.string() + "." + std::to_string(seq);
  std::error_code error;
  remove_tree(kept.string());
  fs::rename(old, kept, error);
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const std::string prefix = path.filename().string() + ".";
  std::vector<std::pair<fs::file_time_type, std::string>> older;
  for (const std::string& name : names_in(folder.string(), prefix)) {
    const std::string number = name.substr(prefix.size());
    if (!number.empty() && number.find_first_not_of("0123456789") == std::string::npos)
      older.emplace_back(fs::last_write_time(folder / name, error), name);
  }
  std::sort(older.rbegin(), older.rend());
  for (size_t i = static_cast<size_t>(count); i < older.size(); ++i)
    remove_tree((folder / older[i].second).string());
}

// Copies save `save` (libacc.<seq>) to `path`; false, with `error` set, where it cannot.
bool copy_save(const fs::path& save, long seq, const fs::path& path, std::error_code& error) {
  const fs::path writing = path.string() + ".acc-writing";
  remove_tree(writing.string());
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), error);
  if (!error) fs::copy(save, writing, fs::copy_options::recursive, error);
  if (!error) fs::remove(writing / "saved-for", error);
  // load_state's sign of which write it read (runtime/src/checkpoint.cc).
  if (!error && write_file((writing / "acc-seq").string(), std::to_string(seq) + "\n") != 0)
    error = std::make_error_code(std::errc::io_error);
  if (!error && fs::exists(path)) {
    remove_tree(path.string() + ".acc-old");
    fs::rename(path, path.string() + ".acc-old", error);
  }
  if (!error) fs::rename(writing, path, error);
  if (error) remove_tree(writing.string());
  return !error;
}

}  // namespace

int persist_libacc_save(const std::vector<std::string>& args) {
  const int keep = args.size() == 3 && args[1] == "--keep" ? std::atoi(args[2].c_str()) : 0;
  if (keep < 1) {
    std::fprintf(stderr, "usage: acc-launch %s MEMORY_DIRECTORY --keep K\n", kPersistStateCommand);
    return 2;
  }
  const std::string& memory = args[0];
  const long written = CheckpointMemory::persisted_save(memory);
  // A save is a link to the slot that holds it (libacc.<seq> -> libacc.slot<seq % 2>), and the
  // worker removes the link before it writes the slot again: a copy that ends while the link is
  // still there is whole; one that does not is taken again from the newer save.
  for (int attempt = 0; attempt < 10; ++attempt) {
    const CheckpointMemory::Save newest = CheckpointMemory::newest_save(memory);
    if (!newest.libacc || newest.seq <= written) return 0;
    const fs::path save = memory + "/libacc." + std::to_string(newest.seq);
    const fs::path path = read_file((save / "saved-for").string());
    if (path.empty()) continue;
    std::error_code error;
    if (!copy_save(save, newest.seq, path, error)) {
      if (!fs::exists(save)) continue;
      say("cannot write " + path.string() + ": " + error.message() +
          "; training goes on with the copy in memory");
      return 1;
    }
    if (!fs::exists(save)) continue;
    const fs::path old = path.string() + ".acc-old";
    if (keep > 1 && fs::exists(old)) keep_older(old, path, written, keep - 1);
    remove_tree(old.string());
    write_file(memory + "/persisted.tmp", std::to_string(newest.seq) + "\n");
    fs::rename(memory + "/persisted.tmp", memory + "/persisted", error);
    return 0;
  }
  return 0;
}

}  // namespace acc::launcher
