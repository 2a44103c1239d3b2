/*
 * The command-line parsers of ladle's tools: whole numbers and reals with a
 * range, lists of them, shapes ("7x11"), rank lists ("0-5", "0,2,4"),
 * choices among names, and a check that an output path can be written.
 *
 * Each parser returns 0 and stores the value, or returns -1 and writes into
 * why (CLI_WHY bytes) one line that names the option, repeats what was
 * given and says what is accepted:
 *
 *   --epochs: '1.5' is not a whole number (expected 1 to 1000000)
 *   --data-ways: 4294967297 is out of range (expected 1 to 4)
 *
 * Nothing is stored on failure. Text with leading blanks, trailing
 * characters, or a value that does not fit is refused, never truncated or
 * wrapped. Nothing here needs MPI; tools/tool.h has the collective helpers.
 */
#ifndef LADLE_TOOLS_CLI_H
#define LADLE_TOOLS_CLI_H

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ladle.h"

#define CLI_WHY 512

/* Bounds of cli_real: CLI_OPEN_LO excludes lo, CLI_OPEN_HI excludes hi. */
#define CLI_OPEN_LO 1u
#define CLI_OPEN_HI 2u

static inline int cli_fail(char *why, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline int cli_fail(char *why, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, CLI_WHY, fmt, ap);
    va_end(ap);
    return -1;
}

/* A whole number: an optional sign and decimal digits, nothing else.
 * 0 and *v, or 1 for "not a whole number", 2 for "does not fit in int64". */
static inline int cli_scan_int(const char *s, size_t len, int64_t *v)
{
    size_t i = 0;
    int neg = 0;
    uint64_t acc = 0, lim;
    if (len > 0 && (s[0] == '+' || s[0] == '-'))
        neg = s[i++] == '-';
    if (i == len)
        return 1;
    lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    int big = 0;
    for (; i < len; i++) {
        if (!isdigit((unsigned char)s[i]))
            return 1;
        unsigned dgt = (unsigned)(s[i] - '0');
        if (acc > (lim - dgt) / 10)
            big = 1;
        else
            acc = acc * 10 + dgt;
    }
    if (big)
        return 2;
    *v = neg ? (acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc) : (int64_t)acc;
    return 0;
}

/* The same for an unsigned 64-bit value (seeds): digits only. */
static inline int cli_scan_u64(const char *s, uint64_t *v)
{
    uint64_t acc = 0;
    if (*s == '\0')
        return 1;
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p))
            return 1;
        unsigned dgt = (unsigned)(*p - '0');
        if (acc > (UINT64_MAX - dgt) / 10)
            return 2;
        acc = acc * 10 + dgt;
    }
    *v = acc;
    return 0;
}

/* A whole number in [lo, hi]. */
static inline int cli_int(const char *opt, const char *s, int64_t lo, int64_t hi,
                          int64_t *v, char *why)
{
    int64_t x = 0;
    int rc = s ? cli_scan_int(s, strlen(s), &x) : 1;
    if (s == NULL || *s == '\0')
        return cli_fail(why,
                        "%s needs a value (a whole number from %" PRId64 " to %" PRId64 ")",
                        opt, lo, hi);
    if (rc == 1)
        return cli_fail(
            why, "%s: '%s' is not a whole number (expected %" PRId64 " to %" PRId64 ")",
            opt, s, lo, hi);
    if (rc == 2 || x < lo || x > hi)
        return cli_fail(why, "%s: %s is out of range (expected %" PRId64 " to %" PRId64 ")",
                        opt, s, lo, hi);
    *v = x;
    return 0;
}

/* The same into an int (hi must fit in one). */
static inline int cli_int32(const char *opt, const char *s, int lo, int hi, int *v,
                            char *why)
{
    int64_t x = 0;
    if (cli_int(opt, s, lo, hi, &x, why))
        return -1;
    *v = (int)x;
    return 0;
}

