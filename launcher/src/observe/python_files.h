#pragma once

// The Python files of observe/python/, embedded at configure time (python_files.cc.in), so the
// binary alone can install them into a run directory.

namespace acc::launcher {

// observe/python/acc_launch.py.
extern const char* const kAccLaunchModule;

}  // namespace acc::launcher
