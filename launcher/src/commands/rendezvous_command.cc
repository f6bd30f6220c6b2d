#include "commands/rendezvous_command.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "acc/common/endpoint.h"
#include "acc/rendezvous/store_server.h"
#include "cli/flag_spelling.h"
#include "commands/command_line.h"

namespace acc::launcher {
namespace {

int serve(rendezvous::StoreServerOptions options, bool host_given) {
  // Signals are taken synchronously by this thread: blocked before the server's thread starts so
  // that it inherits the mask and never runs a handler itself.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  options.host = parse_host(options.host, "--host");  // [::1] as well as ::1
  // Its clients are other machines, so every interface stays the default; the store has no
  // authorisation (PyTorch's SECURITY.md), so the line says how to narrow it.
  if (!host_given)
    std::fprintf(stderr,
                 "acc-launch rendezvous: no --host: the store listens on every interface (%s); "
                 "--host ADDRESS listens on that address alone\n",
                 options.host.c_str());
  // A bind failure throws NetworkError: main prints its one line and exits 3.
  const bool secret = !options.job_secret.empty();
  rendezvous::StoreServer server(std::move(options));
  server.start();
  // The server has raised its soft open-file limit to the hard one: that bounds its clients
  // (one connection per node, two per 1.13 worker), so the line says it.
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  const std::string limit =
      files.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(files.rlim_cur);
  std::printf(
      "acc-launch rendezvous: store listening on %s (PyTorch TCPStore protocol; open-file limit "
      "%s%s)\n",
      server.address().c_str(), limit.c_str(),
      secret ? "; launchers must prove the job secret" : "");
  std::fflush(stdout);
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  server.stop();
  return 0;
}

}  // namespace

int run_rendezvous_command(const std::vector<std::string>& args) {
  CLI::App app{"The rendezvous store: a server for PyTorch's TCPStore clients",
               "acc-launch rendezvous"};
  app.require_subcommand(1);
  CLI::App* serve_command = app.add_subcommand(
      "serve",
      "Serve the store until SIGINT or SIGTERM (torchrun's c10d endpoint, or an agent "
      "store for TORCHELASTIC_USE_AGENT_STORE=True workers)");
  rendezvous::StoreServerOptions options;
  std::string compat = "1.13";
  CLI::Option* host =
      serve_command
          ->add_option("--host", options.host,
                       "Address to listen on (\"::\" for IPv6 too); every interface without it")
          ->capture_default_str();
  options.port = 29400;
  serve_command->add_option("--port", options.port, "Port to listen on; 0 picks a free one")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  serve_command
      ->add_option(flag_spellings("store_compat"), compat,
                   "PyTorch generation of clients that send no handshake: 1.13 (1.13 to 2.0) or "
                   "2.1; 2.2+ clients are recognised either way")
      ->check(CLI::IsMember({"1.13", "2.1"}))
      ->capture_default_str();
  std::string secret_file;
  serve_command->add_option(
      flag_spellings("job_secret_file"), secret_file,
      "A file (mode 600) holding the job secret: only launchers that prove it write the "
      "launchers' keys (--rdzv_conf job_secret_file=PATH on theirs); default: "
      "$ACC_JOB_SECRET_FILE");
  serve_command->add_flag(
      flag_spellings("admit_members_only"), options.admit_members_only,
      "With a job secret: serve loopback and the addresses from which a launcher proved it, "
      "nobody else (--rdzv_conf admit_members_only on the launchers)");
  if (std::optional<int> exit_code = parse_command_line(app, args)) return *exit_code;
  // A file that cannot be read throws ConfigError: main prints its one line and exits 2.
  options.job_secret = given_job_secret(secret_file);
  options.legacy_dialect =
      compat == "2.1" ? rendezvous::Dialect::kV2_1 : rendezvous::Dialect::kV1_13;
  return serve(std::move(options), host->count() > 0);
}

}  // namespace acc::launcher
