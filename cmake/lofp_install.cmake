# cmake --install: the public headers (with the generated lofp/version.h), liblofp.a, liblofp.so
# (SONAME liblofp.so.<major>), the lofp command, a CMake package exporting lofp::lofp (shared)
# and lofp::lofp_static, and lofp.pc for pkg-config (static link flags in Libs.private).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/lofp ${PROJECT_BINARY_DIR}/include/lofp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

# Consumers of the installed tree see only the installed include directory.
foreach(t lofp_static lofp_shared)
  if(TARGET ${t})
    target_include_directories(${t} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  endif()
endforeach()
set_target_properties(lofp_static PROPERTIES EXPORT_NAME lofp_static)
set(lofp_install_targets lofp_static)
if(TARGET lofp_shared)
  set_target_properties(lofp_shared PROPERTIES EXPORT_NAME lofp)
  list(APPEND lofp_install_targets lofp_shared)
endif()
install(TARGETS ${lofp_install_targets} EXPORT lofpTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET lofp)
  install(TARGETS lofp RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  # `lofp bench` runs lofp-bench from its own directory.
  if(TARGET lofp-bench)
    install(TARGETS lofp-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endif()

set(lofp_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/lofp)
install(EXPORT lofpTargets NAMESPACE lofp:: DESTINATION ${lofp_cmake_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/lofpConfig.cmake.in
  ${PROJECT_BINARY_DIR}/lofpConfig.cmake INSTALL_DESTINATION ${lofp_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/lofpConfigVersion.cmake
  VERSION ${LOFP_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/lofpConfig.cmake ${PROJECT_BINARY_DIR}/lofpConfigVersion.cmake
        DESTINATION ${lofp_cmake_dir})

# pkg-config: `pkg-config --libs lofp` for the shared library, `--static` adds what liblofp.a
# needs (libm and the threads library).
set(lofp_pc_private "-lm")
if(CMAKE_THREAD_LIBS_INIT)
  string(APPEND lofp_pc_private " ${CMAKE_THREAD_LIBS_INIT}")
else()
  string(APPEND lofp_pc_private " -pthread")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/lofp.pc.in ${PROJECT_BINARY_DIR}/lofp.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/lofp.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
