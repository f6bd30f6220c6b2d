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

# acc_test(MODULE SOURCES... LIBS ...): one gtest binary per module, discovered by ctest.
function(acc_test module)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${module}_tests ${T_SOURCES})
  target_link_libraries(${module}_tests PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main
                                                Threads::Threads acc_warnings)
  target_compile_definitions(${module}_tests PRIVATE
    ACC_SOURCE_DIR="${PROJECT_SOURCE_DIR}" ACC_BINARY_DIR="${PROJECT_BINARY_DIR}")
  gtest_discover_tests(${module}_tests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)
endfunction()
