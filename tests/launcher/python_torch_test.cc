// Which PyTorch a Python worker would import, read from the files a real install leaves, laid out
// in a temporary directory: a virtual environment, $PYTHONPATH, a Debian-style system prefix,
// .pth files, a setuptools editable install. The order is site.py's (Python 3.11, Debian's and
// upstream's alike); tests/integration/pytorch/torch_through_pth.sh checks it against a real one.

#include "acc/launcher/host/python_torch.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace acc::launcher {
namespace {

namespace fs = std::filesystem;
using Environment = std::map<std::string, std::string>;

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
  std::string torch_at(const std::string& dir, const std::string& version) {
    return file(dir + "/torch/version.py", "__version__ = '" + version + "'\ndebug = False\n");
  }
  // A virtual environment of Python 3.11 made by `python3 -m venv` from a base interpreter in
  // <root>/usr/bin; returns its bin/python.
  std::string venv(bool system_site_packages) {
    file("venv/pyvenv.cfg", "home = " + root_ + "/usr/bin\ninclude-system-site-packages = " +
                                (system_site_packages ? "true" : "false") + "\nversion = 3.11.2\n");
    fs::create_directories(root_ + "/venv/lib/python3.11/site-packages");
    return file("venv/bin/python");
  }
  static constexpr const char* kVenvSite = "venv/lib/python3.11/site-packages";

  // "2.11.0+cu130 from <root>/x/torch/version.py", "nothing": the whole answer in one string.
  std::string found(const std::string& python, const Environment& environment = {}) {
    const std::optional<PythonTorch> torch = find_python_torch(python, environment);
    if (!torch) return "nothing";
    std::string where = torch->version_py;
    if (where.rfind(root_ + "/", 0) == 0) where = "<root>/" + where.substr(root_.size() + 1);
    return torch->version_text + " from " + where + " as " + std::to_string(torch->version.major) +
           "." + std::to_string(torch->version.minor);
  }

  std::string root_;
};

TEST_F(PythonTorchTest, AVirtualEnvironmentsSitePackagesAreReadWithoutStartingPython) {
  const std::string python = venv(false);
  torch_at(kVenvSite, "2.11.0+cu130");
  EXPECT_EQ(found(python),
            "2.11.0+cu130 from <root>/venv/lib/python3.11/site-packages/torch/version.py as 2.11");
}

TEST_F(PythonTorchTest, PythonpathComesFirst) {
  const std::string python = venv(false);
  torch_at(kVenvSite, "2.11.0");
  torch_at("mine", "2.4.1");
  EXPECT_EQ(found(python, {{"PYTHONPATH", root_ + "/nothing:" + root_ + "/mine"}}),
            "2.4.1 from <root>/mine/torch/version.py as 2.4");
}

TEST_F(PythonTorchTest, ASystemInterpreterReadsDebiansDistPackagesAfterTheUsersSite) {
  const std::string python = file("usr/bin/python3.11");
  fs::create_directories(root_ + "/usr/lib/python3.11");
  torch_at("usr/lib/python3/dist-packages", "1.13.0a0");
  EXPECT_EQ(found(python),
            "1.13.0a0 from <root>/usr/lib/python3/dist-packages/torch/version.py as 1.13");
  torch_at("home/.local/lib/python3.11/site-packages", "2.5.1");
  EXPECT_EQ(found(python, {{"HOME", root_ + "/home"}}),
            "2.5.1 from <root>/home/.local/lib/python3.11/site-packages/torch/version.py as 2.5");
  // $PYTHONNOUSERSITE turns the user's site off, $PYTHONUSERBASE moves it.
  EXPECT_EQ(found(python, {{"HOME", root_ + "/home"}, {"PYTHONNOUSERSITE", "1"}}),
            "1.13.0a0 from <root>/usr/lib/python3/dist-packages/torch/version.py as 1.13");
  torch_at("base/lib/python3.11/site-packages", "2.6.0");
  EXPECT_EQ(found(python, {{"HOME", root_ + "/home"}, {"PYTHONUSERBASE", root_ + "/base"}}),
            "2.6.0 from <root>/base/lib/python3.11/site-packages/torch/version.py as 2.6");
}

