// What the static libstdc++ would ask of a glibc newer than acc-launch's floor, GLIBC_2.34 (RHEL 9,
// Ubuntu 22.04's 2.35, the wheel's manylinux_2_34 tag), given from older calls. Linked into the
// acc-launch binary only, with -Wl,--wrap (launcher/CMakeLists.txt);
// tests/wheel/glibc_symbols.sh fails the build on any symbol newer than GLIBC_2.34.

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

// arc4random (GLIBC_2.36) is std::random_device's default source in GCC 12's libstdc++ (random.o).
// acc-launch makes no random_device (acc/common/random.h), yet random.o is linked all the same:
// std::runtime_error's COW-string instantiations (cow-string-inst.o) refer to it. Same contract:
// 32 random bits from the kernel's generator; abort where there is none, as glibc does.
extern "C" std::uint32_t __wrap_arc4random() {
  std::uint32_t value = 0;
  for (;;) {
    const ssize_t n = ::getrandom(&value, sizeof value, 0);
    if (n == static_cast<ssize_t>(sizeof value)) return value;
    if (n >= 0 || errno != EINTR) std::abort();
  }
}
