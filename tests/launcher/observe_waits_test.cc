// The hang report's two bounded waits, over a fake clock: for the Flight Recorder dumps the
// stall watch asked for (hangs/flight_recorder.h), and for the other nodes' collective traces
// in node 0's store (hangs/trace_gather.h). Each returns at the exact fake time its wait ends.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "acc/common/store_keys.h"
#include "acc/rendezvous/store_client.h"
#include "acc/rendezvous/store_server.h"
#include "fake_clock.h"
#include "hangs/flight_recorder.h"
#include "hangs/trace_gather.h"
#include "launcher_harness.h"

namespace acc::launcher {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using testing::FakeClock;

// Rank 0, this process standing for its worker, poked before any dump existed.
struct PokedRank {
  acc::testing::TempDir dir;
  std::vector<FlightRecorderTarget> targets{{0, dir.path(), ::getpid()}};
  FlightRecorderPoke poke{{0}, {FlightRecorderPoke::Before{}}};
  std::string dump = flight_recorder_dump(dir.path(), 0);
  FakeClock clock;
};

TEST(FlightRecorderWaitTest, ADumpThatNeverComesIsWaitedForUntilTheLimitOnly) {
  PokedRank rank;
  EXPECT_TRUE(wait_for_flight_recorder_dumps(rank.targets, rank.poke, 10s, proc::Reader::machine(),
                                             rank.clock)
                  .empty());
  EXPECT_EQ(rank.clock.elapsed_ms(), 10s);
}

TEST(FlightRecorderWaitTest, ADumpIsCompleteOnceWrittenAndClosedByTheWorker) {
  PokedRank rank;
  std::unique_ptr<std::ofstream> writer;
  rank.clock.on_sleep = [&](FakeClock::duration at) {
    if (at == 1200ms) writer = std::make_unique<std::ofstream>(rank.dump);  // still open: not yet
    if (at == 1500ms) *writer << "a dump";
    if (at == 2000ms) writer.reset();  // closed: complete
  };
  EXPECT_EQ(wait_for_flight_recorder_dumps(rank.targets, rank.poke, 10s, proc::Reader::machine(),
                                           rank.clock),
            std::vector<int>{0});
  EXPECT_EQ(rank.clock.elapsed_ms(), 2000ms);
}

TEST(FlightRecorderWaitTest, ARankWhoseProcessIsGoneIsNotWaitedFor) {
  PokedRank rank;
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  rank.targets[0].pid = child;
  EXPECT_TRUE(wait_for_flight_recorder_dumps(rank.targets, rank.poke, 10s, proc::Reader::machine(),
                                             rank.clock)
                  .empty());
  EXPECT_EQ(rank.clock.elapsed_ms(), 0ms);
}

// Node 0's store, with a client of it.
struct NodeZeroStore {
  NodeZeroStore() {
    rendezvous::StoreServerOptions options;
    options.host = "127.0.0.1";
    server = std::make_unique<rendezvous::StoreServer>(options);
    server->start();
    rendezvous::StoreClientOptions client_options;
    client_options.port = server->port();
    client = std::make_unique<rendezvous::StoreClient>(client_options);
  }
  void publish(int rank) {
    RankTrace trace;
    trace.rank = rank;
    trace.completed = 10 + static_cast<std::uint64_t>(rank);
    publish_traces(*client, 0, {trace});
  }
  std::unique_ptr<rendezvous::StoreServer> server;
  std::unique_ptr<rendezvous::StoreClient> client;
  FakeClock clock;
};

TEST(TraceGatherTest, ATraceThatComesWithinTheWaitIsGathered) {
  NodeZeroStore store;
  store.publish(0);
  store.clock.on_sleep = [&](FakeClock::duration at) {
    if (at == 700ms) store.publish(1);
  };
  const auto traces = gather_traces(*store.client, 0, 2, 2s, store.clock);
  ASSERT_EQ(traces.size(), 2u);
  EXPECT_EQ(traces[1].completed, 11u);
  EXPECT_EQ(store.clock.elapsed_ms(), 700ms);
}

TEST(TraceGatherTest, TheTracesThatCameAreReturnedWhenTheWaitEnds) {
  NodeZeroStore store;
  store.publish(1);
  const auto traces = gather_traces(*store.client, 0, 3, 2s, store.clock);
  ASSERT_EQ(traces.size(), 1u);
  EXPECT_EQ(traces[0].rank, 1);
  EXPECT_EQ(store.clock.elapsed_ms(), 2s);  // one wait for ranks 0 and 2 together, not one each
}

}  // namespace
}  // namespace acc::launcher
