// Linux calls that Swift's Glibc module does not show (they need _GNU_SOURCE).
#ifndef HAUL_CFILESYNC_H
#define HAUL_CFILESYNC_H

/// syncfs(2): writes every dirty page and inode of the file system holding `fd` to the device
/// and waits for it. Returns 0, or -1 with errno set (errors are reported since Linux 5.8).
int haul_syncfs(int fd);

#endif