TEST_F(PythonTorchTest, ABareNameIsFoundOnPath) {
  const std::string python = file("usr/bin/python3.12");
  ::chmod(python.c_str(), 0755);
  fs::create_directories(root_ + "/usr/lib/python3.12");
  torch_at("usr/lib/python3.12/site-packages", "2.7.0");
  EXPECT_EQ(found("python3.12", {{"PATH", "/nonexistent:" + root_ + "/usr/bin"}}),
            "2.7.0 from <root>/usr/lib/python3.12/site-packages/torch/version.py as 2.7");
}

TEST_F(PythonTorchTest, NoTorchAnywhereIsUnknown) {
  const std::string python = venv(false);
  EXPECT_EQ(found(python), "nothing");
  EXPECT_EQ(found("no-such-python", {{"PATH", root_}}), "nothing");
}

TEST_F(PythonTorchTest, ThePyvenvCfgVersionPicksTheSitePackagesOfSeveral) {
  const std::string python = venv(false);
  torch_at("venv/lib/python3.12/site-packages", "2.9.0");
  torch_at(kVenvSite, "2.8.0");
  EXPECT_EQ(found(python),
            "2.8.0 from <root>/venv/lib/python3.11/site-packages/torch/version.py as 2.8");
}

TEST_F(PythonTorchTest, APthFileLineAddsTheDirectoryItNames) {
  const std::string python = venv(false);
  file(std::string(kVenvSite) + "/peers.pth", root_ + "/peers/site-packages\n");
  torch_at("peers/site-packages", "2.11.0");
  EXPECT_EQ(found(python), "2.11.0 from <root>/peers/site-packages/torch/version.py as 2.11");
}

TEST_F(PythonTorchTest, ARelativePthLineIsReadAgainstItsSiteDirectory) {
  const std::string python = venv(false);
  // Trailing white space and a Windows line end are not part of the path, as site.py reads it.
  file(std::string(kVenvSite) + "/src.pth", "../../../../checkout/build  \r\n");
  torch_at("checkout/build", "2.12.0a0+git1234");
  EXPECT_EQ(found(python), "2.12.0a0+git1234 from <root>/checkout/build/torch/version.py as 2.12");
}

TEST_F(PythonTorchTest, ImportLinesCommentsAndBlankLinesOfAPthFileAreNoPaths) {
  const std::string python = venv(false);
  // Each line, read as a path, would name a directory that holds a torch.
  file(std::string(kVenvSite) + "/a.pth", "import sys\n#comment\n\n   \nimport\tos\n");
  for (const char* dir : {"import sys", "#comment", "import\tos"})
    torch_at(std::string(kVenvSite) + "/" + dir, "2.1.0");
  EXPECT_EQ(found(python), "nothing");
  // A line that only begins with the word is a path.
  file(std::string(kVenvSite) + "/b.pth", "importable\n");
  torch_at(std::string(kVenvSite) + "/importable", "2.2.0");
  EXPECT_EQ(
      found(python),
      "2.2.0 from <root>/venv/lib/python3.11/site-packages/importable/torch/version.py as 2.2");
}

TEST_F(PythonTorchTest, PthFilesAreReadInNameOrderAfterTheirSiteDirectory) {
  const std::string python = venv(false);
  file(std::string(kVenvSite) + "/b.pth", root_ + "/b\n");
  file(std::string(kVenvSite) + "/a.pth", root_ + "/nothing\n" + root_ + "/a\n");
  file(std::string(kVenvSite) + "/.hidden.pth", root_ + "/hidden\n");
  torch_at("b", "2.2.0");
  torch_at("hidden", "2.0.0");
  EXPECT_EQ(found(python), "2.2.0 from <root>/b/torch/version.py as 2.2");
  torch_at("a", "2.1.0");
  EXPECT_EQ(found(python), "2.1.0 from <root>/a/torch/version.py as 2.1");
  torch_at(kVenvSite, "2.3.0");
  EXPECT_EQ(found(python),
            "2.3.0 from <root>/venv/lib/python3.11/site-packages/torch/version.py as 2.3");
}

TEST_F(PythonTorchTest, ThePthFilesOfAPythonpathDirectoryAreNotRead) {
  const std::string python = venv(false);
  file("mine/extra.pth", root_ + "/extra\n");
  torch_at("extra", "2.4.0");
  EXPECT_EQ(found(python, {{"PYTHONPATH", root_ + "/mine"}}), "nothing");
}

