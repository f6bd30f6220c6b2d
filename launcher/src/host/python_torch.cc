#include "acc/launcher/host/python_torch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "acc/common/strings.h"

namespace acc::launcher {
namespace {

namespace fs = std::filesystem;

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
  text.resize(8192);
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

// lib/python3.* under `prefix`, newest name last (there is one in all but odd installs).
std::vector<std::string> python_lib_dirs(const std::string& prefix) {
  std::vector<std::string> dirs;
  std::error_code ec;
  for (fs::directory_iterator it(prefix + "/lib", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("python3.", 0) == 0) dirs.push_back(it->path().string());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// "python3.11" from a lib dir, for the matching user and Debian directories.
std::string version_dir_name(const std::string& lib_dir) {
  return fs::path(lib_dir).filename().string();
}

// The key of pyvenv.cfg's "key = value" lines.
std::string cfg_value(const std::string& text, const std::string& key) {
  for (const std::string& line : split(text, '\n')) {
    const size_t equals = line.find('=');
    if (equals == std::string::npos || trim(line.substr(0, equals)) != key) continue;
    return trim(line.substr(equals + 1));
  }
  return "";
}

// `interpreter` ("python3.11", the resolved name) picks the lib/python3.X of several.
void add_system_dirs(const std::string& prefix, const std::string& home,
                     const std::string& interpreter, std::vector<std::string>& dirs) {
  // The resolved interpreter names its lib/python3.X; a listing of <prefix>/lib (hundreds of
  // entries in /usr/lib) only where it does not.
  std::vector<std::string> libs;
  if (interpreter.rfind("python3.", 0) == 0 && is_dir(prefix + "/lib/" + interpreter))
    libs = {prefix + "/lib/" + interpreter};
  else
    libs = python_lib_dirs(prefix);
  for (auto it = libs.rbegin(); it != libs.rend(); ++it) {
    const std::string version = version_dir_name(*it);
    if (!home.empty()) dirs.push_back(home + "/.local/lib/" + version + "/site-packages");
    dirs.push_back(prefix + "/local/lib/" + version + "/dist-packages");
    dirs.push_back(prefix + "/lib/python3/dist-packages");
    dirs.push_back(*it + "/dist-packages");
    dirs.push_back(*it + "/site-packages");
  }
}

}  // namespace

std::optional<torch_env::Version> find_python_torch(
    const std::string& python, const std::map<std::string, std::string>& environment) {
  try {
    const std::string path = locate(python, environment);
    if (path.empty()) return std::nullopt;
    std::vector<std::string> dirs;
    for (const std::string& dir : split(value_of(environment, "PYTHONPATH"), ':'))
      if (!dir.empty()) dirs.push_back(dir);
    // A virtual environment is known by its interpreter's unresolved path: bin/python is a link
    // to the base interpreter, and pyvenv.cfg sits one level above bin/.
    const fs::path bin = fs::path(path).parent_path();
    const std::string venv = bin.parent_path().string();
    std::string cfg;
    for (const fs::path& dir : {bin, bin.parent_path()})
      if (is_file((dir / "pyvenv.cfg").string()))
        cfg = read_small_file((dir / "pyvenv.cfg").string());
    if (!cfg.empty()) {
      for (const std::string& lib : python_lib_dirs(venv)) dirs.push_back(lib + "/site-packages");
      if (cfg_value(cfg, "include-system-site-packages") == "true") {
        const std::string home = cfg_value(cfg, "home");  // the base interpreter's bin/
        if (!home.empty()) add_system_dirs(fs::path(home).parent_path().string(), "", "", dirs);
      }
    } else {
      std::error_code ec;
      const fs::path real = fs::canonical(path, ec);
      const fs::path interpreter = ec ? fs::path(path) : real;
      add_system_dirs(interpreter.parent_path().parent_path().string(),
                      value_of(environment, "HOME"), interpreter.filename().string(), dirs);
    }
    for (const std::string& dir : dirs) {
      const std::string version_py = dir + "/torch/version.py";
      if (is_file(version_py)) return torch_env::parse_version_py(read_small_file(version_py));
    }
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace acc::launcher
