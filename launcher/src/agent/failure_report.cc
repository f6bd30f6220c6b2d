#include "acc/launcher/agent/failure_report.h"

#include <string.h>

#include <algorithm>
#include <sstream>

namespace acc::launcher {
namespace {

std::string signal_name(int signal) {
  const char* abbrev = ::sigabbrev_np(signal);
  return abbrev ? std::string("SIG") + abbrev : "signal";
}

std::string or_dash(const std::string& text) {
  return text.empty() ? "-" : text;
}

}  // namespace

std::string describe_exit(const WorkerOutcome& outcome) {
  if (outcome.signal == 0) return std::to_string(outcome.exit_code);
  return signal_name(outcome.signal) + " (" + std::to_string(outcome.signal) + ")";
}

int failure_exit_status(const WorkerOutcome& root_cause) {
  return root_cause.signal != 0 ? 128 + root_cause.signal : root_cause.exit_code;
}

std::string format_failure_report(const std::string& program, int attempts,
                                  const std::vector<WorkerOutcome>& outcomes) {
  const std::vector<std::string> header = {"rank", "local", "host",    "pid",
                                           "exit", "time",  "log file"};
  std::vector<std::vector<std::string>> rows;
  for (const WorkerOutcome& o : outcomes) {
    std::string exit = describe_exit(o);
    if (o.root_cause) exit += " *";
    if (o.stopped_by_launcher) exit += " (stopped)";
    rows.push_back({std::to_string(o.rank), std::to_string(o.local_rank), o.host,
                    std::to_string(o.pid), exit, or_dash(o.time), or_dash(o.log_file)});
  }
  std::vector<size_t> widths(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    widths[c] = header[c].size();
    for (const auto& row : rows) widths[c] = std::max(widths[c], row[c].size());
  }
  auto print_row = [&](std::ostringstream& out, const std::vector<std::string>& row) {
    for (size_t c = 0; c < row.size(); ++c) {
      out << row[c];
      if (c + 1 < row.size()) out << std::string(widths[c] - row[c].size() + 2, ' ');
    }
    out << '\n';
  };

  const std::string rule(72, '=');
  std::ostringstream out;
  out << rule << '\n'
      << "acc-launch: " << program << " FAILED after " << attempts
      << (attempts == 1 ? " attempt" : " attempts") << '\n'
      << std::string(72, '-') << '\n';
  print_row(out, header);
  for (const auto& row : rows) print_row(out, row);

  auto root = std::find_if(outcomes.begin(), outcomes.end(),
                           [](const WorkerOutcome& o) { return o.root_cause; });
  if (root != outcomes.end()) {
    out << std::string(72, '-') << '\n'
        << "root cause (* above): rank " << root->rank << " (local rank " << root->local_rank
        << ") on ";
    if (root->node >= 0) {
      out << "node " << root->node << " (host " << or_dash(root->host) << ") exited with "
          << describe_exit(*root) << '\n'
          << "  details   : in node " << root->node << "'s own report\n";
    } else {
      out << root->host << " exited with " << describe_exit(*root) << '\n'
          << "  error file: "
          << (!root->error_file.empty()     ? root->error_file
              : root->error_message.empty() ? "<none written>"
                                            // Read, then removed with the temporary run dir.
                                            : "<read; removed with the run directory (--log_dir "
                                              "keeps it)>")
          << '\n';
    }
    if (!root->cause.empty()) out << "  cause     : " << root->cause << '\n';
    if (!root->error_message.empty()) out << "  error     : " << root->error_message << '\n';
    if (!root->traceback.empty()) {
      out << "  traceback :\n";
      std::istringstream lines(root->traceback);
      for (std::string line; std::getline(lines, line);) out << "    " << line << '\n';
    }
    if (!root->stderr_tail.empty()) {
      out << "  last lines of stderr:\n";
      for (const std::string& line : root->stderr_tail) out << "    | " << line << '\n';
    }
  }
  out << rule << '\n';
  return out.str();
}

}  // namespace acc::launcher
