#include "acc/launcher/host/python_torch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <vector>

#include "acc/common/strings.h"

namespace acc::launcher {
namespace {

namespace fs = std::filesystem;

// Enough for any version.py, pyvenv.cfg, .pth file or editable finder a tool writes; a longer
// one is read this far.
constexpr size_t kSmallFile = 64 * 1024;

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string read_small_file(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  text.resize(kSmallFile);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

std::string value_of(const std::map<std::string, std::string>& environment, const char* name) {
  const auto it = environment.find(name);
  return it == environment.end() ? "" : it->second;
}

// `python` as exec would find it: a path as given, a bare name on $PATH.
std::string locate(const std::string& python, const std::map<std::string, std::string>& env) {
  if (python.find('/') != std::string::npos) return python;
  for (const std::string& dir : split(value_of(env, "PATH"), ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + python;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// The names python3.X of `prefix`/lib/, newest last (there is one in all but odd installs).
std::vector<std::string> python_versions(const std::string& prefix) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(prefix + "/lib", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("python3.", 0) == 0) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The value of pyvenv.cfg's "key = value" line.
std::string cfg_value(const std::string& text, const std::string& key) {
  for (const std::string& line : split(text, '\n')) {
    const size_t equals = line.find('=');
    if (equals == std::string::npos || to_lower(trim(line.substr(0, equals))) != key) continue;
    return trim(line.substr(equals + 1));
  }
  return "";
}

// "python3.11" of pyvenv.cfg's "version = 3.11.2" (venv) or "version_info = 3.11.9" (uv,
// virtualenv); "" when it has neither.
std::string cfg_python_version(const std::string& cfg) {
  for (const char* key : {"version", "version_info"}) {
    const std::vector<std::string> parts = split(cfg_value(cfg, key), '.');
    if (parts.size() >= 2 && parts[0] == "3" && parse_int(parts[1])) return "python3." + parts[1];
  }
  return "";
}

// The user's site packages where site.py adds them: ($PYTHONUSERBASE or ~/.local)
// /lib/python3.X/site-packages, unless $PYTHONNOUSERSITE is set.
void add_user_site(const std::map<std::string, std::string>& env, const std::string& version,
                   std::vector<std::string>& dirs) {
  if (!value_of(env, "PYTHONNOUSERSITE").empty()) return;
  std::string base = value_of(env, "PYTHONUSERBASE");
  if (base.empty() && !value_of(env, "HOME").empty()) base = value_of(env, "HOME") + "/.local";
  if (!base.empty()) dirs.push_back(base + "/lib/" + version + "/site-packages");
}

// The site directories of the Python installed under `prefix`: Debian's site.py names
// dist-packages (and, for the base of a virtual environment, lib/python3.X/site-packages first),
// upstream's lib/python3.X/site-packages (lib64 on Fedora). Those that do not exist cost a stat.
void add_prefix_sites(const std::string& prefix, const std::string& version, bool venv_base,
                      std::vector<std::string>& dirs) {
  const std::string lib = prefix + "/lib/" + version;
  const std::string lib64 = prefix + "/lib64/" + version;
  if (venv_base) dirs.insert(dirs.end(), {lib + "/site-packages", lib64 + "/site-packages"});
  dirs.push_back(prefix + "/local/lib/" + version + "/dist-packages");
  dirs.push_back(prefix + "/lib/python3/dist-packages");
  dirs.push_back(lib + "/dist-packages");
  if (!venv_base) dirs.insert(dirs.end(), {lib + "/site-packages", lib64 + "/site-packages"});
}

// The site directories of the interpreter at `path` (as exec finds it), in site.py's order.
std::vector<std::string> site_dirs(const std::string& path,
                                   const std::map<std::string, std::string>& env) {
  std::vector<std::string> dirs;
  // A virtual environment is known by its interpreter's unresolved path: bin/python is a link
  // to the base interpreter, and pyvenv.cfg sits beside it or one level above bin/.
  const fs::path bin = fs::path(path).parent_path();
  const std::string venv = bin.parent_path().string();
  std::string cfg;
  for (const fs::path& dir : {bin, bin.parent_path()}) {
    if (!is_file((dir / "pyvenv.cfg").string())) continue;
    cfg = read_small_file((dir / "pyvenv.cfg").string());
    break;
  }
  if (!cfg.empty()) {
    std::vector<std::string> versions = {cfg_python_version(cfg)};
    if (versions.front().empty() || !is_dir(venv + "/lib/" + versions.front()))
      versions = python_versions(venv);
    for (auto it = versions.rbegin(); it != versions.rend(); ++it)
      dirs.push_back(venv + "/lib/" + *it + "/site-packages");
    const std::string home = cfg_value(cfg, "home");  // the base interpreter's bin/
    if (to_lower(cfg_value(cfg, "include-system-site-packages")) == "true" && !home.empty()) {
      for (auto it = versions.rbegin(); it != versions.rend(); ++it) add_user_site(env, *it, dirs);
      for (auto it = versions.rbegin(); it != versions.rend(); ++it)
        add_prefix_sites(fs::path(home).parent_path().string(), *it, true, dirs);
    }
    return dirs;
  }
  std::error_code ec;
  const fs::path real = fs::canonical(path, ec);
  const fs::path interpreter = ec ? fs::path(path) : real;
  const std::string prefix = interpreter.parent_path().parent_path().string();
  // The resolved interpreter ("python3.11") names its lib/python3.X; a listing of <prefix>/lib
  // (hundreds of entries in /usr/lib) only where it does not.
  const std::string name = interpreter.filename().string();
  std::vector<std::string> versions = {name};
  if (name.rfind("python3.", 0) != 0 || !is_dir(prefix + "/lib/" + name))
    versions = python_versions(prefix);
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
    add_user_site(env, *it, dirs);
    add_prefix_sites(prefix, *it, false, dirs);
  }
  return dirs;
}

// The .pth files of a site directory in the order site.py reads them: by name, hidden ones
// skipped (as Python >= 3.13 skips them).
std::vector<std::string> pth_files(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > 4 && ends_with(name, ".pth") && name[0] != '.') names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The module a .pth file's `import` line installs when it is a setuptools editable finder:
// "import __editable___torch_2_5_0_finder; __editable___torch_2_5_0_finder.install()".
std::string editable_finder_of(const std::string& line) {
  const size_t start = line.find_first_not_of(" \t", 6);
  if (start == std::string::npos) return "";
  size_t end = start;
  while (end < line.size() &&
         (std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '_'))
    ++end;
  const std::string name = line.substr(start, end - start);
  return starts_with(name, "__editable___") && ends_with(name, "_finder") ? name : "";
}

// The directory an editable finder's MAPPING gives the `torch` package:
// MAPPING: dict[str, str] = {'torch': '/src/pytorch/torch', ...}; "" where it gives none.
std::string torch_of_mapping(const std::string& finder) {
  const size_t at = finder.find("\nMAPPING");
  const size_t open = finder.find('{', at == std::string::npos ? finder.size() : at);
  const size_t close = finder.find('}', open == std::string::npos ? finder.size() : open);
  if (close == std::string::npos) return "";
  const std::string_view mapping = std::string_view(finder).substr(open, close - open);
  for (const std::string_view key : {"'torch'", "\"torch\""}) {
    const size_t k = mapping.find(key);
    if (k == std::string_view::npos) continue;
    const size_t before = mapping.find_last_not_of(" \t\r\n", k - 1);
    const size_t colon = mapping.find_first_not_of(" \t\r\n", k + key.size());
    if ((mapping[before] != '{' && mapping[before] != ',') || colon == std::string_view::npos ||
        mapping[colon] != ':')
      continue;
    const size_t quote = mapping.find_first_not_of(" \t\r\n", colon + 1);
    if (quote == std::string_view::npos || (mapping[quote] != '\'' && mapping[quote] != '"'))
      continue;
    const size_t end = mapping.find(mapping[quote], quote + 1);
    if (end != std::string_view::npos)
      return std::string(mapping.substr(quote + 1, end - quote - 1));
  }
  return "";
}

// torch.__version__ as version.py spells it: the quoted text of its `__version__ = '...'` line.
std::string version_text_of(std::string_view text) {
  for (size_t at = text.find("__version__"); at != std::string_view::npos;
       at = text.find("__version__", at + 1)) {
    if (at != 0 && text[at - 1] != '\n') continue;
    const size_t quote = text.find_first_of("'\"", at);
    const size_t end_of_line = text.find('\n', at);
    if (quote == std::string_view::npos || quote > end_of_line) continue;
    const size_t close = text.find(text[quote], quote + 1);
    if (close == std::string_view::npos || close > end_of_line) continue;
    return std::string(text.substr(quote + 1, close - quote - 1));
  }
  return "";
}

// sys.path walked in order up to the first entry with a torch/version.py.
class Search {
 public:
  // Whether the entry `dir` holds torch/version.py (then found() names it).
  bool entry(const std::string& dir) {
    const std::string version_py = dir + "/torch/version.py";
    if (!is_file(version_py)) return false;
    found_ = version_py;
    return true;
  }

  // A site directory: itself, then the entries its .pth files add after it. Import lines run
  // code; of them only an editable install's finder is read, and only after the whole path
  // (site.py appends the finder to sys.meta_path, behind the path's own finder).
  bool site(const std::string& dir) {
    if (entry(dir)) return true;
    for (const std::string& name : pth_files(dir)) {
      for (const std::string& line : split(read_small_file(dir + "/" + name), '\n')) {
        if (line.empty() || line[0] == '#' || trim(line).empty()) continue;
        if (starts_with(line, "import ") || starts_with(line, "import\t")) {
          const std::string finder = editable_finder_of(line);
          if (!finder.empty()) finders_.push_back(dir + "/" + finder + ".py");
          continue;
        }
        // site.py strips trailing white space only, and makes the path absolute against the
        // site directory (an absolute line stays as it is).
        const std::string path = line.substr(0, line.find_last_not_of(" \t\r\n\f\v") + 1);
        if (entry((fs::path(dir) / path).lexically_normal().string())) return true;
      }
    }
    return false;
  }

  // The editable finders met on the way, in order: the first that maps `torch` to a directory
  // with a version.py.
  bool editable_finders() {
    for (const std::string& finder : finders_) {
      const std::string torch = torch_of_mapping(read_small_file(finder));
      if (!torch.empty() && is_file(torch + "/version.py")) {
        found_ = torch + "/version.py";
        return true;
      }
    }
    return false;
  }

  std::optional<PythonTorch> result() const {
    PythonTorch torch;
    torch.version_text = version_text_of(read_small_file(found_));
    const std::optional<torch_env::Version> version = torch_env::parse_version(torch.version_text);
    if (!version) return std::nullopt;
    torch.version = *version;
    torch.version_py = found_;
    return torch;
  }

 private:
  std::string found_;
  std::vector<std::string> finders_;
};

}  // namespace

std::optional<PythonTorch> find_python_torch(
    const std::string& python, const std::map<std::string, std::string>& environment) {
  try {
    const std::string path = locate(python, environment);
    if (path.empty()) return std::nullopt;
    Search search;
    for (const std::string& dir : split(value_of(environment, "PYTHONPATH"), ':'))
      if (!dir.empty() && search.entry(dir)) return search.result();
    for (const std::string& dir : site_dirs(path, environment))
      if (search.site(dir)) return search.result();
    if (search.editable_finders()) return search.result();
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace acc::launcher
