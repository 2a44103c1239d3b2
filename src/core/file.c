/* Reading and writing whole files, and naming the system's reasons (see
 * internal.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/core/internal.h"

const char *ladle__strerror(int err, char *buf, size_t cap)
{
    /* the XSI strerror_r (thread-safe, unlike strerror) */
    if (cap == 0)
        return buf;
    if (strerror_r(err, buf, cap) != 0)
        snprintf(buf, cap, "error %d", err);
    return buf;
}

/* Whether an open file is a regular file; raises otherwise. */
static ladle_status regular(const char *func, const char *path, int fd, int64_t max,
                            int64_t *size)
{
    struct stat sb;
    char why[128];
    if (fstat(fd, &sb) != 0)
        return ladle__raise(LADLE_ERR_IO, func, "cannot stat %s: %s", path,
                            ladle__strerror(errno, why, sizeof why));
    if (S_ISDIR(sb.st_mode))
        return ladle__raise(LADLE_ERR_IO, func, "%s is a directory, not a file", path);
    if (!S_ISREG(sb.st_mode))
        return ladle__raise(LADLE_ERR_IO, func,
                            "%s is not a regular file (a device, pipe or socket)", path);
    if ((int64_t)sb.st_size > max)
        return ladle__raise(LADLE_ERR_IO, func,
                            "%s is too large (%lld bytes, at most %lld)", path,
                            (long long)sb.st_size, (long long)max);
    *size = (int64_t)sb.st_size;
    return LADLE_OK;
}

/* n bytes from fd into p; -1 with errno set (0 for a file that ended). */
static int read_all(int fd, char *p, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = read(fd, p + done, n - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = 0;
            return -1;
        }
        done += (size_t)r;
    }
    return 0;
}

ladle_status ladle__read_file(const char *func, const char *path, int64_t max, char **data,
                              size_t *size)
{
    ladle_status st = LADLE_OK;
    char why[128];
    char *buf = NULL;
    int64_t len = 0;
    /* non-blocking, so that a FIFO named by mistake cannot stop the caller
     * (and the ranks waiting for its verdict) before fstat refuses it */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return ladle__raise(LADLE_ERR_IO, func, "cannot open %s: %s", path,
                            ladle__strerror(errno, why, sizeof why));
    LADLE_CALL(regular(func, path, fd, max, &len));
    buf = ladle__calloc((size_t)len + 1, 1);
    if (buf == NULL) {
        st = ladle__raise(LADLE_ERR_ALLOC, func, "cannot allocate %lld bytes to read %s",
                          (long long)len, path);
        goto fail;
    }
    if (read_all(fd, buf, (size_t)len) != 0) {
        st = ladle__raise(LADLE_ERR_IO, func, "cannot read %s: %s", path,
                          errno ? ladle__strerror(errno, why, sizeof why)
                                : "it became shorter while being read");
        goto fail;
    }
    *data = buf;
    *size = (size_t)len;
    buf = NULL;
fail:
    ladle__free(buf);
    close(fd);
    return st;
}

/* Every byte of n at fd, or -1 with errno set. */
static int write_all(int fd, const char *p, size_t n, size_t *done)
{
    while (*done < n) {
        ssize_t w = write(fd, p + *done, n - *done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        if (w == 0) { /* no progress and no reason: call it what it is */
            errno = EIO;
            return -1;
        }
        *done += (size_t)w;
    }
    return 0;
}

/* path + ".tmp" into buf; 0 when it does not fit. */
static int tmp_name(const char *path, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s.tmp", path);
    return n > 0 && (size_t)n < cap;
}

/* Refuse a path that names a directory or something other than a file. */
static ladle_status not_a_directory(const char *func, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return ladle__raise(LADLE_ERR_IO, func, "%s is a directory, not a file", path);
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return ladle__raise(LADLE_ERR_IO, func,
                            "%s is not a regular file (a device, pipe or socket)", path);
    return LADLE_OK;
}

/* Create (or truncate) the regular file tmp for writing. Non-blocking, so
 * that a FIFO of that name cannot stop the caller; anything but a regular
 * file is refused. */
static ladle_status create_tmp(const char *func, const char *tmp, int *out)
{
    char why[128];
    int64_t size = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC, 0666);
    if (fd < 0)
        return ladle__raise(LADLE_ERR_IO, func, "cannot create %s: %s", tmp,
                            ladle__strerror(errno, why, sizeof why));
    ladle_status st = regular(func, tmp, fd, INT64_MAX, &size);
    if (st != LADLE_OK) {
        close(fd);
        return st;
    }
    *out = fd;
    return LADLE_OK;
}

