#include "store_state.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>

#include "acc/common/endpoint.h"
#include "acc/rendezvous/job_secret.h"

namespace acc::rendezvous::detail {
namespace {

// A key as its client named it, with the "/" PyTorch's clients (and ours) put before each.
std::string_view as_named(std::string_view key) {
  if (key.starts_with("//")) key.remove_prefix(1);
  return key;
}

void erase_one(std::vector<std::uint64_t>& ids, std::uint64_t id) {
  auto it = std::find(ids.begin(), ids.end(), id);
  if (it != ids.end()) ids.erase(it);
}

}  // namespace

bool parse_counter(std::string_view text, std::int64_t& out) {
  std::size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
  // Accumulate as a negative number so that INT64_MIN parses without overflow.
  std::int64_t value = 0;
  std::size_t digits = 0;
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits) {
    int digit = text[i] - '0';
    if (value < (kMin + digit) / 10) return false;
    value = value * 10 - digit;
  }
  if (digits == 0) return false;
  if (!negative && value == kMin) return false;
  out = negative ? value : -value;
  return true;
}

bool StoreState::is_shared_key(std::string_view key) {
  key = as_named(key);
  return key.starts_with("/acc/") || key.starts_with("/worker/attempt_");
}

std::string_view StoreState::unscoped(std::string_view key, const std::string& space) {
  if (!space.empty() && key.starts_with(space)) key.remove_prefix(space.size());
  return key;
}

void StoreState::begin_key_space(std::string prefix, std::string when_set) {
  if (when_set.empty() || present(when_set)) {
    space_ = std::move(prefix);
    space_trigger_.clear();
    return;
  }
  next_space_ = std::move(prefix);
  space_trigger_ = std::move(when_set);
}

void StoreState::require_job_secret(std::string secret, std::string salt) {
  job_secret_ = std::move(secret);
  job_salt_ = std::move(salt);
}

void StoreState::admit_members_only(const std::vector<std::string>& member_hosts) {
  admission_ = true;
  member_hosts_.insert(member_hosts.begin(), member_hosts.end());
  for (ConnectionId member : members_)
    if (const auto host = host_of_.find(member); host != host_of_.end())
      member_hosts_.insert(host->second);
}

void StoreState::connection_from(ConnectionId connection, std::string host, bool this_host) {
  host_of_[connection] = std::move(host);
  if (this_host) this_host_.insert(connection);
}

namespace {

// The key a client names as `key` (kJobNonceKey...), as the wire has it.
bool names(const Request& request, std::string_view key) {
  return request.keys.size() == 1 && request.keys[0].size() == key.size() + 1 &&
         request.keys[0].starts_with('/') && request.keys[0].ends_with(key);
}

bool writes(Op op) {
  switch (op) {
    case Op::kSet:
    case Op::kAppend:
    case Op::kMultiSet:
    case Op::kCompareSet:
    case Op::kAdd:
    case Op::kDeleteKey:
    case Op::kQueuePush:
      return true;
    default:
      return false;
  }
}

// The launchers' keys: their own ("/acc/...") and the elastic rendezvous' ("/rdzv/...").
bool launcher_key(std::string_view key) {
  key = as_named(key);
  return key.starts_with("/acc/") || key.starts_with("/rdzv/");
}

// What a client sends before anything else, holding no key: whoever it is may (a launcher from a
// new address proves the secret after it).
bool greets(Op op) {
  return op == Op::kValidate || op == Op::kPing;
}

}  // namespace

