/*
 * bench/common.h - the timing helpers every benchmark program shares: a
 * monotonic clock and the median of repeated timings (the figure the
 * benchmarks print and the docs quote).
 */
#ifndef LADLE_BENCH_COMMON_H
#define LADLE_BENCH_COMMON_H

#include <stdlib.h>
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

#endif /* LADLE_BENCH_COMMON_H */
