/* A disk slower than the network, for workload F of Benchmarks/run.
 *
 * Loaded with LD_PRELOAD, it makes every write(2) and pwrite(2) of 4 KiB or more sleep
 * SLOW_WRITE_US microseconds first, as a slow disk would block the writer, except a pwrite to a
 * database file (a name holding ".db": SQLite's pages; log lines are short), so only the
 * downloaded bytes are slowed: haul writes bodies with pwrite(2), the floors with write(2). Both of haul's transports write in pieces of at most 16 KiB (URLSession's chunks;
 * libcurl's write callback, whatever CURLOPT_BUFFERSIZE, gets at most CURL_MAX_WRITE_SIZE), so
 * the delay per byte is the same for both. Programs that write through stdio (curl, wget) call
 * an internal write and are not slowed: F runs only haul and the two floors.
 *
 *   cc -O2 -shared -fPIC slowwrite.c -o slowwrite.so -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static long slow_delay(void) {
    static long delay = -1;
    if (delay < 0) {
        const char *text = getenv("SLOW_WRITE_US");
        delay = text ? atol(text) : 0;
    }
    return delay;
}

/* Whether fd is not one of a database's files. */
static int not_database(int fd) {
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t length = readlink(link, path, sizeof path - 1);
    if (length < 0) return 1;
    path[length] = 0;
    return strstr(path, ".db") == NULL;
}

typedef ssize_t (*pwrite_function)(int, const void *, size_t, off_t);

/* The real function is looked up once (*real caches it), not on every call. */
static ssize_t slow_pwrite(pwrite_function *real, const char *name, int fd, const void *buffer, size_t count, off_t offset) {
    if (!*real) *real = (pwrite_function)dlsym(RTLD_NEXT, name);
    if (count >= 4096 && slow_delay() > 0 && not_database(fd)) usleep((useconds_t)slow_delay());
    return (*real)(fd, buffer, count, offset);
}

ssize_t pwrite(int fd, const void *buffer, size_t count, off_t offset) {
    static pwrite_function real;
    return slow_pwrite(&real, "pwrite", fd, buffer, count, offset);
}

ssize_t pwrite64(int fd, const void *buffer, size_t count, off_t offset) {
    static pwrite_function real;
    return slow_pwrite(&real, "pwrite64", fd, buffer, count, offset);
}

ssize_t write(int fd, const void *buffer, size_t count) {
    static ssize_t (*real_write)(int, const void *, size_t);
    if (!real_write) real_write = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (count >= 4096 && slow_delay() > 0) usleep((useconds_t)slow_delay());
    return real_write(fd, buffer, count);
}
