#include "acc/common/endpoint.h"

#include <gtest/gtest.h>

#include <string>

#include "acc/common/error.h"

namespace acc {
namespace {

struct Accepted {
  const char* text;
  const char* host;
  int port;
};

// Every spelling users give a server, with default port 29400.
const Accepted kAccepted[] = {
    {"node1", "node1", 29400},
    {"node1:1234", "node1", 1234},
    {"node-1.cluster.local:29500", "node-1.cluster.local", 29500},
    {"gpu_node_03", "gpu_node_03", 29400},
    {"10.0.0.1", "10.0.0.1", 29400},
    {"10.0.0.1:65535", "10.0.0.1", 65535},
    {"localhost:1", "localhost", 1},
    {"[::1]:29500", "::1", 29500},
    {"[::1]", "::1", 29400},
    {"::1", "::1", 29400},
    {"[fe80::1:2]:80", "fe80::1:2", 80},
    {"fe80::1:2", "fe80::1:2", 29400},
    {"::", "::", 29400},
    {"[::ffff:10.0.0.1]:7", "::ffff:10.0.0.1", 7},
};

TEST(EndpointTest, ParsesHostNamesIpv4AndIpv6WithAndWithoutPorts) {
  for (const Accepted& c : kAccepted) {
    SCOPED_TRACE(c.text);
    const Endpoint endpoint = parse_endpoint(c.text, 29400, "--rdzv_endpoint");
    EXPECT_EQ(endpoint.host, c.host);
    EXPECT_EQ(endpoint.port, c.port);
  }
}

struct Refused {
  const char* text;
  const char* message;  // the whole line, so the flag and the fix are both checked
};

const Refused kRefused[] = {
    {"", "--rdzv_endpoint : no host; write host:port, IPv4:port or [IPv6]:port"},
    {":29400", "--rdzv_endpoint :29400: no host; write host:port, IPv4:port or [IPv6]:port"},
    {"node1:",
     "--rdzv_endpoint node1:: the port '' is not 1-65535; write host:port, IPv4:port or "
     "[IPv6]:port"},
    {"node1:0",
     "--rdzv_endpoint node1:0: the port '0' is not 1-65535; write host:port, "
     "IPv4:port or [IPv6]:port"},
    {"node1:65536",
     "--rdzv_endpoint node1:65536: the port '65536' is not 1-65535; write "
     "host:port, IPv4:port or [IPv6]:port"},
    {"node1:abc",
     "--rdzv_endpoint node1:abc: the port 'abc' is not 1-65535; write host:port, "
     "IPv4:port or [IPv6]:port"},
    {"node1:-5",
     "--rdzv_endpoint node1:-5: the port '-5' is not 1-65535; write host:port, "
     "IPv4:port or [IPv6]:port"},
    {"::1:29500",
     "--rdzv_endpoint ::1:29500: not an IPv6 address; with a port, put the address "
     "in brackets: [::1]:29500; write host:port, IPv4:port or [IPv6]:port"},
    {"[::1",
     "--rdzv_endpoint [::1: no ']' closes the IPv6 address; write host:port, IPv4:port "
     "or [IPv6]:port"},
    {"[node1]:80",
     "--rdzv_endpoint [node1]:80: 'node1' in brackets is not an IPv6 address; "
     "write host:port, IPv4:port or [IPv6]:port"},
    {"[::1]29500",
     "--rdzv_endpoint [::1]29500: expected ':port' after ']'; write host:port, "
     "IPv4:port or [IPv6]:port"},
    {"no de:80",
     "--rdzv_endpoint no de:80: 'no de' is not a host name or IP address; write "
     "host:port, IPv4:port or [IPv6]:port"},
    {"-node:80",
     "--rdzv_endpoint -node:80: '-node' is not a host name or IP address; write "
     "host:port, IPv4:port or [IPv6]:port"},
};

TEST(EndpointTest, RefusesBadInputWithOneLineNamingTheFlag) {
  for (const Refused& c : kRefused) {
    SCOPED_TRACE(c.text);
    try {
      parse_endpoint(c.text, 29400, "--rdzv_endpoint");
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()), c.message);
    }
  }
}

TEST(EndpointTest, WithoutADefaultPortThePortIsRequired) {
  EXPECT_EQ(parse_endpoint("h:5", 0, "--x").port, 5);
  EXPECT_THROW(parse_endpoint("h", 0, "--x"), ConfigError);
  EXPECT_THROW(parse_endpoint("[::1]", 0, "--x"), ConfigError);
}

TEST(EndpointTest, ParsesACommaListOfEndpoints) {
  const auto endpoints = parse_endpoint_list("e1:1, [::1]:2,e3", 2379, "--rdzv_endpoint");
  ASSERT_EQ(endpoints.size(), 3u);
  EXPECT_EQ(endpoints[0], (Endpoint{"e1", 1}));
  EXPECT_EQ(endpoints[1], (Endpoint{"::1", 2}));
  EXPECT_EQ(endpoints[2], (Endpoint{"e3", 2379}));
  EXPECT_THROW(parse_endpoint_list("", 2379, "--rdzv_endpoint"), ConfigError);
  EXPECT_THROW(parse_endpoint_list("e1,,e2", 2379, "--rdzv_endpoint"), ConfigError);
}

TEST(EndpointTest, FormatsIpv6InBracketsSoTheTextParsesBack) {
  EXPECT_EQ(format_endpoint("::1", 29500), "[::1]:29500");
  EXPECT_EQ(format_endpoint("node1", 29500), "node1:29500");
  EXPECT_EQ(format_endpoint("0.0.0.0", 0), "0.0.0.0:0");
  EXPECT_EQ((Endpoint{"::1", 0}.to_string()), "[::1]");
  for (const Accepted& c : kAccepted) {
    SCOPED_TRACE(c.text);
    const Endpoint endpoint = parse_endpoint(c.text, 29400, "--x");
    EXPECT_EQ(parse_endpoint(endpoint.to_string(), 0, "--x"), endpoint);
  }
}

TEST(EndpointTest, ParsesAHostAloneAndRefusesOneWithAPort) {
  EXPECT_EQ(parse_host("node1", "--master_addr"), "node1");
  EXPECT_EQ(parse_host("10.0.0.1", "--master_addr"), "10.0.0.1");
  EXPECT_EQ(parse_host("::1", "--master_addr"), "::1");
  EXPECT_EQ(parse_host("[::1]", "--master_addr"), "::1");
  EXPECT_EQ(parse_host("::", "--host"), "::");
  auto message = [](const char* text) {
    try {
      parse_host(text, "--master_addr");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(message("node1:29500"),
            "--master_addr node1:29500: a host alone, without a port (the port has its own flag); "
            "IPv6 as ::1 or [::1]");
  EXPECT_EQ(message("[::1]:29500"),
            "--master_addr [::1]:29500: a host alone, without a port (the port has its own flag); "
            "IPv6 as ::1 or [::1]");
  EXPECT_EQ(message(""), "--master_addr : not a host name or IP address");
  EXPECT_EQ(message("a b"), "--master_addr a b: not a host name or IP address");
}

TEST(EndpointTest, TellsIpv6LiteralsFromNames) {
  EXPECT_TRUE(is_ipv6_literal("::1"));
  EXPECT_TRUE(is_ipv6_literal("fe80::1"));
  EXPECT_FALSE(is_ipv6_literal("10.0.0.1"));
  EXPECT_FALSE(is_ipv6_literal("localhost"));
  EXPECT_FALSE(is_ipv6_literal("[::1]"));
  EXPECT_FALSE(is_ipv6_literal(""));
}

}  // namespace
}  // namespace acc
