#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/xattr.h>
#include <sys/vfs.h>
#include <unistd.h>
#include "CFileSync.h"

int haul_syncfs(int fd) { return syncfs(fd); }

int haul_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest) {
    return posix_spawn_file_actions_addclosefrom_np(actions, lowest);
}

int haul_wait_for_writeback(int fd) {
    return sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
}

int haul_start_writeback(int fd, long long offset, long long length) {
    return sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE);
}

long long haul_filesystem_type(int fd) {
    struct statfs info;
    if (fstatfs(fd, &info) != 0) return -1;
    return (long long)info.f_type;
}

int haul_rename_noreplace(const char *from, const char *to) {
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}

long haul_random_bytes(void *buffer, unsigned long length) {
    return (long)getrandom(buffer, length, 0);
}

int haul_open_unnamed(const char *folder, unsigned int mode) {
    return open(folder, O_TMPFILE | O_RDWR | O_CLOEXEC, (mode_t)mode);
}

/* Whether linkat(fd, "", …, AT_EMPTY_PATH) works here: it needs CAP_DAC_READ_SEARCH, and
   fails with ENOENT without it. Tried first (it skips resolving a /proc path: measured, about a
   tenth of an unnamed file's create-and-link cost), given up process-wide at the first ENOENT. */
static _Atomic int empty_path_links = 1;

int haul_link_open_file_by_proc(int fd, const char *target) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, path, AT_FDCWD, target, AT_SYMLINK_FOLLOW);
}

int haul_link_open_file(int fd, const char *target) {
    if (empty_path_links) {
        if (linkat(fd, "", AT_FDCWD, target, AT_EMPTY_PATH) == 0) return 0;
        if (errno != ENOENT) return -1;
        empty_path_links = 0;
    }
    return haul_link_open_file_by_proc(fd, target);
}

int haul_mark_file(int fd, const char *value) {
    return fsetxattr(fd, "user.haul.job", value, strlen(value), 0);
}

long haul_read_mark(const char *path, char *buffer, unsigned long size) {
    return (long)lgetxattr(path, "user.haul.job", buffer, size);
}

int haul_way_has_no_links(const char *folder) {
    struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS };
    int fd = (int)syscall(SYS_openat2, AT_FDCWD, folder, &how, sizeof how);
    if (fd < 0) return 0;
    close(fd);
    return 1;
}

// jemalloc's settings for the haul executable (see Sources/haul/Allocator.swift), read by jemalloc
// once, when the process first allocates (before main): the variable jemalloc documents for a
// program to set. MALLOC_CONF in the environment is read after it and may add to it. Other
// programs linking this shim without jemalloc never read it; it is weak, so one that links
// HaulCore and defines its own malloc_conf keeps its own (no duplicate symbol).
// tcache_max: each thread keeps freed blocks of up to 128 KiB for its next allocations of the
// same size (jemalloc's default stops at 32 KiB). libcurl allocates its receive buffer
// (CURLOPT_BUFFERSIZE, 100 KiB) when a transfer starts and frees it when the transfer ends,
// and haul holds a small body in a buffer of up to 64 KiB: beyond 32 KiB, each of those went
// to the arena, about 600 instructions a free. Measured on workload A (callgrind,
// Benchmarks/callgrind-per-file): 322.9 k → 319.1 k instructions a file; alternated with the
// same binary without it (6 rounds): CPU 1.115 → 1.045 s (medians).
// A thread keeps at most 20 blocks of each size class: a few MB at most, whatever the run's length.
__attribute__((weak)) const char *malloc_conf = "tcache_max:131072";
