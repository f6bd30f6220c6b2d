#pragma once

// Which PyTorch a Python worker would import, found without starting Python (a Python start costs
// tens of milliseconds; this costs a few stat calls and small reads): the launcher gives each
// worker only the names of PyTorch's variables that its PyTorch reads (acc/common/torch_env.h).

#include <map>
#include <optional>
#include <string>

#include "acc/common/torch_env.h"

namespace acc::launcher {

// A PyTorch found on disk, and where: the dry run and `acc-launch env` say both.
struct PythonTorch {
  torch_env::Version version;  // {2, 11}
  std::string version_text;    // "2.11.0+cu130": torch.__version__ as version.py spells it
  std::string version_py;      // the torch/version.py read, as the search reached it
};

// The torch/version.py of the `torch` package `python` would import, looked for where Python's
// site.py puts it on sys.path, in its order:
//   1. $PYTHONPATH (of `environment`);
//   2. the site directories, each followed by the directories its *.pth files name (files in
//      name order; a line is a path, relative ones against the site directory; blank lines,
//      `#` comments and `import` lines are skipped): for a virtual environment (pyvenv.cfg beside
//      or above the interpreter's directory) its lib/python3.X/site-packages, then, where
//      pyvenv.cfg says include-system-site-packages = true, the user's site packages and those of
//      the base interpreter (pyvenv.cfg's `home`); else the user's site packages
//      (<$PYTHONUSERBASE, else ~/.local>/lib/python3.X/site-packages, unless $PYTHONNOUSERSITE),
//      then <prefix>/local/lib/python3.X/dist-packages, <prefix>/lib/python3/dist-packages and
//      <prefix>/lib/python3.X/dist-packages (Debian), <prefix>/lib{,64}/python3.X/site-packages
//      (conda, source builds, Fedora);
//   3. last, as a finder appended to sys.meta_path is, a setuptools editable install's finder
//      module (__editable___*_finder.py, named by an `import` line of a .pth file) whose MAPPING
//      names a `torch` directory.
// The script's own directory (sys.path[0]) is not looked at. `python` is a path or a name looked
// up on $PATH. nullopt when no torch/version.py is found or the first one names no version. Reads
// directories and small files only; never starts Python; never throws.
std::optional<PythonTorch> find_python_torch(const std::string& python,
                                             const std::map<std::string, std::string>& environment);

}  // namespace acc::launcher