/* An unsigned 64-bit whole number (every value is accepted: seeds). */
static inline int cli_u64(const char *opt, const char *s, uint64_t *v, char *why)
{
    uint64_t x = 0;
    int rc = s ? cli_scan_u64(s, &x) : 1;
    if (rc == 1)
        return cli_fail(why, "%s: '%s' is not a whole number (expected 0 to %" PRIu64 ")",
                        opt, s ? s : "", UINT64_MAX);
    if (rc == 2)
        return cli_fail(why, "%s: %s is out of range (expected 0 to %" PRIu64 ")", opt, s,
                        UINT64_MAX);
    *v = x;
    return 0;
}

/* "[lo, hi)" and the like, for messages; inf for an open end at infinity. */
static inline const char *cli_range_text(double lo, double hi, unsigned flags, char *buf,
                                         size_t cap)
{
    snprintf(buf, cap, "%c%g, %g%c", flags & CLI_OPEN_LO ? '(' : '[', lo, hi,
             flags & CLI_OPEN_HI ? ')' : ']');
    return buf;
}

/* A finite real number (decimal or exponent form) in the range lo..hi. */
static inline int cli_real(const char *opt, const char *s, double lo, double hi,
                           unsigned flags, double *v, char *why)
{
    char range[96];
    char *end = NULL;
    cli_range_text(lo, hi, flags, range, sizeof range);
    if (s == NULL || *s == '\0' || isspace((unsigned char)*s))
        return cli_fail(why, "%s: '%s' is not a number (expected one in %s)", opt,
                        s ? s : "", range);
    errno = 0;
    double x = strtod(s, &end);
    if (end == s || *end != '\0' || isnan(x))
        return cli_fail(why, "%s: '%s' is not a number (expected one in %s)", opt, s,
                        range);
    int below = flags & CLI_OPEN_LO ? !(x > lo) : !(x >= lo);
    int above = flags & CLI_OPEN_HI ? !(x < hi) : !(x <= hi);
    if (!isfinite(x) || below || above)
        return cli_fail(why, "%s: %s is out of range (expected a number in %s)", opt, s,
                        range);
    *v = x;
    return 0;
}

/* The next item of a separated list: its length up to sep or the end. */
static inline size_t cli_item(const char *p, char sep)
{
    const char *q = strchr(p, sep);
    return q ? (size_t)(q - p) : strlen(p);
}

/* What cli_int_list found wrong with a list of whole numbers. */
enum { CLI_LIST_OK, CLI_LIST_EMPTY, CLI_LIST_LONG, CLI_LIST_NOT_INT, CLI_LIST_RANGE };

/* The whole numbers of s between any of the characters seps, at most cap
 * (up to 64) in [lo, hi]: CLI_LIST_OK with v[0..*n-1] set, or the first
 * failure (v and *n left as they were) with the item it is about at *at,
 * *len characters long. */
static inline int cli_int_list(const char *s, const char *seps, int64_t lo, int64_t hi,
                               int cap, int64_t *v, int *n, const char **at, size_t *len)
{
    int64_t tmp[64];
    int k = 0;
    if (s == NULL || *s == '\0')
        return CLI_LIST_EMPTY;
    for (const char *p = s;; p++) {
        size_t l = strcspn(p, seps);
        int64_t x = 0;
        int rc = cli_scan_int(p, l, &x);
        *at = p, *len = l;
        if (k == cap)
            return CLI_LIST_LONG;
        if (rc == 1)
            return CLI_LIST_NOT_INT;
        if (rc == 2 || x < lo || x > hi)
            return CLI_LIST_RANGE;
        tmp[k++] = x;
        p += l;
        if (*p == '\0')
            break;
    }
    memcpy(v, tmp, sizeof(int64_t) * (size_t)k);
    *n = k;
    return CLI_LIST_OK;
}

