// Linux calls that Swift's Glibc module does not show (some need _GNU_SOURCE, some its headers).
#ifndef HAUL_CFILESYNC_H
#define HAUL_CFILESYNC_H

#include <spawn.h>

/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34): the child closes every descriptor from
/// `lowest` up, so it inherits only what the other file actions give it. Returns 0 or an errno.
int haul_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest);

/// syncfs(2): writes every dirty page and inode of the file system holding `fd` to the device
/// and waits for it. Returns 0, or -1 with errno set (errors are reported since Linux 5.8).
int haul_syncfs(int fd);

/// Waits until the file's dirty pages are written and reports a write-back error seen on this
/// file since it was opened (sync_file_range(2) with WAIT_BEFORE | WRITE | WAIT_AFTER). It
/// does not flush metadata or the device's cache: call it after `haul_syncfs` to learn whether
/// this file's own bytes made it.
int haul_wait_for_writeback(int fd);

/// Starts writing the dirty pages of `length` bytes from `offset` to the device, without waiting
/// for them (sync_file_range(2) with WRITE only), so that a later fsync or syncfs finds less to do.
int haul_start_writeback(int fd, long long offset, long long length);

/// The file system type (statfs(2)'s f_type, e.g. 0xEF53 for ext4) of the file open as `fd`,
/// or -1 with errno set.
long long haul_filesystem_type(int fd);

/// renameat2(2) with RENAME_NOREPLACE: renames `from` to `to` only when `to` does not exist,
/// atomically. Returns 0, or -1 with errno set: EEXIST when `to` exists, EINVAL when the file
/// system cannot do it.
int haul_rename_noreplace(const char *from, const char *to);

/// Opens an unnamed regular file in `folder` (O_TMPFILE, read and write, close-on-exec), to be
/// named later with haul_link_open_file; -1 with errno (EOPNOTSUPP, EISDIR…: not supported there).
int haul_open_unnamed(const char *folder, unsigned int mode);

/// getrandom(2): fills `buffer` with `length` bytes from the kernel's cryptographic generator;
/// returns the count filled, or -1 with errno.
long haul_random_bytes(void *buffer, unsigned long length);

/// Gives the open file `fd` the name `target` (which must not exist: EEXIST): by AT_EMPTY_PATH
/// where the process may (CAP_DAC_READ_SEARCH), else through /proc/self/fd; 0 or -1 with errno.
int haul_link_open_file(int fd, const char *target);

/// haul_link_open_file's way without the capability: through /proc/self/fd (so tests run as
/// root still exercise it).
int haul_link_open_file_by_proc(int fd, const char *target);

/// 1 when `folder` exists and no component of the way to it is a symbolic link (one openat2
/// with RESOLVE_NO_SYMLINKS), else 0: a link on the way, a missing folder, or a kernel before
/// 5.6 — the caller then looks component by component.
int haul_way_has_no_links(const char *folder);

/// Sets the extended attribute user.haul.job of the open file `fd` to `value` (which haul's own
/// placed files carry, see ExistingFile). Returns 0, or -1 with errno set (ENOTSUP where the
/// file system has no user attributes).
int haul_mark_file(int fd, const char *value);

/// Reads user.haul.job of the file at `path` (not following a link) into `buffer`; returns its
/// length, or -1 with errno set (ENODATA when it has none).
long haul_read_mark(const char *path, char *buffer, unsigned long size);

#endif
