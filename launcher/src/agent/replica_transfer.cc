// `acc-launch __checkpoint_replica receive|send ...` (checkpoint_replica.h): the two ends of
// --checkpoint_replica's copy of a node's saves to the node after it.
//
// A link: the receiver's "acc-replica <nonce>\n", the sender's "proof <HMAC of the nonce under the
// job secret>\n" (rendezvous/job_secret.h: MEMORY/replica.secret on both nodes; "-" for both
// where the job has none), then per save "save <rank> <seq> <slot> <data size> <description
// size>\n", the slot's bytes, the description's, and "commit\n" (its description was still there
// once sent: the slot was not reused meanwhile) or "drop\n"; then "end\n", answered "ok\n".

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "acc/common/files.h"
#include "acc/common/unique_fd.h"
#include "acc/rendezvous/job_secret.h"
#include "acc/rendezvous/tcp_connect.h"
#include "agent/checkpoint_replica.h"
#include "nodes/socket_bytes.h"

namespace acc::launcher {
namespace {

constexpr int kLinkTimeoutSeconds = 30;
constexpr std::chrono::seconds kReplicaConnectBound{5};
constexpr std::size_t kCopyChunk = 1 << 20;

void say_replica(const std::string& line) {
  std::printf("checkpoint: replica: %s\n", line.c_str());
  std::fflush(stdout);
}

// Ends this helper with its launcher (SIGKILLed too): the parent named on the command line.
bool tie_to_parent(const std::string& parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  return std::to_string(::getppid()) == parent;
}

std::optional<std::string> read_line(int fd) {
  std::string line;
  for (char c = 0; line.size() < 256;) {
    if (!read_all_bytes(fd, &c, 1)) return std::nullopt;
    if (c == '\n') return line;
    line += c;
  }
  return std::nullopt;
}

bool send_text(int fd, const std::string& text) {
  return write_all_bytes(fd, text.data(), text.size());
}

// --- receive -------------------------------------------------------------------------------

// A socket listening on `host`'s first address that binds, its port the kernel's choice.
UniqueFd listen_on(const std::string& host, int& port) {
  const rendezvous::TcpResolution resolved = rendezvous::resolve_tcp(host, 0);
  for (const rendezvous::TcpAddress& address : resolved.addresses) {
    UniqueFd fd(::socket(address.address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd ||
        ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address.address), address.length) !=
            0 ||
        ::listen(fd.get(), 4) != 0)
      continue;
    port = bound_port(fd.get());
    return fd;
  }
  return UniqueFd();
}

// `size` bytes from the link into the new file `path`, its room reserved first; false where the
// link broke or the memory has no room (said once).
bool receive_file(int link, const std::string& path, std::size_t size) {
  UniqueFd file(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!file) return false;
  if (size > 0) {
    if (const int error = ::posix_fallocate(file.get(), 0, static_cast<off_t>(size)); error != 0) {
      say_replica("no room for " + std::to_string(size >> 20) + " MB in " + path + ": " +
                  std::strerror(error) + "; the replica keeps its last save");
      return false;
    }
  }
  std::vector<char> buffer(std::min(size, kCopyChunk));
  for (std::size_t left = size; left > 0;) {
    const std::size_t n = std::min(left, buffer.size());
    if (!read_all_bytes(link, buffer.data(), n) ||
        ::write(file.get(), buffer.data(), n) != ssize_t(n))
      return false;
    left -= n;
  }
  return true;
}

// Puts a received save of `rank` in place of the one held: under the replica's lock, which the
// launcher takes where it moves a replica into its memory.
void commit(const std::string& replica, int rank, long seq, const std::string& meta) {
  const std::string rank_prefix = "rank" + std::to_string(rank) + ".";
  UniqueFd lock(::open((replica + "/" + kReplicaLock).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ::flock(lock.get(), LOCK_EX);
  for (const std::string& name : names_in(replica, rank_prefix))
    if (number_in(name, rank_prefix, ".meta") >= 0) ::unlink((replica + "/" + name).c_str());
  ::rename((replica + "/" + rank_prefix + "data.part").c_str(),
           (replica + "/" + rank_prefix + "data").c_str());
  const std::string meta_path = replica + "/" + rank_prefix + std::to_string(seq) + ".meta";
  write_file(meta_path + ".part", meta);
  ::rename((meta_path + ".part").c_str(), meta_path.c_str());
}

// What proves the job secret for `nonce`.
std::string proof_for(const std::string& secret, const std::string& nonce) {
  return "proof " + (secret.empty() ? std::string("-") : rendezvous::job_proof(secret, nonce));
}

// One sender's link (the `number`th), until "end" or a break.
void serve_link(int link, const std::string& replica, const std::string& secret,
                const std::string& salt, unsigned long long number) {
  set_socket_timeouts(link, kLinkTimeoutSeconds);
  const std::string nonce = secret.empty() ? "-" : rendezvous::job_nonce(salt, number);
  if (!send_text(link, "acc-replica " + nonce + "\n") ||
      read_line(link) != proof_for(secret, nonce))
    return;
  for (;;) {
    const std::optional<std::string> line = read_line(link);
    if (!line) return;
    if (*line == "end") {
      send_text(link, "ok\n");
      return;
    }
    int rank = 0, slot = 0;
    long seq = 0;
    std::size_t size = 0, meta_size = 0;
    if (std::sscanf(line->c_str(), "save %d %ld %d %zu %zu", &rank, &seq, &slot, &size,
                    &meta_size) != 5 ||
        rank < 0 || meta_size > (64u << 20))
      return;
    const std::string rank_prefix = replica + "/rank" + std::to_string(rank) + ".";
    std::string meta(meta_size, '\0');
    const bool whole = receive_file(link, rank_prefix + "data.part", size) &&
                       read_all_bytes(link, meta.data(), meta.size());
    const std::optional<std::string> verdict = whole ? read_line(link) : std::nullopt;
    if (verdict != "commit") ::unlink((rank_prefix + "data.part").c_str());
    if (!verdict) return;
    if (*verdict == "commit") commit(replica, rank, seq, meta);
  }
}

int receive(const std::string& memory, const std::string& host) {
  const std::string replica = memory + "/" + kReplicaDir;
  ::mkdir(replica.c_str(), 0700);
  int port = 0;
  UniqueFd listener = listen_on(host, port);
  if (!listener) {
    say_replica("cannot listen on " + host + ": " + std::strerror(errno));
    return 1;
  }
  const std::string secret = read_file(memory + "/" + kReplicaSecret);
  const std::string address = memory + "/" + kReplicaAddress;
  write_file(address + ".part", host + ":" + std::to_string(port));
  ::rename((address + ".part").c_str(), address.c_str());
  const std::string salt = rendezvous::random_salt();
  for (unsigned long long number = 1;; ++number) {
    UniqueFd link(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (link) serve_link(link.get(), replica, secret, salt, number);
  }
}

// --- send ----------------------------------------------------------------------------------

struct HeldSave {
  long seq = 0;
  int slot = 0;
  std::size_t size = 0;
  std::string meta;  // the description file's bytes
};

// The newest save of `rank` committed in `memory`; nullopt where there is none.
std::optional<HeldSave> newest_save_of(const std::string& memory, int rank) {
  const long seq = newest_rank_save(memory, rank);
  if (seq <= 0) return std::nullopt;
  HeldSave save;
  save.seq = seq;
  save.meta = read_file(memory + "/" + rank_meta_name(rank, seq));
  if (std::sscanf(save.meta.c_str(), "acc-slot %d %zu", &save.slot, &save.size) != 2)
    return std::nullopt;
  return save;
}

// Sends `save` of `rank`; false where the link broke. `whole` becomes false where the save's slot
// was reused during the copy (its description gone): the copy is dropped there.
bool send_save(int link, const std::string& memory, int rank, const HeldSave& save, bool& whole) {
  const std::string slot_path =
      memory + "/rank" + std::to_string(rank) + ".slot" + std::to_string(save.slot) + ".data";
  UniqueFd slot(::open(slot_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!slot && save.size > 0) {
    whole = false;  // reused meanwhile: nothing sent
    return true;
  }
  if (!send_text(link, "save " + std::to_string(rank) + " " + std::to_string(save.seq) + " " +
                           std::to_string(save.slot) + " " + std::to_string(save.size) + " " +
                           std::to_string(save.meta.size()) + "\n"))
    return false;
  off_t offset = 0;
  while (static_cast<std::size_t>(offset) < save.size) {
    const ssize_t n = ::sendfile(link, slot.get(), &offset, save.size - offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
  }
  const bool still = ::access((memory + "/" + rank_meta_name(rank, save.seq)).c_str(), F_OK) == 0;
  whole = whole && still;
  return send_text(link, save.meta) && send_text(link, still ? "commit\n" : "drop\n");
}

int send(const std::string& memory, const std::string& address, const std::vector<int>& ranks) {
  const std::size_t colon = address.rfind(':');
  const std::string host = address.substr(0, colon);
  const int port = std::atoi(address.c_str() + colon + 1);
  const rendezvous::TcpResolution resolved = rendezvous::resolve_tcp(host, port);
  rendezvous::TcpConnection connection = rendezvous::connect_tcp(
      resolved.addresses, rendezvous::Clock::steady().now() + kReplicaConnectBound);
  if (!connection.fd) {
    say_replica("cannot reach the next node's launcher at " + address + ": " +
                (connection.timed_out ? "no answer" : std::strerror(connection.error)));
    return 1;
  }
  const int link = connection.fd.get();
  set_socket_timeouts(link, kLinkTimeoutSeconds);
  const std::string secret = read_file(memory + "/" + kReplicaSecret);
  const std::optional<std::string> hello = read_line(link);
  bool ok = hello && hello->rfind("acc-replica ", 0) == 0 &&
            send_text(link, proof_for(secret, hello->substr(12)) + "\n");
  bool whole = true;
  for (const int rank : ranks)
    if (const std::optional<HeldSave> save = newest_save_of(memory, rank); ok && save)
      ok = send_save(link, memory, rank, *save, whole);
  const std::optional<std::string> answer =
      ok && send_text(link, "end\n") ? read_line(link) : std::nullopt;
  if (answer != "ok") {
    say_replica("the next node's launcher at " + address + " broke off the copy");
    return 1;
  }
  return whole ? 0 : kReplicaOverwritten;
}

}  // namespace

int run_replica_helper(const std::vector<std::string>& args) {
  (void)::nice(10);  // the CPU that training leaves
  if (args.size() >= 4 && args[0] == "receive" && tie_to_parent(args[3]))
    return receive(args[1], args[2]);
  if (args.size() >= 4 && args[0] == "send" && tie_to_parent(args[3])) {
    std::vector<int> ranks;
    for (std::size_t i = 4; i < args.size(); ++i) ranks.push_back(std::atoi(args[i].c_str()));
    return send(args[1], args[2], ranks);
  }
  std::fprintf(stderr,
               "usage: acc-launch %s receive MEMORY HOST PARENT | send MEMORY HOST:PORT PARENT "
               "RANK...\n",
               kReplicaCommand);
  return 2;
}

}  // namespace acc::launcher
