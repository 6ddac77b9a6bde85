# Tests of what users get (scripts in tests/install/): the exported symbols of libbackplane.so,
# one version everywhere, an installed prefix used by the examples and the README's C snippet
# through pkg-config and find_package, and the Python binding with pytest.
# A sanitizer build's programs are built with the same flags; Python loads the sanitizer runtime
# first (LD_PRELOAD), as a sanitized library in an unsanitized interpreter requires.
set(BP_USER_CFLAGS "")
set(BP_PY_PRELOAD "")
if(BP_SANITIZE)
  set(BP_USER_CFLAGS "-fsanitize=address,undefined")
  set(bp_runtime libasan.so)
elseif(BP_TSAN)
  set(BP_USER_CFLAGS "-fsanitize=thread")
  set(bp_runtime libtsan.so)
endif()
if(BP_USER_CFLAGS)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=${bp_runtime}
                  OUTPUT_VARIABLE BP_PY_PRELOAD OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
add_test(NAME install_exports
  COMMAND bash tests/install/exports.sh $<TARGET_FILE:backplane_shared> ${CMAKE_SOURCE_DIR}/include
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
add_test(NAME install_version
  COMMAND bash tests/install/version.sh $<TARGET_FILE:backplane_cli> $<TARGET_FILE:backplane_shared>
          ${PROJECT_VERSION} ${BP_ABI_VERSION} "${BP_PY_PRELOAD}"
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})

add_test(NAME install_prefix
  COMMAND bash tests/install/prefix.sh ${CMAKE_BINARY_DIR} "${BP_USER_CFLAGS}"
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# A backend outside the tree: a program built against the installed prefix only registers a toy
# device (the public device interface) and the seam runs a model's matmuls on it.
add_test(NAME install_device_backend
  COMMAND bash tests/install/device_backend.sh ${CMAKE_BINARY_DIR} "${BP_USER_CFLAGS}"
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
add_test(NAME install_python
  COMMAND bash tests/install/python.sh ${CMAKE_BINARY_DIR} "${BP_PY_PRELOAD}"
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(install_python PROPERTIES SKIP_RETURN_CODE 77)