TEST_F(PythonTorchTest, SystemSitePackagesAreReadOnlyWhereThePyvenvCfgIncludesThem) {
  fs::create_directories(root_ + "/usr/lib/python3.11");
  torch_at("usr/lib/python3/dist-packages", "1.13.0a0");
  const Environment home = {{"HOME", root_ + "/home"}};
  EXPECT_EQ(found(venv(false), home), "nothing");
  EXPECT_EQ(found(venv(true), home),
            "1.13.0a0 from <root>/usr/lib/python3/dist-packages/torch/version.py as 1.13");
  // The user's site packages then come after the environment's, before the system's.
  torch_at("home/.local/lib/python3.11/site-packages", "2.5.1");
  EXPECT_EQ(found(venv(false), home), "nothing");
  EXPECT_EQ(found(venv(true), home),
            "2.5.1 from <root>/home/.local/lib/python3.11/site-packages/torch/version.py as 2.5");
  // The environment's own .pth entries come before them all.
  file(std::string(kVenvSite) + "/peers.pth", root_ + "/peers\n");
  torch_at("peers", "2.11.0");
  EXPECT_EQ(found(venv(true), home), "2.11.0 from <root>/peers/torch/version.py as 2.11");
}

TEST_F(PythonTorchTest, ASystemSitesPthFileIsReadToo) {
  const std::string python = venv(true);
  fs::create_directories(root_ + "/usr/lib/python3.11");
  file("usr/local/lib/python3.11/dist-packages/site.pth", root_ + "/opt/torch-site\n");
  torch_at("opt/torch-site", "2.6.0");
  torch_at("usr/lib/python3/dist-packages", "1.13.0a0");
  EXPECT_EQ(found(python), "2.6.0 from <root>/opt/torch-site/torch/version.py as 2.6");
}

TEST_F(PythonTorchTest, AnEditableInstallsFinderIsAskedAfterThePath) {
  const std::string python = venv(true);
  const std::string finder = "__editable___torch_2_12_0a0_finder";
  file(std::string(kVenvSite) + "/__editable__.torch-2.12.0a0.pth",
       "import " + finder + "; " + finder + ".install()\n");
  file(std::string(kVenvSite) + "/" + finder + ".py",
       "import sys\nfrom importlib.machinery import ModuleSpec\n"
       "MAPPING: dict[str, str] = {'functorch': '/nowhere/functorch', 'torch': '" +
           root_ + "/pytorch/torch'}\nNAMESPACES: dict[str, list[str]] = {}\n");
  torch_at("pytorch", "2.12.0a0+gitabcdef");
  EXPECT_EQ(found(python), "2.12.0a0+gitabcdef from <root>/pytorch/torch/version.py as 2.12");
  // The finder is behind sys.path: a torch on the path, even the system's, is imported first.
  fs::create_directories(root_ + "/usr/lib/python3.11");
  torch_at("usr/lib/python3/dist-packages", "1.13.0a0");
  EXPECT_EQ(found(python),
            "1.13.0a0 from <root>/usr/lib/python3/dist-packages/torch/version.py as 1.13");
}

TEST_F(PythonTorchTest, AFinderThatMapsNoTorchFindsNone) {
  const std::string python = venv(false);
  file(std::string(kVenvSite) + "/__editable__.other-1.0.pth",
       "import __editable___other_1_0_finder; __editable___other_1_0_finder.install()\n");
  file(std::string(kVenvSite) + "/__editable___other_1_0_finder.py",
       "MAPPING = {'other': '" + root_ + "/pytorch/torch'}\n");
  torch_at("pytorch", "2.12.0");
  EXPECT_EQ(found(python), "nothing");
}

TEST_F(PythonTorchTest, TheFirstTorchDecidesEvenWithoutAVersion) {
  const std::string python = venv(false);
  file(std::string(kVenvSite) + "/torch/version.py", "git_version = 'abc'\n");
  file(std::string(kVenvSite) + "/later.pth", root_ + "/later\n");
  torch_at("later", "2.11.0");
  EXPECT_EQ(found(python), "nothing");
}

}  // namespace
}  // namespace acc::launcher
