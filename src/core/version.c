/* bp_version(): the project version of CMakeLists.txt's project(), the one place it is written;
 * cmake/library.cmake passes it to this file only. */
#include "backplane.h"

#ifndef BP_VERSION_STRING
#error "BP_VERSION_STRING is defined by cmake/library.cmake from the CMake project version"
#endif

const char *bp_version(void) { return BP_VERSION_STRING; }
