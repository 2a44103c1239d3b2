/* The pipeline planner: stage boundaries and replica counts that make the
 * slowest stage as fast as it can be (see ladle/pipeline.h). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"
#include "ladle/pipeline.h"

/* Beyond this the need table (an int per layer and worker count) and the
 * O(n^2 W) passes over it stop being a planning step. */
#define MAX_TABLE (1 << 24)
#define NONE (1 << 29)

typedef struct planner {
    int n, workers, smax;
    const double *c, *m; /* per layer: f + b + w, and stashed memory (or NULL) */
    double t, cap;       /* the stage time and stash being tested */
    int *need;           /* (n+1) x (workers+1) */
} planner;

#define NEED(p, i, k) ((p)->need[(size_t)(i) * (size_t)((p)->workers + 1) + (size_t)(k)])

/* The fewest replicas r <= w with c / r <= t, or w + 1. The test is the
 * division itself, so the planner and the reported stage times agree to the
 * last bit. */
static int replicas_for_time(double c, double t, int w)
{
    if (c <= t)
        return 1;
    if (!(c / w <= t))
        return w + 1;
    int r = (int)fmin(fmax(ceil(c / t), 1), w);
    while (r < w && c / r > t)
        r++;
    while (r > 1 && c / (r - 1) <= t)
        r--;
    return r;
}

/* The most microbatches q <= w a replica may stash with m * q <= cap; 0
 * when not even one fits. */
static int stash_for_cap(double m, double cap, int w)
{
    if (m * w <= cap)
        return w;
    if (!(m <= cap))
        return 0;
    int q = (int)fmin(fmax(floor(cap / m), 1), w);
    while (q < w && m * (q + 1) <= cap)
        q++;
    while (q > 1 && m * q > cap)
        q--;
    return q;
}

/* The fewest stages that run layers i.. on exactly k workers with every
 * stage time <= t and every stash <= cap, for all i and k, from the last
 * layer backwards: a stage's stash depends on the workers after it. Giving
 * a suffix one more worker never needs more stages (the extra replica goes
 * to its first stage, whose time and stash only shrink), so each first
 * stage takes the fewest replicas it allows. Returns the count for the
 * whole chain on all workers (NONE when impossible). */
static int count_stages(planner *p)
{
    int n = p->n, w = p->workers;
    for (int k = 0; k <= w; k++)
        NEED(p, n, k) = k == 0 ? 0 : NONE;
    for (int i = n - 1; i >= 0; i--) {
        for (int k = 0; k <= w; k++)
            NEED(p, i, k) = NONE;
        double c = 0, m = 0;
        for (int e = i; e < n; e++) {
            c += p->c[e];
            m += p->m != NULL ? p->m[e] : 0;
            int rt = replicas_for_time(c, p->t, w), q = stash_for_cap(m, p->cap, w);
            if (rt > w || q < 1)
                break; /* longer stages only cost more */
            for (int k = rt; k <= w; k++) {
                int r = rt > (k + q - 1) / q ? rt : (k + q - 1) / q;
                int rest = e == n - 1 ? (r <= k ? 0 : NONE)
                                      : (r < k ? NEED(p, e + 1, k - r) : NONE);
                if (rest + 1 < NEED(p, i, k))
                    NEED(p, i, k) = rest + 1;
            }
        }
    }
    return NEED(p, 0, w);
}

static int fits_time(planner *p, double t)
{
    p->t = t;
    return count_stages(p) <= p->smax;
}

static int fits_cap(planner *p, double cap)
{
    p->cap = cap;
    return count_stages(p) <= p->smax;
}

/* The plain pipeline: min(workers, n) unreplicated stages, no cap. A
 * greedy cut is optimal for a chain, and fewer stages can always be split
 * further without slowing the slowest. */
static int fits_plain(planner *p, double t)
{
    int stages = 1;
    double c = 0;
    for (int l = 0; l < p->n; l++) {
        if (p->c[l] > t)
            return 0;
        c += p->c[l];
        if (c > t) {
            stages++;
            c = p->c[l];
        }
    }
    return stages <= (p->workers < p->n ? p->workers : p->n);
}

/* The smallest double x in [0, hi] with fits(p, x), given fits(p, hi) and
 * fits monotone: a bisection over the bit patterns, which non-negative
 * doubles share their order with. The answer is exact, the value of some
 * plan, not an approximation of it; at most 64 rounds. */
