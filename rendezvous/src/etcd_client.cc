#include "acc/rendezvous/etcd_client.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "acc/common/backoff.h"
#include "acc/common/error.h"
#include "acc/common/strings.h"
#include "base64.h"
#include "http_connection.h"
#include "json.h"

namespace acc::rendezvous {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// etcd refuses a transaction of more than --max-txn-ops (128 by default) operations.
constexpr size_t kOpsPerTxn = 100;
// One attempt on one member: long enough for a proposal during a leader election (etcd's own
// request timeout is about 7 s), short enough to move on from a member that hangs.
constexpr milliseconds kAttemptTimeout{10'000};
constexpr milliseconds kFirstPause{5};
constexpr milliseconds kLongestPause{100};

milliseconds remaining(Clock::time_point deadline) {
  return std::max(milliseconds(0), std::chrono::ceil<milliseconds>(deadline - Clock::now()));
}

std::string bytes_field(std::string_view name, std::string_view bytes) {
  return json::quote(name) + ":" + json::quote(base64_encode(bytes));
}

std::string decoded(const std::string& text) {
  auto bytes = base64_decode(text);
  if (!bytes) throw StoreError("etcd sent a key or value that is not base64: " + text);
  return *bytes;
}

// A transaction: if every comparison holds, the `success` operations, else the `failure` ones.
std::string txn_body(const std::string& compare, const std::vector<std::string>& success,
                     const std::vector<std::string>& failure) {
  std::string body = "{";
  if (!compare.empty()) body += "\"compare\":[" + compare + "],";
  body += "\"success\":[" + join(success, ",") + "]";
  if (!failure.empty()) body += ",\"failure\":[" + join(failure, ",") + "]";
  return body + "}";
}

// The "responses" of a transaction reply (empty when absent).
const std::vector<json::Value>& responses(const json::Value& reply) {
  static const std::vector<json::Value> kNone;
  const json::Value* found = reply.find("responses");
  return found ? found->items : kNone;
}

bool succeeded(const json::Value& reply) {
  const json::Value* found = reply.find("succeeded");
  return found && found->boolean;
}

// One "key ..." list for an error message, shortened past a few keys.
std::string key_list(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size() && i < 3; ++i) out += (i ? ", " : "") + keys[i];
  if (keys.size() > 3) out += " and " + std::to_string(keys.size() - 3) + " more";
  return out;
}

}  // namespace

EtcdClient::EtcdClient(EtcdClientOptions options) : options_(std::move(options)) {
  std::random_device entropy;
  char id[17];
  std::snprintf(id, sizeof id, "%08x%08x", entropy(), entropy());
  receipt_key_ = std::string(".receipts/") + id;
  ACC_CHECK(!options_.endpoints.empty(), ConfigError,
            "--rdzv_endpoint: give the etcd members' client addresses, host:port[,host:port...]");
  for (const auto& endpoint : options_.endpoints)
    members_.push_back(std::make_unique<HttpConnection>(endpoint));
  call("/v3/maintenance/status", "{}");
}

EtcdClient::~EtcdClient() {
  if (adds_ == 0) return;
  // Best effort, one short try: the receipt only matters to this client's adds.
  try {
    members_[current_]->post("/v3/kv/deleterange", "{" + encoded_key(receipt_key_) + "}",
                             milliseconds(500));
  } catch (const Error&) {
  }
}

const std::string& EtcdClient::endpoint() const {
  return members_[current_]->address();
}

std::string EtcdClient::call(std::string_view path, const std::string& body) {
  const auto deadline = Clock::now() + options_.timeout;
  Backoff backoff(kFirstPause, kLongestPause * 5);  // between full passes over the members
  std::string last_failure;
  for (size_t failures = 1;; ++failures) {
    HttpConnection& member = *members_[current_];
    try {
      auto reply = member.post(path, body,
                               std::clamp(remaining(deadline), milliseconds(1), kAttemptTimeout));
      if (reply.status == 200) return reply.body;
      std::string message = reply.body;
      try {
        message = json::parse(reply.body).text_of("message", reply.body);
      } catch (const StoreError&) {
        // Not JSON (a proxy's page?): the body as it came says more than nothing.
      }
      // A malformed request is our bug, the same on every member: no point trying the others.
      ACC_CHECK(reply.status != 400 && reply.status != 404, StoreError, "etcd at ",
                member.address(), " refused ", path, " (HTTP ", reply.status, "): ", message);
      last_failure = detail::concat(member.address(), ": HTTP ", reply.status, ": ", message);
    } catch (const NetworkError& e) {
      last_failure = e.what();
    }
    // This member cannot serve now (down, no leader, shutting down): move on to the next.
    current_ = (current_ + 1) % members_.size();
    if (Clock::now() >= deadline) {
      throw NetworkError(detail::concat("no etcd member at ", join(options_.endpoints, ","),
                                        " answered within ", options_.timeout.count(),
                                        " ms (last: ", last_failure,
                                        "); check --rdzv_endpoint and the cluster's health"));
    }
    if (failures % members_.size() == 0) {
      backoff.sleep(deadline);
    }
  }
}

std::string EtcdClient::encoded_key(std::string_view key) const {
  return bytes_field("key", options_.key_prefix + std::string(key));
}

