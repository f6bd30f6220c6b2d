#pragma once

namespace acc::launcher {
// acc-launch's version, "MAJOR.MINOR.PATCH", from the repository's VERSION file, which the wheel
// and the CMake package read too (launcher/src/cli/version.cc.in).
extern const char kVersion[];
}  // namespace acc::launcher
