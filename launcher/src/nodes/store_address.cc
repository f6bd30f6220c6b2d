#include "nodes/store_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "acc/common/endpoint.h"
#include "acc/common/strings.h"
#include "acc/common/unique_fd.h"
#include "acc/launcher/plan/plan.h"
#include "acc/rendezvous/store_server.h"
#include "acc/rendezvous/tcp_connect.h"
#include "output/log.h"

namespace acc::launcher {
namespace {

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// Why the hostname does not do, as the start of the one line the launcher prints.
std::string hostname_problem(const AddressFacts& facts) {
  const std::string name = "the hostname " + facts.hostname;
  if (facts.hostname_addresses.empty()) return name + " does not resolve here";
  const auto loopback = std::find_if(facts.hostname_addresses.begin(),
                                     facts.hostname_addresses.end(), is_loopback_address);
  if (loopback != facts.hostname_addresses.end())
    return name + " resolves to " + *loopback + " here, a loopback address";
  return name + " resolves to " + facts.hostname_addresses.front() +
         ", not an address of this node";
}

std::vector<std::string> resolve(const std::string& host) {
  std::vector<std::string> addresses;
  if (host.empty()) return addresses;
  for (const rendezvous::TcpAddress& a : rendezvous::resolve_tcp(host, 0).addresses) {
    std::string text = numeric_address(reinterpret_cast<const sockaddr&>(a.address));
    if (!text.empty() && !contains(addresses, text)) addresses.push_back(std::move(text));
  }
  return addresses;
}

// Calls visit(interface, its address as numeric text) for each IPv4 and IPv6 address of this
// node's interfaces; none where they cannot be listed.
template <typename F>
void for_each_interface_address(F&& visit) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return;
  for (ifaddrs* i = list; i; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_name &&
        (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6))
      visit(*i, numeric_address(*i->ifa_addr));
  ::freeifaddrs(list);
}

std::vector<std::string> interface_addresses() {
  std::vector<std::string> v4, v6;
  for_each_interface_address([&](const ifaddrs& i, std::string text) {
    if (!(i.ifa_flags & IFF_UP) || (i.ifa_flags & IFF_LOOPBACK)) return;
    const bool ipv6 = i.ifa_addr->sa_family == AF_INET6;
    // A link-local IPv6 address needs its interface named to be reached: not one to publish.
    if (ipv6 &&
        IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(i.ifa_addr)->sin6_addr))
      return;
    if (!text.empty() && !is_loopback_address(text)) (ipv6 ? v6 : v4).push_back(std::move(text));
  });
  v4.insert(v4.end(), v6.begin(), v6.end());
  return v4;
}

// connect() on a UDP socket only picks the route and the source address; nothing is sent.
std::string route_source(const std::string& host) {
  if (host.empty()) return "";
  std::string source;
  for (const rendezvous::TcpAddress& a : rendezvous::resolve_tcp(host, 9).addresses) {
    const UniqueFd fd(::socket(a.address.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd || ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&a.address), a.length) != 0)
      continue;
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &length) == 0)
      source = numeric_address(reinterpret_cast<const sockaddr&>(local));
    if (!source.empty()) break;
  }
  return source;
}

bool is_ipv6_text(const std::string& address) {
  return address.find(':') != std::string::npos;
}

void add_once(std::vector<std::string>& list, const std::string& item) {
  if (!contains(list, item)) list.push_back(item);
}

// Whether a client given the host reaches this listener address, and the address can be bound:
// one of this node's, or (every client running here) an IPv4 loopback one, all of which lo holds.
bool listenable(const ListenFacts& facts, const std::string& address) {
  return contains(facts.own, address) ||
         (facts.only_this_machine && is_loopback_address(address) && !is_ipv6_text(address));
}

