/* A disk slower than the network, for workload F of Benchmarks/run.
 *
 * Loaded with LD_PRELOAD, it makes every write(2) of 4 KiB or more sleep SLOW_WRITE_US
 * microseconds first, as a slow disk would block the writer. Body chunks reach the file through
 * write(2) (SQLite writes with pwrite(2), and log lines are short), so only the downloaded bytes
 * are slowed. Both of haul's transports write in pieces of at most 16 KiB (URLSession's chunks;
 * libcurl's write callback, whatever CURLOPT_BUFFERSIZE, gets at most CURL_MAX_WRITE_SIZE), so
 * the delay per byte is the same for both. Programs that write through stdio (curl, wget) call
 * an internal write and are not slowed: F runs only haul and the two floors.
 *
 *   cc -O2 -shared -fPIC slowwrite.c -o slowwrite.so -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

ssize_t write(int fd, const void *buffer, size_t count) {
    static ssize_t (*real_write)(int, const void *, size_t);
    static long delay = -1;
    if (!real_write) real_write = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (delay < 0) {
        const char *text = getenv("SLOW_WRITE_US");
        delay = text ? atol(text) : 0;
    }
    if (count >= 4096 && delay > 0) usleep((useconds_t)delay);
    return real_write(fd, buffer, count);
}
