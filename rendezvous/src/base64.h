#pragma once

// Standard base64 (RFC 4648, with padding): etcd's JSON gateway carries keys and values as bytes,
// which protobuf's JSON mapping writes in base64.

#include <optional>
#include <string>
#include <string_view>

namespace acc::rendezvous {

std::string base64_encode(std::string_view bytes);
// nullopt when `text` is not padded base64.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace acc::rendezvous
