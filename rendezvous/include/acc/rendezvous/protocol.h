#pragma once

// The byte protocol of PyTorch's TCPStore, as pure functions: opcode tables per dialect, an
// incremental request parser and the encoders both sides need. No I/O here, so the codec is tested
// and fuzzed without sockets (docs/rendezvous.md has the grammar).
//
// All functions are pure and thread-safe; none throws (malformed input is a ParseStatus::kError).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace acc::rendezvous {

// The generations of the protocol (docs/rendezvous.md, "Dialects"). They differ in opcode numbering
// only.
enum class Dialect : std::uint8_t {
  kV1_13,  // PyTorch 1.13 to 2.0 ("G0"): no handshake, WATCH_KEY = 7, DELETE_KEY = 8.
  kV2_1,   // PyTorch 2.1 ("G1", inferred): no handshake, DELETE_KEY = 7, APPEND..CANCEL_WAIT.
  kV2_2,   // PyTorch 2.2 and later ("G2"): starts with VALIDATE, adds PING, queues and LIST.
};

// One operation, independent of its numbering in a dialect.
enum class Op : std::uint8_t {
  kValidate,
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kGetNumKeys,
  kWatchKey,
  kDeleteKey,
  kAppend,
  kMultiGet,
  kMultiSet,
  kCancelWait,
  kPing,
  kQueuePush,
  kQueuePop,
  kQueueLen,
  kList,
};

// The magic number a 2.2+ client sends after VALIDATE (bytes CE F7 85 3C on the wire).
inline constexpr std::uint32_t kValidationMagic = 0x3C85F7CE;

// Reply bytes of CHECK and WAIT/CANCEL_WAIT.
inline constexpr std::uint8_t kCheckReady = 0;
inline constexpr std::uint8_t kCheckNotReady = 1;
inline constexpr std::uint8_t kStopWaiting = 0;
inline constexpr std::uint8_t kWaitCanceled = 1;

// Types of the unsolicited messages pushed to a 1.13 WATCH_KEY connection.
inline constexpr std::uint8_t kWatchKeyUpdated = 0;
inline constexpr std::uint8_t kWatchKeyCreated = 1;
inline constexpr std::uint8_t kWatchKeyDeleted = 2;
inline constexpr std::uint8_t kWatchCallbackRegistered = 3;

// Bounds on what one request may carry; a request over any of them is a parse error. The defaults
// are those of PyTorch's libuv server.
struct Limits {
  std::size_t max_key_bytes = 8 * 1024;
  std::size_t max_value_bytes = 8 * 1024 * 1024;
  std::size_t max_keys_per_request = 128 * 1024;
  std::size_t max_request_bytes = 32 * 1024 * 1024;
};

// A decoded request. Which fields are used depends on `op`:
//   SET, APPEND, QUEUE_PUSH: keys[0], values[0]     COMPARE_SET: keys[0], values = {expected,
//   desired} GET, DELETE_KEY, WATCH_KEY, QUEUE_POP, QUEUE_LEN: keys[0] CHECK, WAIT, MULTI_GET: keys
//   MULTI_SET: keys, values (same length) ADD: keys[0], number = delta VALIDATE, PING: number = the
//   uint32 sent GETNUMKEYS, CANCEL_WAIT, LIST: nothing
struct Request {
  Op op = Op::kGetNumKeys;
  std::vector<std::string> keys;
  std::vector<std::string> values;
  std::int64_t number = 0;

  bool operator==(const Request&) const = default;
};

// The opcode byte of `op` in `dialect`, or nullopt when the dialect does not have it.
std::optional<std::uint8_t> opcode_of(Op op, Dialect dialect);
// The operation that `byte` means in `dialect`, or nullopt for an unknown opcode.
std::optional<Op> op_of(std::uint8_t byte, Dialect dialect);
// A short upper-case name ("SET", "MULTI_GET") for messages.
std::string_view op_name(Op op);

enum class ParseStatus { kIncomplete, kComplete, kError };

struct ParseResult {
  ParseStatus status = ParseStatus::kIncomplete;
  std::size_t consumed = 0;  // bytes of the request when kComplete, else 0
  std::string error;         // one line when kError
};

// Decodes one request from the front of `bytes`. kIncomplete means more bytes are needed (nothing
// is consumed: call again with the same front and more bytes appended); kError means the stream
// is malformed or over `limits` and the connection should be closed.
ParseResult parse_request(std::string_view bytes, Dialect dialect, const Limits& limits,
                          Request& out);

// How a connection's first bytes decide its dialect (docs/rendezvous.md, "Dialects"): VALIDATE with
// the magic number means kV2_2 and the 5 handshake bytes are consumed; anything else means `legacy`
// (kV1_13 unless the server was told to expect 2.1 clients) and nothing is consumed.
struct DialectDetection {
  bool complete = false;  // false: fewer than the 5 bytes needed to tell
  Dialect dialect = Dialect::kV1_13;
  std::size_t consumed = 0;
};
DialectDetection detect_dialect(std::string_view first_bytes, Dialect legacy);

// Encoders, appending to `out` in the wire's little-endian layout.
void append_u8(std::string& out, std::uint8_t value);
void append_u32(std::string& out, std::uint32_t value);
void append_i64(std::string& out, std::int64_t value);
void append_u64(std::string& out, std::uint64_t value);
void append_bytes(std::string& out, std::string_view bytes);  // u64 length, then the bytes

// Appends the request as a client of `dialect` sends it. Returns false (appending nothing) when the
// dialect lacks the operation.
bool encode_request(const Request& request, Dialect dialect, std::string& out);

// Reads a little-endian integer from the first bytes of `bytes` (which must be long enough).
std::uint32_t load_u32(std::string_view bytes);
std::uint64_t load_u64(std::string_view bytes);

}  // namespace acc::rendezvous