std::optional<bool> StoreState::admit(ConnectionId connection, const Request& request,
                                      ReplySink& sink, std::string& error) {
  std::string out;
  if (request.op == Op::kCheck && (names(request, kJobNonceKey) || names(request, kJobMemberKey))) {
    const bool ready = names(request, kJobNonceKey) || members_.count(connection);
    append_u8(out, ready ? kCheckReady : kCheckNotReady);
  } else if (request.op == Op::kWait && names(request, kJobNonceKey)) {
    append_u8(out, kStopWaiting);  // it is there for every connection
  } else if ((request.op == Op::kGet || request.op == Op::kMultiGet) &&
             names(request, kJobNonceKey)) {
    append_bytes(out, job_nonce(job_salt_, connection));
  } else if (request.op == Op::kSet && names(request, kJobProofKey)) {
    if (request.values[0] != job_proof(job_secret_, job_nonce(job_salt_, connection))) {
      error = "a wrong job secret (the proof does not match): not one of the job's launchers";
      return false;
    }
    members_.insert(connection);
    if (const auto host = host_of_.find(connection); admission_ && host != host_of_.end())
      member_hosts_.insert(host->second);
    return true;
  } else if (admission_ && !admitted(connection) && !greets(request.op)) {
    const auto host = host_of_.find(connection);
    error = "not a member of the job: " +
            (host == host_of_.end() ? std::string("its address") : host->second) +
            " is no member's address, and the connection has not presented the job secret "
            "(--rdzv_conf admit_members_only)";
    return false;
  } else if (writes(request.op) && !members_.count(connection) &&
             std::any_of(request.keys.begin(), request.keys.end(), launcher_key)) {
    error = "a write of the launchers' key " + request.keys[0] +
            " from a connection that has not presented the job secret";
    return false;
  } else {
    return std::nullopt;
  }
  reply(sink, connection, out);
  return true;
}

bool StoreState::admitted(ConnectionId connection) const {
  if (members_.count(connection) || this_host_.count(connection)) return true;
  const auto host = host_of_.find(connection);
  return host != host_of_.end() &&
         (is_loopback_address(host->second) || member_hosts_.count(host->second));
}

bool StoreState::apply(ConnectionId connection, Dialect dialect, const Request& request,
                       ReplySink& sink, std::string& error) {
  (void)dialect;  // the dialect changes opcode numbers only; semantics are shared.
  if (!job_secret_.empty())
    if (const std::optional<bool> admitted = admit(connection, request, sink, error))
      return *admitted;
  const std::string& space = space_of_.try_emplace(connection, space_).first->second;
  if (space.empty() || request.keys.empty())
    return apply_in_space(connection, space, request, sink, error);
  Request scoped = request;
  for (auto& key : scoped.keys)
    if (!is_shared_key(key)) key.insert(0, space);
  return apply_in_space(connection, space, scoped, sink, error);
}

bool StoreState::apply_in_space(ConnectionId connection, const std::string& space,
                                const Request& request, ReplySink& sink, std::string& error) {
  std::string out;
  switch (request.op) {
    case Op::kValidate:
      if (static_cast<std::uint32_t>(request.number) != kValidationMagic) {
        error = "VALIDATE with a wrong magic number";
        return false;
      }
      return true;
    case Op::kPing:
      append_u32(out, static_cast<std::uint32_t>(request.number));
      break;
    case Op::kSet:
    case Op::kAppend:
    case Op::kMultiSet:
      return set(request, sink, error);
    case Op::kCompareSet:
      compare_set(connection, request, sink);
      return true;
    case Op::kAdd:
      return add(connection, request, sink, error);
    case Op::kCheck: {
      bool ready = std::all_of(request.keys.begin(), request.keys.end(),
                               [this](const std::string& key) { return present(key); });
      append_u8(out, ready ? kCheckReady : kCheckNotReady);
      break;
    }
    case Op::kWait:
      register_wait(connection, request.keys, sink);
      return true;
    case Op::kCancelWait:
      cancel_waits(connection);
      append_u8(out, kWaitCanceled);
      break;
    case Op::kGetNumKeys: {
      std::size_t count = values_.size();
      if (!space.empty())
        count = static_cast<std::size_t>(
            std::count_if(values_.begin(), values_.end(),
                          [&](const auto& kv) { return kv.first.starts_with(space); }));
      append_i64(out, static_cast<std::int64_t>(count));
      break;
    }
    case Op::kDeleteKey: {
      auto it = values_.find(request.keys[0]);
      bool existed = it != values_.end();
      if (existed) {
        std::string old_value = std::move(it->second);
        values_.erase(it);
        notify_watchers(request.keys[0], kWatchKeyDeleted, old_value, {}, sink);
      }
      append_i64(out, existed ? 1 : 0);
      break;
    }
    case Op::kWatchKey:
      watchers_[request.keys[0]].push_back(connection);
      append_u8(out, kWatchCallbackRegistered);
      break;
    case Op::kQueuePush:
      return queue_push(request, sink, error);
    case Op::kQueuePop:
      queue_pop(connection, request.keys[0], sink);
      return true;
    case Op::kQueueLen: {
      auto it = queues_.find(request.keys[0]);
      append_i64(out, it == queues_.end() ? 0 : static_cast<std::int64_t>(it->second.size()));
      break;
    }
    case Op::kGet:
    case Op::kMultiGet:
    case Op::kList:
      if (!read(request, space, out, error)) return false;
      break;
  }
  reply(sink, connection, out);
  return true;
}

