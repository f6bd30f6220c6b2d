// A StoreServer for scripted tests: serves on 127.0.0.1 (port 0 unless given), prints the port on
// one line, and serves until its standard input closes.

#include <cstdio>
#include <string>

#include "acc/rendezvous/store_server.h"

int main(int argc, char** argv) {
  acc::rendezvous::StoreServerOptions options;
  options.host = "127.0.0.1";
  options.port = argc > 1 ? std::stoi(argv[1]) : 0;
  acc::rendezvous::StoreServer server(options);
  server.start();
  std::printf("%d\n", server.port());
  std::fflush(stdout);
  while (std::getchar() != EOF) {
  }
  server.stop();
  return 0;
}