/* The message of cli_int_list's failure `code` on the value s of option
 * opt, a list of values (cli_ints) or, with shape set, of extents
 * (cli_shape); at and len as cli_int_list left them. Returns -1. */
static inline int cli_int_list_fail(const char *opt, const char *s, int shape, int code,
                                    const char *at, size_t len, int64_t lo, int64_t hi,
                                    int cap, char *why)
{
    if (code == CLI_LIST_EMPTY)
        return cli_fail(why, "%s needs a %s", opt,
                        shape ? "shape such as 7x11" : "list such as 1,2,3");
    if (code == CLI_LIST_LONG)
        return cli_fail(why, "%s: '%s' has more than %d %s", opt, s, cap,
                        shape ? "dimensions" : "values");
    if (code == CLI_LIST_NOT_INT && shape)
        return cli_fail(why,
                        "%s: '%s' is not a shape such as 7x11 (extents %" PRId64 " to %" PRId64
                        ")",
                        opt, s, lo, hi);
    if (code == CLI_LIST_NOT_INT)
        return cli_fail(why,
                        "%s: '%.*s' in '%s' is not a whole number (expected %" PRId64
                        " to %" PRId64 ")",
                        opt, (int)len, at, s, lo, hi);
    return cli_fail(why,
                    "%s: %s%.*s in '%s' is out of range (expected %" PRId64 " to %" PRId64 ")",
                    opt, shape ? "the extent " : "", (int)len, at, s, lo, hi);
}

/* "a,b,c": at most cap whole numbers in [lo, hi]. */
static inline int cli_ints(const char *opt, const char *s, int64_t lo, int64_t hi,
                           int64_t *v, int cap, int *n, char *why)
{
    const char *at = NULL;
    size_t len = 0;
    if (cap > 64)
        cap = 64;
    int code = cli_int_list(s, ",", lo, hi, cap, v, n, &at, &len);
    return code ? cli_int_list_fail(opt, s, 0, code, at, len, lo, hi, cap, why) : 0;
}

/* "a,b,c": at most cap finite reals in the range. */
static inline int cli_reals(const char *opt, const char *s, double lo, double hi,
                            unsigned flags, double *v, int cap, int *n, char *why)
{
    double tmp[64];
    char item[64];
    int k = 0;
    if (cap > 64)
        cap = 64;
    if (s == NULL || *s == '\0')
        return cli_fail(why, "%s needs a list such as 1,2.5,3", opt);
    for (const char *p = s;; p++) {
        size_t len = cli_item(p, ',');
        if (k == cap)
            return cli_fail(why, "%s: '%s' has more than %d values", opt, s, cap);
        if (len >= sizeof item)
            return cli_fail(why, "%s: '%.*s' in '%s' is not a number", opt, (int)len, p, s);
        memcpy(item, p, len);
        item[len] = '\0';
        if (cli_real(opt, item, lo, hi, flags, &tmp[k], why))
            return -1;
        k++;
        p += len;
        if (*p == '\0')
            break;
    }
    memcpy(v, tmp, sizeof(double) * (size_t)k);
    *n = k;
    return 0;
}

/* "AxBxC" (a lone "7" is one dimension): at most maxdim extents in
 * [lo, hi]. */
static inline int cli_shape(const char *opt, const char *s, int64_t lo, int64_t hi,
                            int maxdim, int *ndim, int64_t *shape, char *why)
{
    const char *at = NULL;
    size_t len = 0;
    if (maxdim > LADLE_MAX_NDIM)
        maxdim = LADLE_MAX_NDIM;
    int code = cli_int_list(s, "xX", lo, hi, maxdim, shape, ndim, &at, &len);
    return code ? cli_int_list_fail(opt, s, 1, code, at, len, lo, hi, maxdim, why) : 0;
}

