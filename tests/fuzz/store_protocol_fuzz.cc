// The store protocol in both of PyTorch's framings: arbitrary bytes go through dialect detection
// and the incremental parser as a connection would deliver them (the first byte picks the legacy
// dialect a connection without a handshake is read as: 1.13's or 2.1's; 2.2's VALIDATE
// handshake is detected from the bytes), every decoded request is applied to a StoreState, and
// re-encoding a decoded request must give back the bytes it came from.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "acc/rendezvous/protocol.h"
#include "store_state.h"

namespace {

using namespace acc::rendezvous;

class NullSink : public detail::ReplySink {
 public:
  std::string* buffer_for(detail::ConnectionId) override {
    if (buffer_.size() > (1 << 20)) buffer_.clear();
    return &buffer_;
  }

 private:
  std::string buffer_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  Limits limits;
  limits.max_key_bytes = 64;
  limits.max_value_bytes = 256;
  limits.max_keys_per_request = 16;
  limits.max_request_bytes = 4096;
  Dialect legacy = data[0] % 2 == 0 ? Dialect::kV1_13 : Dialect::kV2_1;
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);

  DialectDetection detection = detect_dialect(bytes, legacy);
  if (!detection.complete) return 0;
  bytes.remove_prefix(detection.consumed);
  detail::StoreState state(64);
  NullSink sink;
  // Two connections take turns, so waits of one are woken by writes of the other.
  detail::ConnectionId connection = 1;
  while (!bytes.empty()) {
    Request request;
    ParseResult result = parse_request(bytes, detection.dialect, limits, request);
    if (result.status != ParseStatus::kComplete) break;
    if (result.consumed == 0 || result.consumed > bytes.size()) std::abort();
    std::string encoded;
    if (!encode_request(request, detection.dialect, encoded)) std::abort();
    if (encoded != bytes.substr(0, result.consumed)) std::abort();
    std::string error;
    if (!state.apply(connection, detection.dialect, request, sink, error)) {
      state.drop_connection(connection);
    }
    connection = 3 - connection;
    bytes.remove_prefix(result.consumed);
  }
  state.drop_connection(1);
  if (state.num_pending_waits() != 0 && bytes.empty()) {
    // Only connection 2's waits may remain.
    state.drop_connection(2);
    if (state.num_pending_waits() != 0) std::abort();
  }
  return 0;
}
