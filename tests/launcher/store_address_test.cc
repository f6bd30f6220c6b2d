#include "nodes/store_address.h"

#include <gtest/gtest.h>

namespace acc::launcher {
namespace {

// A node with one interface at 10.0.0.2 that reaches a rendezvous endpoint at 10.0.0.1.
AddressFacts node(std::vector<std::string> hostname_addresses) {
  AddressFacts facts;
  facts.hostname = "host-b";
  facts.hostname_addresses = std::move(hostname_addresses);
  facts.interface_addresses = {"10.0.0.2", "fd00::2"};
  facts.rendezvous_host = "10.0.0.1";
  facts.route_source = "10.0.0.2";
  return facts;
}

TEST(StoreAddressTest, AHostnameThatResolvesToThisNodeIsPublishedAsItIs) {
  const StoreAddress chosen = choose_store_address(node({"10.0.0.2"}));
  EXPECT_EQ(chosen.address, "host-b");
  EXPECT_EQ(chosen.why, "");
  EXPECT_EQ(choose_store_address(node({"fd00::2", "10.0.0.2"})).address, "host-b");
}

TEST(StoreAddressTest, ALoopbackHostnameGivesWayToTheRouteToTheRendezvous) {
  const StoreAddress chosen = choose_store_address(node({"127.0.1.1"}));
  EXPECT_EQ(chosen.address, "10.0.0.2");
  EXPECT_EQ(chosen.why,
            "the hostname host-b resolves to 127.0.1.1 here, a loopback address; the workers' "
            "store is published as 10.0.0.2, the address this node reaches the rendezvous "
            "endpoint 10.0.0.1 from (--local_addr sets it)");
}

TEST(StoreAddressTest, AHostnameThatAlsoResolvesToLoopbackIsNotPublished) {
  // Which of the two another node's resolver gives is not known here.
  EXPECT_EQ(choose_store_address(node({"10.0.0.2", "127.0.1.1"})).address, "10.0.0.2");
  EXPECT_EQ(choose_store_address(node({"::1"})).address, "10.0.0.2");
}

TEST(StoreAddressTest, AHostnameOfAnotherMachineOrOfNoneIsNotPublished) {
  const StoreAddress elsewhere = choose_store_address(node({"192.0.2.7"}));
  EXPECT_EQ(elsewhere.address, "10.0.0.2");
  EXPECT_NE(elsewhere.why.find("the hostname host-b resolves to 192.0.2.7, not an address of "
                               "this node;"),
            std::string::npos)
      << elsewhere.why;
  const StoreAddress unresolved = choose_store_address(node({}));
  EXPECT_EQ(unresolved.address, "10.0.0.2");
  EXPECT_EQ(unresolved.why.rfind("the hostname host-b does not resolve here;", 0), 0u)
      << unresolved.why;
}

TEST(StoreAddressTest, AnIpv6RouteIsPublishedAsItsAddress) {
  AddressFacts facts = node({"127.0.1.1"});
  facts.rendezvous_host = "fd00::1";
  facts.route_source = "fd00::2";
  EXPECT_EQ(choose_store_address(facts).address, "fd00::2");
}

TEST(StoreAddressTest, TheRendezvousHostUnderALoopbackNameFallsBackToTheFirstInterface) {
  // Node 0 serves the rendezvous as "host-a", which its own /etc/hosts maps to 127.0.1.1 (the
  // others resolve it through DNS): its route there is loopback and tells nothing.
  AddressFacts facts = node({"127.0.1.1"});
  facts.rendezvous_host = "host-a";
  facts.route_source = "127.0.1.1";
  const StoreAddress chosen = choose_store_address(facts);
  EXPECT_EQ(chosen.address, "10.0.0.2");
  EXPECT_NE(chosen.why.find("the first address of this node's interfaces"), std::string::npos)
      << chosen.why;
}

TEST(StoreAddressTest, AJobOnOneMachineKeepsALoopbackHostname) {
  // --rdzv_endpoint 127.0.0.1 or localhost: every node runs here, where loopback reaches.
  for (const std::string rendezvous : {"127.0.0.1", "localhost", "::1"}) {
    AddressFacts facts = node({"127.0.1.1"});
    facts.rendezvous_host = rendezvous;
    facts.route_source = rendezvous == "::1" ? "::1" : "127.0.0.1";
    const StoreAddress chosen = choose_store_address(facts);
    EXPECT_EQ(chosen.address, "host-b") << rendezvous;
    EXPECT_EQ(chosen.why, "") << rendezvous;
  }
  // ... but not a hostname that does not resolve: the loopback address the route took.
  AddressFacts facts = node({});
  facts.rendezvous_host = "127.0.0.1";
  facts.route_source = "127.0.0.1";
  EXPECT_EQ(choose_store_address(facts).address, "127.0.0.1");
}

TEST(StoreAddressTest, WithoutAnyOtherAddressTheHostnameStays) {
  AddressFacts facts = node({"127.0.1.1"});
  facts.interface_addresses.clear();
  facts.route_source.clear();
  facts.rendezvous_host = "host-a";
  const StoreAddress chosen = choose_store_address(facts);
  EXPECT_EQ(chosen.address, "host-b");
  EXPECT_EQ(chosen.why, "");
}

TEST(StoreAddressTest, NoRouteToTheRendezvousFallsBackToTheFirstInterface) {
  AddressFacts facts = node({"127.0.1.1"});
  facts.route_source.clear();
  EXPECT_EQ(choose_store_address(facts).address, "10.0.0.2");
}

TEST(StoreAddressTest, LoopbackAddressesAreTold) {
  EXPECT_TRUE(is_loopback_address("127.0.0.1"));
  EXPECT_TRUE(is_loopback_address("127.0.1.1"));
  EXPECT_TRUE(is_loopback_address("::1"));
  EXPECT_TRUE(is_loopback_address("::ffff:127.0.1.1"));
  EXPECT_FALSE(is_loopback_address("10.0.0.2"));
  EXPECT_FALSE(is_loopback_address("fd00::2"));
  EXPECT_FALSE(is_loopback_address("localhost"));  // a name, not an address
}

TEST(StoreAddressTest, TheFactsOfThisMachineRouteLoopbackOverLoopback) {
  const AddressFacts facts = read_address_facts("localhost", "127.0.0.1");
  EXPECT_EQ(facts.route_source, "127.0.0.1");
  EXPECT_FALSE(facts.hostname_addresses.empty());
  for (const std::string& address : facts.interface_addresses)
    EXPECT_FALSE(is_loopback_address(address)) << address;
  const AddressFacts none = read_address_facts("", "");
  EXPECT_TRUE(none.hostname_addresses.empty());
  EXPECT_EQ(none.route_source, "");
}

TEST(StoreAddressTest, TheInterfaceOfAnAddressIsNamedUnlessItIsLoopback) {
  for (const std::string& address : read_address_facts("", "").interface_addresses) {
    const std::string name = worker_interface(address);
    EXPECT_FALSE(name.empty()) << address;
    EXPECT_NE(name, "lo") << address;
  }
  EXPECT_EQ(worker_interface("127.0.0.1"), "");     // lo: every node runs here
  EXPECT_EQ(worker_interface("203.0.113.77"), "");  // TEST-NET-3: no interface holds it
  EXPECT_EQ(worker_interface("host-a"), "");
  EXPECT_EQ(worker_interface(""), "");
}

TEST(StoreAddressTest, WorkersGetASocketAddressOnlyWhereTheHostnameWouldNotBringTheOthers) {
  // Gloo's own choice, the hostname's address, serves: nothing is set.
  EXPECT_EQ(worker_socket_address(node({"10.0.0.2"}), ""), "");
  EXPECT_EQ(worker_socket_address(node({"10.0.0.2"}), "10.0.0.2"), "");
  // Debian's 127.0.1.1: the route to the host every node reaches, or --local_addr.
  EXPECT_EQ(worker_socket_address(node({"127.0.1.1"}), ""), "10.0.0.2");
  EXPECT_EQ(worker_socket_address(node({"127.0.1.1"}), "fd00::2"), "fd00::2");
  EXPECT_EQ(worker_socket_address(node({}), ""), "10.0.0.2");
  // Every node on this machine (node 0 at 127.0.0.1): loopback serves them all.
  AddressFacts local = node({"127.0.1.1"});
  local.rendezvous_host = "127.0.0.1";
  local.route_source = "127.0.0.1";
  EXPECT_EQ(worker_socket_address(local, ""), "");
}

TEST(StoreAddressTest, TheWorkersInterfaceIsTheOneThatHoldsTheirAddressUnlessItIsLoopback) {
  // A hostname that resolves to nothing, and --local_addr at one of this node's interfaces.
  for (const std::string& address : read_address_facts("", "").interface_addresses) {
    const std::string name = worker_socket_interface("no-such-host.invalid", "127.0.0.1", address);
    EXPECT_EQ(name, worker_interface(address)) << address;
    EXPECT_FALSE(name.empty()) << address;
  }
  // An address on a loopback interface: every node runs here, nothing to name.
  EXPECT_EQ(worker_socket_interface("no-such-host.invalid", "127.0.0.1", "127.0.0.1"), "");
  // --local_addr that no interface holds: nothing to name.
  EXPECT_EQ(worker_socket_interface("no-such-host.invalid", "127.0.0.1", "203.0.113.77"), "");
}

// A node with 10.0.0.2 and fd00::2 on its interfaces, and lo's 127.0.0.1 and ::1.
ListenFacts clients_given(std::string host, std::vector<std::string> resolved,
                          bool only_this_machine) {
  ListenFacts facts;
  facts.host = std::move(host);
  facts.resolved = std::move(resolved);
  facts.own = {"127.0.0.1", "::1", "10.0.0.2", "fd00::2"};
  facts.only_this_machine = only_this_machine;
  return facts;
}

using Hosts = std::vector<std::string>;

TEST(StoreListenTest, ASingleNodeJobListensOnLoopbackOnly) {
  for (const char* host : {"127.0.0.1", "localhost"}) {
    const StoreListen listen = choose_store_listen(clients_given(host, {"127.0.0.1"}, true));
    EXPECT_EQ(listen.hosts, Hosts{"127.0.0.1"}) << host;
    EXPECT_EQ(listen.why, "");
  }
  EXPECT_EQ(choose_store_listen(clients_given("localhost", {"127.0.0.1", "::1"}, true)).hosts,
            (Hosts{"127.0.0.1", "::1"}));
}

TEST(StoreListenTest, ASingleNodeJobAtALoopbackHostnameListensThereToo) {
  // Debian's "127.0.1.1 <hostname>": every client resolves it here, so it is loopback alone.
  const StoreListen listen = choose_store_listen(clients_given("host-b", {"127.0.1.1"}, true));
  EXPECT_EQ(listen.hosts, (Hosts{"127.0.0.1", "127.0.1.1"}));
  EXPECT_EQ(listen.why, "");
}

TEST(StoreListenTest, NodeZeroListensOnLoopbackAndTheAddressTheOthersReach) {
  EXPECT_EQ(choose_store_listen(clients_given("10.0.0.2", {"10.0.0.2"}, false)).hosts,
            (Hosts{"127.0.0.1", "10.0.0.2"}));
  EXPECT_EQ(choose_store_listen(clients_given("host-b", {"10.0.0.2", "fd00::2"}, false)).hosts,
            (Hosts{"127.0.0.1", "::1", "10.0.0.2", "fd00::2"}));
  EXPECT_EQ(choose_store_listen(clients_given("fd00::2", {"fd00::2"}, false)).hosts,
            (Hosts{"127.0.0.1", "::1", "fd00::2"}));
}

TEST(StoreListenTest, AnAddressNotOfThisNodeListensOnEveryInterfaceAndSaysWhy) {
  const StoreListen service = choose_store_listen(clients_given("job.svc", {"10.96.0.5"}, false));
  EXPECT_EQ(service.hosts, Hosts{"0.0.0.0"});
  EXPECT_EQ(service.why,
            "the store listens on every interface (0.0.0.0): MASTER_ADDR job.svc resolves to "
            "10.96.0.5, not an address of this node (a service name, NAT, /etc/hosts?), where the "
            "other nodes may reach it at any address of this node's");
  // Even with one node: the clients come to an address this node does not hold.
  EXPECT_EQ(choose_store_listen(clients_given("job.svc", {"10.96.0.5"}, true)).hosts,
            Hosts{"0.0.0.0"});
  EXPECT_EQ(choose_store_listen(clients_given("fd00::9", {"fd00::9"}, false)).hosts, Hosts{"::"});
  EXPECT_NE(choose_store_listen(clients_given("gone", {}, false)).why.find("does not resolve"),
            std::string::npos);
}

TEST(StoreListenTest, ALoopbackHostnameOfSeveralNodesListensOnEveryInterface) {
  // The other nodes resolve the name through their DNS, to an address not known here.
  const StoreListen listen =
      choose_store_listen(clients_given("host-b", {"127.0.1.1", "10.0.0.2"}, false));
  EXPECT_EQ(listen.hosts, Hosts{"0.0.0.0"});
  EXPECT_NE(listen.why.find("resolves to 127.0.1.1 here, a loopback address"), std::string::npos);
}

TEST(StoreListenTest, NoIpv6LoopbackWhereLoHasNone) {
  ListenFacts facts = clients_given("localhost", {"127.0.0.1", "::1"}, true);
  facts.own = {"127.0.0.1", "10.0.0.2"};  // a container without IPv6
  EXPECT_EQ(choose_store_listen(facts).hosts, Hosts{"127.0.0.1"});
}

TEST(StoreListenTest, DescribesTheListeners) {
  EXPECT_EQ(describe_listen({"127.0.0.1"}), "127.0.0.1");
  EXPECT_EQ(describe_listen({"127.0.0.1", "10.0.0.2"}), "127.0.0.1 and 10.0.0.2");
  EXPECT_EQ(describe_listen({"127.0.0.1", "::1", "10.0.0.2"}), "127.0.0.1, ::1 and 10.0.0.2");
  EXPECT_EQ(describe_listen({"::"}), "every interface (::)");
}

}  // namespace
}  // namespace acc::launcher
