/* The pipeline planner: stage boundaries and replica counts that make the
 * slowest stage as fast as it can be (see ladle/pipeline.h). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "src/core/internal.h"
#include "ladle/pipeline.h"

/* Beyond this the stage-count table (a 64-bit set per layer and worker
 * count) and the O(n^2 W) passes over it stop being a planning step. */
#define MAX_TABLE (1 << 24)

typedef struct planner {
    int n, workers, smin, smax;
    const double *c, *m; /* per layer: f + b + w, and stashed memory (or NULL) */
    double t, cap;       /* the stage time and stash being tested */
    uint64_t range;      /* the stage counts asked for: bit s - 1 for s stages */
    uint64_t *counts;    /* n x (workers + 1), see stage_counts */
} planner;

#define COUNTS(p, i, k)                                                                    \
    ((p)->counts[(size_t)(i) * (size_t)((p)->workers + 1) + (size_t)(k)])

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

/* Which stage counts can run layers i.. on exactly k workers with every
 * stage time <= t and every stash <= cap: bit s - 1 of COUNTS(i, k) for s
 * stages, for all i and k, from the last layer backwards (a stage's stash
 * depends on the workers after it). A set, not a least count, because a
 * lower bound on the stages needs to know whether a given count is
 * possible; a set, not a least and a greatest count, because nothing here
 * shows the possible counts form an interval, and one 64-bit word costs no
 * more than the two. Giving a suffix one more worker keeps every count it
 * had (the extra replica goes to its first stage, whose time and stash only
 * shrink), so a first stage that is not the last need only take the fewest
 * replicas it allows: more would leave the rest a subset of the same
 * counts. Returns the set for the whole chain on all workers. */
static uint64_t stage_counts(planner *p)
{
    int n = p->n, w = p->workers;
    for (int i = n - 1; i >= 0; i--) {
        for (int k = 0; k <= w; k++)
            COUNTS(p, i, k) = 0;
        double c = 0, m = 0;
        for (int e = i; e < n; e++) {
            c += p->c[e];
            m += p->m != NULL ? p->m[e] : 0;
            int rt = replicas_for_time(c, p->t, w), q = stash_for_cap(m, p->cap, w);
            if (rt > w || q < 1)
                break; /* longer stages only cost more */
            for (int k = rt; k <= w; k++) {
                int r = rt > (k + q - 1) / q ? rt : (k + q - 1) / q;
                /* the last stage takes all k; bit 63 shifted out would be a
                 * 65th stage, which no plan holds */
                if (e == n - 1)
                    COUNTS(p, i, k) |= r <= k ? 1 : 0;
                else if (r < k)
                    COUNTS(p, i, k) |= COUNTS(p, e + 1, k - r) << 1;
            }
        }
    }
    return COUNTS(p, 0, w);
}

/* Whether layers i.. on exactly k workers can make exactly s stages under
 * the table's bounds; past the last layer, only with nothing left. */
static int can_make(planner *p, int i, int k, int s)
{
    if (i == p->n)
        return k == 0 && s == 0;
    return k >= 1 && s >= 1 && s <= 64 && (COUNTS(p, i, k) >> (s - 1) & 1);
}

static int fits_time(planner *p, double t)
{
    p->t = t;
    return (stage_counts(p) & p->range) != 0;
}

