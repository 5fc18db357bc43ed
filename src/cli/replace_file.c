/* replace_file.c: writing a system file so that a crash, a full disk or a power cut in the
 * middle never leaves it half written: /etc/ld.so.preload (every program on the machine reads
 * it at start), malloc debug's system setting, systemd drop-ins.
 *
 * The new content goes to a temporary file in the same directory (same file system, so the
 * rename is atomic), is flushed to disk (fsync), takes the old file's mode and owner, and is
 * renamed over the old file; then the directory is flushed so the rename itself is durable.
 * A symbolic link is followed: the file it points at is replaced and the link stays.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Flushes the directory holding path (a rename or an unlink in it). */
static void sync_directory_of(const char *path)
{
    char copy[PATH_MAX];
    snprintf(copy, sizeof(copy), "%s", path);
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* The file to replace: path itself, or what its symbolic link points at. */
static int resolve(const char *path, char *out, size_t cap)
{
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        char real[PATH_MAX];
        if (!realpath(path, real))
            return -1;
        return snprintf(out, cap, "%s", real) < (int)cap ? 0 : (errno = ENAMETOOLONG, -1);
    }
    return snprintf(out, cap, "%s", path) < (int)cap ? 0 : (errno = ENAMETOOLONG, -1);
}

static int write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

int hs_replace_file(const char *command, const char *path, const char *data, size_t len,
                    mode_t mode)
{
    char target[PATH_MAX], tmp[PATH_MAX + 64];
    if (resolve(path, target, sizeof(target)) != 0) {
        fprintf(stderr, "heapscope %s: cannot write %s: %s\n", command, path, strerror(errno));
        return -1;
    }
    const char *slash = strrchr(target, '/');
    if (slash)
        snprintf(tmp, sizeof(tmp), "%.*s/.%s.heapscope-%d.tmp", (int)(slash - target), target,
                 slash + 1, (int)getpid());
    else
        snprintf(tmp, sizeof(tmp), ".%s.heapscope-%d.tmp", target, (int)getpid());

    struct stat old;
    bool existed = stat(target, &old) == 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  existed ? old.st_mode & 07777 : mode);
    if (fd < 0) {
        fprintf(stderr, "heapscope %s: cannot write %s: %s\n", command, tmp, strerror(errno));
        return -1;
    }
    int rc = write_all(fd, data, len);
    /* The old file's mode and owner (umask out of the way); root can set both. */
    if (rc == 0)
        rc = fchmod(fd, existed ? old.st_mode & 07777 : mode);
    if (rc == 0 && existed && (old.st_uid != geteuid() || old.st_gid != getegid()))
        rc = fchown(fd, old.st_uid, old.st_gid);
    if (rc == 0)
        rc = fsync(fd);
    int err = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        err = errno;
    }
    if (rc == 0 && rename(tmp, target) != 0) {
        rc = -1;
        err = errno;
    }
    if (rc != 0) {
        unlink(tmp);
        fprintf(stderr, "heapscope %s: cannot write %s: %s (left unchanged)\n", command, target,
                strerror(err));
        return -1;
    }
    sync_directory_of(target);
    return 0;
}

int hs_remove_file(const char *command, const char *path)
{
    if (unlink(path) != 0) {
        if (errno == ENOENT)
            return 0;
        fprintf(stderr, "heapscope %s: cannot remove %s: %s\n", command, path, strerror(errno));
        return -1;
    }
    sync_directory_of(path);
    return 0;
}

int hs_make_directories(const char *command, const char *dir, mode_t mode)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path)) {
        fprintf(stderr, "heapscope %s: %s: %s\n", command, dir, strerror(ENAMETOOLONG));
        return -1;
    }
    for (char *p = path + 1;; p++) {
        bool end = *p == '\0';
        if (*p == '/' || end) {
            *p = '\0';
            struct stat st;
            if (mkdir(path, mode) != 0 && errno != EEXIST) {
                fprintf(stderr, "heapscope %s: cannot create %s: %s\n", command, path,
                        strerror(errno));
                return -1;
            }
            if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
                fprintf(stderr, "heapscope %s: %s is not a directory\n", command, path);
                return -1;
            }
            if (end)
                return 0;
            *p = '/';
        }
    }
}
