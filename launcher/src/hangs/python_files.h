#pragma once

// The acc_launch Python package (python/acc_launch/: the hook, checkpoint), embedded at configure
// time (python_files.cc.in), so that the binary alone can install it into a run directory.

namespace acc::launcher {

struct PythonFile {
  const char* name;  // in the package's directory
  const char* text;
};

extern const PythonFile kAccLaunchPackage[];
extern const int kAccLaunchPackageSize;

}  // namespace acc::launcher