bool StoreState::set(const Request& request, ReplySink& sink, std::string& error) {
  if (request.op == Op::kMultiSet) {
    for (std::size_t i = 0; i < request.keys.size(); ++i) {
      if (!store(request.keys[i], request.values[i], error)) return false;
      wake_waiters(request.keys[i], sink);
    }
    return true;
  }
  const std::string& key = request.keys[0];
  auto it = values_.find(key);
  bool existed = it != values_.end();
  std::string old_value = existed ? it->second : std::string();
  std::string value = request.op == Op::kAppend ? old_value + request.values[0] : request.values[0];
  if (!store(key, value, error)) return false;
  wake_waiters(key, sink);
  notify_watchers(key, existed ? kWatchKeyUpdated : kWatchKeyCreated, old_value, value, sink);
  return true;
}

bool StoreState::queue_push(const Request& request, ReplySink& sink, std::string& error) {
  const std::string& key = request.keys[0];
  auto& queue = queues_[key];
  if (queue.size() + values_.size() + queues_.size() > max_keys_) {
    error = "queue '" + key + "' is full (limit " + std::to_string(max_keys_) + ")";
    return false;
  }
  queue.push_back(request.values[0]);
  wake_waiters(key, sink, /*only_one=*/true);
  return true;
}

bool StoreState::read(const Request& request, const std::string& space, std::string& out,
                      std::string& error) const {
  // Sized before a byte is built: a MULTI_GET naming the key of an 8 MiB value a thousand
  // times costs its client a few KiB to send and would cost us 8 GiB to answer.
  const std::size_t size = reply_size(request, space);
  if (size > max_reply_bytes_) {
    error = std::string(op_name(request.op)) + " reply of " + std::to_string(size) +
            " bytes is over the limit of " + std::to_string(max_reply_bytes_);
    return false;
  }
  out.reserve(size);
  if (request.op == Op::kList) {
    std::int64_t count = 0;
    const std::size_t count_at = out.size();
    append_i64(out, 0);
    for (const auto& [key, value] : values_) {
      if (!key.starts_with(space)) continue;
      append_bytes(out, unscoped(key, space));
      ++count;
    }
    std::string counted;
    append_i64(counted, count);
    out.replace(count_at, counted.size(), counted);
    return true;
  }
  for (const auto& key : request.keys) {
    // A missing key reads as empty, as in PyTorch's libuv server (the 1.13 server dropped
    // the connection instead; its clients always WAIT first, so they never see a difference).
    auto it = values_.find(key);
    append_bytes(out, it == values_.end() ? std::string_view() : it->second);
  }
  return true;
}

