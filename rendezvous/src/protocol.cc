#include "acc/rendezvous/protocol.h"

#include <array>
#include <cstring>

namespace acc::rendezvous {
namespace {

constexpr std::uint8_t kNone = 0xFF;

// Every operation, one row each, in the enum's order: its name and its opcode byte in each
// dialect (kNone where the dialect lacks it). The encoder, the decoder and the names read it; a
// new operation is a row here (and an enumerator) plus its fields in parse_request and its
// handler in store_state.cc.
struct OpRow {
  Op op;
  std::string_view name;
  std::uint8_t v1_13, v2_1, v2_2;
};
constexpr OpRow kOps[] = {
    {Op::kValidate, "VALIDATE", kNone, kNone, 0},
    {Op::kSet, "SET", 0, 0, 1},
    {Op::kCompareSet, "COMPARE_SET", 1, 1, 2},
    {Op::kGet, "GET", 2, 2, 3},
    {Op::kAdd, "ADD", 3, 3, 4},
    {Op::kCheck, "CHECK", 4, 4, 5},
    {Op::kWait, "WAIT", 5, 5, 6},
    {Op::kGetNumKeys, "GETNUMKEYS", 6, 6, 7},
    {Op::kWatchKey, "WATCH_KEY", 7, kNone, kNone},
    {Op::kDeleteKey, "DELETE_KEY", 8, 7, 8},
    {Op::kAppend, "APPEND", kNone, 8, 9},
    {Op::kMultiGet, "MULTI_GET", kNone, 9, 10},
    {Op::kMultiSet, "MULTI_SET", kNone, 10, 11},
    {Op::kCancelWait, "CANCEL_WAIT", kNone, 11, 12},
    {Op::kPing, "PING", kNone, kNone, 13},
    {Op::kQueuePush, "QUEUE_PUSH", kNone, kNone, 14},
    {Op::kQueuePop, "QUEUE_POP", kNone, kNone, 15},
    {Op::kQueueLen, "QUEUE_LEN", kNone, kNone, 16},
    {Op::kList, "LIST", kNone, kNone, 17},
};

constexpr bool rows_in_enum_order() {
  for (std::size_t i = 0; i < std::size(kOps); ++i)
    if (static_cast<std::size_t>(kOps[i].op) != i) return false;
  return true;
}
static_assert(rows_in_enum_order() && std::size(kOps) == static_cast<std::size_t>(Op::kList) + 1,
              "kOps has one row per Op, in the enum's order");

std::uint8_t code_in(const OpRow& row, Dialect dialect) {
  switch (dialect) {
    case Dialect::kV1_13:
      return row.v1_13;
    case Dialect::kV2_1:
      return row.v2_1;
    case Dialect::kV2_2:
      break;
  }
  return row.v2_2;
}

// Reads fields from the front of a buffer. A read past the end sets `incomplete`; a field over
// the limits sets `error`. Either stops every later read, so a parse function can read all its
// fields and check the outcome once.
class Cursor {
 public:
  Cursor(std::string_view bytes, const Limits& limits) : bytes_(bytes), limits_(limits) {}

  bool ok() const { return !incomplete_ && error_.empty(); }
  bool incomplete() const { return incomplete_; }
  const std::string& error() const { return error_; }
  std::size_t pos() const { return pos_; }

  std::uint64_t u64() {
    if (!take(8)) return 0;
    return load_u64(bytes_.substr(pos_ - 8));
  }
  std::uint32_t u32() {
    if (!take(4)) return 0;
    return load_u32(bytes_.substr(pos_ - 4));
  }
  std::string string(std::size_t max, const char* what) {
    std::uint64_t size = u64();
    if (!ok()) return {};
    if (size > max) {
      fail(std::string(what) + " of " + std::to_string(size) + " bytes is over the limit of " +
           std::to_string(max));
      return {};
    }
    if (!take(static_cast<std::size_t>(size))) return {};
    return std::string(bytes_.substr(pos_ - size, size));
  }
  std::string key() { return string(limits_.max_key_bytes, "key"); }
  std::string value() { return string(limits_.max_value_bytes, "value"); }
  std::size_t count(std::uint64_t raw) {
    // MULTI_SET sends its count as int64; a negative one reads as a huge uint64.
    if (ok() && raw > limits_.max_keys_per_request) {
      fail("request with " + std::to_string(static_cast<std::int64_t>(raw)) +
           " keys is over the limit of " + std::to_string(limits_.max_keys_per_request));
    }
    return ok() ? static_cast<std::size_t>(raw) : 0;
  }
  void fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }

 private:
  bool take(std::size_t n) {
    if (!ok()) return false;
    if (pos_ > limits_.max_request_bytes || n > limits_.max_request_bytes - pos_) {
      fail("request is over the limit of " + std::to_string(limits_.max_request_bytes) + " bytes");
      return false;
    }
    if (bytes_.size() - pos_ < n) {
      incomplete_ = true;
      return false;
    }
    pos_ += n;
    return true;
  }

