#include "host/machine_files.h"

#include <algorithm>

#include "acc/common/files.h"

namespace acc::launcher {

namespace fs = std::filesystem;

fs::path MachineFiles::under_root(const fs::path& path) const {
  return root_ / path.relative_path();
}

std::string MachineFiles::read(const fs::path& path) const {
  return read_file(under_root(path).string());
}

std::string MachineFiles::line(const fs::path& path) const {
  std::string text = read(path);
  text.resize(std::min(text.find('\n'), text.size()));
  return text;
}

std::vector<fs::path> MachineFiles::entries(const fs::path& path) const {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(under_root(path), ec))
    found.push_back(path / entry.path().filename());
  std::sort(found.begin(), found.end());
  return found;
}

bool MachineFiles::exists(const fs::path& path) const {
  std::error_code ec;
  return fs::exists(under_root(path), ec);
}

fs::path MachineFiles::link_target(const fs::path& path) const {
  std::error_code ec;
  return fs::read_symlink(under_root(path), ec);
}

}  // namespace acc::launcher
