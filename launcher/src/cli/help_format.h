#pragma once

// How --help shows an option, in the launch's help and in every subcommand's: in plain words, as
// torchrun's and accelerate launch's help (argparse) read, never in CLI11's spellings of types
// and checks (INT:INT>=0, TEXT:FILE, FLOAT:SECONDS, (Env:PET_...)):
//
//   --nproc_per_node NPROC      workers on this node: N, auto, cpu or gpu (default: 1; or
//                               $PET_NPROC_PER_NODE)
//   --start_method {spawn,fork,forkserver}
//   -m, --module                run PROGRAM as a Python module (python -m) (or $PET_MODULE=1)
//
// A flag is shown in one spelling, the underscore one the documentation uses (the dashed one is
// accepted as well); its value by a placeholder: the option's own text where it sets one
// (option_text, e.g. HOST), its choices, SECONDS or N for our checks of a duration or a whole
// number, a type name the option sets itself (type_name("FILE")), else its name in capitals, as
// argparse does (--rdzv_id RDZV_ID).

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace acc::launcher {

class PlainHelpFormatter : public CLI::Formatter {
 public:
  // "-m, --module", "--nproc_per_node"; a positional by its name.
  std::string make_option_name(const CLI::Option* option, bool positional) const override {
    if (positional) return option->get_name(true, false);
    std::string names;
    for (const std::string& name : option->get_snames()) names += "-" + name + ", ";
    return names + "--" + long_name(*option);
  }

  // " NPROC", " {spawn,fork,forkserver}", " OPTION ..."; nothing for a switch.
  std::string make_option_opts(const CLI::Option* option) const override {
    const bool many = option->get_expected_max() == CLI::detail::expected_max_vector_size &&
                      (!option->nonpositional() || option->get_allow_extra_args());
    if (!option->nonpositional()) return many ? " ..." : "";
    if (option->get_items_expected_max() == 0) return "";  // a switch
    return " " + placeholder(*option) + (many ? " ..." : "");
  }

  // The description, then its default and its variable in one parenthesis, as "(default: 1; or
  // $PET_NPROC_PER_NODE)", or in the description's own "(default ...)" at its end; wrapped to
  // the width of the help.
  std::string make_option_desc(const CLI::Option* option) const override {
    std::string text = option->get_description();
    std::vector<std::string> notes;
    const std::string& fallback = option->get_default_str();
    const bool says_default = text.find("default") != std::string::npos;
    if (!fallback.empty() && !says_default) notes.push_back("default: " + fallback);
    if (const std::string& env = option->get_envname(); !env.empty())
      notes.push_back("or $" + env + (option->get_items_expected_max() == 0 ? "=1" : ""));
    if (!notes.empty() && says_default && notes.size() == 1 && !text.empty() &&
        text.back() == ')' && text.rfind("(default") != std::string::npos) {
      text.insert(text.size() - 1, "; " + notes.front());
    } else if (!notes.empty()) {
      text += " (";
      for (size_t i = 0; i < notes.size(); ++i) text += (i ? "; " : "") + notes[i];
      text += ")";
    }
    return wrap(text, kWidth - get_column_width());
  }

 private:
  static constexpr size_t kWidth = 100;

  // The underscore spelling where an option has two.
  static std::string long_name(const CLI::Option& option) {
    const std::vector<std::string>& names = option.get_lnames();
    if (names.empty()) return option.get_name(false, false);
    const auto underscore = std::find_if(names.begin(), names.end(), [](const std::string& n) {
      return n.find('_') != std::string::npos;
    });
    return underscore == names.end() ? names.front() : *underscore;
  }

  static std::string placeholder(const CLI::Option& option) {
    if (!option.get_option_text().empty()) return option.get_option_text();
    // get_type_name(): the type's name, then each check's description, ':' between.
    std::vector<std::string> parts;
    const std::string full = option.get_type_name();
    for (size_t from = 0, colon;; from = colon + 1) {
      colon = full.find(':', from);
      parts.push_back(full.substr(from, colon == std::string::npos ? colon : colon - from));
      if (colon == std::string::npos) break;
    }
    for (size_t i = 1; i < parts.size(); ++i) {
      if (!parts[i].empty() && parts[i].front() == '{') return parts[i];  // CLI::IsMember
      if (parts[i] == "SECONDS") return "SECONDS";
      if (parts[i].rfind("INT>=", 0) == 0) return "N";
    }
    static const char* const kCli11Types[] = {"TEXT",    "INT",  "UINT", "FLOAT",
                                              "BOOLEAN", "CHAR", "ENUM", ""};
    if (std::find(std::begin(kCli11Types), std::end(kCli11Types), parts.front()) ==
        std::end(kCli11Types))
      return parts.front();  // the option's own type_name
    std::string upper = long_name(option);
    for (char& c : upper) c = c == '-' ? '_' : static_cast<char>(std::toupper(c));
    return upper;
  }

  // `text` in lines of at most `width` characters, broken at spaces (format_help indents each
  // line after a '\n' to the description's column).
  static std::string wrap(const std::string& text, size_t width) {
    std::string out;
    size_t line = 0;
    for (size_t from = 0; from < text.size();) {
      size_t end = text.find(' ', from);
      if (end == std::string::npos) end = text.size();
      const size_t word = end - from;
      if (line > 0 && line + 1 + word > width) {
        out += '\n';
        line = 0;
      } else if (line > 0) {
        out += ' ';
        ++line;
      }
      out.append(text, from, word);
      line += word;
      from = end + 1;
    }
    return out;
  }
};

}  // namespace acc::launcher
