#include "tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <boost/asio/ssl/error.hpp>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>

#include "acc/common/error.h"

namespace acc::rendezvous {

namespace ssl = boost::asio::ssl;

namespace {

// Runs `load` (one of the context's loaders); ConfigError naming the file when it refuses it.
// (The launcher's plan has already refused a file it cannot read, in its own line.)
template <typename Load>
void load_pem(const std::string& setting, const std::string& path, Load load) {
  boost::system::error_code ec;
  load(ec);
  ACC_CHECK(!ec, ConfigError, setting, "=", path, ": ", ec.message(),
            "; give a PEM file (-----BEGIN ...)");
}

// An OpenSSL error that a setting causes, the same on every try: our verification refused the
// server's certificate, or the server sent an alert (its verification refused ours, or found
// none). Anything else (a member gone mid-record: "unexpected eof") is the network's.
bool is_refusal(unsigned long code) {
  const int reason = ERR_GET_REASON(code);
  return reason == SSL_R_CERTIFICATE_VERIFY_FAILED || reason >= SSL_AD_REASON_OFFSET;
}

// The last OpenSSL error, or the socket's when OpenSSL has none (the peer hung up). `refused`
// says whether it is_refusal().
std::string last_error(int ssl_error, bool& refused) {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  refused = code != 0 && is_refusal(code);
  if (code != 0) {
    const char* reason = ERR_reason_error_string(code);
    return reason ? reason : "TLS error";
  }
  // The socket's SO_RCVTIMEO/SO_SNDTIMEO (the deadline) ran out.
  if (ssl_error == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK))
    return "timed out";
  if (ssl_error == SSL_ERROR_SYSCALL && errno != 0) return std::strerror(errno);
  return "the connection closed";
}

}  // namespace

bool is_ip_address(const std::string& host) {
  unsigned char buffer[16];
  return ::inet_pton(AF_INET, host.c_str(), buffer) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

void expect_host(SSL* ssl, const std::string& host) {
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  if (is_ip_address(host)) {
    X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, host.c_str());  // SNI: names only, never an address
    X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
  }
}

bool is_tls_refusal(const boost::system::error_code& error) {
  return error.category() == boost::asio::error::get_ssl_category() &&
         is_refusal(static_cast<unsigned long>(error.value()));
}

TlsContext::TlsContext(const EtcdTls& tls) : context_(ssl::context::tls_client), files_(tls) {
  trust(tls.ca_file);
  if (!tls.cert_file.empty()) {
    load_pem("--rdzv_conf cert", tls.cert_file, [&](boost::system::error_code& ec) {
      context_.use_certificate_chain_file(tls.cert_file, ec);
    });
    const std::string& key = tls.key_file.empty() ? tls.cert_file : tls.key_file;
    load_pem("--rdzv_conf key", key, [&](boost::system::error_code& ec) {
      context_.use_private_key_file(key, ssl::context::pem, ec);
    });
    ACC_CHECK(SSL_CTX_check_private_key(context_.native_handle()) == 1, ConfigError,
              "--rdzv_conf key=", key, ": not the key of cert=", tls.cert_file,
              "; give the private key that belongs to the certificate");
  }
}

TlsContext::TlsContext(const std::string& ca_file, std::string server, std::string ca_setting)
    : context_(ssl::context::tls_client),
      server_(std::move(server)),
      ca_setting_(std::move(ca_setting)) {
  files_.enabled = true;
  files_.ca_file = ca_file;
  trust(ca_file);
}

void TlsContext::trust(const std::string& ca_file) {
  context_.set_options(ssl::context::no_sslv2 | ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                       ssl::context::no_tlsv1_1);
  context_.set_verify_mode(ssl::verify_peer);
  if (ca_file.empty()) {
    context_.set_default_verify_paths();
  } else {
    load_pem(ca_setting_, ca_file,
             [&](boost::system::error_code& ec) { context_.load_verify_file(ca_file, ec); });
  }
}

