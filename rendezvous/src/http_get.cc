#include "acc/rendezvous/http_get.h"

#include "http_connection.h"

namespace acc::rendezvous {

HttpReply http_get(const HttpGet& request) {
  HttpConnection connection(request.address, nullptr, request.server);
  HttpConnection::Headers headers = request.headers;
  // One request: the server need not keep the connection for another.
  headers.emplace_back("Connection", "close");
  return connection.get(request.target, request.timeout, headers);
}

}  // namespace acc::rendezvous
