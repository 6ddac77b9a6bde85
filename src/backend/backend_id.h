/* The backend ids: backends.def's rows in precedence order, then the CPU. */
#ifndef BP_BACKEND_BACKEND_ID_H
#define BP_BACKEND_BACKEND_ID_H

#define BP_BACKEND(ENUM, name, display, ...) BP_BACKEND_##ENUM,
typedef enum bp_backend_id {
#include "backend/backends.def"
    BP_BACKEND_CPU, /* always last, always able */
    BP_BACKEND_COUNT
} bp_backend_id;
#undef BP_BACKEND

#endif
