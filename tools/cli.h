/*
 * Small parsers shared by ladle's command-line tools: shapes ("7x11"),
 * rank lists ("0-5", "0,2,4", "0-2,7") and comma-separated integers.
 * Each returns 0 on success and -1 on malformed input.
 */
#ifndef LADLE_TOOLS_CLI_H
#define LADLE_TOOLS_CLI_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ladle.h"

/* Parse "AxBxC" (a lone "1" is one dimension) into up to LADLE_MAX_NDIM
 * non-negative extents. */
static inline int cli_parse_shape(const char *s, int *ndim, int64_t *shape)
{
    int n = 0;
    const char *p = s;
    if (s == NULL || *s == '\0')
        return -1;
    while (*p) {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno != 0 || v < 0 || n == LADLE_MAX_NDIM)
            return -1;
        shape[n++] = v;
        p = end;
        if (*p == 'x' || *p == 'X') {
            p++;
            if (*p == '\0')
                return -1;
        } else if (*p != '\0') {
            return -1;
        }
    }
    *ndim = n;
    return 0;
}

/* Parse a rank list into ranks[0..*n-1] (at most cap entries). */
static inline int cli_parse_ranks(const char *s, int *ranks, int cap, int *n)
{
    int k = 0;
    const char *p = s;
    if (s == NULL || *s == '\0')
        return -1;
    while (*p) {
        char *end = NULL;
        long a = strtol(p, &end, 10), b;
        if (end == p || a < 0)
            return -1;
        p = end;
        b = a;
        if (*p == '-') {
            p++;
            b = strtol(p, &end, 10);
            if (end == p || b < a)
                return -1;
            p = end;
        }
        for (long r = a; r <= b; r++) {
            if (k == cap)
                return -1;
            ranks[k++] = (int)r;
        }
        if (*p == ',') {
            p++;
            if (*p == '\0')
                return -1;
        } else if (*p != '\0') {
            return -1;
        }
    }
    *n = k;
    return 0;
}

/* Parse "1,2,3" into up to cap integers. */
static inline int cli_parse_ints(const char *s, int64_t *v, int cap, int *n)
{
    int k = 0;
    const char *p = s;
    if (s == NULL || *s == '\0')
        return -1;
    while (*p) {
        char *end = NULL;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (end == p || errno != 0 || k == cap)
            return -1;
        v[k++] = x;
        p = end;
        if (*p == ',') {
            p++;
            if (*p == '\0')
                return -1;
        } else if (*p != '\0') {
            return -1;
        }
    }
    *n = k;
    return 0;
}

#endif /* LADLE_TOOLS_CLI_H */
