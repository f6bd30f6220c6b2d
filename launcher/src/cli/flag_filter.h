#pragma once

// Which of the launch flags a command line can use, so that only those are made into CLI11
// options. CLI11 checks each new option's names against those of every option added before it:
// the ~160 flags of a launch (both spellings of each) cost O(n^2) string comparisons, the largest
// user-space cost of a launch (bench/README.md). A launch names a handful; --help and
// --print-completion list them all.

#include <string>
#include <string_view>
#include <vector>

namespace acc::launcher {

class FlagFilter {
 public:
  // `args`: the command line after the program's name (and after `launch`). Every word that
  // could be a flag counts, the program's own included: a flag registered and not used changes
  // nothing, one not registered that the command line names would.
  explicit FlagFilter(const std::vector<std::string>& args);

  // Whether the flag `name` (underscores) must be registered: the command line names it (in
  // either spelling, `--name` or `--name=value`), it has a short name (which may be combined,
  // as in -qm), its variable `env` (may be empty) is set, or every flag is wanted.
  bool wants(std::string_view name, bool has_short_name, const std::string& env) const;

  // --help, -h (also combined, as -qh) or --print-completion: every flag is listed.
  bool all() const { return all_; }

 private:
  bool all_ = false;
  std::vector<std::string> named_;  // sorted, underscores
};

}  // namespace acc::launcher
