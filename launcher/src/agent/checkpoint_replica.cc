#include "agent/checkpoint_replica.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "acc/common/error.h"
#include "acc/common/files.h"
#include "acc/common/int_ranges.h"
#include "acc/common/unique_fd.h"
#include "acc/rendezvous/key_value_store.h"
#include "agent/checkpoint_memory.h"

namespace acc::launcher {
namespace {

constexpr char kReceiveLog[] = "/replica-receive.log";
constexpr char kSendLog[] = "/replica-send.log";
constexpr std::chrono::milliseconds kReplicaLook{200};
// Copies overwritten in a row before a line says so.
constexpr int kOverwrittenSaid = 5;

std::string describe_status(int status) {
  return WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                           : std::string("SIG") + sigabbrev_np(WTERMSIG(status));
}

// The slot a save's description names (its first line, "acc-slot <slot> <size>"); -1: none.
int slot_of(const std::string& meta_path) {
  int slot = -1;
  std::sscanf(read_file(meta_path).c_str(), "acc-slot %d", &slot);
  return slot;
}

}  // namespace

std::string rank_meta_name(int rank, long seq) {
  return "rank" + std::to_string(rank) + "." + std::to_string(seq) + ".meta";
}

long newest_rank_save(const std::string& dir, int rank) {
  const std::string prefix = "rank" + std::to_string(rank) + ".";
  long newest = 0;
  for (const std::string& name : names_in(dir, prefix))
    newest = std::max(newest, number_in(name, prefix, ".meta"));
  return newest;
}

CheckpointReplica::CheckpointReplica(Os& os, std::string memory, const std::string& host,
                                     const std::string& secret, Notice notice)
    : os_(os),
      memory_(std::move(memory)),
      launcher_(os_.proc().executable()),
      notice_(std::move(notice)) {
  const std::string secret_path = memory_ + "/" + kReplicaSecret;
  UniqueFd file(::open(secret_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  ACC_CHECK(file && ::write(file.get(), secret.data(), secret.size()) ==
                        static_cast<ssize_t>(secret.size()),
            SystemError, "--checkpoint_replica: cannot write ", secret_path);
  receiver_ = os_.start_program(
      {launcher_, kReplicaCommand, "receive", memory_, host, std::to_string(::getpid())},
      memory_ + kReceiveLog);
  if (receiver_ < 0) notice_("checkpoint: replica: cannot start " + launcher_ + " to receive");
}

CheckpointReplica::~CheckpointReplica() {
  for (const pid_t helper : {receiver_, sender_})
    if (helper > 0) os_.signal_process(helper, SIGTERM);
}

void CheckpointReplica::attempt_starts(const RoundStore& round, const std::vector<int>& ranks) {
  if (sender_ > 0) os_.signal_process(sender_, SIGTERM);  // reaped by check_helpers
  round_ = round;
  ranks_ = ranks;
  published_ = false;
  next_node_.clear();
  sent_.assign(ranks.size(), 0);
  sending_.assign(ranks.size(), 0);
  if (const std::vector<int> taken = take_places(ranks); !taken.empty())
    notice_(std::string("checkpoint: ") + (taken.size() == 1 ? "rank " : "ranks ") +
            format_int_ranges(taken) + " load" + (taken.size() == 1 ? "s" : "") +
            " the newest save of the node that held " + (taken.size() == 1 ? "it" : "them") +
            ", from this node's replica (--checkpoint_replica)");
}

std::vector<int> CheckpointReplica::take_places(const std::vector<int>& ranks) {
  const std::string replica = memory_ + "/" + kReplicaDir;
  UniqueFd lock(::open((replica + "/" + kReplicaLock).c_str(), O_RDWR | O_CLOEXEC));
  if (!lock) return {};  // nothing received yet
  ::flock(lock.get(), LOCK_EX);
  std::vector<int> taken;
  for (const int rank : ranks) {
    const long seq = newest_rank_save(replica, rank);
    const std::string meta = rank_meta_name(rank, seq);
    const int slot = seq > 0 ? slot_of(replica + "/" + meta) : -1;
    if (slot < 0 || seq <= newest_rank_save(memory_, rank)) continue;
    const std::string prefix = "rank" + std::to_string(rank) + ".";
    for (const std::string& name : names_in(memory_, prefix))
      if (number_in(name, prefix, ".meta") >= 0) ::unlink((memory_ + "/" + name).c_str());
    const std::string slot_name = prefix + "slot" + std::to_string(slot) + ".data";
    if (::rename((replica + "/" + prefix + "data").c_str(), (memory_ + "/" + slot_name).c_str()) ==
            0 &&
        ::rename((replica + "/" + meta).c_str(), (memory_ + "/" + meta).c_str()) == 0)
      taken.push_back(rank);
  }
  return taken;
}

void CheckpointReplica::say_lines(const std::string& log) {
  const std::string text = read_file(log);
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && std::find(said_.begin(), said_.end(), line) == said_.end()) {
      said_.push_back(line);
      notice_(line);
    }
    start = end + 1;
  }
}

void CheckpointReplica::check_helpers() {
  if (receiver_ > 0)
    if (const std::optional<int> status = os_.exit_status(receiver_)) {
      receiver_ = -1;
      say_lines(memory_ + kReceiveLog);
      notice_("checkpoint: replica: the receiver of the previous node's saves ended (" +
              describe_status(*status) + "); this node holds no replica from now on");
    }
  if (sender_ <= 0) return;
  const std::optional<int> status = os_.exit_status(sender_);
  if (!status) return;
  sender_ = -1;
  const int code = WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
  if (code == 0) sent_ = sending_;
  if (code == kReplicaOverwritten && ++overwritten_ == kOverwrittenSaid)
    notice_("checkpoint: replica: " + std::to_string(kOverwrittenSaid) +
            " copies in a row to the next node were overwritten here before they were whole "
            "there: saves come faster than the link takes them, and the replica falls behind");
  if (code != kReplicaOverwritten) overwritten_ = 0;
  if (code != 0 && code != kReplicaOverwritten) say_lines(memory_ + kSendLog);
}

void CheckpointReplica::tick() {
  check_helpers();
  if (round_.store == nullptr || round_.num_nodes < 2) return;
  try {
    if (!published_) {
      const std::string address = read_file(memory_ + "/" + kReplicaAddress);
      if (address.empty()) return;
      round_.store->set(round_.prefix + "replica/" + std::to_string(round_.node_rank), address);
      published_ = true;
    }
    if (next_node_.empty()) {
      const std::string key =
          round_.prefix + "replica/" + std::to_string((round_.node_rank + 1) % round_.num_nodes);
      if (!round_.store->check({key})) return;
      next_node_ = round_.store->get(key);
    }
  } catch (const Error&) {
    return;  // the store is away for now: the membership says so where it stays away
  }
  if (sender_ > 0) return;
  bool newer = false;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    sending_[i] = newest_rank_save(memory_, ranks_[i]);
    newer = newer || sending_[i] > sent_[i];
  }
  if (!newer) return;
  std::vector<std::string> argv = {launcher_, kReplicaCommand, "send",
                                   memory_,   next_node_,      std::to_string(::getpid())};
  for (const int rank : ranks_) argv.push_back(std::to_string(rank));
  sender_ = os_.start_program(argv, memory_ + kSendLog);
}

std::optional<CheckpointReplica::Clock::time_point> CheckpointReplica::next_wake() const {
  if (round_.store == nullptr || round_.num_nodes < 2) return std::nullopt;
  return os_.now() + kReplicaLook;
}

}  // namespace acc::launcher
