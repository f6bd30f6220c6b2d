#include "acc/rendezvous/https_post.h"

#include <memory>

#include "http_connection.h"
#include "tls_context.h"

namespace acc::rendezvous {

HttpsReply https_post(const HttpsPost& request) {
  auto tls = std::make_shared<TlsContext>(request.ca_file, request.server, request.ca_setting);
  HttpConnection connection(request.address, std::move(tls), request.server);
  HttpConnection::Reply reply =
      connection.post(request.target, request.body, request.timeout, request.headers);
  return HttpsReply{reply.status, std::move(reply.body)};
}

}  // namespace acc::rendezvous
