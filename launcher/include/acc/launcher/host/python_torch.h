#pragma once

// Which PyTorch a Python worker would import, found without starting Python (a Python start costs
// tens of milliseconds; this costs a few stat calls): the launcher gives each worker only the
// names of PyTorch's variables that its PyTorch reads (acc/common/torch_env.h).

#include <map>
#include <optional>
#include <string>

#include "acc/common/torch_env.h"

namespace acc::launcher {

// The version in torch/version.py of the first `torch` package on the path `python` would search:
// $PYTHONPATH (of `environment`), then, for a virtual environment (pyvenv.cfg beside or above the
// interpreter's directory), its lib/python3.*/site-packages, and the base interpreter's where
// pyvenv.cfg includes the system site packages; else the user's site packages
// (~/.local/lib/python3.X/site-packages), then <prefix>/local/lib/python3.X/dist-packages,
// <prefix>/lib/python3/dist-packages (Debian), <prefix>/lib/python3.X/{dist,site}-packages
// (conda and source builds). `python` is a path or a name looked up on $PATH. nullopt when no
// torch/version.py is found or it names no version; never throws.
std::optional<torch_env::Version> find_python_torch(
    const std::string& python, const std::map<std::string, std::string>& environment);

}  // namespace acc::launcher
