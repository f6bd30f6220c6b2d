#pragma once

// The launch flags a command line names: their unique prefixes written out whole, as argparse
// reads them (expand_flag_prefixes), and which flags a command line can use (FlagFilter), so
// that only those are made into CLI11 options. CLI11 checks each new option's names against those
// of every option added before it: the ~160 flags of a launch (both spellings of each) cost O(n^2)
// string comparisons, the largest user-space cost of a launch (bench/README.md). A launch names a
// handful; --help and
// --print-completion list them all.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace acc::launcher {

// A launch flag as a command line may name it: `name` with underscores (its dashed spelling is
// accepted too), its short name ('\0': none), and whether it takes a value (the next word,
// unless given as --name=value).
struct FlagName {
  std::string name;
  char short_name = '\0';
  bool takes_value = false;
};

// The launch flags, their spellings (both, for each) in one sorted list, so that the flags a
// long flag's word names are found by one search: built once a process (cli.cc).
class FlagNames {
 public:
  explicit FlagNames(std::vector<FlagName> flags);
  const std::vector<FlagName>& flags() const { return flags_; }
  // The flag `word` (after `--`, before `=`) spells whole, else every flag it begins, once each.
  std::vector<size_t> named_by(std::string_view word) const;

 private:
  std::vector<FlagName> flags_;
  std::vector<std::pair<std::string, size_t>> spellings_;  // sorted
};

// `args` (the words after the program's name) with each long flag before the program that is a
// unique prefix of one of `flags`, in either spelling, written out whole, as torchrun and
// accelerate launch (argparse) read them: `--nproc_per_nod 2` and `--nproc_per_nod=2` become
// `--nproc_per_node 2` and `--nproc_per_node=2`, in the spelling the prefix is written in. An
// exact name wins over the longer names it begins (--no_python beside --no_python_hook). The
// program and its arguments, and whatever follows `--` or a flag no name begins, are left as
// they are. `error` is set instead, to one line, when a prefix begins several flags.
struct ExpandedFlags {
  std::vector<std::string> args;
  std::string error;  // "ambiguous option: --no_py could match --no_python, --no_python_hook"
};
ExpandedFlags expand_flag_prefixes(const std::vector<std::string>& args, const FlagNames& names);

class FlagFilter {
 public:
  // `args`: the command line after the program's name (and after `launch`). Every word before
  // the program that could be a flag counts, and a few of the program's own may: a flag
  // registered and not used changes nothing, one not registered that the command line names
  // would.
  explicit FlagFilter(const std::vector<std::string>& args);

  // Whether the flag `name` (underscores) must be registered: the command line names it (in
  // either spelling, `--name` or `--name=value`), it has a short name (which may be combined,
  // as in -qm), its variable `env` (may be empty) is set, or every flag is wanted.
  bool wants(std::string_view name, bool has_short_name, const std::string& env) const {
    return all() || named(name, has_short_name, env);
  }

  // wants(), but for listing: whether the command line itself can use the flag.
  bool named(std::string_view name, bool has_short_name, const std::string& env) const;

  // --help, -h (also combined, as -qh) or --print-completion: every flag is listed.
  bool all() const { return help_ || completion_; }

  // --help or -h without --print-completion: only the flags that help shows need to be
  // registered beyond those named (the config keys are a help topic of their own).
  bool help_only() const { return help_ && !completion_; }

 private:
  bool help_ = false;
  bool completion_ = false;
  std::vector<std::string> named_;  // sorted, underscores
};

}  // namespace acc::launcher
