#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>
#include "CFileSync.h"

int haul_syncfs(int fd) { return syncfs(fd); }

int haul_wait_for_writeback(int fd) {
    return sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
}
