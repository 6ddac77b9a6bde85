/* libbackplane.so has no sources of its own: it is libbackplane.a linked whole
 * (cmake/library.cmake). CMake wants at least one source file for a library target. */
typedef int bp_shared_library_has_no_sources_of_its_own;
