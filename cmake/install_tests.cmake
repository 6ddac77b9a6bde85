# Tests of what users get (scripts in tests/install/): the exported symbols of libbackplane.so,
# one version everywhere, an installed prefix used by the examples and the README's C snippet
# through pkg-config and find_package, and the Python binding with pytest.
add_test(NAME install_exports
  COMMAND bash tests/install/exports.sh $<TARGET_FILE:backplane_shared> ${CMAKE_SOURCE_DIR}/include
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
add_test(NAME install_version
  COMMAND bash tests/install/version.sh $<TARGET_FILE:backplane_cli> $<TARGET_FILE:backplane_shared>
          ${PROJECT_VERSION} ${BP_ABI_VERSION}
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
