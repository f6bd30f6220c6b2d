#pragma once

// TLS to etcd (--rdzv_conf protocol=https,cacert=,cert=,key=): one OpenSSL client context, made
// once per EtcdClient and shared by its HTTP connections (Boost.Beast's ssl_stream) and its
// watches (a raw socket the agent polls, with an OpenSSL session over it). Also the context of
// https_post.h's one request to another server (Kubeflow Trainer's status server), from a CA
// file that a setting of that caller's names.

#include <boost/asio/ssl/context.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "acc/rendezvous/etcd_client.h"

using SSL = struct ssl_st;

namespace acc::rendezvous {

class TlsContext {
 public:
  // Loads the CA certificates (cacert, else the system's) and the client certificate and key,
  // when given. Throws ConfigError naming the file and the fix when one cannot be read or is not
  // PEM. Not thread-safe while building; the result is read-only after.
  explicit TlsContext(const EtcdTls& tls);
  // For `server` ("Kubeflow Trainer's status server"), which it trusts by `ca_file` alone (the
  // system's CAs when empty), no client certificate; errors name the file as `ca_setting`=PATH
  // ("KUBEFLOW_TRAINER_SERVER_CA_CERT"). Throws ConfigError as the other.
  TlsContext(const std::string& ca_file, std::string server, std::string ca_setting);

  boost::asio::ssl::context& native() { return context_; }
  // The one-line reason a handshake or TLS read failed with `error`, with what to do about it:
  // names `address` and the files this context was built from.
  std::string failure(const std::string& address, const std::string& why) const;

 private:
  // The context's protocols, verification and CAs.
  void trust(const std::string& ca_file);
  // The fix a refused handshake names, for another server than etcd.
  std::string other_server_fix(const std::string& why) const;

  boost::asio::ssl::context context_;
  EtcdTls files_;
  std::string server_ = "etcd";
  std::string ca_setting_ = "--rdzv_conf cacert";  // how errors name files_.ca_file
};

// True when `error` is OpenSSL refusing the peer (a certificate that does not verify) or the
// peer refusing us (an alert: our certificate refused or missing): a setting to fix, not a
// member to retry. A connection that broke mid-record is not one.
bool is_tls_refusal(const boost::system::error_code& error);

// An OpenSSL session over a connected, blocking socket `fd` (not owned) to `host`, handshaken
// within `timeout`: the server's certificate verified against the context's CAs and `host` (a name
// or an IP address, as the certificate's subject alternative names give it). ConfigError (from
// TlsContext::failure) when the handshake is refused; NetworkError when the connection breaks.
class TlsSession {
 public:
  TlsSession(TlsContext& context, int fd, const std::string& host, const std::string& address,
             std::chrono::milliseconds timeout);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // Sends all of `data`, blocking; false when the connection broke.
  bool write(std::string_view data);
  // Reads what is there without blocking (the socket is non-blocking by then) and appends it to
  // `out`; false when the stream ended or broke, true when it would block.
  bool read_available(std::string& out);
  // Moves the session onto another descriptor holding the same connection (dup3'd).
  void rebind(int fd);

 private:
  SSL* ssl_;
};

// Host `host` (as in the endpoint) as OpenSSL checks it: an IP address literal or a DNS name.
bool is_ip_address(const std::string& host);
// Sets up `ssl` to send `host` as SNI (a name only, never an address) and to refuse a
// certificate that does not name it (X509_V_ERR_HOSTNAME_MISMATCH or IP_ADDRESS_MISMATCH, which
// the one-line error then states).
void expect_host(SSL* ssl, const std::string& host);

}  // namespace acc::rendezvous
