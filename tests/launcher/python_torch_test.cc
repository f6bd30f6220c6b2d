// Which PyTorch a Python worker would import, read from the files a real install leaves, laid out
// in a temporary directory: a virtual environment, $PYTHONPATH, a Debian-style system prefix.

#include "acc/launcher/host/python_torch.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace acc::launcher {
namespace {

namespace fs = std::filesystem;

class PythonTorchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "acc-python-torch-XXXXXX").string();
    root_ = ::mkdtemp(pattern.data());
  }
  void TearDown() override { fs::remove_all(root_); }

  // Writes a file (and its directories) under the root; returns its path.
  std::string file(const std::string& relative, const std::string& text = "") {
    const fs::path path = fs::path(root_) / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
    return path.string();
  }
  std::string torch_at(const std::string& site, const std::string& version) {
    return file(site + "/torch/version.py", "__version__ = '" + version + "'\ndebug = False\n");
  }

  std::string root_;
};

TEST_F(PythonTorchTest, AVirtualEnvironmentsSitePackagesAreReadWithoutStartingPython) {
  file("venv/pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = false\n");
  const std::string python = file("venv/bin/python");
  torch_at("venv/lib/python3.11/site-packages", "2.11.0+cu130");
  EXPECT_EQ(find_python_torch(python, {}), (torch_env::Version{2, 11}));
}

TEST_F(PythonTorchTest, PythonpathComesFirst) {
  file("venv/pyvenv.cfg", "home = /usr/bin\n");
  const std::string python = file("venv/bin/python");
  torch_at("venv/lib/python3.11/site-packages", "2.11.0");
  torch_at("mine", "2.4.1");
  EXPECT_EQ(find_python_torch(python, {{"PYTHONPATH", root_ + "/nothing:" + root_ + "/mine"}}),
            (torch_env::Version{2, 4}));
}

TEST_F(PythonTorchTest, ASystemInterpreterReadsDebiansDistPackagesAfterTheUsersSite) {
  const std::string python = file("usr/bin/python3.11");
  fs::create_directories(root_ + "/usr/lib/python3.11");
  torch_at("usr/lib/python3/dist-packages", "1.13.0a0");
  EXPECT_EQ(find_python_torch(python, {}), (torch_env::Version{1, 13}));
  torch_at("home/.local/lib/python3.11/site-packages", "2.5.1");
  EXPECT_EQ(find_python_torch(python, {{"HOME", root_ + "/home"}}), (torch_env::Version{2, 5}));
}

TEST_F(PythonTorchTest, ABareNameIsFoundOnPath) {
  const std::string python = file("usr/bin/python3.12");
  ::chmod(python.c_str(), 0755);
  fs::create_directories(root_ + "/usr/lib/python3.12");
  torch_at("usr/lib/python3.12/site-packages", "2.7.0");
  EXPECT_EQ(find_python_torch("python3.12", {{"PATH", "/nonexistent:" + root_ + "/usr/bin"}}),
            (torch_env::Version{2, 7}));
}

TEST_F(PythonTorchTest, NoTorchAnywhereIsUnknown) {
  file("venv/pyvenv.cfg", "home = /usr/bin\n");
  const std::string python = file("venv/bin/python");
  fs::create_directories(root_ + "/venv/lib/python3.11/site-packages");
  EXPECT_FALSE(find_python_torch(python, {}));
  EXPECT_FALSE(find_python_torch("no-such-python", {{"PATH", root_}}));
}

}  // namespace
}  // namespace acc::launcher
