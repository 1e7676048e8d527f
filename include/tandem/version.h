// Tandem's version, one place: CMake's project(VERSION), the Python package and every
// tool's --version read it from here.
#pragma once

#define TANDEM_VERSION_STRING "0.2.0"

namespace tandem {
inline constexpr const char* kVersion = TANDEM_VERSION_STRING;
}  // namespace tandem
