# Finds Intel's ISA-L (Debian: libisal-dev) through pkg-config, falling back to a plain
# search; defines the imported target ISAL::isal.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PC_ISAL QUIET libisal)
endif()
find_path(ISAL_INCLUDE_DIR isa-l/crc.h HINTS ${PC_ISAL_INCLUDE_DIRS})
find_library(ISAL_LIBRARY NAMES isal HINTS ${PC_ISAL_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ISAL REQUIRED_VARS ISAL_LIBRARY ISAL_INCLUDE_DIR)
if(ISAL_FOUND AND NOT TARGET ISAL::isal)
  add_library(ISAL::isal UNKNOWN IMPORTED)
  set_target_properties(ISAL::isal PROPERTIES
    IMPORTED_LOCATION ${ISAL_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${ISAL_INCLUDE_DIR})
endif()
