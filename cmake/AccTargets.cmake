# Warnings for our own code only: an interface target, never exported.
add_library(acc_warnings INTERFACE)
target_compile_options(acc_warnings INTERFACE -Wall -Wextra -Wpedantic)
if(ACC_WERROR)
  target_compile_options(acc_warnings INTERFACE -Werror)
endif()

# A module's sources compile in batches of 8 per compiler run (CMake's unity build): the headers
# they share (CLI11, spdlog, Asio, LibTorch) are parsed and their templates instantiated once per
# batch, not once per source, two fifths less build time here. A name private to one source (its
# anonymous namespace) must then not be used by another source of the same module. OFF while
# editing one file: one compiler run per source.
option(ACC_UNITY_BUILD "Compile each module's sources in batches (unity build)" ON)

# acc_module(NAME SOURCES...): a library acc::NAME with public headers in NAME/include.
function(acc_module name)
  add_library(acc_${name} ${ARGN})
  add_library(acc::${name} ALIAS acc_${name})
  set_target_properties(acc_${name} PROPERTIES OUTPUT_NAME acc_${name} EXPORT_NAME ${name}
                                               POSITION_INDEPENDENT_CODE ON
                                               UNITY_BUILD ${ACC_UNITY_BUILD}
                                               UNITY_BUILD_BATCH_SIZE 8)
  target_include_directories(acc_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(acc_${name} PRIVATE $<BUILD_INTERFACE:acc_warnings>)
endfunction()

# The SANITIZED tests are those a sanitized tree runs: the unit tests of the modules without
# LibTorch (common, config, rendezvous, launcher) and the tests of the real acc-launch binary that
# need no LibTorch (tests/integration's launcher_integration_tests, the store's clients).
# `make test` runs them once, in its sanitized tree, and configures its main tree with
# ACC_SANITIZED_TESTS=OFF, where they are neither built nor run; the main tree runs the rest
# (LibTorch's tests, the long multi-node and compatibility scripts).
option(ACC_SANITIZED_TESTS "Build and run the tests a sanitized tree runs (see above)" ON)

# acc_test(MODULE [SANITIZED] SOURCES... LIBS ...): one gtest binary per module, discovered by
# ctest; with SANITIZED, left out of `all` and of ctest where ACC_SANITIZED_TESTS is OFF.
function(acc_test module)
  cmake_parse_arguments(T "SANITIZED" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${module}_tests ${T_SOURCES})
  # The modules' tests without LibTorch compile in batches too (gtest's and the modules' headers
  # are most of each file's time: 528 s of compiling down to 219 s in the sanitized tree here);
  # LibTorch's start from its precompiled header instead.
  if(T_SANITIZED)
    set_target_properties(${module}_tests PROPERTIES UNITY_BUILD ${ACC_UNITY_BUILD}
                                                     UNITY_BUILD_BATCH_SIZE 8)
  endif()
  target_link_libraries(${module}_tests PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main
                                                Threads::Threads acc_warnings)
  target_compile_definitions(${module}_tests PRIVATE
    ACC_SOURCE_DIR="${PROJECT_SOURCE_DIR}" ACC_BINARY_DIR="${PROJECT_BINARY_DIR}")
  if(T_SANITIZED AND NOT ACC_SANITIZED_TESTS)
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
