# The one version source is the VERSION file at the root ("MAJOR.MINOR.PATCH"). This file reads it
# into LOFP_VERSION{,_MAJOR,_MINOR,_PATCH} before project() and, after project(), writes the
# public header include/lofp/version.h into the build tree (lofp.h includes it). pyproject.toml
# reads the same file; scripts/fuzz.sh writes the same header for its builds without CMake.
file(READ "${CMAKE_CURRENT_LIST_DIR}/../VERSION" LOFP_VERSION)
string(STRIP "${LOFP_VERSION}" LOFP_VERSION)
if(NOT LOFP_VERSION MATCHES "^([0-9]+)\\.([0-9]+)\\.([0-9]+)$")
  message(FATAL_ERROR "VERSION: expected MAJOR.MINOR.PATCH, got '${LOFP_VERSION}'")
endif()
set(LOFP_VERSION_MAJOR ${CMAKE_MATCH_1})
set(LOFP_VERSION_MINOR ${CMAKE_MATCH_2})
set(LOFP_VERSION_PATCH ${CMAKE_MATCH_3})

function(lofp_write_version_header dir)
  configure_file("${CMAKE_CURRENT_FUNCTION_LIST_DIR}/version.h.in" "${dir}/lofp/version.h" @ONLY)
endfunction()