static double smallest_fit(int (*fits)(planner *, double), planner *p, double hi)
{
    if (fits(p, 0.0))
        return 0.0;
    uint64_t lo_bits = 0, hi_bits;
    memcpy(&hi_bits, &hi, sizeof hi);
    while (hi_bits - lo_bits > 1) {
        uint64_t mid_bits = lo_bits + (hi_bits - lo_bits) / 2;
        double mid;
        memcpy(&mid, &mid_bits, sizeof mid);
        if (fits(p, mid))
            hi_bits = mid_bits;
        else
            lo_bits = mid_bits;
    }
    memcpy(&hi, &hi_bits, sizeof hi);
    return hi;
}

/* Walk the need table of the optimal time front to back. Among the plans
 * with that time and the fewest stages it takes, stage by stage, the fewest
 * replicas and then the earliest end: the lexicographically smallest
 * (r_0, first[1], r_1, first[2], ...). */
static int build(planner *p, ladle_pipe_plan *plan)
{
    int i = 0, k = p->workers, s = NEED(p, 0, k), j = 0;
    while (i < p->n) {
        int found = 0;
        if (s < 1 || j >= LADLE_PIPE_MAX_STAGES)
            return 0; /* the table broke its own promise */
        for (int r = 1; r <= k && !found; r++) {
            double c = 0, m = 0;
            for (int e = i; e < p->n && !found; e++) {
                c += p->c[e];
                m += p->m != NULL ? p->m[e] : 0;
                if (c / r <= p->t && m * (double)((k + r - 1) / r) <= p->cap &&
                    NEED(p, e + 1, k - r) <= s - 1) {
                    plan->first[j] = i;
                    plan->replicas[j] = r;
                    i = e + 1;
                    k -= r;
                    found = 1;
                }
            }
        }
        if (!found)
            return 0;
        s--;
        j++;
    }
    plan->stages = j;
    plan->first[j] = p->n;
    return 1;
}

/* The first layer whose costs are negative or not finite, or -1. */
static int bad_layer(int n, const double *f, const double *b, const double *w,
                     const double *m)
{
    for (int l = 0; l < n; l++) {
        double v[4] = {f[l], b[l], w != NULL ? w[l] : 0, m != NULL ? m[l] : 0};
        for (int q = 0; q < 4; q++)
            if (!isfinite(v[q]) || v[q] < 0)
                return l;
    }
    return -1;
}

/* Stage times, the slowest, and the plain pipeline's slowest. */
static void finish(planner *p, ladle_pipe_plan *plan)
{
    plan->slowest = 0;
    for (int j = 0; j < plan->stages; j++) {
        double c = 0;
        for (int l = plan->first[j]; l < plan->first[j + 1]; l++)
            c += p->c[l];
        plan->stage_time[j] = c / plan->replicas[j];
        plan->slowest = fmax(plan->slowest, plan->stage_time[j]);
    }
    double total = 0;
    for (int l = 0; l < p->n; l++)
        total += p->c[l];
    plan->plain_slowest = smallest_fit(fits_plain, p, total);
}

static double *layer_costs(int n, const double *f, const double *b, const double *w)
{
    double *c = ladle__calloc((size_t)n, sizeof *c);
    for (int l = 0; c != NULL && l < n; l++)
        c[l] = f[l] + b[l] + (w != NULL ? w[l] : 0);
    return c;
}