std::string TlsContext::other_server_fix(const std::string& why) const {
  if (why.find("verify") != std::string::npos || why.find("mismatch") != std::string::npos)
    return files_.ca_file.empty()
               ? "give " + ca_setting_ + "=PATH, the CA that signed its certificate"
               : "check that " + ca_setting_ + "=" + files_.ca_file +
                     " is the CA that signed its certificate and that the certificate names the "
                     "host as the URL gives it";
  if (why.find("alert") != std::string::npos)
    return "it refused the connection (it may want a client certificate)";
  return "check that it serves https there";
}

std::string TlsContext::failure(const std::string& address, const std::string& why) const {
  if (server_ != "etcd")
    return server_ + " at " + address + ": TLS handshake failed: " + why + "; " +
           other_server_fix(why);
  std::string fix;
  if (why.find("verify") != std::string::npos || why.find("mismatch") != std::string::npos) {
    fix = files_.ca_file.empty()
              ? "give --rdzv_conf cacert=PATH, the CA that signed etcd's certificate"
              : "check that cacert=" + files_.ca_file +
                    " is the CA that signed etcd's certificate and that the certificate names "
                    "the host as --rdzv_endpoint gives it";
  } else if (why.find("alert") != std::string::npos) {
    fix = files_.cert_file.empty()
              ? "etcd wants a client certificate: give --rdzv_conf cert=PATH,key=PATH"
              : "check that cert=" + files_.cert_file +
                    " is signed by the CA etcd trusts (its --trusted-ca-file)";
  } else {
    fix = "check that etcd serves https there (--rdzv_conf protocol=https)";
  }
  return "etcd at " + address + ": TLS handshake failed: " + why + "; " + fix;
}

TlsSession::TlsSession(TlsContext& context, int fd, const std::string& host,
                       const std::string& address, std::chrono::milliseconds timeout)
    : ssl_(SSL_new(context.native().native_handle())) {
  ACC_CHECK(ssl_ != nullptr, NetworkError, "etcd at ", address, ": cannot start TLS");
  const auto usec = std::chrono::duration_cast<std::chrono::microseconds>(timeout).count();
  const timeval limit{static_cast<time_t>(usec / 1'000'000),
                      static_cast<suseconds_t>(usec % 1'000'000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  SSL_set_fd(ssl_, fd);
  expect_host(ssl_, host);
  errno = 0;
  const int done = SSL_connect(ssl_);
  if (done == 1) return;
  const int ssl_error = SSL_get_error(ssl_, done);
  const long verified = SSL_get_verify_result(ssl_);
  bool refused = false;
  std::string why = last_error(ssl_error, refused);
  if (verified != X509_V_OK)
    why += std::string(" (") + X509_verify_cert_error_string(verified) + ")";
  SSL_free(ssl_);
  if (refused) throw ConfigError(context.failure(address, why));
  throw NetworkError("etcd at " + address + ": watch: TLS handshake failed: " + why);
}

TlsSession::~TlsSession() {
  SSL_free(ssl_);
}

bool TlsSession::write(std::string_view data) {
  while (!data.empty()) {
    const int n = SSL_write(ssl_, data.data(), static_cast<int>(data.size()));
    if (n <= 0) {
      ERR_clear_error();
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool TlsSession::read_available(std::string& out) {
  char buffer[4096];
  for (;;) {
    const int n = SSL_read(ssl_, buffer, sizeof buffer);
    if (n > 0) {
      out.append(buffer, static_cast<size_t>(n));
      continue;
    }
    const int error = SSL_get_error(ssl_, n);
    ERR_clear_error();
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return true;
    if (error == SSL_ERROR_SYSCALL && errno == EINTR) continue;
    return false;
  }
}

void TlsSession::rebind(int fd) {
  SSL_set_fd(ssl_, fd);
}

}  // namespace acc::rendezvous