std::vector<std::string> StoreState::keys_with_prefix(std::string_view prefix) const {
  std::vector<std::string> keys;
  for (const auto& [key, value] : values_)
    if (key.starts_with(prefix)) keys.push_back(key);
  return keys;
}

void StoreState::drop_connection(ConnectionId connection) {
  cancel_waits(connection);
  space_of_.erase(connection);
  members_.erase(connection);
  host_of_.erase(connection);
  this_host_.erase(connection);
  for (auto it = watchers_.begin(); it != watchers_.end();) {
    std::erase(it->second, connection);
    it = it->second.empty() ? watchers_.erase(it) : std::next(it);
  }
}

std::size_t StoreState::reply_size(const Request& request, const std::string& space) const {
  std::size_t size = 0;
  if (request.op == Op::kList) {
    size = 8;
    for (const auto& [key, value] : values_)
      if (key.starts_with(space)) size += 8 + key.size() - space.size();
    return size;
  }
  for (const auto& key : request.keys) {
    auto it = values_.find(key);
    size += 8 + (it == values_.end() ? 0 : it->second.size());
  }
  return size;
}

bool StoreState::present(const std::string& key) const {
  if (values_.count(key) != 0) return true;
  auto it = queues_.find(key);
  return it != queues_.end() && !it->second.empty();
}

void StoreState::reply(ReplySink& sink, ConnectionId connection, std::string_view bytes) {
  if (bytes.empty()) return;
  if (std::string* buffer = sink.buffer_for(connection)) buffer->append(bytes);
}

bool StoreState::store(const std::string& key, std::string value, std::string& error) {
  auto it = values_.find(key);
  if (it != values_.end()) {
    it->second = std::move(value);
    return true;
  }
  if (values_.size() + queues_.size() >= max_keys_) {
    error = "the store is full (" + std::to_string(max_keys_) + " keys); cannot add '" + key + "'";
    return false;
  }
  values_.emplace(key, std::move(value));
  if (!space_trigger_.empty() && key == space_trigger_) {
    space_ = std::move(next_space_);
    space_trigger_.clear();
  }
  return true;
}

void StoreState::wake_waiters(const std::string& key, ReplySink& sink, bool only_one) {
  auto by_key = waits_by_key_.find(key);
  if (by_key == waits_by_key_.end()) return;
  std::vector<std::uint64_t> ids;
  if (only_one) {
    ids.push_back(by_key->second.front());
    by_key->second.erase(by_key->second.begin());
    if (by_key->second.empty()) waits_by_key_.erase(by_key);
  } else {
    ids = std::move(by_key->second);
    waits_by_key_.erase(by_key);
  }
  for (std::uint64_t id : ids) {
    auto wait = waits_.find(id);
    if (wait == waits_.end() || --wait->second.remaining > 0) continue;
    // Exactly one STOP_WAITING per WAIT: the wait is gone once answered.
    std::string stop(1, static_cast<char>(kStopWaiting));
    reply(sink, wait->second.connection, stop);
    erase_one(waits_by_connection_[wait->second.connection], id);
    waits_.erase(wait);
  }
}

void StoreState::notify_watchers(const std::string& key, std::uint8_t type,
                                 std::string_view old_value, std::string_view new_value,
                                 ReplySink& sink) {
  auto it = watchers_.find(key);
  if (it == watchers_.end()) return;
  for (ConnectionId watcher : it->second) {
    // Each watcher is told the key as it named it.
    auto space = space_of_.find(watcher);
    std::string message;
    append_u8(message, type);
    append_bytes(message, space == space_of_.end() ? key : unscoped(key, space->second));
    append_bytes(message, old_value);
    append_bytes(message, new_value);
    reply(sink, watcher, message);
  }
}

