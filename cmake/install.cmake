# `cmake --install BUILD [--prefix P]` puts in the prefix:
#   include/backplane.h, include/backplane_*.h, include/backplane_kinds.def   every public header
#                                       (self-contained: they include only each other and libc)
#   lib/libbackplane.so.<VERSION>, .so.<ABI> (the SONAME), .so                 the shared library
#   lib/libbackplane.a                                                         the static library
#   lib/pkgconfig/backplane.pc                                                 pkg-config
#   lib/cmake/backplane/backplaneConfig.cmake, backplaneConfigVersion.cmake   find_package(backplane)
#   bin/backplane                                                              the CLI
# (lib is CMAKE_INSTALL_LIBDIR: lib/x86_64-linux-gnu under /usr on Debian.)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Every public header, so one added under include/ today is installed without a change here.
file(GLOB BP_PUBLIC_HEADERS CONFIGURE_DEPENDS
  ${CMAKE_SOURCE_DIR}/include/*.h ${CMAKE_SOURCE_DIR}/include/*.def)
install(FILES ${BP_PUBLIC_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS backplane_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS backplane ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS backplane_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# What a program linking the static library must add: the archive's link dependencies, read
# from the target after every backend fragment added its own (libm, pthread, the static CUDA
# runtime with libstdc++/dl/rt, the OpenCL ICD loader). The shared library needs none of them
# on the program's link line. One list feeds both backplane.pc (Libs.private) and the CMake
# package (backplane::backplane_static).
get_target_property(bp_deps backplane INTERFACE_LINK_LIBRARIES)
set(BP_STATIC_DEPS "")
set(BP_PC_LIBS_PRIVATE "")
foreach(dep IN LISTS bp_deps)
  string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" dep "${dep}")
  if(dep MATCHES "\\$<" OR TARGET "${dep}")
    # tests/install/prefix.sh links an example statically against the installed archive, so a
    # dependency dropped here fails a test rather than a user's build.
    message(WARNING "cmake/install.cmake: cannot express link dependency '${dep}' of libbackplane.a "
                    "in backplane.pc / backplaneConfig.cmake; static users must add it themselves")
    continue()
  endif()
  if(dep IN_LIST BP_STATIC_DEPS)
    continue()
  endif()
  list(APPEND BP_STATIC_DEPS "${dep}")
  if(IS_ABSOLUTE "${dep}" OR dep MATCHES "^-")
    string(APPEND BP_PC_LIBS_PRIVATE " ${dep}")
  else()
    string(APPEND BP_PC_LIBS_PRIVATE " -l${dep}")
  endif()
endforeach()
string(STRIP "${BP_PC_LIBS_PRIVATE}" BP_PC_LIBS_PRIVATE)

set(BP_SHARED_FILE ${CMAKE_SHARED_LIBRARY_PREFIX}backplane${CMAKE_SHARED_LIBRARY_SUFFIX}.${PROJECT_VERSION})
set(BP_SONAME ${CMAKE_SHARED_LIBRARY_PREFIX}backplane${CMAKE_SHARED_LIBRARY_SUFFIX}.${BP_ABI_VERSION})
set(BP_STATIC_FILE ${CMAKE_STATIC_LIBRARY_PREFIX}backplane${CMAKE_STATIC_LIBRARY_SUFFIX})

# backplane.pc names the prefix the files were really installed to, which `cmake --install
# --prefix P` decides after configure time: the install step fills it in, writing straight into
# the destination (two installs of one build into different prefixes may run at once: tests do).
set(BP_INSTALL_PREFIX "@BP_INSTALL_PREFIX@") # kept for the install step's own substitution
configure_file(${CMAKE_SOURCE_DIR}/cmake/backplane.pc.in ${CMAKE_BINARY_DIR}/pkgconfig/backplane.pc.in @ONLY)
install(CODE "
  set(BP_INSTALL_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(bp_pc \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/backplane.pc\")
  message(STATUS \"Installing: \${bp_pc}\")
  configure_file(\"${CMAKE_BINARY_DIR}/pkgconfig/backplane.pc.in\" \"\${bp_pc}\" @ONLY)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${bp_pc}\")")

# The CMake package is relocatable: it finds the prefix from its own location.
set(BP_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/backplane)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/backplaneConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake/backplaneConfig.cmake
  INSTALL_DESTINATION ${BP_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
# Before 1.0 a minor release may change the ABI (and the SONAME), so only the same MAJOR.MINOR
# satisfies find_package(backplane X.Y).
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/backplaneConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/backplaneConfig.cmake
              ${CMAKE_BINARY_DIR}/cmake/backplaneConfigVersion.cmake
        DESTINATION ${BP_CMAKE_DIR})
