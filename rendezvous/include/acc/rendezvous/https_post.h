#pragma once

// One HTTPS POST of a JSON body to a server other than etcd, over the library's one TLS client
// (the HttpConnection and TlsContext that etcd's gateway uses), for the launcher's calls to a
// cluster's services: Kubeflow Trainer's status server (launcher/src/status/kubeflow_progress.h).
// A new connection per call, so that a CA file that changed (a rotated certificate) is read again.

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace acc::rendezvous {

struct HttpsPost {
  std::string address;  // host:port ("[::1]:8443" for IPv6)
  std::string target;   // the path and query: "/apis/.../status"
  std::string ca_file;  // PEM, the CAs the server's certificate must chain to; empty: the system's
  std::string server;   // how errors name the server: "Kubeflow Trainer's status server"
  std::string ca_setting;  // how errors name ca_file: "KUBEFLOW_TRAINER_SERVER_CA_CERT"
  std::vector<std::pair<std::string, std::string>> headers;  // besides Host, Content-Type (JSON)
  std::string body;
  std::chrono::milliseconds timeout{5000};  // for connecting (and the handshake), then again for
                                            // the request and its reply
};

struct HttpsReply {
  int status = 0;  // 200, 403...
  std::string body;
};

// Connects to `request.address`, verifies its certificate against the CAs and the host as the
// address names it, POSTs, reads the reply and closes: at most twice `request.timeout`. Blocks;
// safe to call from any thread (nothing is shared between calls). Throws NetworkError (naming the
// server and address) when it cannot be reached, the connection breaks or the time runs out;
// ConfigError (one line with the fix) when the CA file cannot be read or the handshake is
// refused either way. A reply of any status is returned, not thrown.
HttpsReply https_post(const HttpsPost& request);

}  // namespace acc::rendezvous
