/* Reading whole files and naming the system's reasons (see internal.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

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
static ladle_status regular(const char *func, const char *path, FILE *f, int64_t max,
                            int64_t *size)
{
    struct stat sb;
    char why[128];
    if (fstat(fileno(f), &sb) != 0)
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

ladle_status ladle__read_file(const char *func, const char *path, int64_t max, char **data,
                              size_t *size)
{
    ladle_status st = LADLE_OK;
    char why[128];
    char *buf = NULL;
    int64_t len = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return ladle__raise(LADLE_ERR_IO, func, "cannot open %s: %s", path,
                            ladle__strerror(errno, why, sizeof why));
    LADLE_CALL(regular(func, path, f, max, &len));
    buf = ladle__calloc((size_t)len + 1, 1);
    if (buf == NULL) {
        st = ladle__raise(LADLE_ERR_ALLOC, func, "cannot allocate %lld bytes to read %s",
                          (long long)len, path);
        goto fail;
    }
    if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
        int err = ferror(f) ? errno : 0;
        st = ladle__raise(LADLE_ERR_IO, func, "cannot read %s: %s", path,
                          err ? ladle__strerror(err, why, sizeof why)
                              : "it became shorter while being read");
        goto fail;
    }
    *data = buf;
    *size = (size_t)len;
    buf = NULL;
fail:
    ladle__free(buf);
    fclose(f);
    return st;
}
