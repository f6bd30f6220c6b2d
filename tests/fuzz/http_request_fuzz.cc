// The status server's and the health check's HTTP requests (launcher/src/status/http_server.cc):
// Boost.Beast's request parser set up as each connection's is (an empty body, the 8 KiB header
// limit), fed the bytes as a client would send them, in pieces whose sizes the first byte picks;
// then path_of_target on the target of a request it accepted, which picks the handler.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

// clang-format off
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
// clang-format on

#include "status/http_server.h"

namespace http = boost::beast::http;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // As Client::start() in http_server.cc.
  constexpr std::size_t kMaxRequestBytes = 8192;
  const std::size_t piece = 1 + data[0] % 64;
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  http::request_parser<http::empty_body> parser;
  parser.header_limit(kMaxRequestBytes);
  // Beast's reader keeps what the parser has not taken yet and appends the next read to it.
  std::string pending;
  boost::beast::error_code ec;
  while (!parser.is_done() && !ec) {
    if (bytes.empty()) {
      parser.put_eof(ec);
      break;
    }
    const std::size_t take = std::min(piece, bytes.size());
    pending.append(bytes.substr(0, take));
    bytes.remove_prefix(take);
    const std::size_t used = parser.put(boost::asio::buffer(pending), ec);
    if (ec == http::error::need_more) ec = {};
    pending.erase(0, used);
  }
  if (ec || !parser.is_done()) return 0;
  const auto target = parser.get().target();
  const std::string path =
      acc::launcher::path_of_target(std::string_view(target.data(), target.size()));
  if (path.size() > target.size()) __builtin_trap();
  acc::launcher::http_reply(200, "text/plain", path);
  return 0;
}
