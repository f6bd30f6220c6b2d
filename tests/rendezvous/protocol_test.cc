#include "acc/rendezvous/protocol.h"

#include <gtest/gtest.h>

#include <string>

namespace acc::rendezvous {
namespace {

const Dialect kDialects[] = {Dialect::kV1_13, Dialect::kV2_1, Dialect::kV2_2};

std::vector<Request> sample_requests() {
  return {
      {Op::kValidate, {}, {}, kValidationMagic},
      {Op::kPing, {}, {}, 4242},
      {Op::kSet, {"/k"}, {"v"}, 0},
      {Op::kCompareSet, {"/k"}, {"old", ""}, 0},
      {Op::kGet, {"/k"}, {}, 0},
      {Op::kAdd, {"/counter"}, {}, -17},
      {Op::kCheck, {"/a", "/b"}, {}, 0},
      {Op::kWait, {"/a"}, {}, 0},
      {Op::kGetNumKeys, {}, {}, 0},
      {Op::kWatchKey, {"/w"}, {}, 0},
      {Op::kDeleteKey, {"/k"}, {}, 0},
      {Op::kAppend, {"/k"}, {std::string("\0\1", 2)}, 0},
      {Op::kMultiGet, {"/a", "/b", "/c"}, {}, 0},
      {Op::kMultiSet, {"/a", "/b"}, {"1", "2"}, 0},
      {Op::kCancelWait, {}, {}, 0},
      {Op::kQueuePush, {"/q"}, {"item"}, 0},
      {Op::kQueuePop, {"/q"}, {}, 0},
      {Op::kQueueLen, {"/q"}, {}, 0},
      {Op::kList, {}, {}, 0},
  };
}

TEST(ProtocolTest, EveryRequestOfADialectDecodesToWhatWasEncoded) {
  Limits limits;
  int checked = 0;
  for (Dialect dialect : kDialects) {
    for (const Request& request : sample_requests()) {
      std::string bytes;
      if (!encode_request(request, dialect, bytes)) continue;
      Request decoded;
      ParseResult result = parse_request(bytes, dialect, limits, decoded);
      ASSERT_EQ(result.status, ParseStatus::kComplete) << op_name(request.op) << result.error;
      EXPECT_EQ(result.consumed, bytes.size()) << op_name(request.op);
      EXPECT_EQ(decoded, request) << op_name(request.op);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 9 + 12 + 18);  // ops per dialect: 1.13 has 9, 2.1 has 12, 2.2+ has 18
}

TEST(ProtocolTest, SetBytesSeenFromPytorch113DecodeAsSetOfSlashK) {
  // libtorch-notes.md: what torch 1.13 sent for set("k", "v") (20 bytes; the note says 21).
  std::string wire("\x00\x02\x00\x00\x00\x00\x00\x00\x00/k\x01\x00\x00\x00\x00\x00\x00\x00v", 20);
  Request decoded;
  ParseResult result = parse_request(wire, Dialect::kV1_13, Limits{}, decoded);
  ASSERT_EQ(result.status, ParseStatus::kComplete);
  EXPECT_EQ(result.consumed, 20u);
  EXPECT_EQ(decoded.op, Op::kSet);
  EXPECT_EQ(decoded.keys, std::vector<std::string>{"/k"});
  EXPECT_EQ(decoded.values, std::vector<std::string>{"v"});
  std::string encoded;
  ASSERT_TRUE(encode_request(decoded, Dialect::kV1_13, encoded));
  EXPECT_EQ(encoded, wire);
}

TEST(ProtocolTest, EveryProperPrefixOfARequestIsIncompleteAndConsumesNothing) {
  for (const Request& request : sample_requests()) {
    std::string bytes;
    if (!encode_request(request, Dialect::kV2_2, bytes)) continue;
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      Request decoded;
      ParseResult result = parse_request(bytes.substr(0, n), Dialect::kV2_2, Limits{}, decoded);
      EXPECT_EQ(result.status, ParseStatus::kIncomplete) << op_name(request.op) << " at " << n;
      EXPECT_EQ(result.consumed, 0u);
    }
  }
}

TEST(ProtocolTest, TwoPipelinedRequestsDecodeOneAtATime) {
  std::string bytes;
  encode_request({Op::kAdd, {"/n"}, {}, 5}, Dialect::kV2_2, bytes);
  std::size_t first = bytes.size();
  encode_request({Op::kGet, {"/n"}, {}, 0}, Dialect::kV2_2, bytes);
  Request decoded;
  ParseResult result = parse_request(bytes, Dialect::kV2_2, Limits{}, decoded);
  ASSERT_EQ(result.status, ParseStatus::kComplete);
  EXPECT_EQ(result.consumed, first);
  EXPECT_EQ(decoded.op, Op::kAdd);
  result = parse_request(std::string_view(bytes).substr(first), Dialect::kV2_2, Limits{}, decoded);
  ASSERT_EQ(result.status, ParseStatus::kComplete);
  EXPECT_EQ(decoded.op, Op::kGet);
}

TEST(ProtocolTest, OversizedKeyIsAnErrorAsSoonAsItsLengthArrives) {
  Limits limits;
  limits.max_key_bytes = 16;
  std::string bytes;
  append_u8(bytes, *opcode_of(Op::kGet, Dialect::kV2_2));
  append_u64(bytes, 17);  // the key's bytes never come: the length alone must be refused
  Request decoded;
  ParseResult result = parse_request(bytes, Dialect::kV2_2, limits, decoded);
  EXPECT_EQ(result.status, ParseStatus::kError);
  EXPECT_NE(result.error.find("key of 17 bytes"), std::string::npos) << result.error;
}

TEST(ProtocolTest, OversizedValueIsAnError) {
  Limits limits;
  limits.max_value_bytes = 4;
  std::string bytes;
  encode_request({Op::kSet, {"/k"}, {"12345"}, 0}, Dialect::kV1_13, bytes);
  Request decoded;
  EXPECT_EQ(parse_request(bytes, Dialect::kV1_13, limits, decoded).status, ParseStatus::kError);
}

TEST(ProtocolTest, TooManyKeysOrANegativeCountIsAnError) {
  Limits limits;
  limits.max_keys_per_request = 2;
  std::string bytes;
  encode_request({Op::kWait, {"/a", "/b", "/c"}, {}, 0}, Dialect::kV1_13, bytes);
  Request decoded;
  EXPECT_EQ(parse_request(bytes, Dialect::kV1_13, limits, decoded).status, ParseStatus::kError);

  std::string negative;
  append_u8(negative, *opcode_of(Op::kMultiSet, Dialect::kV2_2));
  append_i64(negative, -1);
  EXPECT_EQ(parse_request(negative, Dialect::kV2_2, Limits{}, decoded).status, ParseStatus::kError);
}

TEST(ProtocolTest, RequestOverTheTotalByteLimitIsAnError) {
  Limits limits;
  limits.max_request_bytes = 100;
  std::vector<std::string> keys(20, std::string(10, 'k'));
  std::string bytes;
  encode_request({Op::kCheck, keys, {}, 0}, Dialect::kV2_2, bytes);
  Request decoded;
  EXPECT_EQ(parse_request(bytes, Dialect::kV2_2, limits, decoded).status, ParseStatus::kError);
}

TEST(ProtocolTest, UnknownOpcodeIsAnErrorInEachDialect) {
  Request decoded;
  EXPECT_EQ(parse_request("\x09", Dialect::kV1_13, Limits{}, decoded).status, ParseStatus::kError);
  EXPECT_EQ(parse_request("\x0C", Dialect::kV2_1, Limits{}, decoded).status, ParseStatus::kError);
  EXPECT_EQ(parse_request("\x12", Dialect::kV2_2, Limits{}, decoded).status, ParseStatus::kError);
  // 0xFF marks missing opcodes in the tables; it must not decode as one (found by the fuzzer).
  for (Dialect dialect : kDialects) {
    EXPECT_EQ(parse_request("\xFF", dialect, Limits{}, decoded).status, ParseStatus::kError);
  }
}

TEST(ProtocolTest, OpcodeNumberingFollowsEachGeneration) {
  EXPECT_EQ(opcode_of(Op::kSet, Dialect::kV1_13), 0);
  EXPECT_EQ(opcode_of(Op::kSet, Dialect::kV2_2), 1);
  EXPECT_EQ(opcode_of(Op::kWatchKey, Dialect::kV1_13), 7);
  EXPECT_EQ(opcode_of(Op::kWatchKey, Dialect::kV2_1), std::nullopt);
  EXPECT_EQ(opcode_of(Op::kDeleteKey, Dialect::kV1_13), 8);
  EXPECT_EQ(opcode_of(Op::kDeleteKey, Dialect::kV2_1), 7);
  EXPECT_EQ(opcode_of(Op::kDeleteKey, Dialect::kV2_2), 8);
  EXPECT_EQ(opcode_of(Op::kPing, Dialect::kV2_2), 13);
  EXPECT_EQ(opcode_of(Op::kList, Dialect::kV2_2), 17);
  EXPECT_EQ(op_of(7, Dialect::kV2_1), Op::kDeleteKey);
  EXPECT_EQ(op_of(8, Dialect::kV2_1), Op::kAppend);
}

TEST(ProtocolTest, ValidateWithMagicSelectsTheNewDialectAndIsConsumed) {
  std::string bytes("\x00\xCE\xF7\x85\x3C\x0D", 6);
  DialectDetection detection = detect_dialect(bytes, Dialect::kV1_13);
  EXPECT_TRUE(detection.complete);
  EXPECT_EQ(detection.dialect, Dialect::kV2_2);
  EXPECT_EQ(detection.consumed, 5u);
}

TEST(ProtocolTest, LegacySetStartingWithZeroStaysLegacy) {
  std::string bytes;
  encode_request({Op::kSet, {"/k"}, {"v"}, 0}, Dialect::kV1_13, bytes);
  DialectDetection detection = detect_dialect(bytes, Dialect::kV1_13);
  EXPECT_TRUE(detection.complete);
  EXPECT_EQ(detection.dialect, Dialect::kV1_13);
  EXPECT_EQ(detection.consumed, 0u);
  // A first byte other than 0 decides at once; the server's legacy choice is honoured.
  DialectDetection add = detect_dialect("\x03", Dialect::kV2_1);
  EXPECT_TRUE(add.complete);
  EXPECT_EQ(add.dialect, Dialect::kV2_1);
}

TEST(ProtocolTest, PartialMagicWaitsForMoreBytes) {
  EXPECT_FALSE(detect_dialect(std::string("\x00\xCE\xF7", 3), Dialect::kV1_13).complete);
  EXPECT_FALSE(detect_dialect("", Dialect::kV1_13).complete);
  EXPECT_TRUE(detect_dialect(std::string("\x00\xCE\x00", 3), Dialect::kV1_13).complete);
}

TEST(ProtocolTest, IntegersAreLittleEndian) {
  std::string bytes;
  append_i64(bytes, -2);
  append_u32(bytes, kValidationMagic);
  EXPECT_EQ(bytes, std::string("\xFE\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xCE\xF7\x85\x3C", 12));
  EXPECT_EQ(static_cast<std::int64_t>(load_u64(bytes)), -2);
  EXPECT_EQ(load_u32(std::string_view(bytes).substr(8)), kValidationMagic);
}

}  // namespace
}  // namespace acc::rendezvous
