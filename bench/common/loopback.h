#pragma once

// Many TCP connections to a loopback server from one process, as the scale benches make them
// (bench/store_scale, bench/rendezvous_scale): each from a source address of its own block of
// 127.0.0.0/8, its port chosen at connect (IP_BIND_ADDRESS_NO_PORT), so that the ~28,000
// ephemeral ports of one address do not run out; processes of at most connections_per_process()
// each, under the per-process descriptor limit.

#include <netinet/in.h>
#include <sys/types.h>

#include <string>

namespace acc::bench {

// Connections per source address. Far fewer than an address's ~28,000 ephemeral ports: the
// kernel looks for a free port by probing the range, and with 16,000 of an address's ports taken
// the clients' connects cost 8 times the CPU of 10,000 ranks (5.2 s against 0.6 s).
inline constexpr int kConnectionsPerAddress = 2'000;

// The source address (network order) of connection `index` of a run: 127.<block>.<hi>.<lo>,
// kConnectionsPerAddress connections each, from 127.<block>.0.1 on.
in_addr_t loopback_source(int block, int index);

// A non-blocking, close-on-exec TCP socket with TCP_NODELAY, bound to `source` with its port left
// to the connect, and its connect to 127.0.0.1:`port` started. Returns the descriptor, whose
// connect completes (or fails: SO_ERROR) when it is writable; or -1 with `error` set to what
// failed ("socket: Too many open files"). A connect refused at once is -1 too.
int start_connect(in_addr_t source, int port, std::string& error);

// Closes `fd` with a reset rather than a FIN: no TIME_WAIT left to hold the run's ports, and the
// server sees the connection end at once.
void close_with_reset(int fd);

// Raises the soft RLIMIT_NOFILE to the hard one (no change where it cannot).
void raise_fd_limit();

// How many connections one process holds at most: the soft RLIMIT_NOFILE less a margin, at most
// 16,000. Call after raise_fd_limit().
int connections_per_process();

// Sets a many-connection bench up (raise_fd_limit(), SIGPIPE ignored) and prints its first line:
// "NAME: WHAT; RLIMIT_NOFILE S (hard H); client processes of up to N UNIT; handshake window W".
void begin_run(const char* name, const char* what, const char* unit, int window);

// Reaps the child `pid`, waiting up to `wait_ms` for it to exit by itself, then kills it.
void reap_or_kill(pid_t pid, int wait_ms = 10'000);

// "/proc/loadavg"'s first three fields: "4.80 3.10 2.90".
std::string load_average();

}  // namespace acc::bench
