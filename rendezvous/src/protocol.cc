#include "acc/rendezvous/protocol.h"

#include <array>
#include <cstring>

namespace acc::rendezvous {
namespace {

constexpr std::uint8_t kNone = 0xFF;

// Opcode byte of each Op (in enum order) per dialect; kNone where the dialect lacks it.
constexpr std::array<std::uint8_t, 19> kV1_13Codes = {
    kNone, 0,     1,     2,     3,     4,     5,     6,     7,    8,
    kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone};
constexpr std::array<std::uint8_t, 19> kV2_1Codes = {
    kNone, 0, 1, 2, 3, 4, 5, 6, kNone, 7, 8, 9, 10, 11, kNone, kNone, kNone, kNone, kNone};
constexpr std::array<std::uint8_t, 19> kV2_2Codes = {0, 1,  2,  3,  4,  5,  6,  7,  kNone, 8,
                                                     9, 10, 11, 12, 13, 14, 15, 16, 17};

const std::array<std::uint8_t, 19>& codes_of(Dialect dialect) {
  switch (dialect) {
    case Dialect::kV1_13:
      return kV1_13Codes;
    case Dialect::kV2_1:
      return kV2_1Codes;
    case Dialect::kV2_2:
      break;
  }
  return kV2_2Codes;
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
  std::uint8_t code = codes_of(dialect)[static_cast<std::size_t>(op)];
  if (code == kNone) return std::nullopt;
  return code;
}

std::optional<Op> op_of(std::uint8_t byte, Dialect dialect) {
  if (byte == kNone) return std::nullopt;  // the tables' own marker for "no such opcode"
  const auto& codes = codes_of(dialect);
  for (std::size_t i = 0; i < codes.size(); ++i) {
    if (codes[i] == byte) return static_cast<Op>(i);
  }
  return std::nullopt;
}

std::string_view op_name(Op op) {
  static constexpr std::array<std::string_view, 19> kNames = {
      "VALIDATE",   "SET",       "COMPARE_SET", "GET",         "ADD",
      "CHECK",      "WAIT",      "GETNUMKEYS",  "WATCH_KEY",   "DELETE_KEY",
      "APPEND",     "MULTI_GET", "MULTI_SET",   "CANCEL_WAIT", "PING",
      "QUEUE_PUSH", "QUEUE_POP", "QUEUE_LEN",   "LIST"};
  return kNames[static_cast<std::size_t>(op)];
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
