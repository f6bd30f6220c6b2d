#include "observe/trace_gather.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "acc/common/progress_file.h"
#include "acc/common/store_keys.h"
#include "acc/rendezvous/store_client.h"

namespace acc::launcher {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream out;
  out << file.rdbuf();
  return out.str();
}

int parent_of(const std::string& stat) {
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 2));
  std::string state;
  int parent = 0;
  fields >> state >> parent;
  return parent;
}

}  // namespace

std::string progress_file_of(int pid) {
  const std::string environ = read_file("/proc/" + std::to_string(pid) + "/environ");
  const std::string prefix = std::string(progress_file::kEnvVar) + "=";
  std::istringstream in(environ);
  for (std::string entry; std::getline(in, entry, '\0');)
    if (entry.rfind(prefix, 0) == 0) return entry.substr(prefix.size());
  return "";
}

std::vector<RankTrace> local_traces(const std::vector<LocalRank>& ranks) {
  std::vector<RankTrace> traces;
  bool any_call = false;
  for (const LocalRank& r : ranks) {
    const std::string path = progress_file_of(r.pid);
    if (path.empty()) continue;
    try {
      const progress_file::Reader reader(path);
      traces.push_back(trace_from_snapshot(r.rank, reader.snapshot(), progress_file::now_ns()));
      any_call |= !traces.back().calls.empty();
    } catch (const std::exception&) {
      // Not created (yet), or not a progress file: that rank has no trace.
    }
  }
  if (!any_call) traces.clear();
  return traces;
}

void publish_traces(rendezvous::StoreClient& store, int restart_count,
                    const std::vector<RankTrace>& traces) {
  for (const RankTrace& trace : traces)
    store.set(store_keys::collective_trace(restart_count, trace.rank), encode_trace(trace));
}

std::vector<RankTrace> gather_traces(rendezvous::StoreClient& store, int restart_count,
                                     int world_size, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  std::vector<RankTrace> traces;
  for (int rank = 0; rank < world_size; ++rank) {
    const std::string key = store_keys::collective_trace(restart_count, rank);
    while (!store.check({key}) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!store.check({key})) continue;
    if (auto trace = decode_trace(store.get(key))) traces.push_back(std::move(*trace));
  }
  return traces;
}

std::vector<std::pair<int, int>> descendants_of(int pid) {
  // One pass over /proc for every process's parent: /proc/PID/task/TID/children needs a kernel
  // option that not every kernel has.
  std::multimap<int, int> children;
  if (DIR* dir = ::opendir("/proc")) {
    while (dirent* entry = ::readdir(dir)) {
      const int child = std::atoi(entry->d_name);
      if (child <= 0) continue;
      const int parent = parent_of(read_file("/proc/" + std::to_string(child) + "/stat"));
      if (parent > 0) children.emplace(parent, child);
    }
    ::closedir(dir);
  }
  std::vector<std::pair<int, int>> found;
  std::vector<int> frontier = {pid};
  while (!frontier.empty()) {
    std::vector<int> next;
    for (int parent : frontier) {
      auto [from, to] = children.equal_range(parent);
      std::vector<int> direct;
      for (auto it = from; it != to; ++it) direct.push_back(it->second);
      std::sort(direct.begin(), direct.end());
      for (int child : direct) {
        found.emplace_back(child, parent);
        next.push_back(child);
      }
    }
    frontier = std::move(next);
  }
  return found;
}

}  // namespace acc::launcher