/* A rank list ("0-5", "0,2,4", "0-2,7") of ranks below world, at most cap. */
static inline int cli_ranks(const char *opt, const char *s, int world, int *ranks, int cap,
                            int *n, char *why)
{
    int k = 0;
    if (s == NULL || *s == '\0')
        return cli_fail(why, "%s needs a rank list such as 0-3 or 0,2,4", opt);
    for (const char *p = s;; p++) {
        size_t len = cli_item(p, ','), dash = 0;
        int64_t a = 0, b = 0;
        while (dash < len && p[dash] != '-')
            dash++;
        int bad =
            cli_scan_int(p, dash, &a) != 0 || a < 0 ||
            (dash < len && (cli_scan_int(p + dash + 1, len - dash - 1, &b) != 0 || b < 0));
        if (dash == len)
            b = a;
        if (bad)
            return cli_fail(
                why, "%s: '%.*s' in '%s' is not a rank or a range of ranks such as 0-3",
                opt, (int)len, p, s);
        if (a >= world || b >= world)
            return cli_fail(why,
                            "%s: rank %" PRId64 " in '%s' does not exist (ranks 0 to %d)",
                            opt, a >= world ? a : b, s, world - 1);
        if (b < a)
            return cli_fail(why, "%s: the range '%.*s' runs backwards", opt, (int)len, p);
        if (b - a + 1 > cap - k)
            return cli_fail(why, "%s: '%s' lists more than %d ranks", opt, s, cap);
        for (int64_t r = a; r <= b; r++)
            ranks[k++] = (int)r;
        p += len;
        if (*p == '\0')
            break;
    }
    *n = k;
    return 0;
}

/* One of the NULL-terminated names: its index. */
static inline int cli_choice(const char *opt, const char *s, const char *const *names,
                             int *index, char *why)
{
    char list[256] = "";
    for (int i = 0; names[i]; i++) {
        if (s && strcmp(s, names[i]) == 0) {
            *index = i;
            return 0;
        }
        size_t at = strlen(list);
        snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", names[i]);
    }
    return cli_fail(why, "%s: '%s' is not one of %s", opt, s ? s : "", list);
}

/* Can path be written? It must not be a directory, and a file there must
 * be creatable (opened for appending; a file the probe created is removed
 * again, an existing one is left as it was). The system's reason goes into
 * why. Not collective. */
static inline int cli_output_ok(const char *opt, const char *path, char *why)
{
    struct stat sb;
    if (path == NULL || *path == '\0')
        return cli_fail(why, "%s needs a file name", opt);
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return cli_fail(why, "%s: %s is a directory, not a file", opt, path);
    int existed = stat(path, &sb) == 0;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK, 0644);
    if (fd < 0)
        return cli_fail(why, "%s: cannot write %s: %s", opt, path, strerror(errno));
    close(fd);
    if (!existed)
        unlink(path);
    return 0;
}

/* fopen(path, mode) for writing, or NULL with "tool: cannot write path:
 * reason" printed. Not collective. */
static inline FILE *cli_fopen(const char *tool, const char *path, const char *mode)
{
    FILE *f = fopen(path, mode);
    if (f == NULL)
        fprintf(stderr, "%s: cannot write %s: %s\n", tool, path, strerror(errno));
    return f;
}

/* Close f (opened for path) and say whether everything written reached
 * the file: 0, or -1 with the system's reason in why. */
static inline int cli_close_ok(FILE *f, const char *path, char *why)
{
    errno = 0;
    int ok = fflush(f) == 0 && !ferror(f);
    int err = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        err = errno;
    }
    if (!ok)
        return cli_fail(why, "writing %s failed: %s", path, strerror(err ? err : EIO));
    return 0;
}

/* The line --version prints: the tool, ladle's version, and the MPI it was
 * built with (callable before MPI_Init). */
static inline void cli_version(const char *tool)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, "\n")] = '\0';
    for (char *c = lib; *c; c++)
        if (*c == '\t')
            *c = ' ';
    printf("%s (ladle %s), built with %s\n", tool, ladle_version(), lib);
}

#endif /* LADLE_TOOLS_CLI_H */
