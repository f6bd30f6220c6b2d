// `acc-launch top [--url URL]`: the running job's ranks, live in the terminal, from the status a
// launcher serves with --status_port (status/status_server.h): per rank its state, steps per
// second, step time, share of time in collectives, last collective and quiet time. Refreshes in
// place each --interval seconds; q quits. Without --url it reads the URL a launcher of this user
// on this machine published; --once prints the table once (for scripts).

#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "acc/common/endpoint.h"
#include "acc/common/error.h"
#include "acc/common/strings.h"
#include "acc/rendezvous/clock.h"
#include "acc/rendezvous/http_get.h"
#include "commands/command_line.h"
#include "commands/commands.h"
#include "commands/launchers.h"
#include "output/console.h"
#include "status/status_server.h"

namespace acc::launcher {
namespace {

using Clock = rendezvous::Clock;
// For the connection, and again for the request and its reply: a launcher answers in
// milliseconds.
constexpr std::chrono::seconds kTimeout{2};

struct Url {
  std::string text;     // as given
  std::string address;  // host:port, [IPv6]:port
};

// "http://host:port/..." -> its address. Throws ConfigError for anything else.
Url parse_url(const std::string& url) {
  const std::string prefix = "http://";
  ACC_CHECK(starts_with(url, prefix), ConfigError, "acc-launch top: --url '", escape_control(url),
            "': expected http://HOST:PORT/ as the launcher printed it");
  std::string rest = url.substr(prefix.size());
  rest = rest.substr(0, rest.find('/'));
  std::string host;
  if (!rest.empty() && rest[0] == '[') {
    const size_t close = rest.find(']');
    ACC_CHECK(close != std::string::npos, ConfigError, "acc-launch top: --url '", url,
              "': no ] after the IPv6 address");
    host = rest.substr(1, close - 1);
    rest = rest.substr(close + 1);
  } else {
    host = rest.substr(0, rest.find(':'));
    rest = rest.find(':') == std::string::npos ? "" : rest.substr(rest.find(':'));
  }
  const std::optional<int> port = parse_int(starts_with(rest, ":") ? rest.substr(1) : "80");
  ACC_CHECK(!host.empty() && port, ConfigError, "acc-launch top: --url '", url,
            "': expected http://HOST:PORT/");
  // The host and port as the launcher's other flags take them: a host that is not a name or an
  // address, or a port past 65535, is one line here rather than a job that seems to have ended.
  const Endpoint endpoint =
      parse_endpoint(Endpoint{host, *port}.to_string(), 0, "acc-launch top: --url");
  return Url{url, endpoint.to_string()};
}

// What top says for `failure` of GET `path`: a server that does not connect or answer in time,
// or answers what is not HTTP, is likely not a launcher's status port.
std::string failure_line(const Url& url, const std::string& path,
                         const rendezvous::HttpError& failure) {
  const std::string seconds = std::to_string(kTimeout.count()) + " s";
  switch (failure.failure()) {
    case rendezvous::HttpFailure::kConnectTimeout:
      return acc::detail::concat("acc-launch top: ", url.text,
                                 " did not accept a connection within ", seconds,
                                 "; check the address, or give the --url the launcher printed");
    case rendezvous::HttpFailure::kReplyTimeout:
      return acc::detail::concat("acc-launch top: ", url.text,
                                 " accepted the connection but did not answer ", path, " within ",
                                 seconds, "; is that a launcher's --status_port?");
    default:
      return acc::detail::concat("acc-launch top: ", url.text, " answered ", path,
                                 " with what is not HTTP (", failure.reason(),
                                 "); is that a launcher's --status_port?");
  }
}

// GET `path` from `url`'s server, its connection and its reply each within kTimeout; the body of
// a 200 reply, nullopt when nobody answers there (the launcher has gone: refused, or closed
// without a reply). Throws NetworkError for a server that does not connect or answer in time,
// and for any reply but a 200. `token` (status_token), where given, goes as the Authorization.
std::optional<std::string> http_get(const Url& url, const std::string& path,
                                    const std::string& token) {
  rendezvous::HttpGet request;
  request.address = url.address;
  request.target = path;
  request.server = "acc-launch top: " + url.text;
  if (!token.empty()) request.headers.emplace_back("Authorization", "Bearer " + token);
  request.timeout = kTimeout;
  rendezvous::HttpReply reply;
  try {
    reply = rendezvous::http_get(request);
  } catch (const rendezvous::HttpError& e) {
    if (e.failure() == rendezvous::HttpFailure::kUnreachable ||
        e.failure() == rendezvous::HttpFailure::kClosed)
      return std::nullopt;
    throw NetworkError(failure_line(url, path, e));
  }
  // A refusal says why in its body (the status server's 401 and 403: the job's secret).
  const bool refused = reply.status == 401 || reply.status == 403;
  ACC_CHECK(reply.status == 200, NetworkError, "acc-launch top: ", path, " answered '",
            reply.status, " ", one_line(reply.reason), "'",
            refused ? ": " + one_line(reply.body) : ", not 200");
  return std::move(reply.body);
}

// The URL of the one launcher of this user here that serves its status.
std::string find_status_url() {
  std::vector<std::string> urls;
  for (int pid : find_launchers()) {
    std::ifstream file(status_url_path(pid));
    std::string url;
    if (owned_by_me(status_url_path(pid)) && std::getline(file, url) && !url.empty())
      urls.push_back(url);
  }
  ACC_CHECK(!urls.empty(), ConfigError,
            "acc-launch top: no launcher of yours on this machine serves its status; start it "
            "with --status_port 0, or give --url");
  ACC_CHECK(urls.size() == 1, ConfigError, "acc-launch top: ", urls.size(),
            " launchers serve their status here (", join(urls, ", "), "); choose one with --url");
  return urls.front();
}

std::string seconds_text(const nlohmann::json& value) {
  if (!value.is_number()) return "-";
  const double s = value.get<double>();
  return s < 1 ? fixed(s * 1000, 1) + " ms" : fixed(s, 2) + " s";
}

// One look: the job's line and a row per rank. `before` is the previous look (for the rates).
std::string render(const nlohmann::json& job, const nlohmann::json* before, double elapsed) {
  std::map<int, const nlohmann::json*> previous;
  if (before)
    for (const auto& r : (*before)["ranks"]) previous[r["rank"].get<int>()] = &r;
  std::string out =
      "acc-launch top: job " + job["job_id"].get<std::string>() + " on " +
      job["host"].get<std::string>() + " (node " + std::to_string(job["node_rank"].get<int>()) +
      " of " + std::to_string(job["nnodes"].get<int>()) + "), world size " +
      std::to_string(job["world_size"].get<int>()) + ", " + job["phase"].get<std::string>() +
      ", attempt " + std::to_string(job["attempt"].get<int>()) + ", " +
      std::to_string(job["restarts"].get<int>()) + " restart(s); q quits\n\n";
  char line[256];
  std::snprintf(line, sizeof(line), "%5s %5s  %-10s %8s %10s %7s  %-32s %9s %5s\n", "rank", "node",
                "state", "step/s", "step time", "% coll", "last collective", "quiet", "GPU %");
  out += line;
  for (const auto& r : job["ranks"]) {
    std::string rate = "-", share = "-";
    const auto it = previous.find(r["rank"].get<int>());
    if (it != previous.end() && elapsed > 0) {
      const auto& p = *it->second;
      rate = fixed(
          static_cast<double>(r["steps"].get<long long>() - p["steps"].get<long long>()) / elapsed,
          1);
      share = fixed(
          100 * (r["collective_seconds"].get<double>() - p["collective_seconds"].get<double>()) /
              elapsed,
          0);
    }
    const std::string gpu =
        r["gpu_busy"].is_number() ? fixed(100 * r["gpu_busy"].get<double>(), 0) : "-";
    std::string state = r["state"].get<std::string>();
    if (r["straggler"].get<bool>()) state += "*";
    std::string last = r["last_collective"].get<std::string>().substr(0, 24);
    if (last.empty()) last = "-";
    if (r["in_collective"].get<bool>()) last += " (in it)";
    std::snprintf(line, sizeof(line), "%5d %5d  %-10s %8s %10s %7s  %-32s %9s %5s\n",
                  r["rank"].get<int>(), r["node"].get<int>(), state.c_str(), rate.c_str(),
                  seconds_text(r["step_seconds"]).c_str(), share.c_str(), last.c_str(),
                  seconds_text(r["seconds_since_progress"]).c_str(), gpu.c_str());
    out += line;
  }
  // The last recovery, from a launcher that reports them (an older one does not).
  if (job.contains("recoveries") && job["recoveries"].is_array() && !job["recoveries"].empty()) {
    const auto& r = job["recoveries"].back();
    out += "\nlast recovery: attempt " + std::to_string(r["attempt"].get<int>()) + " in " +
           seconds_text(r["seconds"]) + " (stop " + seconds_text(r["stop_seconds"]) +
           ", rendezvous " + seconds_text(r["rendezvous_seconds"]) + ", spawn " +
           seconds_text(r["spawn_seconds"]) + "): " + r["cause"].get<std::string>() + "\n";
  }
  if (job.contains("goodput") && job["goodput"].is_object() &&
      job["goodput"]["wall_seconds"].get<double>() > 0) {
    const auto& g = job["goodput"];
    out += "goodput: " +
           fixed(100 * g["progress_seconds"].get<double>() / g["wall_seconds"].get<double>(), 1) +
           "% of the wall time in attempts that made progress; " + seconds_text(g["lost_seconds"]) +
           " lost\n";
  }
  if (!job["hang_report"].get<std::string>().empty())
    out += "\nA hang report fired: see the launcher's output or its page.\n";
  return out;
}

// The terminal in raw mode (keys without Enter, no echo) while this lives, where stdin is one.
class RawTerminal {
 public:
  RawTerminal() {
    if (::tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  termios saved_{};
  bool active_ = false;
};

// Waits `ms` for q; where stdin has ended (no terminal), only waits.
bool quit_pressed(int ms) {
  static bool stdin_ended = false;
  const auto until = Clock::steady().now() + std::chrono::milliseconds(ms);
  for (auto now = Clock::steady().now(); now < until; now = Clock::steady().now()) {
    const int left =
        static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(until - now).count());
    pollfd p{STDIN_FILENO, POLLIN, 0};
    if (::poll(&p, stdin_ended ? 0 : 1, left) <= 0) continue;
    char key = 0;
    if (::read(STDIN_FILENO, &key, 1) <= 0) {
      stdin_ended = true;
      continue;
    }
    if (key == 'q' || key == 'Q') return true;
  }
  return false;
}

}  // namespace

int run_top_command(const std::vector<std::string>& args) {
  std::string url;
  double interval = 1;
  bool once = false;
  CLI::App app{
      "Show a running job's ranks live: state, steps per second, step time, share of time in "
      "collectives, last collective, quiet time. Reads the status a launcher serves with "
      "--status_port. q quits.",
      "acc-launch top"};
  app.add_option("--url", url,
                 "the status URL the launcher printed (default: the one launcher "
                 "of yours on this machine that serves one)");
  app.add_option("--interval", interval, "seconds between refreshes (default 1)")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_flag("--once", once, "print the table once (after two looks, for the rates) and exit");
  std::string secret_file;
  app.add_option("--job_secret_file", secret_file,
                 "the job's secret, which another host's launcher asks for (--rdzv_conf "
                 "job_secret_file=PATH on the job's; default: $ACC_JOB_SECRET_FILE)");
  if (std::optional<int> exit_code = parse_command_line(app, args)) return *exit_code;
  if (url.empty()) url = find_status_url();
  const Url where = parse_url(url);
  const std::string token = status_token(given_job_secret(secret_file));

  const bool tty = ::isatty(STDOUT_FILENO) == 1;
  RawTerminal raw;
  std::optional<nlohmann::json> before;
  Clock::time_point before_at;
  for (;;) {
    const std::optional<std::string> body = http_get(where, "/api/job", token);
    if (!body) {
      write_all(STDOUT_FILENO,
                "acc-launch top: " + url + " no longer answers: the job has ended\n");
      return 0;
    }
    const nlohmann::json job = nlohmann::json::parse(*body);
    const Clock::time_point now = Clock::steady().now();
    const double elapsed = before ? std::chrono::duration<double>(now - before_at).count() : 0.0;
    const std::string table = render(job, before ? &*before : nullptr, elapsed);
    // --once: the second look, which has rates.
    if (!once || before) write_all(STDOUT_FILENO, (tty && !once ? "\033[H\033[2J" : "") + table);
    if (once && before) return 0;
    before = job;
    before_at = now;
    if (quit_pressed(static_cast<int>(std::lround(interval * 1000)))) return 0;
  }
}

}  // namespace acc::launcher
