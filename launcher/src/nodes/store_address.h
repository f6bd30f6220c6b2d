#pragma once

// The address an elastic round's node 0 publishes for its workers' store: the workers' MASTER_ADDR
// on every node. Without --local_addr it is this machine's hostname, as torchrun's, unless that
// name would not bring the other nodes here: it resolves to a loopback address (Debian's and
// Ubuntu's "127.0.1.1 <hostname>" line in /etc/hosts), to no address of this node's interfaces,
// or to nothing. Then it is the address this node reaches the rendezvous endpoint from: the
// network every node already reaches the rendezvous over. docs/rendezvous.md, "The workers'
// store".

#include <string>
#include <vector>

#include "acc/common/endpoint.h"

struct sockaddr;

namespace acc::rendezvous {
struct StoreServerOptions;
}

namespace acc::launcher {

struct LaunchPlan;

// What the choice is made from, as read on this node (read_address_facts) or given by a test.
// Addresses are numeric text ("10.0.0.1", "fd00::2").
struct AddressFacts {
  std::string hostname;
  std::vector<std::string> hostname_addresses;   // what the hostname resolves to here; empty: none
  std::vector<std::string> interface_addresses;  // this node's, on interfaces that are up, without
                                                 // loopback and IPv6 link-local ones; IPv4 first
  std::string rendezvous_host;  // as the user named it: --rdzv_endpoint, or the first etcd member
  // The source address of this node's packets to rendezvous_host (a connected UDP socket's
  // getsockname); empty when it does not resolve or has no route.
  std::string route_source;
};

struct StoreAddress {
  std::string address;  // a name or a numeric address
  std::string why;      // one line when the hostname was not used; empty when it was
};

// The address to publish. The hostname stays when it resolves to one of interface_addresses and
// to no loopback address (users see their host names). Otherwise: route_source when it is not
// loopback; when this node reaches the rendezvous over loopback, the first interface address (it
// serves the rendezvous under a name that is loopback here), or, for a rendezvous endpoint named
// as this machine on purpose (127.0.0.1, ::1, localhost: every node runs here), the hostname if
// it resolves to loopback, else route_source or 127.0.0.1. The hostname when nothing better is
// known. Pure.
StoreAddress choose_store_address(const AddressFacts& facts);

// Reads the facts on this machine: resolves `hostname` and `rendezvous_host` (getaddrinfo, which
// may wait for DNS as long as the resolver's own timeout), lists the interfaces (getifaddrs), and
// connects a UDP socket to the rendezvous host, which sends nothing. Never throws: what cannot be
// read is left empty.
AddressFacts read_address_facts(const std::string& hostname, const std::string& rendezvous_host);

// Whether the hostname brings the other nodes here: it resolves to one of this node's interface
// addresses and to no loopback address. Pure.
bool hostname_reaches_here(const AddressFacts& facts);

// The address this node's workers should take for their own sockets where Gloo's choice, the
// address the hostname resolves to, would not bring the other nodes here: `local_addr`
// (--local_addr) when given, else the address choose_store_address publishes from the same
// facts. Empty where the hostname does, or where every node runs on this machine. Pure.
std::string worker_socket_address(const AddressFacts& facts, const std::string& local_addr);

// The workers' GLOO_SOCKET_IFNAME on a node of a multi-node job: worker_interface of
// worker_socket_address(read_address_facts(hostname, peer_host), local_addr), where `peer_host`
// is the host every node reaches (node 0's --master_addr, the rendezvous endpoint). "" when none
// is needed. May wait for DNS as read_address_facts. Never throws.
std::string worker_socket_interface(const std::string& hostname, const std::string& peer_host,
                                    const std::string& local_addr);

// The interface of this node that holds `address` (numeric text), as a GLOO_SOCKET_IFNAME: ""
// where none does, and where a loopback interface does (an address of lo, or of an alias such as
// lo:1, is one only this machine reaches: every node of the job runs here, where Gloo's own
// choice serves). Never throws.
std::string worker_interface(const std::string& address);

// is_loopback_address (a numeric loopback address) is common's: acc/common/endpoint.h.

// A host named as this machine on purpose (a loopback literal, localhost): where a loopback
// address is no /etc/hosts trap. Pure.
bool names_this_machine(const std::string& host);

// Where a store listens (docs/launch.md, "Where the stores listen"): loopback, which this node's
// own launcher and workers reach it on, plus each address of this node's that the host its clients
// are given (MASTER_ADDR, the rendezvous endpoint's host) resolves to; every interface where that
// host brings the clients to no address of this node's (a Kubernetes service name, NAT, a name
// that resolves to nothing here, or, with other machines in the job, to a loopback address: the
// others resolve it otherwise).
struct ListenFacts {
  std::string host;                      // as the clients are given it
  std::string named_as = "MASTER_ADDR";  // what messages call host
  std::vector<std::string> resolved;     // what it resolves to here, numeric; empty: nothing
  std::vector<std::string> own;          // this node's interface addresses, numeric
  bool only_this_machine = false;        // every client runs here (one node, or a localhost job)
};

struct StoreListen {
  std::vector<std::string> hosts;  // numeric addresses; "0.0.0.0" or "::" alone for every interface
  std::string why;                 // one line when it is every interface; empty otherwise
};

// The addresses to listen on, as above. Where every client runs here, a loopback address the
// host resolves to (Debian's "127.0.1.1 <hostname>") is one of them. IPv6 loopback (::1) only
// where the host resolves to an IPv6 address. Pure.
StoreListen choose_store_listen(const ListenFacts& facts);

// choose_store_listen of `host`, resolved here (getaddrinfo: may wait for DNS), and this node's
// interface addresses (getifaddrs). Never throws.
StoreListen store_listen_for(const std::string& host, bool only_this_machine,
                             const std::string& named_as = "MASTER_ADDR");

// Listens where `listen` says: options.host and options.more_hosts; prints listen.why, if any, as
// one info line (--quiet hides it).
void set_listen(rendezvous::StoreServerOptions& options, const StoreListen& listen);

// Where this node's stores will listen, as --dry_run's comment lines ("# ...\n" each): the
// workers' store of a static job's node 0 (port `master_port`), the c10d rendezvous store this
// node would host. Resolves names as store_listen_for. Never throws.
std::string describe_store_listeners(const LaunchPlan& plan, int master_port);

// "127.0.0.1 and 10.0.0.1", "every interface (0.0.0.0)": for messages and --dry_run. Pure.
std::string describe_listen(const std::vector<std::string>& hosts);

// An IPv4 or IPv6 socket address as numeric text ("10.0.0.1", "fd00::2"); "" for another family.
std::string numeric_address(const sockaddr& address);

}  // namespace acc::launcher
