#include "acc/common/endpoint.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

#include "acc/common/error.h"
#include "acc/common/strings.h"

namespace acc {
namespace {

// RFC 1123 host names (letters, digits, '-', '.'), plus '_' that clusters use in node names.
bool valid_host_name(std::string_view host) {
  return !host.empty() && host.front() != '-' && host.front() != '.' &&
         std::all_of(host.begin(), host.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
         });
}

[[noreturn]] void bad(std::string_view flag, std::string_view text, std::string_view why) {
  throw ConfigError(
      detail::concat(flag, " ", text, ": ", why, "; write host:port, IPv4:port or [IPv6]:port"));
}

int parse_port(std::string_view digits, std::string_view flag, std::string_view text) {
  const std::optional<int> port = parse_int(digits);
  if (!port || *port < 1 || *port > 65535)
    bad(flag, text, detail::concat("the port '", digits, "' is not 1-65535"));
  return *port;
}

}  // namespace

bool is_ipv6_literal(std::string_view host) {
  in6_addr address{};
  return !host.empty() && host.find(':') != std::string_view::npos &&
         ::inet_pton(AF_INET6, std::string(host).c_str(), &address) == 1;
}

namespace {
std::string bracketed(std::string_view host) {
  return is_ipv6_literal(host) ? "[" + std::string(host) + "]" : std::string(host);
}
}  // namespace

std::string format_endpoint(std::string_view host, int port) {
  return bracketed(host) + ":" + std::to_string(port);
}

std::string Endpoint::to_string() const {
  return port == 0 ? bracketed(host) : format_endpoint(host, port);
}

Endpoint parse_endpoint(std::string_view text, int default_port, std::string_view flag) {
  Endpoint endpoint;
  std::optional<std::string_view> port_text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) bad(flag, text, "no ']' closes the IPv6 address");
    endpoint.host = std::string(text.substr(1, close - 1));
    if (!is_ipv6_literal(endpoint.host))
      bad(flag, text, "'" + endpoint.host + "' in brackets is not an IPv6 address");
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') bad(flag, text, "expected ':port' after ']'");
      port_text = rest.substr(1);
    }
  } else if (std::count(text.begin(), text.end(), ':') > 1) {
    if (!is_ipv6_literal(text)) {
      const size_t colon = text.rfind(':');
      bad(flag, text,
          detail::concat("not an IPv6 address; with a port, put the address in brackets: [",
                         text.substr(0, colon), "]:", text.substr(colon + 1)));
    }
    endpoint.host = std::string(text);
  } else {
    const size_t colon = text.find(':');
    endpoint.host = std::string(text.substr(0, colon));
    if (colon != std::string_view::npos) port_text = text.substr(colon + 1);
    if (endpoint.host.empty()) bad(flag, text, "no host");
    if (!valid_host_name(endpoint.host))
      bad(flag, text, "'" + endpoint.host + "' is not a host name or IP address");
  }
  if (port_text) {
    endpoint.port = parse_port(*port_text, flag, text);
  } else {
    if (default_port == 0) bad(flag, text, "no port");
    endpoint.port = default_port;
  }
  return endpoint;
}

std::string parse_host(std::string_view text, std::string_view flag) {
  std::string_view host = text;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (is_ipv6_literal(host)) return std::string(host);
  ACC_CHECK(host.find_first_of(":[]") == std::string_view::npos, ConfigError, flag, " ", text,
            ": a host alone, without a port (the port has its own flag); IPv6 as ::1 or [::1]");
  ACC_CHECK(valid_host_name(host), ConfigError, flag, " ", text, ": not a host name or IP address");
  return std::string(host);
}

std::vector<Endpoint> parse_endpoint_list(std::string_view text, int default_port,
                                          std::string_view flag) {
  std::vector<Endpoint> endpoints;
  for (const std::string& item : split(text, ','))
    endpoints.push_back(parse_endpoint(trim(item), default_port, flag));
  ACC_CHECK(!endpoints.empty(), ConfigError, flag, " ", text,
            ": no endpoint; write host:port[,host:port...]");
  return endpoints;
}

bool is_loopback_address(const std::string& address) {
  in_addr v4{};
  if (::inet_pton(AF_INET, address.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, address.c_str(), &v6) != 1) return false;
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

}  // namespace acc
