// jemalloc, linked into the haul executable so that it serves every malloc and free of the
// process (haul's Swift code, libcurl, SQLite, libpq): see Sources/haul/Allocator.swift.
#ifndef HAUL_CJEMALLOC_H
#define HAUL_CJEMALLOC_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/// jemalloc's mallctl (its control interface), the one function haul calls, declared here
/// rather than through <jemalloc/jemalloc.h>: that header would also show Swift a second
/// declaration of malloc, free and the rest, besides the C library's.
int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

/// 1 when the process's malloc is jemalloc's: a megabyte taken with malloc shows in jemalloc's
/// count of this thread's allocated bytes. (In C, with the block held in a volatile variable, so
/// that no compiler removes the malloc and free as unused.)
static inline int cjemalloc_serves_malloc(void) {
    uint64_t before = 0, after = 0;
    size_t size = sizeof before;
    if (mallctl("thread.allocated", &before, &size, NULL, 0) != 0) return 0;
    void *volatile block = malloc(1 << 20);
    if (block == NULL) return 0;
    size = sizeof after;
    int serves = mallctl("thread.allocated", &after, &size, NULL, 0) == 0 && after - before >= (1u << 20);
    free(block);
    return serves;
}

#endif