static int fits_cap(planner *p, double cap)
{
    p->cap = cap;
    return (stage_counts(p) & p->range) != 0;
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

/* Walk the table of the optimal time front to back. Among the plans with
 * that time it takes the fewest stages in the range, then, stage by stage,
 * the fewest replicas and then the earliest end: the lexicographically
 * smallest (r_0, first[1], r_1, first[2], ...). */
static int build(planner *p, ladle_pipe_plan *plan)
{
    uint64_t ok = COUNTS(p, 0, p->workers) & p->range;
    int i = 0, k = p->workers, s = 1, j = 0;
    if (ok == 0)
        return 0;
    while (!(ok & 1)) {
        ok >>= 1;
        s++;
    }
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
                    can_make(p, e + 1, k - r, s - 1)) {
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

ladle_status ladle_pipe_plan_create_range(int n, const double *f, const double *b,
                                          const double *w, const double *mem,
                                          double mem_cap, int workers, int min_stages,
                                          int max_stages, ladle_pipe_plan *plan)
{
    ladle_status st = LADLE_OK;
    planner p = {0};
    double *c = NULL;
    ladle_pipe_plan out;
    LADLE_NOT_NULL(f);
    LADLE_NOT_NULL(b);
    LADLE_NOT_NULL(plan);
    LADLE_CHECK(n >= 1 && workers >= 1 && min_stages >= 0 && max_stages >= 0, LADLE_ERR_ARG,
                "%d layers, %d workers, min_stages %d, max_stages %d: need 1, 1, 0 and 0 "
                "at least",
                n, workers, min_stages, max_stages);
    LADLE_CHECK(((double)n + 1) * ((double)workers + 1) <= MAX_TABLE, LADLE_ERR_ARG,
                "%d layers on %d workers: (n + 1) * (workers + 1) must stay within %d", n,
                workers, MAX_TABLE);
    LADLE_CHECK(max_stages == 0 || min_stages <= max_stages, LADLE_ERR_ARG,
                "min_stages %d is above max_stages %d", min_stages, max_stages);
    /* every stage takes a layer and a worker */
    LADLE_CHECK(min_stages <= (n < workers ? n : workers), LADLE_ERR_ARG,
                "min_stages %d: %d layers on %d workers make at most %d stages", min_stages,
                n, workers, n < workers ? n : workers);
    LADLE_CHECK(min_stages <= LADLE_PIPE_MAX_STAGES, LADLE_ERR_ARG,
                "min_stages %d: a plan holds at most %d stages", min_stages,
                LADLE_PIPE_MAX_STAGES);
    int l = bad_layer(n, f, b, w, mem);
    LADLE_CHECK(l < 0, LADLE_ERR_ARG,
                "layer %d: a cost or memory is negative or not finite", l);
    LADLE_CHECK(!isnan(mem_cap), LADLE_ERR_ARG, "the memory cap is NaN");
    p.n = n;
    p.workers = workers;
    p.smin = min_stages > 1 ? min_stages : 1;
    p.smax = n < workers ? n : workers;
    if (max_stages > 0 && max_stages < p.smax)
        p.smax = max_stages;
    if (p.smax > LADLE_PIPE_MAX_STAGES)
        p.smax = LADLE_PIPE_MAX_STAGES;
    p.range = (p.smax == 64 ? ~(uint64_t)0 : ((uint64_t)1 << p.smax) - 1) &
              ~(((uint64_t)1 << (p.smin - 1)) - 1);
    p.m = mem;
    p.cap = mem != NULL && mem_cap > 0 ? mem_cap : INFINITY;
    p.c = c = layer_costs(n, f, b, w);
    p.counts = ladle__calloc((size_t)n * (size_t)(workers + 1), sizeof *p.counts);
    LADLE_CHECK(c != NULL && p.counts != NULL, LADLE_ERR_ALLOC, "out of memory");

    if (!fits_time(&p, INFINITY)) {
        /* only the cap can forbid every plan: with none, smin stages of one
         * layer and one worker each, the last taking the rest, always do */
        double cap = p.cap;
        LADLE_CHECK(mem != NULL && mem_cap > 0, LADLE_ERR_INTERNAL,
                    "no plan of %d layers on %d workers, with no memory cap", n, workers);
        /* search up to an infinite cap, which fits as no cap does: the
         * whole chain's stash bounds one stage on every worker, not a plan
         * of more stages, whose first stage may stash its layers once for
         * every later worker */
        double least = smallest_fit(fits_cap, &p, INFINITY);
        LADLE_CHECK(0, LADLE_ERR_ARG,
                    "no split of %d layers on %d workers into %d to %d stages keeps every "
                    "stage's stash within %g (the smallest needs %g)",
                    n, workers, p.smin, p.smax, cap, least);
    }
    memset(&out, 0, sizeof out);
    p.t = smallest_fit(fits_time, &p, INFINITY);
    stage_counts(&p); /* the table of the optimal time, for build */
    LADLE_CHECK(build(&p, &out), LADLE_ERR_INTERNAL,
                "no plan of %d layers on %d workers reaches the time %.17g found for it", n,
                workers, p.t);
    finish(&p, &out);
    *plan = out;
fail:
    ladle__free(c);
    ladle__free(p.counts);
    return st;
}

ladle_status ladle_pipe_plan_create(int n, const double *f, const double *b,
                                    const double *w, const double *mem, double mem_cap,
                                    int workers, int max_stages, ladle_pipe_plan *plan)
{
    return ladle_pipe_plan_create_range(n, f, b, w, mem, mem_cap, workers, 1, max_stages,
                                        plan);
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

int ladle_pipe_plan_first(const ladle_pipe_plan *plan, int j)
{
    if (plan == NULL || j < 0 || j > plan->stages || plan->stages > 64)
        return -1;
    return plan->first[j];
}

int ladle_pipe_plan_replicas(const ladle_pipe_plan *plan, int j)
{
    if (plan == NULL || j < 0 || j >= plan->stages || plan->stages > 64)
        return -1;
    return plan->replicas[j];
}

double ladle_pipe_plan_stage_time(const ladle_pipe_plan *plan, int j)
{
    if (plan == NULL || j < 0 || j >= plan->stages || plan->stages > 64)
        return NAN;
    return plan->stage_time[j];
}
