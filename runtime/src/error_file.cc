#include "error_file.h"

#include <cxxabi.h>

#include <c10/util/Exception.h>

#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <typeinfo>

namespace acc::runtime::detail {
namespace {

std::terminate_handler previous_handler = nullptr;

std::string current_type_name() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  if (type == nullptr) return "unknown exception";
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> name(
      abi::__cxa_demangle(type->name(), nullptr, nullptr, &status), &std::free);
  return status == 0 && name ? name.get() : type->name();
}

[[noreturn]] void on_terminate() {
  // std::terminate without an exception (a joinable std::thread destroyed, noexcept) leaves
  // nothing to describe: the previous handler says what it can.
  if (std::current_exception()) {
    try {
      throw;
    } catch (...) {
      write_error_file(describe_current_exception());
    }
  }
  if (previous_handler != nullptr) previous_handler();
  std::abort();
}

// Loaded with libacc: an exception thrown before the first Accelerator is covered too.
[[maybe_unused]] const bool kInstalledAtLoad = (install_terminate_handler(), true);

}  // namespace

void write_error_file(const std::string& message) {
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (path == nullptr || *path == '\0') return;
  try {
    // An exception's text may hold any bytes: those that are not UTF-8 become U+FFFD.
    const nlohmann::json error = {{"message", message}};
    std::ofstream(path) << error.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                        << '\n';
  } catch (...) {
  }
}

std::string describe_current_exception() {
  const std::string type = current_type_name();
  try {
    throw;
  } catch (const c10::Error& e) {
    return type + ": " + e.what_without_backtrace();
  } catch (const std::exception& e) {
    return type + ": " + e.what();
  } catch (...) {
    return "an exception of type " + type + " (not a std::exception)";
  }
}

void install_terminate_handler() {
  static std::once_flag once;
  std::call_once(once, [] { previous_handler = std::set_terminate(on_terminate); });
}

}  // namespace acc::runtime::detail
