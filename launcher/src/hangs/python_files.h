#pragma once

// The Python files of hangs/python/, embedded at configure time (python_files.cc.in), so the
// binary alone can install them into a run directory.

namespace acc::launcher {

// hangs/python/acc_launch.py.
extern const char* const kAccLaunchModule;

}  // namespace acc::launcher
