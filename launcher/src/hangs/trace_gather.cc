#include "hangs/trace_gather.h"

#include <algorithm>
#include <memory>

#include "acc/common/progress_file.h"
#include "acc/common/store_keys.h"
#include "acc/rendezvous/store_client.h"

namespace acc::launcher {

std::vector<RankTrace> local_traces(const std::vector<LocalRank>& ranks) {
  std::vector<RankTrace> traces;
  bool any_call = false;
  for (const LocalRank& r : ranks) {
    try {
      const progress_file::Reader reader(r.progress_file);
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
                                     int world_size, std::chrono::milliseconds wait,
                                     const rendezvous::Clock& clock) {
  const auto deadline = clock.now() + wait;
  std::vector<RankTrace> traces;
  for (int rank = 0; rank < world_size; ++rank) {
    const std::string key = store_keys::collective_trace(restart_count, rank);
    while (!store.check({key}) && clock.now() < deadline)
      clock.sleep_for(std::chrono::milliseconds(50));
    if (!store.check({key})) continue;
    if (auto trace = decode_trace(store.get(key))) traces.push_back(std::move(*trace));
  }
  return traces;
}

}  // namespace acc::launcher