// Why the clients' host brings them to no address of this node's, or "" where it does.
std::string listen_problem(const ListenFacts& facts) {
  const std::string name = facts.named_as + " " + facts.host;
  if (facts.resolved.empty()) return name + " does not resolve here";
  const auto loopback =
      std::find_if(facts.resolved.begin(), facts.resolved.end(), is_loopback_address);
  // Another machine resolves the name otherwise (its DNS, not this /etc/hosts).
  if (!facts.only_this_machine && loopback != facts.resolved.end())
    return name + " resolves to " + *loopback + " here, a loopback address";
  for (const std::string& address : facts.resolved)
    if (listenable(facts, address)) return "";
  return name + " resolves to " + facts.resolved.front() + ", not an address of this node";
}

}  // namespace

StoreListen choose_store_listen(const ListenFacts& facts) {
  const std::string problem = listen_problem(facts);
  if (!problem.empty()) {
    // Dual-stack "::" where the clients come over IPv6 only, as before; IPv4's everywhere else.
    const bool only_ipv6 =
        is_ipv6_text(facts.host) ||
        (!facts.resolved.empty() &&
         std::all_of(facts.resolved.begin(), facts.resolved.end(), is_ipv6_text));
    const std::string every = only_ipv6 ? "::" : "0.0.0.0";
    return {{every},
            "the store listens on " + describe_listen({every}) + ": " + problem +
                " (a service name, NAT, /etc/hosts?), where the other nodes may reach "
                "it at any address of this node's"};
  }
  StoreListen listen{{"127.0.0.1"}, ""};
  // ::1 where the clients may come over IPv6 and lo holds it (a container may have no IPv6).
  if (std::any_of(facts.resolved.begin(), facts.resolved.end(), is_ipv6_text) &&
      contains(facts.own, "::1"))
    listen.hosts.push_back("::1");
  for (const std::string& address : facts.resolved)
    if (listenable(facts, address)) add_once(listen.hosts, address);
  return listen;
}

StoreListen store_listen_for(const std::string& host, bool only_this_machine,
                             const std::string& named_as) {
  ListenFacts facts;
  facts.host = host;
  facts.named_as = named_as;
  facts.resolved = resolve(host);
  facts.only_this_machine = only_this_machine;
  for_each_interface_address([&](const ifaddrs& i, std::string text) {
    if ((i.ifa_flags & IFF_UP) && !text.empty()) add_once(facts.own, text);
  });
  return choose_store_listen(facts);
}

void set_listen(rendezvous::StoreServerOptions& options, const StoreListen& listen) {
  options.host = listen.hosts.front();
  options.more_hosts.assign(listen.hosts.begin() + 1, listen.hosts.end());
  if (!listen.why.empty()) log::info(listen.why);
}

namespace {

std::string where_stores_listen(const LaunchPlan& plan, int master_port) {
  const auto line = [](const std::string& what, const StoreListen& listen, int port) {
    // The reason for every interface already says where: the line says it once.
    if (!listen.why.empty())
      return "# " + what + ": " + listen.why + "; port " + std::to_string(port) + "\n";
    return "# " + what + " listens on " + describe_listen(listen.hosts) + ", port " +
           std::to_string(port) + "\n";
  };
  if (plan.rdzv_backend == "static") {
    if (plan.node_rank != 0)
      return "# store: node 0's, at " + format_endpoint(plan.master_addr, master_port) + "\n";
    const bool here = plan.nnodes == 1 || names_this_machine(plan.master_addr);
    return line("store", store_listen_for(plan.master_addr, here), master_port);
  }
  std::string text;
  if (plan.rdzv_backend == "c10d" && hosts_rendezvous_store(plan)) {
    const bool here = plan.max_nodes == 1 || names_this_machine(plan.rdzv_host);
    text += line("rendezvous store",
                 store_listen_for(plan.rdzv_host, here, "the rendezvous endpoint"), plan.rdzv_port);
  }
  return text +
         "# workers' store: node 0 of each round serves it on loopback and the address it "
         "publishes (every interface where that is none of its own)\n";
}

}  // namespace

std::string describe_store_listeners(const LaunchPlan& plan, int master_port) {
  return where_stores_listen(plan, master_port) +
         (plan.admit_members_only
              ? "# admission: the stores serve loopback and the addresses that prove the job "
                "secret alone (--rdzv_conf admit_members_only)\n"
              : "");
}