/* Write the pieces to fd: the step that failed and the reason on failure. */
static ladle_status write_pieces(const char *func, const char *tmp, int fd, int n,
                                 const void *const *data, const size_t *sizes)
{
    char why[128];
    size_t total = 0;
    for (int k = 0; k < n; k++) {
        size_t done = 0;
        if (write_all(fd, data[k], sizes[k], &done) != 0)
            return ladle__raise(LADLE_ERR_IO, func, "cannot write %s (after %zu bytes): %s",
                                tmp, total + done, ladle__strerror(errno, why, sizeof why));
        total += done;
    }
    /* on the disk before it replaces the old file */
    if (fsync(fd) != 0)
        return ladle__raise(LADLE_ERR_IO, func, "cannot flush %s to the disk: %s", tmp,
                            ladle__strerror(errno, why, sizeof why));
    return LADLE_OK;
}

/* After a rename, the directory entry itself (best effort: some file
 * systems cannot sync a directory, and the file is already in place). */
static void sync_directory(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    int n = slash == NULL   ? snprintf(dir, sizeof dir, ".")
            : slash == path ? snprintf(dir, sizeof dir, "/")
                            : snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (n <= 0 || (size_t)n >= sizeof dir)
        return;
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* The new temporary file beside path (its name in tmp, of cap bytes), open
 * for writing in *fd, once path is known not to be a directory. */
static ladle_status open_tmp(const char *func, const char *path, char *tmp, size_t cap, int *fd)
{
    if (!tmp_name(path, tmp, cap))
        return ladle__raise(LADLE_ERR_IO, func, "the path %.64s... is too long", path);
    ladle_status st = not_a_directory(func, path);
    return st != LADLE_OK ? st : create_tmp(func, tmp, fd);
}

ladle_status ladle__write_file(const char *func, const char *path, int n,
                               const void *const *data, const size_t *sizes)
{
    ladle_status st = LADLE_OK;
    char tmp[4096], why[128];
    int fd = -1;
    LADLE_CALL(open_tmp(func, path, tmp, sizeof tmp, &fd));
    st = write_pieces(func, tmp, fd, n, data, sizes);
    if (close(fd) != 0 && st == LADLE_OK)
        st = ladle__raise(LADLE_ERR_IO, func, "cannot close %s: %s", tmp,
                          ladle__strerror(errno, why, sizeof why));
    if (st == LADLE_OK && rename(tmp, path) != 0)
        st = ladle__raise(LADLE_ERR_IO, func, "cannot rename %s to %s: %s", tmp, path,
                          ladle__strerror(errno, why, sizeof why));
    if (st != LADLE_OK) {
        /* the old file, if any, is untouched: only the partial copy goes */
        (void)unlink(tmp);
        return st;
    }
    sync_directory(path);
fail:
    return st;
}

ladle_status ladle__check_writable(const char *func, const char *path)
{
    ladle_status st = LADLE_OK;
    char tmp[4096], why[128];
    int fd = -1;
    LADLE_CALL(open_tmp(func, path, tmp, sizeof tmp, &fd));
    close(fd);
    if (unlink(tmp) != 0)
        return ladle__raise(LADLE_ERR_IO, func, "cannot remove %s: %s", tmp,
                            ladle__strerror(errno, why, sizeof why));
fail:
    return st;
}
