#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro that casts -1 to a function pointer; Swift cannot import it.
static inline sqlite3_destructor_type csqlite_transient(void) { return SQLITE_TRANSIENT; }

// sqlite3_config is variadic, which Swift cannot call. Must run before sqlite3_initialize.
static inline int csqlite_disable_memstatus(void) { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }

// glibc's mallopt(M_MMAP_THRESHOLD, bytes), for URLListImporter (Swift's Glibc module lacks it).
#if defined(__GLIBC__)
#include <malloc.h>
static inline int csqlite_set_mmap_threshold(int bytes) { return mallopt(M_MMAP_THRESHOLD, bytes); }
#else
static inline int csqlite_set_mmap_threshold(int bytes) { (void)bytes; return 0; }
#endif