void EtcdClient::set(std::string_view key, std::string_view value) {
  call("/v3/kv/put", "{" + encoded_key(key) + "," + bytes_field("value", value) + "}");
}

std::optional<EtcdClient::Entry> EtcdClient::entry_in(const json::Value& response) {
  const json::Value* range = response.find("response_range");
  const json::Value* kvs = range ? range->find("kvs") : nullptr;
  if (!kvs || kvs->items.empty()) return std::nullopt;
  const json::Value& kv = kvs->items.front();
  return Entry{decoded(kv.text_of("value")), kv.text_of("mod_revision")};
}

std::vector<std::optional<EtcdClient::Entry>> EtcdClient::read(
    const std::vector<std::string>& keys) {
  std::vector<std::optional<Entry>> entries;
  for (size_t first = 0; first < keys.size(); first += kOpsPerTxn) {
    std::vector<std::string> ranges;
    for (size_t i = first; i < std::min(keys.size(), first + kOpsPerTxn); ++i)
      ranges.push_back("{\"request_range\":{" + encoded_key(keys[i]) + "}}");
    const json::Value reply = json::parse(call("/v3/kv/txn", txn_body("", ranges, {})));
    const auto& results = responses(reply);
    ACC_CHECK(results.size() == ranges.size(), StoreError, "etcd answered ", results.size(),
              " of the ", ranges.size(), " reads of one transaction");
    for (const json::Value& result : results) entries.push_back(entry_in(result));
  }
  return entries;
}

std::vector<std::string> EtcdClient::await(const std::vector<std::string>& keys,
                                           milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  Backoff backoff(kFirstPause, kLongestPause);
  for (;;) {
    auto entries = read(keys);
    if (std::all_of(entries.begin(), entries.end(), [](const auto& e) { return e.has_value(); })) {
      std::vector<std::string> values;
      for (auto& entry : entries) values.push_back(std::move(entry->value));
      return values;
    }
    if (Clock::now() >= deadline)
      throw TimeoutError(
          detail::concat("etcd: ", key_list(keys), " not set within ", timeout.count(), " ms"));
    backoff.sleep(deadline);
  }
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
    std::vector<std::string> puts;
    for (size_t i = first; i < std::min(keys.size(), first + kOpsPerTxn); ++i)
      puts.push_back("{\"request_put\":{" + encoded_key(keys[i]) + "," +
                     bytes_field("value", values[i]) + "}}");
    call("/v3/kv/txn", txn_body("", puts, {}));
  }
}

std::int64_t EtcdClient::add(std::string_view key, std::int64_t delta) {
  const std::string name(key);
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
    const std::string compare = seen ? "{\"target\":\"MOD\",\"result\":\"EQUAL\"," +
                                           encoded_key(name) + ",\"mod_revision\":\"" +
                                           seen->mod_revision + "\"}"
                                     : "{\"target\":\"VERSION\",\"result\":\"EQUAL\"," +
                                           encoded_key(name) + ",\"version\":\"0\"}";
    // The same transaction also writes this client's receipt, unique to this attempt: when
    // call() resends it after a reply was lost, the compare fails (our own write moved the
    // revision) and the receipt tells that the add was applied, so it is not made twice.
    const std::string next = std::to_string(value + delta);
    const std::string receipt = std::to_string(++adds_) + ":" + next;
    const json::Value reply = json::parse(
        call("/v3/kv/txn", txn_body(compare,
                                    {"{\"request_put\":{" + encoded_key(name) + "," +
                                         bytes_field("value", next) + "}}",
                                     "{\"request_put\":{" + encoded_key(receipt_key_) + "," +
                                         bytes_field("value", receipt) + "}}"},
                                    {"{\"request_range\":{" + encoded_key(name) + "}}",
                                     "{\"request_range\":{" + encoded_key(receipt_key_) + "}}"})));
    if (succeeded(reply)) return value + delta;
    const auto& results = responses(reply);
    ACC_CHECK(results.size() == 2, StoreError, "etcd answered ", results.size(),
              " of the 2 reads of an add");
    if (auto mine = entry_in(results[1]); mine && mine->value == receipt) return value + delta;
    seen = entry_in(results[0]);
  }
}

std::string EtcdClient::compare_set(std::string_view key, std::string_view expected,
                                    std::string_view desired) {
  // etcd fails a value comparison on a missing key, so "expected empty" compares absence.
  const std::string compare = expected.empty() ? "{\"target\":\"VERSION\",\"result\":\"EQUAL\"," +
                                                     encoded_key(key) + ",\"version\":\"0\"}"
                                               : "{\"target\":\"VALUE\",\"result\":\"EQUAL\"," +
                                                     encoded_key(key) + "," +
                                                     bytes_field("value", expected) + "}";
  const json::Value reply =
      json::parse(call("/v3/kv/txn", txn_body(compare,
                                              {"{\"request_put\":{" + encoded_key(key) + "," +
                                               bytes_field("value", desired) + "}}"},
                                              {"{\"request_range\":{" + encoded_key(key) + "}}"})));
  if (succeeded(reply)) return std::string(desired);
  const auto& results = responses(reply);
  const std::optional<Entry> now = results.empty() ? std::nullopt : entry_in(results[0]);
  return now ? now->value : std::string(expected);
}

}  // namespace acc::rendezvous
