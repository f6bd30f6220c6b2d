#pragma once

namespace acc::launcher {
inline constexpr const char* kVersion = "0.1.0";
}  // namespace acc::launcher