std::string describe_listen(const std::vector<std::string>& hosts) {
  if (hosts.size() == 1 && (hosts.front() == "0.0.0.0" || hosts.front() == "::"))
    return "every interface (" + hosts.front() + ")";
  std::string text;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    if (i > 0) text += i + 1 == hosts.size() ? " and " : ", ";
    text += hosts[i];
  }
  return text;
}

std::string numeric_address(const sockaddr& address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.sa_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(address).sin_addr, text,
                sizeof(text));
  else if (address.sa_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(address).sin6_addr, text,
                sizeof(text));
  return text;
}

bool names_this_machine(const std::string& host) {
  const std::string lower = to_lower(host);
  return is_loopback_address(host) || lower == "localhost" || ends_with(lower, ".localhost");
}

bool hostname_reaches_here(const AddressFacts& facts) {
  const auto& resolved = facts.hostname_addresses;
  const bool any_loopback = std::any_of(resolved.begin(), resolved.end(), is_loopback_address);
  const bool any_ours = std::any_of(resolved.begin(), resolved.end(), [&](const std::string& a) {
    return contains(facts.interface_addresses, a);
  });
  return any_ours && !any_loopback;
}

StoreAddress choose_store_address(const AddressFacts& facts) {
  if (hostname_reaches_here(facts)) return {facts.hostname, ""};
  const auto& resolved = facts.hostname_addresses;
  const bool any_loopback = std::any_of(resolved.begin(), resolved.end(), is_loopback_address);

  const std::string problem = hostname_problem(facts);
  const std::string rendezvous = "the rendezvous endpoint " + facts.rendezvous_host;
  if (!facts.route_source.empty() && !is_loopback_address(facts.route_source))
    return {facts.route_source, problem + "; the workers' store is published as " +
                                    facts.route_source + ", the address this node reaches " +
                                    rendezvous + " from (--local_addr sets it)"};
  if (names_this_machine(facts.rendezvous_host)) {
    // Every node runs on this machine, where a loopback name works as well as any.
    if (any_loopback) return {facts.hostname, ""};
    const std::string here = facts.route_source.empty() ? "127.0.0.1" : facts.route_source;
    return {here, problem + "; the workers' store is published as " + here + ", as " + rendezvous +
                      " is this machine (--local_addr sets it)"};
  }
  // This node serves the rendezvous under a name that is loopback here (the others reach it
  // under the same name through their DNS), or cannot tell how it reaches it.
  if (!facts.interface_addresses.empty()) {
    const std::string& first = facts.interface_addresses.front();
    return {first, problem + "; the workers' store is published as " + first +
                       ", the first address of this node's interfaces, as " + rendezvous +
                       " is reached over loopback here (--local_addr sets it)"};
  }
  return {facts.hostname, ""};  // no interface but loopback: nothing else could reach this node
}

std::string worker_socket_address(const AddressFacts& facts, const std::string& local_addr) {
  if (hostname_reaches_here(facts)) return "";
  if (!local_addr.empty()) return local_addr;
  const StoreAddress chosen = choose_store_address(facts);
  return chosen.why.empty() ? "" : chosen.address;
}

std::string worker_socket_interface(const std::string& hostname, const std::string& peer_host,
                                    const std::string& local_addr) {
  return worker_interface(
      worker_socket_address(read_address_facts(hostname, peer_host), local_addr));
}

std::string worker_interface(const std::string& address) {
  std::string name;
  if (address.empty()) return name;
  for_each_interface_address([&](const ifaddrs& i, const std::string& text) {
    if (name.empty() && text == address && !(i.ifa_flags & IFF_LOOPBACK)) name = i.ifa_name;
  });
  return name;
}

AddressFacts read_address_facts(const std::string& hostname, const std::string& rendezvous_host) {
  AddressFacts facts;
  facts.hostname = hostname;
  facts.hostname_addresses = resolve(hostname);
  facts.interface_addresses = interface_addresses();
  facts.rendezvous_host = rendezvous_host;
  facts.route_source = route_source(rendezvous_host);
  return facts;
}

}  // namespace acc::launcher