void StoreState::register_wait(ConnectionId connection, const std::vector<std::string>& keys,
                               ReplySink& sink) {
  PendingWait wait{connection, 0, {}};
  for (const auto& key : keys) {
    // Only keys absent now are counted, as PyTorch's servers do.
    if (!present(key)) wait.keys.push_back(key);
  }
  if (wait.keys.empty()) {
    std::string stop(1, static_cast<char>(kStopWaiting));
    reply(sink, connection, stop);
    return;
  }
  std::uint64_t id = next_wait_id_++;
  wait.remaining = wait.keys.size();
  for (const auto& key : wait.keys) waits_by_key_[key].push_back(id);
  waits_by_connection_[connection].push_back(id);
  waits_.emplace(id, std::move(wait));
}

void StoreState::cancel_waits(ConnectionId connection) {
  auto by_connection = waits_by_connection_.find(connection);
  if (by_connection == waits_by_connection_.end()) return;
  for (std::uint64_t id : by_connection->second) {
    auto wait = waits_.find(id);
    if (wait == waits_.end()) continue;
    for (const auto& key : wait->second.keys) {
      auto by_key = waits_by_key_.find(key);
      if (by_key == waits_by_key_.end()) continue;
      std::erase(by_key->second, id);
      if (by_key->second.empty()) waits_by_key_.erase(by_key);
    }
    waits_.erase(wait);
  }
  waits_by_connection_.erase(by_connection);
}

bool StoreState::add(ConnectionId connection, const Request& request, ReplySink& sink,
                     std::string& error) {
  const std::string& key = request.keys[0];
  auto it = values_.find(key);
  bool existed = it != values_.end();
  std::string old_value = existed ? it->second : std::string();
  std::int64_t current = 0;
  if (existed && !parse_counter(old_value, current)) {
    error = "ADD on key '" + key + "' whose value is not an integer";
    return false;
  }
  // Wraps on overflow instead of PyTorch's undefined behaviour.
  auto sum = static_cast<std::int64_t>(static_cast<std::uint64_t>(current) +
                                       static_cast<std::uint64_t>(request.number));
  std::string value = std::to_string(sum);
  if (!store(key, value, error)) return false;
  std::string out;
  append_i64(out, sum);
  reply(sink, connection, out);
  wake_waiters(key, sink);
  notify_watchers(key, existed ? kWatchKeyUpdated : kWatchKeyCreated, old_value, value, sink);
  return true;
}

void StoreState::compare_set(ConnectionId connection, const Request& request, ReplySink& sink) {
  const std::string& key = request.keys[0];
  const std::string& expected = request.values[0];
  const std::string& desired = request.values[1];
  std::string out;
  auto it = values_.find(key);
  std::string error;
  if (it == values_.end()) {
    // As PyTorch: a missing key is created only when `expected` is empty; otherwise the reply is
    // `expected` itself, which tells the caller its swap did not happen.
    if (expected.empty() && store(key, desired, error)) {
      append_bytes(out, desired);
      reply(sink, connection, out);
      wake_waiters(key, sink);
      notify_watchers(key, kWatchKeyCreated, {}, desired, sink);
      return;
    }
    append_bytes(out, expected);
  } else if (it->second == expected) {
    std::string old_value = std::move(it->second);
    it->second = desired;
    append_bytes(out, desired);
    reply(sink, connection, out);
    notify_watchers(key, kWatchKeyUpdated, old_value, desired, sink);
    return;
  } else {
    append_bytes(out, it->second);
  }
  reply(sink, connection, out);
}

void StoreState::queue_pop(ConnectionId connection, const std::string& key, ReplySink& sink) {
  std::string out;
  auto it = queues_.find(key);
  std::size_t length = it == queues_.end() ? 0 : it->second.size();
  append_i64(out, static_cast<std::int64_t>(length));
  if (length > 0) {
    append_bytes(out, it->second.front());
    it->second.pop_front();
    if (it->second.empty()) queues_.erase(it);
  }
  reply(sink, connection, out);
}

}  // namespace acc::rendezvous::detail
