#include "cli/flag_filter.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "acc/common/strings.h"

namespace acc::launcher {
namespace {

std::string dashed(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

// What a word of short flags (-q, -qr, -r, -r3) leaves to the next word: its value, when its last
// letter takes one (-r3 holds its own); nothing is known past a letter of no flag (the parser
// names it).
enum class ShortFlags { kAlone, kValueFollows, kUnknown };
ShortFlags read_short_flags(std::string_view word, const std::vector<FlagName>& flags) {
  for (size_t i = 1; i < word.size(); ++i) {
    const auto flag = std::find_if(flags.begin(), flags.end(),
                                   [&](const FlagName& f) { return f.short_name == word[i]; });
    if (flag == flags.end()) return ShortFlags::kUnknown;
    if (flag->takes_value)
      return i + 1 == word.size() ? ShortFlags::kValueFollows : ShortFlags::kAlone;
  }
  return ShortFlags::kAlone;
}

// argparse's line, the candidates in the spelling of the prefix; a long list is cut.
std::string ambiguity(std::string_view word, const std::vector<size_t>& named,
                      const std::vector<FlagName>& flags, bool dashes) {
  constexpr size_t kListed = 8;
  std::string text = "ambiguous option: --" + escape_control(std::string(word)) + " could match ";
  for (size_t i = 0; i < std::min(named.size(), kListed); ++i) {
    const std::string& name = flags[named[i]].name;
    text += (i == 0 ? "--" : ", --") + (dashes ? dashed(name) : name);
  }
  if (named.size() > kListed) text += ", ... (" + std::to_string(named.size()) + " flags)";
  return text;
}

}  // namespace

FlagNames::FlagNames(std::vector<FlagName> flags) : flags_(std::move(flags)) {
  for (size_t i = 0; i < flags_.size(); ++i) {
    spellings_.emplace_back(flags_[i].name, i);
    if (std::string other = dashed(flags_[i].name); other != flags_[i].name)
      spellings_.emplace_back(std::move(other), i);
  }
  std::sort(spellings_.begin(), spellings_.end());
}

std::vector<size_t> FlagNames::named_by(std::string_view word) const {
  if (word.empty()) return {};
  auto at = std::lower_bound(spellings_.begin(), spellings_.end(), word,
                             [](const std::pair<std::string, size_t>& spelling,
                                std::string_view w) { return spelling.first < w; });
  if (at != spellings_.end() && at->first == word) return {at->second};
  std::vector<size_t> found;
  for (; at != spellings_.end() && at->first.compare(0, word.size(), word) == 0; ++at)
    if (std::find(found.begin(), found.end(), at->second) == found.end())
      found.push_back(at->second);
  return found;
}

ExpandedFlags expand_flag_prefixes(const std::vector<std::string>& args, const FlagNames& names) {
  const std::vector<FlagName>& flags = names.flags();
  ExpandedFlags out;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--" || arg.size() < 2 || arg[0] != '-') break;  // the program from here
    bool value_follows = false;
    if (arg[1] != '-') {
      const ShortFlags shorts = read_short_flags(arg, flags);
      if (shorts == ShortFlags::kUnknown) break;
      value_follows = shorts == ShortFlags::kValueFollows;
      out.args.push_back(arg);
    } else {
      const size_t equals = arg.find('=');
      const std::string_view word =
          std::string_view(arg).substr(2, equals == std::string::npos ? equals : equals - 2);
      const std::vector<size_t> named = names.named_by(word);
      if (named.empty()) break;  // no flag of ours: the parser names it
      const bool dashes = word.find('-') != std::string_view::npos;
      if (named.size() > 1) {
        out.error = ambiguity(word, named, flags, dashes);
        return out;
      }
      const FlagName& flag = flags[named.front()];
      out.args.push_back("--" + (dashes ? dashed(flag.name) : flag.name) +
                         (equals == std::string::npos ? "" : arg.substr(equals)));
      value_follows = flag.takes_value && equals == std::string::npos;
    }
    if (value_follows && i + 1 < args.size()) out.args.push_back(args[++i]);
  }
  out.args.insert(out.args.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return out;
}

FlagFilter::FlagFilter(const std::vector<std::string>& args) {
  // The parser reads no flag past the program: the first word that is no flag and no flag's
  // value, or `--`. A word after a flag without `=` may be its value; so as not to need every
  // flag's name, it is taken to be one (a few of the program's words may then count).
  bool value_may_follow = false;
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') {
      if (!value_may_follow) break;
      value_may_follow = false;
      continue;
    }
    value_may_follow = arg.find('=') == std::string::npos;
    const std::string_view word = std::string_view(arg).substr(0, arg.find('='));
    if (word[1] != '-') {
      // Short flags, alone or combined: CLI11 reads -qh as -q -h.
      if (word.find('h') != std::string_view::npos) help_ = true;
      continue;
    }
    std::string name(word.substr(2));
    std::replace(name.begin(), name.end(), '-', '_');
    if (name == "help") help_ = true;
    if (name == "print_completion") completion_ = true;
    named_.push_back(std::move(name));
  }
  std::sort(named_.begin(), named_.end());
}

bool FlagFilter::named(std::string_view name, bool has_short_name, const std::string& env) const {
  if (has_short_name) return true;
  if (std::binary_search(named_.begin(), named_.end(), name)) return true;
  return !env.empty() && std::getenv(env.c_str()) != nullptr;
}

}  // namespace acc::launcher
