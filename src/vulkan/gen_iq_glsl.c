/* Build-time generator for the IQ grid tables of src/kinds/iq_tables.h, so the shaders and the
 * CPU reference read the very same numbers (one source of truth) and a CI build needs nothing
 * beyond a C compiler -- no python at build time.
 *
 *   gen_iq_glsl glsl  prints a GLSL include: accessor functions reading each table from a
 *                     storage buffer (set 3) at a fixed word offset;
 *   gen_iq_glsl c     prints the C array of 32-bit words the host uploads into that buffer.
 * Both come from one loop over the same tables, so offsets and data agree by construction.
 *
 * Why a buffer and not GLSL constant arrays: llvmpipe (lavapipe) materialises a dynamically
 * indexed constant array in every invocation's private memory; with the 512- and 2048-entry
 * grids a single matvec ran for minutes. Every entry is one word (64-bit grid rows two: low,
 * high), since 8-bit storage and 64-bit integers are optional Vulkan features.
 *
 * Each BP_TABLE(type, name, count) row registers itself through a constructor.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef struct gen_table {
    const char *type, *name;
    const void *data;
    int count;
} gen_table;

static gen_table gen_tables[64];
static int gen_n;

static void gen_register(const char *type, const char *name, const void *data, int count) {
    if (gen_n < 64) gen_tables[gen_n++] = (gen_table){type, name, data, count};
}

/* A tentative definition, a constructor that registers it, then the definition the header's
 * "= { ... };" completes. */
#define BP_TABLE(type, name, count)                                                      \
    static const type name[count];                                                       \
    __attribute__((constructor)) static void gen_reg_##name(void) {                      \
        gen_register(#type, #name, name, count);                                         \
    }                                                                                    \
    static const type name[count]
#include "kinds/iq_tables.h"

static int words_per(const gen_table *g) { return strcmp(g->type, "uint64_t") == 0 ? 2 : 1; }

static uint32_t word_at(const gen_table *g, int i, int half) {
    if (strcmp(g->type, "uint64_t") == 0) {
        uint64_t v = ((const uint64_t *)g->data)[i];
        return half ? (uint32_t)(v >> 32) : (uint32_t)v;
    }
    if (strcmp(g->type, "uint32_t") == 0) return ((const uint32_t *)g->data)[i];
    if (strcmp(g->type, "int32_t") == 0) return (uint32_t)((const int32_t *)g->data)[i];
    if (strcmp(g->type, "uint16_t") == 0) return ((const uint16_t *)g->data)[i];
    if (strcmp(g->type, "int16_t") == 0) return (uint32_t)(int32_t)((const int16_t *)g->data)[i];
    if (strcmp(g->type, "uint8_t") == 0) return ((const uint8_t *)g->data)[i];
    return (uint32_t)(int32_t)((const int8_t *)g->data)[i]; /* int8_t */
}

static bool known_type(const char *t) {
    static const char *ok[] = {"uint64_t", "uint32_t", "int32_t", "uint16_t", "int16_t", "uint8_t", "int8_t"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        if (strcmp(t, ok[i]) == 0) return true;
    }
    return false;
}

int main(int argc, char **argv) {
    bool glsl = argc > 1 && strcmp(argv[1], "glsl") == 0;
    if (argc < 2 || (!glsl && strcmp(argv[1], "c") != 0)) {
        fprintf(stderr, "usage: %s glsl|c\n", argv[0]);
        return 2;
    }
    for (int t = 0; t < gen_n; t++) {
        if (!known_type(gen_tables[t].type)) {
            fprintf(stderr, "gen_iq_glsl: table %s has unsupported type %s\n", gen_tables[t].name, gen_tables[t].type);
            return 1;
        }
    }
    printf("%s GENERATED at build time by src/vulkan/gen_iq_glsl.c from src/kinds/iq_tables.h.\n", glsl ? "//" : "/*");
    if (!glsl) printf(" * Do not edit. */\n#include <stddef.h>\n#include <stdint.h>\n\nconst uint32_t bp_vk_iq_words[] = {");
    if (glsl) {
        printf("layout(std430, set = 3, binding = 0) readonly buffer IqTables { uint iqt[]; };\n");
#ifdef BP_IQ1S_DELTA
        printf("const float IQ1S_DELTA = %.9g;\n", (double)BP_IQ1S_DELTA);
#endif
#ifdef BP_IQ1M_DELTA
        printf("const float IQ1M_DELTA = %.9g;\n", (double)BP_IQ1M_DELTA);
#endif
    }
    unsigned long off = 0;
    for (int t = 0; t < gen_n; t++) {
        const gen_table *g = &gen_tables[t];
        const char *gname = strncmp(g->name, "bp_", 3) == 0 ? g->name + 3 : g->name;
        int wp = words_per(g);
        if (glsl) {
            if (wp == 2)
                printf("uvec2 %s(uint i) { return uvec2(iqt[%luu + 2u * i], iqt[%luu + 2u * i + 1u]); }\n", gname, off, off);
            else if (g->type[0] == 'i')
                printf("int %s(uint i) { return int(iqt[%luu + i]); }\n", gname, off);
            else
                printf("uint %s(uint i) { return iqt[%luu + i]; }\n", gname, off);
        } else {
            printf("\n    /* %s at word %lu */", gname, off);
            for (int i = 0; i < g->count; i++) {
                for (int h = 0; h < wp; h++) {
                    if ((i * wp + h) % 8 == 0) printf("\n   ");
                    printf(" 0x%08" PRIx32 "u,", word_at(g, i, h));
                }
            }
        }
        off += (unsigned long)(g->count * wp);
    }
    if (!glsl) printf("\n};\nconst size_t bp_vk_iq_nwords = %lu;\n", off);
    return 0;
}
