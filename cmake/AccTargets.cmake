# Warnings for our own code only: an interface target, never exported.
add_library(acc_warnings INTERFACE)
target_compile_options(acc_warnings INTERFACE -Wall -Wextra -Wpedantic)
if(ACC_WERROR)
  target_compile_options(acc_warnings INTERFACE -Werror)
endif()

# acc_module(NAME SOURCES...): a library acc::NAME with public headers in NAME/include.
function(acc_module name)
  add_library(acc_${name} ${ARGN})
  add_library(acc::${name} ALIAS acc_${name})
  set_target_properties(acc_${name} PROPERTIES OUTPUT_NAME acc_${name} EXPORT_NAME ${name}
                                               POSITION_INDEPENDENT_CODE ON)
  target_include_directories(acc_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(acc_${name} PRIVATE $<BUILD_INTERFACE:acc_warnings>)
endfunction()

# The unit tests of the modules without LibTorch (common, config, rendezvous, launcher: code in one
# process) are MODULE tests. `make test` runs them once, in the sanitized tree, and configures its
# main tree with ACC_MODULE_UNIT_TESTS=OFF, where they are neither built nor run; the main tree
# runs the rest (LibTorch's tests, the real binary's integration tests, the scripts).
option(ACC_MODULE_UNIT_TESTS "Build and run the unit tests of common, config, rendezvous, launcher" ON)

# acc_test(MODULE [MODULE_UNIT] SOURCES... LIBS ...): one gtest binary per module, discovered by
# ctest; with MODULE_UNIT, left out of `all` and of ctest where ACC_MODULE_UNIT_TESTS is OFF.
function(acc_test module)
  cmake_parse_arguments(T "MODULE_UNIT" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${module}_tests ${T_SOURCES})
  target_link_libraries(${module}_tests PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main
                                                Threads::Threads acc_warnings)
  target_compile_definitions(${module}_tests PRIVATE
    ACC_SOURCE_DIR="${PROJECT_SOURCE_DIR}" ACC_BINARY_DIR="${PROJECT_BINARY_DIR}")
  if(T_MODULE_UNIT AND NOT ACC_MODULE_UNIT_TESTS)
    set_target_properties(${module}_tests PROPERTIES EXCLUDE_FROM_ALL ON)
    return()
  endif()
  gtest_discover_tests(${module}_tests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)
endfunction()

# acc_use_torch_pch(TARGET [SOURCES...]): the target's units start from the precompiled
# <torch/torch.h> of acc_torch_pch (runtime/CMakeLists.txt) instead of parsing it, 20 s of a 30 s
# LibTorch unit here. With SOURCES, only those do: a unit that includes a narrower part of
# LibTorch, or none of it, pays more to load the precompiled header than to parse its own.
function(acc_use_torch_pch target)
  if(NOT ACC_TORCH_PCH)
    return()
  endif()
  target_precompile_headers(${target} REUSE_FROM acc_torch_pch)
  # GCC takes a precompiled header only where it is compiled with the same -fpic/-fpie settings
  # (executables would otherwise be the compiler's default -fPIE).
  target_compile_options(${target} PRIVATE -fPIC)
  if(ARGN)
    get_target_property(sources ${target} SOURCES)
    foreach(source IN LISTS sources)
      if(NOT source MATCHES "^\\$<" AND NOT source IN_LIST ARGN)
        set_source_files_properties(${source} TARGET_DIRECTORY ${target} PROPERTIES
                                    SKIP_PRECOMPILE_HEADERS ON)
      endif()
    endforeach()
  endif()
endfunction()