  std::string_view bytes_;
  const Limits& limits_;
  std::size_t pos_ = 0;
  bool incomplete_ = false;
  std::string error_;
};

void read_keys(Cursor& in, Request& out) {
  std::size_t n = in.count(in.u64());
  for (std::size_t i = 0; i < n && in.ok(); ++i) out.keys.push_back(in.key());
}

void read_body(Cursor& in, Request& out) {
  switch (out.op) {
    case Op::kValidate:
    case Op::kPing:
      out.number = in.u32();
      break;
    case Op::kSet:
    case Op::kAppend:
    case Op::kQueuePush:
      out.keys.push_back(in.key());
      out.values.push_back(in.value());
      break;
    case Op::kCompareSet:
      out.keys.push_back(in.key());
      out.values.push_back(in.value());
      out.values.push_back(in.value());
      break;
    case Op::kAdd:
      out.keys.push_back(in.key());
      out.number = static_cast<std::int64_t>(in.u64());
      break;
    case Op::kGet:
    case Op::kDeleteKey:
    case Op::kWatchKey:
    case Op::kQueuePop:
    case Op::kQueueLen:
      out.keys.push_back(in.key());
      break;
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet:
      read_keys(in, out);
      break;
    case Op::kMultiSet: {
      std::size_t n = in.count(in.u64());
      for (std::size_t i = 0; i < n && in.ok(); ++i) {
        out.keys.push_back(in.key());
        out.values.push_back(in.value());
      }
      break;
    }
    case Op::kGetNumKeys:
    case Op::kCancelWait:
    case Op::kList:
      break;
  }
}

}  // namespace

std::optional<std::uint8_t> opcode_of(Op op, Dialect dialect) {
  const std::uint8_t code = code_in(kOps[static_cast<std::size_t>(op)], dialect);
  if (code == kNone) return std::nullopt;
  return code;
}

std::optional<Op> op_of(std::uint8_t byte, Dialect dialect) {
  if (byte == kNone) return std::nullopt;  // the table's own marker for "no such opcode"
  for (const OpRow& row : kOps)
    if (code_in(row, dialect) == byte) return row.op;
  return std::nullopt;
}

std::string_view op_name(Op op) {
  return kOps[static_cast<std::size_t>(op)].name;
}

ParseResult parse_request(std::string_view bytes, Dialect dialect, const Limits& limits,
                          Request& out) {
  out = Request{};
  if (bytes.empty()) return {};
  auto op = op_of(static_cast<std::uint8_t>(bytes[0]), dialect);
  if (!op) {
    return {ParseStatus::kError, 0,
            "unknown opcode " + std::to_string(static_cast<std::uint8_t>(bytes[0]))};
  }
  out.op = *op;
  Cursor in(bytes.substr(1), limits);
  read_body(in, out);
  if (!in.error().empty()) {
    return {ParseStatus::kError, 0, std::string(op_name(out.op)) + ": " + in.error()};
  }
  if (in.incomplete()) {
    out = Request{};
    return {};
  }
  return {ParseStatus::kComplete, 1 + in.pos(), {}};
}

DialectDetection detect_dialect(std::string_view first_bytes, Dialect legacy) {
  if (first_bytes.empty()) return {};
  if (first_bytes[0] != 0) return {true, legacy, 0};
  // A legacy SET also starts with 0, but its next 8 bytes are a key length; CE F7 85 3C there
  // would announce a key of about 1 GB, so the magic cannot be mistaken for one (§5.7).
  std::string_view magic = "\xCE\xF7\x85\x3C";
  std::size_t have = std::min<std::size_t>(first_bytes.size() - 1, 4);
  if (first_bytes.substr(1, have) != magic.substr(0, have)) return {true, legacy, 0};
  if (have < 4) return {};
  return {true, Dialect::kV2_2, 5};
}

void append_u8(std::string& out, std::uint8_t value) {
  out.push_back(static_cast<char>(value));
}

void append_u32(std::string& out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

void append_u64(std::string& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

void append_i64(std::string& out, std::int64_t value) {
  append_u64(out, static_cast<std::uint64_t>(value));
}

void append_bytes(std::string& out, std::string_view bytes) {
  append_u64(out, bytes.size());
  out.append(bytes);
}

std::uint32_t load_u32(std::string_view bytes) {
  std::uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<std::uint8_t>(bytes[i]);
  return value;
}

std::uint64_t load_u64(std::string_view bytes) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<std::uint8_t>(bytes[i]);
  return value;
}

bool encode_request(const Request& request, Dialect dialect, std::string& out) {
  auto code = opcode_of(request.op, dialect);
  if (!code) return false;
  append_u8(out, *code);
  switch (request.op) {
    case Op::kValidate:
    case Op::kPing:
      append_u32(out, static_cast<std::uint32_t>(request.number));
      break;
    case Op::kAdd:
      append_bytes(out, request.keys.at(0));
      append_i64(out, request.number);
      break;
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet:
      append_u64(out, request.keys.size());
      for (const auto& key : request.keys) append_bytes(out, key);
      break;
    case Op::kMultiSet:
      append_i64(out, static_cast<std::int64_t>(request.keys.size()));
      for (std::size_t i = 0; i < request.keys.size(); ++i) {
        append_bytes(out, request.keys[i]);
        append_bytes(out, request.values.at(i));
      }
      break;
    default:
      // Every other request is its key (if any) followed by its values, in order.
      for (const auto& key : request.keys) append_bytes(out, key);
      for (const auto& value : request.values) append_bytes(out, value);
      break;
  }
  return true;
}

}  // namespace acc::rendezvous
