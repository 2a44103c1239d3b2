/*
 * bench/common.h - the timing helpers every benchmark program shares: a
 * monotonic clock and the median of repeated timings (the figure the
 * benchmarks print and the docs quote), and their options.
 */
#ifndef LADLE_BENCH_COMMON_H
#define LADLE_BENCH_COMMON_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n-1] (n > 0; an even n averages the middle two).
 * Sorts v in place. */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One timed repetition of something, on its state arg: its seconds. */
typedef double (*bench_once_fn)(void *arg);

/* The median seconds of n repetitions of once(arg) (n > 0), after two to
 * warm up. */
static inline double bench_median_of(bench_once_fn once, void *arg, int n)
{
    double *t = calloc((size_t)n, sizeof(double));
    for (int r = -2; r < n; r++) {
        double e = once(arg);
        if (r >= 0)
            t[r] = e;
    }
    double m = bench_median(t, n);
    free(t);
    return m;
}

/*
 * A benchmark's options, each "--name value": a whole number in [lo, hi]
 * (num set), or a string (str set), which must be one of `choices`
 * (comma-separated; NULL: any), or with list set a comma-separated list of
 * them. Every rank parses the same arguments, so all agree: an unknown
 * option, a missing value, a number out of range or with trailing
 * characters, or a name not among the choices is reported on rank 0 and
 * makes every rank return 2 (the caller finalises MPI and exits with it).
 */
typedef struct bench_opt {
    const char *name;
    long long lo, hi, *num;
    const char **str, *choices;
    int list;
} bench_opt;

/* 1 if the len characters at s are one of the comma-separated choices */
static inline int bench_choice(const char *s, size_t len, const char *choices)
{
    for (const char *c = choices; c != NULL;
         c = strchr(c, ',') ? strchr(c, ',') + 1 : NULL) {
        size_t n = strchr(c, ',') ? (size_t)(strchr(c, ',') - c) : strlen(c);
        if (n == len && strncmp(c, s, len) == 0)
            return 1;
    }
    return 0;
}

/* 1 if s is a whole number in [lo, hi] (written to *out), else 0 */
static inline int bench_count(const char *s, long long lo, long long hi, long long *out)
{
    char *end = NULL;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0' || x < lo || x > hi)
        return 0;
    *out = x;
    return 1;
}

static inline int bench_options(const char *prog, int rank, int argc, char **argv,
                                const bench_opt *opts, int nopts)
{
    for (int i = 1; i < argc; i += 2) {
        const bench_opt *o = NULL;
        for (int k = 0; k < nopts && o == NULL; k++)
            o = strcmp(argv[i], opts[k].name) == 0 ? &opts[k] : NULL;
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char *why = o == NULL ? "unknown option" : v == NULL ? "needs a value" : NULL;
        if (why == NULL && o->num != NULL) {
            if (!bench_count(v, o->lo, o->hi, o->num))
                why = "wants a whole number in range";
        } else if (why == NULL) {
            for (const char *t = v; why == NULL && t != NULL;
                 t = o->list && strchr(t, ',') ? strchr(t, ',') + 1 : NULL) {
                size_t len =
                    o->list && strchr(t, ',') ? (size_t)(strchr(t, ',') - t) : strlen(t);
                if (o->choices != NULL && !bench_choice(t, len, o->choices))
                    why = "is not one of the choices";
            }
            if (why == NULL)
                *o->str = v;
        }
        if (why != NULL) {
            if (rank == 0) {
                fprintf(stderr, "%s: %s%s%s: %s", prog, argv[i], v ? " " : "", v ? v : "",
                        why);
                if (o != NULL && o->num != NULL)
                    fprintf(stderr, " [%lld, %lld]", o->lo, o->hi);
                else if (o != NULL && o->choices != NULL)
                    fprintf(stderr, " (%s%s)", o->choices,
                            o->list ? ", comma-separated" : "");
                fprintf(stderr, "\n%s: options:", prog);
                for (int k = 0; k < nopts; k++)
                    fprintf(stderr, " %s", opts[k].name);
                fprintf(stderr, "\n");
            }
            return 2;
        }
    }
    return 0;
}

#endif /* LADLE_BENCH_COMMON_H */
