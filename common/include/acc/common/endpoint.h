#pragma once

// host[:port] as users write it on every flag that names a server (--rdzv_endpoint,
// --master_addr, etcd members, `rendezvous serve`): one grammar, one error message.
//
//   node1             node1, the default port        host names and IPv4 addresses
//   node1:29400       node1, 29400
//   10.0.0.1:29400    10.0.0.1, 29400
//   [fe80::1]:29400   fe80::1, 29400                 IPv6 with a port: in brackets (RFC 3986)
//   [::1]  ::1        ::1, the default port          IPv6 without a port: brackets optional
//
// An unbracketed text with two or more colons is an IPv6 address only if it reads as one whole;
// "::1:29400" does not (29400 is not a 16-bit hex group) and is refused with the bracketed
// spelling to use, rather than guessed at. Pure functions; thread-safe.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace acc {

struct Endpoint {
  std::string host;  // a name, an IPv4 address or an IPv6 address, without brackets
  int port = 0;      // 1-65535, or the default given to parse_endpoint (0 when none)

  // "host:port", with IPv6 addresses in brackets: "[::1]:29400". Without a port (0): the host
  // alone, bracketed if IPv6.
  std::string to_string() const;
  bool operator==(const Endpoint& other) const { return host == other.host && port == other.port; }
};

// Parses one endpoint; `default_port` (0: none) stands in for a missing port. Throws ConfigError
// "<flag> <text>: <what is wrong>; <how to write it>" for an empty host, a bad host name, a port
// that is not 1-65535, a missing port when `default_port` is 0, or an unbracketed "::1:29400".
Endpoint parse_endpoint(std::string_view text, int default_port, std::string_view flag);

// A host alone (--master_addr, `rendezvous serve --host`): a name, an IPv4 address, or an IPv6
// address with or without brackets; returned without brackets. Throws ConfigError naming `flag`
// for an empty or malformed host, or one that carries a port ("give the port with its own flag").
std::string parse_host(std::string_view text, std::string_view flag);

// A comma-separated list of endpoints ("h1:2379,[::1]:2379,h3"), each parsed as parse_endpoint.
// Throws ConfigError for an empty list or any bad item.
std::vector<Endpoint> parse_endpoint_list(std::string_view text, int default_port,
                                          std::string_view flag);

// "host:port" for messages and keys, IPv6 hosts in brackets: ("::1", 0) -> "[::1]:0".
std::string format_endpoint(std::string_view host, int port);

// True when `host` is an IPv6 address literal ("::1", "fe80::1"), without brackets.
bool is_ipv6_literal(std::string_view host);

// True for a numeric loopback address (127.0.0.0/8, ::1, ::ffff:127.x); false for a name. Pure.
bool is_loopback_address(const std::string& address);

}  // namespace acc
