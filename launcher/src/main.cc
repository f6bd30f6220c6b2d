// acc-launch: a thin main over the launcher module. Dispatches subcommands, parses, plans, runs,
// and maps errors to exit codes (docs/errors.md).

#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "acc/common/error.h"
#include "acc/launcher/agent.h"
#include "acc/launcher/cli.h"
#include "acc/launcher/host.h"
#include "acc/launcher/plan.h"
#include "console.h"

namespace {

using namespace acc::launcher;

int fail(int code, const std::string& message) {
  write_all(STDERR_FILENO, "acc-launch: error: " + message + "\n");
  return code;
}

int launch(const std::vector<std::string>& args) {
  ParseResult parsed = parse_launch_args(args);
  if (parsed.exit_now) {
    write_all(parsed.exit_code == 0 ? STDOUT_FILENO : STDERR_FILENO, parsed.message + "\n");
    return parsed.exit_code;
  }
  HostInfo host = detect_host();
  LaunchPlan plan = build_plan(parsed.options, host);
  if (plan.dry_run) {
    const int port = plan.master_port != 0 ? plan.master_port : pick_free_port();
    write_all(STDOUT_FILENO, format_dry_run(plan, port, host.environment));
    return 0;
  }
  Agent agent(std::move(plan), std::move(host.environment));
  return agent.run();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args.front() == "launch") args.erase(args.begin());
  try {
    return launch(args);
  } catch (const acc::ConfigError& e) {
    return fail(2, e.what());
  } catch (const acc::StoreError& e) {
    return fail(3, e.what());
  } catch (const acc::NetworkError& e) {
    return fail(3, e.what());
  } catch (const acc::TimeoutError& e) {
    return fail(4, e.what());
  } catch (const acc::BackendError& e) {
    return fail(6, e.what());
  } catch (const acc::LaunchError& e) {
    return fail(127, e.what());
  } catch (const std::exception& e) {
    return fail(1, std::string("internal error: ") + e.what());
  }
}
