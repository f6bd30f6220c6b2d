# Cross-building acc-launch for aarch64 Linux on an x86-64 Debian 12 (`make wheel ARCH=aarch64`):
# Debian's cross GCC 12 (g++-aarch64-linux-gnu: the arm64 C library and libstdc++ under
# /usr/aarch64-linux-gnu) and the arm64 build packages that scripts/install-cross-aarch64.sh
# unpacks into ACC_AARCH64_ROOT (default /opt/acc-launch/aarch64-root, laid out as dpkg would:
# usr/include, usr/lib/aarch64-linux-gnu). CMake finds libraries, headers and packages there only,
# never the build machine's x86-64 ones; programs (cmake, ninja) it runs from the build machine.
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake ...
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# The cross binutils, not the build machine's (CMake's guesses would do; named so none is missed).
set(CMAKE_AR aarch64-linux-gnu-ar CACHE FILEPATH "")
set(CMAKE_RANLIB aarch64-linux-gnu-ranlib CACHE FILEPATH "")
set(CMAKE_STRIP aarch64-linux-gnu-strip CACHE FILEPATH "")
set(CMAKE_OBJDUMP aarch64-linux-gnu-objdump CACHE FILEPATH "")

if(NOT ACC_AARCH64_ROOT)
  if(DEFINED ENV{ACC_AARCH64_ROOT})
    set(ACC_AARCH64_ROOT "$ENV{ACC_AARCH64_ROOT}")
  else()
    set(ACC_AARCH64_ROOT /opt/acc-launch/aarch64-root)
  endif()
endif()
if(NOT EXISTS "${ACC_AARCH64_ROOT}/.acc-launch-root")
  message(FATAL_ERROR "${ACC_AARCH64_ROOT}: no arm64 build packages there; as root: "
                      "bash scripts/install-cross-aarch64.sh (or make wheel ARCH=aarch64)")
endif()
# try_compile projects read this file again: they get the same root.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES ACC_AARCH64_ROOT)

set(CMAKE_FIND_ROOT_PATH "${ACC_AARCH64_ROOT}" /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# The multiarch header directory of the root (OpenSSL's configuration.h), as the native compiler
# searches /usr/include/x86_64-linux-gnu.
set(CMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES "${ACC_AARCH64_ROOT}/usr/include/aarch64-linux-gnu")
# pkg-config (FindOpenSSL asks it first) reads the root's .pc files, with their paths in the root.
set(_acc_pkgconfig_lib "${ACC_AARCH64_ROOT}/usr/lib/aarch64-linux-gnu/pkgconfig")
set(ENV{PKG_CONFIG_LIBDIR} "${_acc_pkgconfig_lib}:${ACC_AARCH64_ROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${ACC_AARCH64_ROOT}")
# No RUNPATH into the root: CMake would give the binary one, as yaml-cpp's target is an imported
# shared library (pointed at its archive: CMakeLists.txt) from a directory the cross linker does not
# search by itself. The x86-64 binary has none; an aarch64 machine has no such directory.
set(CMAKE_SKIP_BUILD_RPATH ON)