ladle_status ladle_pipe_plan_create(int n, const double *f, const double *b,
                                    const double *w, const double *mem, double mem_cap,
                                    int workers, int max_stages, ladle_pipe_plan *plan)
{
    ladle_status st = LADLE_OK;
    planner p = {0};
    double *c = NULL;
    ladle_pipe_plan out;
    LADLE_NOT_NULL(f);
    LADLE_NOT_NULL(b);
    LADLE_NOT_NULL(plan);
    LADLE_CHECK(n >= 1 && workers >= 1 && max_stages >= 0, LADLE_ERR_ARG,
                "%d layers, %d workers, max_stages %d: need 1, 1 and 0 at least", n,
                workers, max_stages);
    LADLE_CHECK(((double)n + 1) * ((double)workers + 1) <= MAX_TABLE, LADLE_ERR_ARG,
                "%d layers on %d workers: (n + 1) * (workers + 1) must stay within %d", n,
                workers, MAX_TABLE);
    int l = bad_layer(n, f, b, w, mem);
    LADLE_CHECK(l < 0, LADLE_ERR_ARG,
                "layer %d: a cost or memory is negative or not finite", l);
    LADLE_CHECK(!isnan(mem_cap), LADLE_ERR_ARG, "the memory cap is NaN");
    p.n = n;
    p.workers = workers;
    p.smax = n < workers ? n : workers;
    if (max_stages > 0 && max_stages < p.smax)
        p.smax = max_stages;
    if (p.smax > LADLE_PIPE_MAX_STAGES)
        p.smax = LADLE_PIPE_MAX_STAGES;
    p.m = mem;
    p.cap = mem != NULL && mem_cap > 0 ? mem_cap : INFINITY;
    p.c = c = layer_costs(n, f, b, w);
    p.need = ladle__calloc((size_t)(n + 1) * (size_t)(workers + 1), sizeof *p.need);
    LADLE_CHECK(c != NULL && p.need != NULL, LADLE_ERR_ALLOC, "out of memory");

    if (!fits_time(&p, INFINITY)) {
        /* only the cap can forbid every plan: one stage on all workers
         * stashes one microbatch of the whole chain */
        double total = 0, cap = p.cap;
        LADLE_CHECK(mem != NULL && mem_cap > 0, LADLE_ERR_INTERNAL,
                    "no plan of %d layers on %d workers, with no memory cap", n, workers);
        for (l = 0; l < n; l++)
            total += mem[l];
        double least = smallest_fit(fits_cap, &p, total);
        LADLE_CHECK(
            0, LADLE_ERR_ARG,
            "no split of %d layers on %d workers into at most %d stages keeps every "
            "stage's stash within %g (the smallest needs %g)",
            n, workers, p.smax, cap, least);
    }
    memset(&out, 0, sizeof out);
    p.t = smallest_fit(fits_time, &p, INFINITY);
    count_stages(&p); /* the table of the optimal time, for build */
    LADLE_CHECK(build(&p, &out), LADLE_ERR_INTERNAL,
                "no plan of %d layers on %d workers reaches the time %.17g found for it", n,
                workers, p.t);
    finish(&p, &out);
    *plan = out;
fail:
    ladle__free(c);
    ladle__free(p.need);
    return st;
}

ladle_status ladle_pipe_plan_explicit(int n, const double *f, const double *b,
                                      const double *w, int stages, const int *first,
                                      const int *replicas, ladle_pipe_plan *plan)
{
    ladle_status st = LADLE_OK;
    planner p = {0};
    double *c = NULL;
    ladle_pipe_plan out;
    LADLE_NOT_NULL(f);
    LADLE_NOT_NULL(b);
    LADLE_NOT_NULL(first);
    LADLE_NOT_NULL(plan);
    LADLE_CHECK(n >= 1, LADLE_ERR_ARG, "%d layers: need at least one", n);
    LADLE_CHECK(stages >= 1 && stages <= LADLE_PIPE_MAX_STAGES, LADLE_ERR_ARG,
                "%d stages: need 1 to %d", stages, LADLE_PIPE_MAX_STAGES);
    LADLE_CHECK(first[0] == 0 && first[stages] == n, LADLE_ERR_ARG,
                "the stages cover layers %d .. %d, not 0 .. %d", first[0],
                first[stages] - 1, n - 1);
    int l = bad_layer(n, f, b, w, NULL);
    LADLE_CHECK(l < 0, LADLE_ERR_ARG, "layer %d: a cost is negative or not finite", l);
    memset(&out, 0, sizeof out);
    out.stages = stages;
    int64_t workers = 0;
    for (int j = 0; j < stages; j++) {
        LADLE_CHECK(first[j + 1] > first[j], LADLE_ERR_ARG,
                    "stage %d is empty or runs backwards (first %d, next %d)", j, first[j],
                    first[j + 1]);
        int r = replicas != NULL ? replicas[j] : 1;
        LADLE_CHECK(r >= 1 && r <= MAX_TABLE, LADLE_ERR_ARG, "stage %d: %d replicas", j, r);
        out.first[j] = first[j];
        out.replicas[j] = r;
        workers += r;
    }
    out.first[stages] = n;
    LADLE_CHECK(workers <= MAX_TABLE, LADLE_ERR_ARG, "%lld workers in all is too many",
                (long long)workers);
    p.n = n;
    p.workers = (int)workers;
    p.c = c = layer_costs(n, f, b, w);
    LADLE_CHECK(c != NULL, LADLE_ERR_ALLOC, "out of memory");
    finish(&p, &out);
    *plan = out;
fail:
    ladle__free(c);
    return st;
}
