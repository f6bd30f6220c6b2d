# Installed package: find_package(acc-launch) gives acc::runtime (and acc::common it needs) and
# acc::runtime_launch (acc::launch), with the launcher's static libraries it links (acc::launcher,
# one library per room of the launcher, acc::config, acc::rendezvous: libraries only, their
# headers stay private), so that a program links acc::runtime_launch alone. The acc-launch binary
# is linked as in the tree.
include(CMakePackageConfigHelpers)
set(acc_export_targets acc_common)
if(ACC_BUILD_RUNTIME AND TARGET acc_runtime)
  get_property(acc_launcher_rooms GLOBAL PROPERTY ACC_LAUNCHER_ROOMS)
  list(APPEND acc_export_targets acc_runtime acc_runtime_launch acc_launcher ${acc_launcher_rooms}
              acc_config acc_rendezvous)
endif()
install(TARGETS ${acc_export_targets} EXPORT acc-launch-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY common/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET acc_runtime)
  install(DIRECTORY runtime/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endif()
if(TARGET acc-launch)
  install(TARGETS acc-launch RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(EXPORT acc-launch-targets NAMESPACE acc:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/acc-launch)
configure_package_config_file(cmake/acc-launch-config.cmake.in
  ${PROJECT_BINARY_DIR}/acc-launch-config.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/acc-launch)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/acc-launch-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/acc-launch-config.cmake
              ${PROJECT_BINARY_DIR}/acc-launch-config-version.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/acc-launch)
