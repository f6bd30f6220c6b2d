#pragma once

// External verdicts on this node (docs/clusters.md, "Keeping a node out"), asked before each
// round so that an operator's drain list or health daemon keeps a node out of the job:
//   --exclude_nodes_file FILE   hosts, addresses or node ids, one a line ('#' starts a comment),
//                               read anew each time: a line that names this node leaves it out;
//   --node_health_command CMD   run with /bin/sh -c, at most kHealthCommandLimit: a non-zero
//                               exit (or no end in time) leaves the node out, with its first line.
// A node left out takes no rank: the launcher exits --no_restart_exit_code with the reason.

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "acc/launcher/plan/plan.h"
#include "process/os.h"

namespace acc::launcher {

inline constexpr std::chrono::seconds kHealthCommandLimit{10};

// What names this node in an exclusion file: its hostname, --local_addr, $ACC_NODE_ID.
std::vector<std::string> names_of_this_node(const LaunchPlan& plan,
                                            const std::map<std::string, std::string>& environment);

// The line of `file_text` that names one of `names` ("" where none does). Pure.
std::string excluding_line(const std::string& file_text, const std::vector<std::string>& names);

// Why this node must stay out of the next round: one line naming the file or the command; ""
// where it may take part. A file that is gone names nobody (plan.cc checks it at the start).
// `scratch_dir` holds the command's output.
std::string node_verdict(Os& os, const LaunchPlan& plan, const std::vector<std::string>& names,
                         const std::string& scratch_dir);

}  // namespace acc::launcher
