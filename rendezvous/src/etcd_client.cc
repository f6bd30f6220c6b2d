#include "acc/rendezvous/etcd_client.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "acc/common/backoff.h"
#include "acc/common/endpoint.h"
#include "acc/common/error.h"
#include "acc/common/random.h"
#include "acc/common/strings.h"
#include "acc/rendezvous/tcp_connect.h"
#include "base64.h"
#include "http_connection.h"
#include "tls_context.h"

namespace acc::rendezvous {

using Json = nlohmann::json;

// One key-value of etcd's: the value and the revision that last modified it.
struct EtcdClient::Entry {
  std::string value;
  std::string mod_revision;

  // The first entry of one transaction response ({"response_range": {"kvs": [...]}}), if any.
  static std::optional<Entry> in(const Json& response);
};

namespace {

using std::chrono::milliseconds;

// etcd refuses a transaction of more than --max-txn-ops (128 by default) operations.
constexpr size_t kOpsPerTxn = 100;
// One attempt on one member: long enough for a proposal during a leader election (etcd's own
// request timeout is about 7 s), short enough to move on from a member that hangs.
constexpr milliseconds kAttemptTimeout{10'000};
constexpr milliseconds kFirstPause{5};
constexpr milliseconds kLongestPause{100};

milliseconds remaining(Clock::time_point deadline) {
  return std::max(milliseconds(0),
                  std::chrono::ceil<milliseconds>(deadline - Clock::steady().now()));
}

std::string decoded(const std::string& text) {
  auto bytes = base64_decode(text);
  if (!bytes) throw StoreError("etcd sent a key or value that is not base64: " + text);
  return *bytes;
}

// etcd's reply as JSON; StoreError when it is not (a proxy's page, a truncated body).
Json parse_reply(const std::string& body) {
  Json reply = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (reply.is_discarded())
    throw StoreError("etcd sent a reply that is not JSON: " + one_line(body));
  return reply;
}

// The member `name` of an object, or nullptr when `json` is not an object or has no such member.
const Json* find_member(const Json& json, const char* name) {
  if (!json.is_object()) return nullptr;
  auto found = json.find(name);
  return found == json.end() ? nullptr : &*found;
}

// A string member (etcd writes int64 fields as strings); `fallback` when absent, StoreError when
// present but not a string.
std::string text_of(const Json& json, const char* name, std::string fallback = "") {
  const Json* found = find_member(json, name);
  if (!found) return fallback;
  ACC_CHECK(found->is_string(), StoreError, "etcd sent a \"", name,
            "\" that is not a string: ", found->dump());
  return found->get<std::string>();
}

// A transaction: if every comparison holds, the `success` operations, else the `failure` ones.
Json txn(Json compare, Json success, Json failure = Json::array()) {
  Json body = {{"success", std::move(success)}};
  if (!compare.is_null()) body["compare"] = Json::array({std::move(compare)});
  if (!failure.empty()) body["failure"] = std::move(failure);
  return body;
}

// The "responses" of a transaction reply (empty when absent).
const Json& responses(const Json& reply) {
  static const Json kNone = Json::array();
  const Json* found = find_member(reply, "responses");
  if (!found) return kNone;
  ACC_CHECK(found->is_array(), StoreError, "etcd sent \"responses\" that are not a list");
  return *found;
}

bool succeeded(const Json& reply) {
  const Json* found = find_member(reply, "succeeded");
  return found && found->is_boolean() && found->get<bool>();
}

// One "key ..." list for an error message, shortened past a few keys.
std::string key_list(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size() && i < 3; ++i) out += (i ? ", " : "") + keys[i];
  if (keys.size() > 3) out += " and " + std::to_string(keys.size() - 3) + " more";
  return out;
}

// The revision in a reply's header ("header": {"revision": "N"}); 0 when absent.
std::int64_t header_revision(const Json& reply) {
  const Json* header = find_member(reply, "header");
  const std::string text = header ? text_of(*header, "revision", "0") : "0";
  try {
    return std::stoll(text);
  } catch (const std::exception&) {
    throw StoreError("etcd sent a revision that is not a number: " + text);
  }
}

// A socket connected to host:port within `timeout`, blocking; NetworkError naming `address`.
int connect_within(const std::string& address, milliseconds timeout) {
  const Endpoint endpoint = parse_endpoint(address, 2379, "etcd endpoint");
  const TcpResolution resolved = resolve_tcp(endpoint.host, endpoint.port);
  if (resolved.status != 0) throw NetworkError("etcd at " + address + ": " + resolved.error());
  const Clock& clock = Clock::steady();
  TcpConnection connection = connect_tcp(resolved.addresses, clock.now() + timeout, clock);
  if (!connection.fd)
    throw NetworkError("etcd at " + address +
                       ": watch: connect failed: " + std::strerror(connection.error));
  return connection.fd.release();
}

}  // namespace

EtcdWatch::EtcdWatch(const std::string& address, const std::string& request, milliseconds timeout,
                     TlsContext* tls) {
  int pipe_fds[2];
  ACC_CHECK(::pipe2(pipe_fds, O_CLOEXEC) == 0, SystemError,
            "cannot make a pipe: ", std::strerror(errno));
  quiet_read_ = pipe_fds[0];
  quiet_write_ = pipe_fds[1];
  try {
    fd_ = connect_within(address, timeout);
  } catch (...) {
    ::close(quiet_read_);
    ::close(quiet_write_);
    throw;
  }
  const Endpoint endpoint = parse_endpoint(address, 2379, "etcd endpoint");
  const std::string message =
      acc::detail::concat("POST /v3/watch HTTP/1.1\r\nHost: ", endpoint.host,
                          "\r\nContent-Type: application/json\r\nContent-Length: ", request.size(),
                          "\r\n\r\n", request);
  try {
    if (tls) tls_ = std::make_unique<TlsSession>(*tls, fd_, endpoint.host, address, timeout);
    if (!send_all(message)) {
      throw NetworkError("etcd at " + address + ": watch: request failed: " + std::strerror(errno));
    }
  } catch (...) {
    tls_.reset();
    ::close(fd_);
    ::close(quiet_read_);
    ::close(quiet_write_);
    throw;
  }
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
}

bool EtcdWatch::send_all(std::string_view message) {
  if (tls_) return tls_->write(message);
  size_t sent = 0;
  while (sent < message.size()) {
    const ssize_t n = ::send(fd_, message.data() + sent, message.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

EtcdWatch::~EtcdWatch() {
  tls_.reset();
  ::close(fd_);
  ::close(quiet_read_);
  ::close(quiet_write_);
}

bool EtcdWatch::fired() {
  if (done_) return false;
  if (!read_stream()) return false;
  quiet();
  return true;
}

bool EtcdWatch::read_stream() {
  char buffer[4096];
  // With TLS, everything the socket holds is decrypted now: no record waits inside OpenSSL for a
  // poll() on the socket that would never wake.
  if (tls_ && !tls_->read_available(received_)) return true;
  for (; !tls_;) {
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n > 0) {
      received_.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return true;  // the member closed the stream or the connection broke
  }
  if (!in_body_) {
    const size_t end = received_.find("\r\n\r\n");
    if (end == std::string::npos) return false;
    // "HTTP/1.1 200 OK": anything else (the gateway's error) ends the watch.
    if (received_.compare(0, 12, "HTTP/1.1 200") != 0 && received_.compare(0, 12, "HTTP/1.0 200"))
      return true;
    in_body_ = true;
    parsed_ = end + 4;
  }
  // The stream's chunks ("<hex size>\r\n<data>\r\n"), one JSON message each.
  for (;;) {
    const size_t line_end = received_.find("\r\n", parsed_);
    if (line_end == std::string::npos) break;
    const size_t size = std::strtoul(received_.c_str() + parsed_, nullptr, 16);
    if (size == 0) return true;  // the last chunk: the stream ended
    if (received_.size() < line_end + 2 + size + 2) break;
    body_.append(received_, line_end + 2, size);
    parsed_ = line_end + 2 + size + 2;
  }
  // {"result": {..., "created": true}} confirms the watch; one with "events" (the key written)
  // or "canceled" (a compacted revision, an error) ends it. Keys and values are base64 and never
  // hold a quote, so the names are found as they are.
  return body_.find("\"events\"") != std::string::npos ||
         body_.find("\"canceled\"") != std::string::npos ||
         body_.find("\"error\"") != std::string::npos;
}

void EtcdWatch::take_over(EtcdWatch& other) {
  ::dup3(other.fd_, fd_, O_CLOEXEC);
  tls_ = std::move(other.tls_);
  if (tls_) tls_->rebind(fd_);
  done_ = false;
  received_.clear();
  body_.clear();
  parsed_ = 0;
  in_body_ = false;
}

void EtcdWatch::quiet() {
  done_ = true;
  // dup3 onto the same number: the caller's poll set stays valid and never wakes again.
  ::dup3(quiet_read_, fd_, O_CLOEXEC);
}

std::optional<EtcdClient::Entry> EtcdClient::Entry::in(const Json& response) {
  const Json* range = find_member(response, "response_range");
  const Json* kvs = range ? find_member(*range, "kvs") : nullptr;
  if (!kvs || !kvs->is_array() || kvs->empty()) return std::nullopt;
  const Json& kv = kvs->front();
  return Entry{decoded(text_of(kv, "value")), text_of(kv, "mod_revision")};
}

EtcdClient::EtcdClient(EtcdClientOptions options) : options_(std::move(options)) {
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(random_u64()));
  receipt_key_ = std::string(".receipts/") + id;
  ACC_CHECK(!options_.endpoints.empty(), ConfigError,
            "--rdzv_endpoint: give the etcd members' client addresses, host:port[,host:port...]");
  if (options_.tls.enabled) tls_ = std::make_shared<TlsContext>(options_.tls);
  for (const auto& endpoint : options_.endpoints)
    members_.push_back(std::make_unique<HttpConnection>(endpoint, tls_));
  call("/v3/maintenance/status", "{}");
}

EtcdClient::~EtcdClient() {
  if (adds_ == 0) return;
  // Best effort, one short try: the receipt only matters to this client's adds.
  try {
    members_[current_]->post("/v3/kv/deleterange", Json{{"key", encoded_key(receipt_key_)}}.dump(),
                             milliseconds(500));
  } catch (const Error&) {
  }
}

const std::string& EtcdClient::endpoint() const {
  return members_[current_]->address();
}

std::string EtcdClient::call(std::string_view path, const std::string& body) {
  const auto deadline = Clock::steady().now() + options_.timeout;
  Backoff backoff(kFirstPause, kLongestPause * 5);  // between full passes over the members
  std::string last_failure;
  for (size_t failures = 1;; ++failures) {
    HttpConnection& member = *members_[current_];
    try {
      auto reply = member.post(path, body,
                               std::clamp(remaining(deadline), milliseconds(1), kAttemptTimeout));
      if (reply.status == 200) return reply.body;
      // etcd's own message when the body is its JSON; otherwise (a proxy's page?) the body as it
      // came says more than nothing.
      std::string message = one_line(reply.body);
      const Json error = Json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
      if (const Json* text = find_member(error, "message"); text && text->is_string())
        message = one_line(text->get<std::string>());
      // A malformed request is our bug, the same on every member: no point trying the others.
      ACC_CHECK(reply.status != 400 && reply.status != 404, StoreError, "etcd at ",
                member.address(), " refused ", path, " (HTTP ", reply.status, "): ", message);
      last_failure = acc::detail::concat(member.address(), ": HTTP ", reply.status, ": ", message);
    } catch (const NetworkError& e) {
      last_failure = e.what();
    }
    // This member cannot serve now (down, no leader, shutting down): move on to the next.
    current_ = (current_ + 1) % members_.size();
    if (Clock::steady().now() >= deadline) {
      throw NetworkError(acc::detail::concat("no etcd member at ", join(options_.endpoints, ","),
                                             " answered within ", options_.timeout.count(),
                                             " ms (last: ", last_failure,
                                             "); check --rdzv_endpoint and the cluster's health"));
    }
    if (failures % members_.size() == 0) {
      backoff.pause(deadline, Clock::steady());
    }
  }
}

std::string EtcdClient::encoded_key(std::string_view key) const {
  return base64_encode(options_.key_prefix + std::string(key));
}

void EtcdClient::set(std::string_view key, std::string_view value) {
  call("/v3/kv/put", Json{{"key", encoded_key(key)}, {"value", base64_encode(value)}}.dump());
}

std::vector<std::optional<EtcdClient::Entry>> EtcdClient::read(const std::vector<std::string>& keys,
                                                               std::int64_t* revision) {
  std::vector<std::optional<Entry>> entries;
  for (size_t first = 0; first < keys.size(); first += kOpsPerTxn) {
    Json ranges = Json::array();
    for (size_t i = first; i < std::min(keys.size(), first + kOpsPerTxn); ++i)
      ranges.push_back({{"request_range", {{"key", encoded_key(keys[i])}}}});
    const Json reply = parse_reply(call("/v3/kv/txn", txn(nullptr, ranges).dump()));
    const Json& results = responses(reply);
    ACC_CHECK(results.size() == ranges.size(), StoreError, "etcd answered ", results.size(),
              " of the ", ranges.size(), " reads of one transaction");
    for (const Json& result : results) entries.push_back(Entry::in(result));
    // The first transaction's: a write after it may be one the later ones did not see.
    if (revision && first == 0) *revision = header_revision(reply);
  }
  return entries;
}

std::vector<std::string> EtcdClient::await(const std::vector<std::string>& keys,
                                           milliseconds timeout) {
  const auto deadline = Clock::steady().now() + timeout;
  Backoff backoff(kFirstPause, kLongestPause);  // only between watches that cannot connect
  for (;;) {
    std::int64_t revision = 0;
    auto entries = read(keys, &revision);
    const auto missing =
        std::find_if(entries.begin(), entries.end(), [](const auto& e) { return !e.has_value(); });
    if (missing == entries.end()) {
      std::vector<std::string> values;
      for (auto& entry : entries) values.push_back(std::move(entry->value));
      return values;
    }
    if (Clock::steady().now() >= deadline)
      throw TimeoutError(acc::detail::concat("etcd: ", key_list(keys), " not set within ",
                                             timeout.count(), " ms"));
    // Watch the first missing key from the revision just read: a write after the read fires it,
    // so none is missed between the two. Then read all of them again.
    const std::string& key = keys[static_cast<size_t>(missing - entries.begin())];
    std::unique_ptr<EtcdWatch> watching;
    try {
      watching.reset(new EtcdWatch(
          endpoint(), watch_request(key, std::nullopt, revision),
          std::clamp(remaining(deadline), milliseconds(1), kAttemptTimeout), tls_.get()));
    } catch (const NetworkError&) {
      // The member went between the read and the watch: the next read moves on to another.
      backoff.pause(deadline, Clock::steady());
      continue;
    }
    for (;;) {
      pollfd p{watching->fd(), POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(remaining(deadline).count()));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0 || watching->fired()) break;
    }
  }
}

std::string EtcdClient::watch_request(std::string_view key, const std::optional<Entry>& entry,
                                      std::int64_t revision) const {
  std::string start = std::to_string(revision + 1);
  if (entry && !entry->mod_revision.empty()) start = entry->mod_revision;
  return Json{{"create_request", {{"key", encoded_key(key)}, {"start_revision", start}}}}.dump();
}

void EtcdClient::rewatch(EtcdWatch& watch, std::string_view key, milliseconds connect_timeout) {
  watch.take_over(*this->watch(key, connect_timeout));
}

std::unique_ptr<EtcdWatch> EtcdClient::watch(std::string_view key, milliseconds connect_timeout) {
  std::int64_t revision = 0;
  const std::optional<Entry> entry = read({std::string(key)}, &revision).front();
  return std::unique_ptr<EtcdWatch>(
      new EtcdWatch(endpoint(), watch_request(key, entry, revision), connect_timeout, tls_.get()));
}

std::string EtcdClient::get(std::string_view key) {
  return await({std::string(key)}, options_.timeout).front();
}

void EtcdClient::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  await(keys, timeout);
}

bool EtcdClient::check(const std::vector<std::string>& keys) {
  auto entries = read(keys);
  return std::all_of(entries.begin(), entries.end(), [](const auto& e) { return e.has_value(); });
}

std::vector<std::string> EtcdClient::multi_get(const std::vector<std::string>& keys) {
  return await(keys, options_.timeout);
}

void EtcdClient::multi_set(const std::vector<std::string>& keys,
                           const std::vector<std::string>& values) {
  ACC_ASSERT(keys.size() == values.size());
  for (size_t first = 0; first < keys.size(); first += kOpsPerTxn) {
    Json puts = Json::array();
    for (size_t i = first; i < std::min(keys.size(), first + kOpsPerTxn); ++i)
      puts.push_back(
          {{"request_put", {{"key", encoded_key(keys[i])}, {"value", base64_encode(values[i])}}}});
    call("/v3/kv/txn", txn(nullptr, puts).dump());
  }
}

std::int64_t EtcdClient::add(std::string_view key, std::int64_t delta) {
  const std::string name(key);
  const Json key_field = encoded_key(name);
  const Json receipt_field = encoded_key(receipt_key_);
  std::optional<Entry> seen = read({name}).front();
  for (;;) {
    std::int64_t value = 0;
    if (seen) {
      try {
        value = std::stoll(seen->value);
      } catch (const std::exception&) {
        throw StoreError("etcd: add to " + name + ", whose value is not an integer");
      }
    }
    if (delta == 0) return value;
    // Write value + delta only if nobody wrote the key since we read it (its mod revision, or
    // its absence); otherwise the failure branch reads it again and we retry from there.
    const Json compare =
        seen
            ? Json{{"target", "MOD"},
                   {"result", "EQUAL"},
                   {"key", key_field},
                   {"mod_revision", seen->mod_revision}}
            : Json{
                  {"target", "VERSION"}, {"result", "EQUAL"}, {"key", key_field}, {"version", "0"}};
    // The same transaction also writes this client's receipt, unique to this attempt: when
    // call() resends it after a reply was lost, the compare fails (our own write moved the
    // revision) and the receipt tells that the add was applied, so it is not made twice.
    const std::string next = std::to_string(value + delta);
    const std::string receipt = std::to_string(++adds_) + ":" + next;
    const Json success = {
        {{"request_put", {{"key", key_field}, {"value", base64_encode(next)}}}},
        {{"request_put", {{"key", receipt_field}, {"value", base64_encode(receipt)}}}}};
    const Json failure = {{{"request_range", {{"key", key_field}}}},
                          {{"request_range", {{"key", receipt_field}}}}};
    const Json reply = parse_reply(call("/v3/kv/txn", txn(compare, success, failure).dump()));
    if (succeeded(reply)) return value + delta;
    const Json& results = responses(reply);
    ACC_CHECK(results.size() == 2, StoreError, "etcd answered ", results.size(),
              " of the 2 reads of an add");
    if (auto mine = Entry::in(results[1]); mine && mine->value == receipt) return value + delta;
    seen = Entry::in(results[0]);
  }
}

std::string EtcdClient::compare_set(std::string_view key, std::string_view expected,
                                    std::string_view desired) {
  const Json key_field = encoded_key(key);
  // etcd fails a value comparison on a missing key, so "expected empty" compares absence.
  const Json compare =
      expected.empty()
          ? Json{{"target", "VERSION"}, {"result", "EQUAL"}, {"key", key_field}, {"version", "0"}}
          : Json{{"target", "VALUE"},
                 {"result", "EQUAL"},
                 {"key", key_field},
                 {"value", base64_encode(expected)}};
  const Json success = {{{"request_put", {{"key", key_field}, {"value", base64_encode(desired)}}}}};
  const Json failure = {{{"request_range", {{"key", key_field}}}}};
  const Json reply = parse_reply(call("/v3/kv/txn", txn(compare, success, failure).dump()));
  if (succeeded(reply)) return std::string(desired);
  const Json& results = responses(reply);
  const std::optional<Entry> now = results.empty() ? std::nullopt : Entry::in(results[0]);
  return now ? now->value : std::string(expected);
}

}  // namespace acc::rendezvous
