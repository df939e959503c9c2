// The haul executable's settings for jemalloc (see Sources/haul/Allocator.swift).
#ifndef HAUL_CJEMALLOCCONF_H
#define HAUL_CJEMALLOCCONF_H

/// jemalloc's settings, read by jemalloc once, when the process first allocates (before
/// `main`): the variable jemalloc documents for a program to set (`malloc_conf`; MALLOC_CONF in
/// the environment is read after it and may add to it).
extern const char *malloc_conf;

#endif
