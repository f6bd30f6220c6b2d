#include "acc/rendezvous/store_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "acc/common/error.h"
#include "acc/rendezvous/job_secret.h"
#include "acc/rendezvous/protocol.h"
#include "acc/rendezvous/tcp_connect.h"

namespace acc::rendezvous {
namespace {

using std::chrono::milliseconds;

constexpr const char* kServerClosed = "the store server closed the connection";

// A server that has gone away shows as an end of stream, or, when a request was on its way as it
// closed, as a reset (or a broken pipe on the next send): to the user these are one event.
bool closed_by_peer(int error) {
  return error == ECONNRESET || error == EPIPE;
}

int remaining_ms(Clock::time_point deadline) {
  // Rounded up: a wait must not end before its deadline.
  auto left = std::chrono::ceil<milliseconds>(deadline - Clock::steady().now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

std::string describe(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& key : keys) out += (out.empty() ? "" : ", ") + key;
  return out;
}

}  // namespace

StoreClient::StoreClient(StoreClientOptions options) : options_(std::move(options)) {
  std::string where = options_.host + ":" + std::to_string(options_.port);
  const TcpResolution resolved = resolve_tcp(options_.host, options_.port);
  ACC_CHECK(resolved.status == 0, NetworkError, "cannot resolve store host '", options_.host,
            "': ", resolved.error());
  const Clock& clock = Clock::steady();
  // The server may not be up yet (another node starts it): try again, soon at first.
  fd_ = connect_tcp_until(resolved.addresses, clock.now() + options_.connect_timeout, clock,
                          milliseconds(50), milliseconds(1000))
            .fd.release();
  ACC_CHECK(fd_ >= 0, TimeoutError, "no store server answered at ", where, " within ",
            options_.connect_timeout.count(), " ms; is it running and reachable?");

  std::string hello;
  encode_request({Op::kValidate, {}, {}, kValidationMagic}, Dialect::kV2_2, hello);
  auto nonce = static_cast<std::uint32_t>(::getpid());
  encode_request({Op::kPing, {}, {}, nonce}, Dialect::kV2_2, hello);
  const milliseconds handshake =
      options_.handshake_timeout.count() > 0 ? options_.handshake_timeout : options_.timeout;
  bool answered = false;
  try {
    send(hello);
    char echo[4];
    answered = receive(echo, sizeof(echo), handshake);
    if (answered && load_u32({echo, 4}) != nonce)
      broken("the server at " + where + " did not echo PING");
  } catch (const NetworkError& e) {
    throw StoreHandshakeFailed(e.what());  // broken() has closed the connection
  }
  if (!answered) {
    ::close(fd_);
    fd_ = -1;
    throw StoreHandshakeTimeout(acc::detail::concat(
        where, " accepted the connection but did not answer as a store (PyTorch's TCPStore ",
        "protocol) within ", handshake.count(), " ms; is another service on that port?"));
  }
  if (options_.job_member) join_job(where);
}

void StoreClient::join_job(const std::string& where) {
  if (!check({std::string(kJobNonceKey)})) return;  // the store asks no secret
  const std::string how =
      "the job's secret file (--rdzv_conf job_secret_file=PATH, or ACC_JOB_SECRET_FILE=PATH), "
      "the same on every node";
  if (options_.job_secret.empty()) {
    ::close(fd_);
    fd_ = -1;
    throw ConfigError("the store at " + where +
                      " serves a job with a job secret, and this launcher has none: give it " +
                      how);
  }
  bool member = false;
  try {
    set(kJobProofKey, job_proof(options_.job_secret, get(kJobNonceKey)));
    member = check({std::string(kJobMemberKey)});
  } catch (const NetworkError&) {
    // A wrong proof closes the connection.
  }
  ACC_CHECK(member, ConfigError, "the store at ", where,
            " refused this launcher's job secret: it is not its job's; give it ", how);
}

StoreClient::~StoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

void StoreClient::set(std::string_view key, std::string_view value) {
  std::string out;
  encode_request({Op::kSet, {prefixed(key)}, {std::string(value)}, 0}, Dialect::kV2_2, out);
  send(out);
}

std::string StoreClient::get(std::string_view key) {
  return multi_get({std::string(key)}).at(0);
}

std::int64_t StoreClient::add(std::string_view key, std::int64_t delta) {
  std::string out;
  encode_request({Op::kAdd, {prefixed(key)}, {}, delta}, Dialect::kV2_2, out);
  send(out);
  return receive_i64();
}

std::string StoreClient::compare_set(std::string_view key, std::string_view expected,
                                     std::string_view desired) {
  std::string out;
  encode_request(
      {Op::kCompareSet, {prefixed(key)}, {std::string(expected), std::string(desired)}, 0},
      Dialect::kV2_2, out);
  send(out);
  return receive_bytes();
}

void StoreClient::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  std::string out;
  encode_request({Op::kWait, prefixed(keys), {}, 0}, Dialect::kV2_2, out);
  send(out);
  char byte = 0;
  if (receive(&byte, 1, timeout)) {
    if (byte != static_cast<char>(kStopWaiting)) broken("unexpected reply to WAIT");
    return;
  }
  // Timed out: cancel on the server, which answers WAIT_CANCELED, possibly after a STOP_WAITING
  // that raced with the cancel. Either way the stream is back in step.
  std::string cancel;
  encode_request({Op::kCancelWait, {}, {}, 0}, Dialect::kV2_2, cancel);
  send(cancel);
  std::uint8_t reply = receive_u8(options_.timeout);
  if (reply == kStopWaiting) reply = receive_u8(options_.timeout);
  if (reply != kWaitCanceled) broken("unexpected reply to CANCEL_WAIT");
  throw TimeoutError(acc::detail::concat("waiting for keys [", describe(keys), "] on store ",
                                         options_.host, ":", options_.port, " timed out after ",
                                         timeout.count(), " ms"));
}

void StoreClient::begin_wait(const std::vector<std::string>& keys) {
  std::string out;
  encode_request({Op::kWait, prefixed(keys), {}, 0}, Dialect::kV2_2, out);
  send(out);
}

bool StoreClient::wait_ended() {
  char byte = 0;
  if (!receive(&byte, 1, milliseconds(0))) return false;
  if (byte != static_cast<char>(kStopWaiting)) broken("unexpected reply to WAIT");
  return true;
}

bool StoreClient::check(const std::vector<std::string>& keys) {
  std::string out;
  encode_request({Op::kCheck, prefixed(keys), {}, 0}, Dialect::kV2_2, out);
  send(out);
  return receive_u8(options_.timeout) == kCheckReady;
}

std::vector<std::string> StoreClient::multi_get(const std::vector<std::string>& keys) {
  wait(keys, options_.timeout);
  std::string out;
  encode_request({Op::kMultiGet, prefixed(keys), {}, 0}, Dialect::kV2_2, out);
  send(out);
  std::vector<std::string> values;
  for (std::size_t i = 0; i < keys.size(); ++i) values.push_back(receive_bytes());
  return values;
}

void StoreClient::multi_set(const std::vector<std::string>& keys,
                            const std::vector<std::string>& values) {
  ACC_CHECK(keys.size() == values.size(), StoreError, "multi_set got ", keys.size(), " keys but ",
            values.size(), " values");
  std::string out;
  encode_request({Op::kMultiSet, prefixed(keys), values, 0}, Dialect::kV2_2, out);
  send(out);
}

void StoreClient::append(std::string_view key, std::string_view value) {
  std::string out;
  encode_request({Op::kAppend, {prefixed(key)}, {std::string(value)}, 0}, Dialect::kV2_2, out);
  send(out);
}

bool StoreClient::delete_key(std::string_view key) {
  std::string out;
  encode_request({Op::kDeleteKey, {prefixed(key)}, {}, 0}, Dialect::kV2_2, out);
  send(out);
  return receive_i64() != 0;
}

std::int64_t StoreClient::num_keys() {
  std::string out;
  encode_request({Op::kGetNumKeys, {}, {}, 0}, Dialect::kV2_2, out);
  send(out);
  return receive_i64();
}

void StoreClient::send(std::string_view bytes) {
  if (fd_ < 0) broken("the connection is closed after an earlier error");
  ++traffic_.requests;
  traffic_.bytes_sent += static_cast<std::int64_t>(bytes.size());
  while (!bytes.empty()) {
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && closed_by_peer(errno)) broken(kServerClosed);
    if (n <= 0) broken(std::string("send failed: ") + std::strerror(errno));
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

bool StoreClient::receive(char* data, std::size_t size, milliseconds timeout) {
  if (fd_ < 0) broken("the connection is closed after an earlier error");
  auto deadline = Clock::steady().now() + timeout;
  while (size > 0) {
    pollfd p{fd_, POLLIN, 0};
    int ready = ::poll(&p, 1, remaining_ms(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return false;
    ssize_t n = ::recv(fd_, data, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (n < 0 && closed_by_peer(errno))) broken(kServerClosed);
    if (n < 0) broken(std::string("receive failed: ") + std::strerror(errno));
    traffic_.bytes_received += n;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

void StoreClient::receive_all(char* data, std::size_t size, milliseconds timeout) {
  if (receive(data, size, timeout)) return;
  // A reply cut off part-way leaves the stream out of step: the connection cannot be reused.
  ::close(fd_);
  fd_ = -1;
  throw TimeoutError(acc::detail::concat("store ", options_.host, ":", options_.port,
                                         " did not reply within ", timeout.count(), " ms"));
}

std::uint8_t StoreClient::receive_u8(milliseconds timeout) {
  char byte = 0;
  receive_all(&byte, 1, timeout);
  return static_cast<std::uint8_t>(byte);
}

std::int64_t StoreClient::receive_i64() {
  char bytes[8];
  receive_all(bytes, sizeof(bytes), options_.timeout);
  return static_cast<std::int64_t>(load_u64({bytes, 8}));
}

std::string StoreClient::receive_bytes() {
  char header[8];
  receive_all(header, sizeof(header), options_.timeout);
  std::uint64_t size = load_u64({header, 8});
  if (size > Limits{}.max_value_bytes) broken("reply of " + std::to_string(size) + " bytes");
  std::string value(size, '\0');
  receive_all(value.data(), value.size(), options_.timeout);
  return value;
}

void StoreClient::broken(const std::string& what) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  throw NetworkError("store " + options_.host + ":" + std::to_string(options_.port) + ": " + what);
}

std::string StoreClient::prefixed(std::string_view key) const {
  return "/" + std::string(key);
}

std::vector<std::string> StoreClient::prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& key : keys) out.push_back(prefixed(key));
  return out;
}

}  // namespace acc::rendezvous
