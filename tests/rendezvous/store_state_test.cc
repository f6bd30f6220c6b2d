#include "store_state.h"

#include "acc/rendezvous/job_secret.h"

#include <gtest/gtest.h>

#include <map>

namespace acc::rendezvous::detail {
namespace {

// Collects replies per connection, as the server's output buffers would.
class RecordingSink : public ReplySink {
 public:
  std::string* buffer_for(ConnectionId connection) override { return &out[connection]; }
  std::string take(ConnectionId connection) { return std::exchange(out[connection], {}); }
  std::map<ConnectionId, std::string> out;
};

class StoreStateTest : public ::testing::Test {
 protected:
  bool apply(ConnectionId connection, Request request) {
    error_.clear();
    return state_.apply(connection, Dialect::kV2_2, request, sink_, error_);
  }
  std::string reply(ConnectionId connection) { return sink_.take(connection); }

  static std::string i64(std::int64_t value) {
    std::string out;
    append_i64(out, value);
    return out;
  }
  static std::string bytes(std::string_view value) {
    std::string out;
    append_bytes(out, value);
    return out;
  }
  static std::string byte(std::uint8_t value) { return std::string(1, static_cast<char>(value)); }

  StoreState state_{1000};
  RecordingSink sink_;
  std::string error_;
};

TEST_F(StoreStateTest, WaitIsAnsweredExactlyOnceWhenTheLastKeyAppears) {
  ASSERT_TRUE(apply(1, {Op::kWait, {"/a", "/b"}, {}, 0}));
  EXPECT_EQ(reply(1), "");
  ASSERT_TRUE(apply(2, {Op::kSet, {"/a"}, {"x"}, 0}));
  EXPECT_EQ(reply(1), "");
  ASSERT_TRUE(apply(2, {Op::kSet, {"/b"}, {"y"}, 0}));
  EXPECT_EQ(reply(1), byte(kStopWaiting));
  ASSERT_TRUE(apply(2, {Op::kSet, {"/b"}, {"z"}, 0}));
  ASSERT_TRUE(apply(2, {Op::kAdd, {"/a2"}, {}, 1}));
  EXPECT_EQ(reply(1), "");
  EXPECT_EQ(state_.num_pending_waits(), 0u);
}

TEST_F(StoreStateTest, WaitOnKeysThatExistIsAnsweredAtOnce) {
  ASSERT_TRUE(apply(1, {Op::kSet, {"/a"}, {"x"}, 0}));
  ASSERT_TRUE(apply(1, {Op::kWait, {"/a"}, {}, 0}));
  EXPECT_EQ(reply(1), byte(kStopWaiting));
}

TEST_F(StoreStateTest, EveryWaiterOnAKeyIsWokenByAdd) {
  for (ConnectionId c = 1; c <= 3; ++c) ASSERT_TRUE(apply(c, {Op::kWait, {"/n"}, {}, 0}));
  ASSERT_TRUE(apply(9, {Op::kAdd, {"/n"}, {}, 2}));
  for (ConnectionId c = 1; c <= 3; ++c) EXPECT_EQ(reply(c), byte(kStopWaiting)) << c;
  EXPECT_EQ(reply(9), i64(2));
}

TEST_F(StoreStateTest, CancelWaitAnswersWaitCanceledAndTheWaitNeverFires) {
  ASSERT_TRUE(apply(1, {Op::kWait, {"/a"}, {}, 0}));
  ASSERT_TRUE(apply(1, {Op::kCancelWait, {}, {}, 0}));
  EXPECT_EQ(reply(1), byte(kWaitCanceled));
  ASSERT_TRUE(apply(2, {Op::kSet, {"/a"}, {"x"}, 0}));
  EXPECT_EQ(reply(1), "");
  // With nothing pending it still answers, as 2.x clients expect.
  ASSERT_TRUE(apply(1, {Op::kCancelWait, {}, {}, 0}));
  EXPECT_EQ(reply(1), byte(kWaitCanceled));
}

TEST_F(StoreStateTest, DroppedConnectionIsNotWokenAndLeavesNoWait) {
  ASSERT_TRUE(apply(1, {Op::kWait, {"/a"}, {}, 0}));
  state_.drop_connection(1);
  EXPECT_EQ(state_.num_pending_waits(), 0u);
  ASSERT_TRUE(apply(2, {Op::kSet, {"/a"}, {"x"}, 0}));
  EXPECT_EQ(reply(1), "");
}

TEST_F(StoreStateTest, AddParsesTheStoredTextLikeStoll) {
  ASSERT_TRUE(apply(1, {Op::kSet, {"/n"}, {" 41abc"}, 0}));
  ASSERT_TRUE(apply(1, {Op::kAdd, {"/n"}, {}, 1}));
  EXPECT_EQ(reply(1), i64(42));
  ASSERT_TRUE(apply(1, {Op::kGet, {"/n"}, {}, 0}));
  EXPECT_EQ(reply(1), bytes("42"));
  ASSERT_TRUE(apply(1, {Op::kAdd, {"/n"}, {}, -50}));
  EXPECT_EQ(reply(1), i64(-8));
}

// A restart's workers (PyTorch 2.x, no attempt prefix) in a fresh key space: they read none of
// the last attempt's keys, though the last attempt's connections are still open, and the keys
// the launchers and libacc share stay one.
TEST_F(StoreStateTest, AKeySpaceHidesTheLastAttemptsKeysFromConnectionsThatComeAfter) {
  ASSERT_TRUE(apply(1, {Op::kSet, {"rank_1"}, {"old address"}, 0}));
  ASSERT_TRUE(apply(1, {Op::kSet, {"//acc/job/restart"}, {"1"}, 0}));
  state_.begin_key_space("/acc/space/attempt_1/");
  ASSERT_TRUE(apply(2, {Op::kCheck, {"rank_1"}, {}, 0}));
  EXPECT_EQ(reply(2), byte(kCheckNotReady));
  ASSERT_TRUE(apply(2, {Op::kSet, {"rank_1"}, {"new address"}, 0}));
  ASSERT_TRUE(apply(2, {Op::kGet, {"rank_1"}, {}, 0}));
  EXPECT_EQ(reply(2), bytes("new address"));
  // The old connection keeps its own space, the shared keys are seen alike.
  ASSERT_TRUE(apply(1, {Op::kGet, {"rank_1"}, {}, 0}));
  EXPECT_EQ(reply(1), bytes("old address"));
  ASSERT_TRUE(apply(2, {Op::kGet, {"//acc/job/restart"}, {}, 0}));
  EXPECT_EQ(reply(2), bytes("1"));
  ASSERT_TRUE(apply(2, {Op::kAdd, {"//worker/attempt_1/acc/beat/0"}, {}, 1}));
  ASSERT_TRUE(apply(1, {Op::kGet, {"//worker/attempt_1/acc/beat/0"}, {}, 0}));
  EXPECT_EQ(reply(1), bytes("1"));
  // The launcher reads a space's key by its full name.
  ASSERT_TRUE(apply(1, {Op::kGet, {"/acc/space/attempt_1/rank_1"}, {}, 0}));
  EXPECT_EQ(reply(1), bytes("new address"));
  // LIST and GET_NUM_KEYS: the connection's own space, without the prefix.
  reply(2);
  ASSERT_TRUE(apply(2, {Op::kGetNumKeys, {}, {}, 0}));
  EXPECT_EQ(reply(2), i64(1));
  ASSERT_TRUE(apply(2, {Op::kList, {}, {}, 0}));
  EXPECT_EQ(reply(2), i64(1) + bytes("rank_1"));
  // A closed connection's space is forgotten with it: its id, reused, starts in today's space.
  state_.drop_connection(1);
  ASSERT_TRUE(apply(1, {Op::kGet, {"rank_1"}, {}, 0}));
  EXPECT_EQ(reply(1), bytes("new address"));
}

// Several nodes: the space begins the moment the attempt barrier's key is set, not before, so a
// connection that comes while the other nodes still stop their workers keeps the old space.
TEST_F(StoreStateTest, AKeySpaceCanBeginWhenAKeyIsFirstSet) {
  state_.begin_key_space("/acc/space/attempt_1/", "//acc/job/attempt_1/ready");
  ASSERT_TRUE(apply(1, {Op::kSet, {"gloo"}, {"attempt 0"}, 0}));
  ASSERT_TRUE(apply(9, {Op::kCompareSet, {"//acc/job/attempt_1/ready"}, {"", "1"}, 0}));
  ASSERT_TRUE(apply(2, {Op::kCheck, {"gloo"}, {}, 0}));
  EXPECT_EQ(reply(2), byte(kCheckNotReady));
  ASSERT_TRUE(apply(1, {Op::kCheck, {"gloo"}, {}, 0}));
  EXPECT_EQ(reply(1), byte(kCheckReady));
  // A watcher in a space is told the key as it named it.
  ASSERT_TRUE(apply(2, {Op::kWatchKey, {"gloo"}, {}, 0}));
  reply(2);
  ASSERT_TRUE(apply(3, {Op::kSet, {"gloo"}, {"attempt 1"}, 0}));
  EXPECT_EQ(reply(2), byte(kWatchKeyCreated) + bytes("gloo") + bytes("") + bytes("attempt 1"));
}

TEST_F(StoreStateTest, AddOnANonNumericValueIsRefused) {
  ASSERT_TRUE(apply(1, {Op::kSet, {"/n"}, {"hello"}, 0}));
  EXPECT_FALSE(apply(1, {Op::kAdd, {"/n"}, {}, 1}));
  EXPECT_NE(error_.find("not an integer"), std::string::npos) << error_;
}

TEST_F(StoreStateTest, ParseCounterRejectsOverflowAndAcceptsTheExtremes) {
  std::int64_t value = 0;
  EXPECT_TRUE(parse_counter("-9223372036854775808", value));
  EXPECT_EQ(value, INT64_MIN);
  EXPECT_TRUE(parse_counter("+9223372036854775807", value));
  EXPECT_EQ(value, INT64_MAX);
  EXPECT_FALSE(parse_counter("9223372036854775808", value));
  EXPECT_FALSE(parse_counter("", value));
  EXPECT_FALSE(parse_counter("-", value));
}

TEST_F(StoreStateTest, CompareSetFollowsPytorchSemantics) {
  // Missing key, expected empty: created.
  ASSERT_TRUE(apply(1, {Op::kCompareSet, {"/k"}, {"", "one"}, 0}));
  EXPECT_EQ(reply(1), bytes("one"));
  // Present and equal: replaced.
  ASSERT_TRUE(apply(1, {Op::kCompareSet, {"/k"}, {"one", "two"}, 0}));
  EXPECT_EQ(reply(1), bytes("two"));
  // Present and different: unchanged, current value returned.
  ASSERT_TRUE(apply(1, {Op::kCompareSet, {"/k"}, {"one", "three"}, 0}));
  EXPECT_EQ(reply(1), bytes("two"));
  // Missing key, expected not empty: not created, `expected` returned.
  ASSERT_TRUE(apply(1, {Op::kCompareSet, {"/m"}, {"x", "y"}, 0}));
  EXPECT_EQ(reply(1), bytes("x"));
  ASSERT_TRUE(apply(1, {Op::kCheck, {"/m"}, {}, 0}));
  EXPECT_EQ(reply(1), byte(kCheckNotReady));
}

TEST_F(StoreStateTest, CheckDeleteAndNumKeys) {
  ASSERT_TRUE(apply(1, {Op::kMultiSet, {"/a", "/b"}, {"1", "2"}, 0}));
  ASSERT_TRUE(apply(1, {Op::kCheck, {"/a", "/b"}, {}, 0}));
  EXPECT_EQ(reply(1), byte(kCheckReady));
  ASSERT_TRUE(apply(1, {Op::kGetNumKeys, {}, {}, 0}));
  EXPECT_EQ(reply(1), i64(2));
  ASSERT_TRUE(apply(1, {Op::kDeleteKey, {"/a"}, {}, 0}));
  EXPECT_EQ(reply(1), i64(1));
  ASSERT_TRUE(apply(1, {Op::kDeleteKey, {"/a"}, {}, 0}));
  EXPECT_EQ(reply(1), i64(0));
  ASSERT_TRUE(apply(1, {Op::kCheck, {"/a", "/b"}, {}, 0}));
  EXPECT_EQ(reply(1), byte(kCheckNotReady));
  EXPECT_EQ(state_.num_keys(), 1u);
}

TEST(StoreStateLimitTest, MultiGetOrListWhoseReplyIsOverTheLimitIsRefusedAndNothingIsSent) {
  StoreState state(1000, /*max_reply_bytes=*/1024);
  RecordingSink sink;
  std::string error;
  ASSERT_TRUE(state.apply(1, Dialect::kV2_2, {Op::kSet, {"/big"}, {std::string(600, 'x')}, 0}, sink,
                          error));
  // One naming: 8 + 600 bytes fit. Twice: 1216 bytes do not.
  ASSERT_TRUE(state.apply(1, Dialect::kV2_2, {Op::kMultiGet, {"/big"}, {}, 0}, sink, error));
  EXPECT_EQ(sink.take(1).size(), 608u);
  EXPECT_FALSE(
      state.apply(1, Dialect::kV2_2, {Op::kMultiGet, {"/big", "/big"}, {}, 0}, sink, error));
  EXPECT_EQ(error, "MULTI_GET reply of 1216 bytes is over the limit of 1024");
  EXPECT_EQ(sink.take(1), "");
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(state.apply(1, Dialect::kV2_2, {Op::kSet, {"/key" + std::to_string(i)}, {"v"}, 0},
                            sink, error));
  }
  EXPECT_FALSE(state.apply(1, Dialect::kV2_2, {Op::kList, {}, {}, 0}, sink, error));
  EXPECT_NE(error.find("LIST reply of"), std::string::npos) << error;
  EXPECT_EQ(sink.take(1), "");
}

TEST_F(StoreStateTest, GetAndMultiGetReadMissingKeysAsEmpty) {
  ASSERT_TRUE(apply(1, {Op::kAppend, {"/a"}, {"x"}, 0}));
  ASSERT_TRUE(apply(1, {Op::kAppend, {"/a"}, {"y"}, 0}));
  ASSERT_TRUE(apply(1, {Op::kMultiGet, {"/a", "/missing"}, {}, 0}));
  EXPECT_EQ(reply(1), bytes("xy") + bytes(""));
}

TEST_F(StoreStateTest, QueuesPopInOrderAndReportLengthFirst) {
  ASSERT_TRUE(apply(1, {Op::kWait, {"/q"}, {}, 0}));
  ASSERT_TRUE(apply(2, {Op::kWait, {"/q"}, {}, 0}));
  ASSERT_TRUE(apply(3, {Op::kQueuePush, {"/q"}, {"first"}, 0}));
  // One push wakes one waiter.
  EXPECT_EQ(reply(1) + reply(2), byte(kStopWaiting));
  ASSERT_TRUE(apply(3, {Op::kQueuePush, {"/q"}, {"second"}, 0}));
  ASSERT_TRUE(apply(3, {Op::kQueueLen, {"/q"}, {}, 0}));
  EXPECT_EQ(reply(3), i64(2));
  ASSERT_TRUE(apply(3, {Op::kQueuePop, {"/q"}, {}, 0}));
  EXPECT_EQ(reply(3), i64(2) + bytes("first"));
  ASSERT_TRUE(apply(3, {Op::kQueuePop, {"/q"}, {}, 0}));
  EXPECT_EQ(reply(3), i64(1) + bytes("second"));
  ASSERT_TRUE(apply(3, {Op::kQueuePop, {"/q"}, {}, 0}));
  EXPECT_EQ(reply(3), i64(0));
}

TEST_F(StoreStateTest, ListNamesEveryKey) {
  ASSERT_TRUE(apply(1, {Op::kSet, {"/only"}, {"v"}, 0}));
  ASSERT_TRUE(apply(1, {Op::kList, {}, {}, 0}));
  EXPECT_EQ(reply(1), i64(1) + bytes("/only"));
}

TEST_F(StoreStateTest, WatchedKeyPushesCreateUpdateAndDelete) {
  ASSERT_TRUE(apply(5, {Op::kWatchKey, {"/w"}, {}, 0}));
  EXPECT_EQ(reply(5), byte(kWatchCallbackRegistered));
  ASSERT_TRUE(apply(1, {Op::kSet, {"/w"}, {"a"}, 0}));
  ASSERT_TRUE(apply(1, {Op::kSet, {"/w"}, {"b"}, 0}));
  ASSERT_TRUE(apply(1, {Op::kDeleteKey, {"/w"}, {}, 0}));
  EXPECT_EQ(reply(5), byte(kWatchKeyCreated) + bytes("/w") + bytes("") + bytes("a") +
                          byte(kWatchKeyUpdated) + bytes("/w") + bytes("a") + bytes("b") +
                          byte(kWatchKeyDeleted) + bytes("/w") + bytes("b") + bytes(""));
}

TEST_F(StoreStateTest, PingEchoesAndWrongValidateIsRefused) {
  ASSERT_TRUE(apply(1, {Op::kPing, {}, {}, 77}));
  std::string echo;
  append_u32(echo, 77);
  EXPECT_EQ(reply(1), echo);
  EXPECT_TRUE(apply(1, {Op::kValidate, {}, {}, kValidationMagic}));
  EXPECT_FALSE(apply(1, {Op::kValidate, {}, {}, 1}));
}

TEST_F(StoreStateTest, ANewKeyPastTheLimitIsRefusedButUpdatesStillWork) {
  StoreState small(2);
  RecordingSink sink;
  std::string error;
  ASSERT_TRUE(small.apply(1, Dialect::kV2_2, {Op::kSet, {"/a"}, {"1"}, 0}, sink, error));
  ASSERT_TRUE(small.apply(1, Dialect::kV2_2, {Op::kSet, {"/b"}, {"1"}, 0}, sink, error));
  EXPECT_FALSE(small.apply(1, Dialect::kV2_2, {Op::kSet, {"/c"}, {"1"}, 0}, sink, error));
  EXPECT_NE(error.find("full"), std::string::npos);
  EXPECT_TRUE(small.apply(1, Dialect::kV2_2, {Op::kSet, {"/a"}, {"2"}, 0}, sink, error));
}

// Admission: a connection from an address that is neither loopback nor a member's may only prove
// the job secret; once one connection from an address has proven it, that address is a member's
// (its workers, which cannot prove it, come from there).
TEST_F(StoreStateTest, AdmissionLetsInLoopbackMembersAddressesAndProofsAlone) {
  const std::string salt = "salt";
  state_.require_job_secret("secret", salt);
  state_.admit_members_only({"10.0.0.2"});
  const std::vector<std::pair<ConnectionId, std::string>> peers = {
      {1, "127.0.0.1"},        {2, "10.0.0.2"}, {3, "10.0.0.3"}, {4, "10.0.0.3"},
      {5, "::ffff:127.0.0.5"}, {6, "::1"},      {7, "10.0.0.9"}, {8, "10.0.0.3"}};
  for (const auto& [connection, host] : peers) state_.connection_from(connection, host);
  EXPECT_TRUE(apply(1, {Op::kSet, {"/MASTER_ADDR"}, {"node0"}, 0})) << "loopback";
  EXPECT_TRUE(apply(2, {Op::kGet, {"/MASTER_ADDR"}, {}, 0})) << "a member's address given";
  EXPECT_EQ(reply(2), bytes("node0"));
  EXPECT_TRUE(apply(5, {Op::kCheck, {"/MASTER_ADDR"}, {}, 0})) << "IPv4-mapped loopback";
  EXPECT_TRUE(apply(6, {Op::kCheck, {"/MASTER_ADDR"}, {}, 0})) << "IPv6 loopback";
  // 10.0.0.3 is nobody's yet: its worker-protocol client is refused, a greeting is not.
  EXPECT_TRUE(apply(3, {Op::kValidate, {}, {}, kValidationMagic}));
  EXPECT_FALSE(apply(3, {Op::kGet, {"/MASTER_ADDR"}, {}, 0}));
  EXPECT_NE(error_.find("not a member of the job: 10.0.0.3"), std::string::npos) << error_;
  EXPECT_FALSE(apply(7, {Op::kSet, {"/worker/x"}, {"y"}, 0}));
  // A launcher there proves the secret: it, and then every connection from 10.0.0.3, is let in.
  EXPECT_TRUE(apply(4, {Op::kGet, {"/acc/job/nonce"}, {}, 0}));
  reply(4);
  EXPECT_TRUE(
      apply(4, {Op::kSet, {"/acc/job/proof"}, {job_proof("secret", job_nonce(salt, 4))}, 0}));
  EXPECT_TRUE(apply(4, {Op::kSet, {"/acc/round"}, {"1"}, 0}));
  EXPECT_TRUE(apply(8, {Op::kGet, {"/MASTER_ADDR"}, {}, 0})) << "a worker of the proven host";
  EXPECT_EQ(reply(8), bytes("node0"));
  EXPECT_FALSE(apply(7, {Op::kGet, {"/MASTER_ADDR"}, {}, 0})) << "10.0.0.9 is still nobody's";
  state_.connection_from(9, "10.0.0.1", true);
  EXPECT_TRUE(apply(9, {Op::kGet, {"/MASTER_ADDR"}, {}, 0})) << "an address of the store's host";
}

// Without admission, addresses do not matter (the job secret guards the launchers' keys alone).
TEST_F(StoreStateTest, WithoutAdmissionEveryAddressReadsAndWritesWorkersKeys) {
  state_.require_job_secret("secret", "salt");
  state_.connection_from(1, "10.0.0.9");
  EXPECT_TRUE(apply(1, {Op::kSet, {"/MASTER_ADDR"}, {"node0"}, 0}));
  EXPECT_FALSE(apply(1, {Op::kSet, {"/acc/round"}, {"1"}, 0}));
}

}  // namespace
}  // namespace acc::rendezvous::detail
