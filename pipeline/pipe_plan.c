/* The pipeline planner: stage boundaries and replica counts that make the
 * slowest stage as fast as it can be (see ladle/pipeline.h). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "src/core/internal.h"
#include "ladle/pipeline.h"

#include "ladle/deprecated.h" /* the 0.1 names' wrappers */

/* Beyond this the stage-count table (a 64-bit set per layer and worker
 * count) and the O(n^2 W) passes over it stop being a planning step. */
#define MAX_TABLE (1 << 24)

typedef struct planner {
    int n, workers, smin, smax;
    const double *c, *m; /* per layer: f + b + w, and stashed memory (or NULL) */
    const double *prm;   /* per layer: parameter memory (or NULL) */
    const double *cut;   /* per boundary after layer i < n - 1 (or NULL) */
    const double *red;   /* per layer: all-reduce bandwidth term (or NULL) */
    double lat, mb;      /* all-reduce latency per step, microbatches per step */
    double t, cap;       /* the stage time and memory being tested */
    uint64_t range;      /* the stage counts asked for: bit s - 1 for s stages */
    uint64_t *counts;    /* n x (workers + 1), see stage_counts */
    uint64_t *suffix;    /* workers + 1: the window's front stack */
} planner;

#define COUNTS(p, i, k)                                                                    \
    ((p)->counts[(size_t)(i) * (size_t)((p)->workers + 1) + (size_t)(k)])

/* A stage's time per microbatch on r replicas, given c (its layers' f + b
 * + w and its boundaries' receives) and red (its all-reduce bandwidth
 * term): c / r of compute, plus a ring all-reduce of its gradients once a
 * step, 2 (r - 1) / r red + 2 (r - 1) lat, spread over the step's
 * microbatches. Without a reduce cost it is c / r exactly, the division
 * the reported stage times repeat to the last bit. */
static double stage_time(const planner *p, double c, double red, int r)
{
    double t = c / r;
    if (r > 1 && (red > 0 || p->lat > 0))
        t += (2.0 * (r - 1) / r * red + 2.0 * (r - 1) * p->lat) / p->mb;
    return t;
}

/* The replica counts lo .. hi within 1 .. w whose stage time is within t;
 * 0 when there are none. The time is a / r + b r + const, convex in r (or
 * increasing), so the counts that fit are one run around its least point;
 * both ends are bisections on the side of it where the time is monotone.
 * Without a reduce cost the time only falls with r, and hi is w. */
static int replica_run(const planner *p, double c, double red, double t, int w, int *lo,
                       int *hi)
{
    int mid = w; /* the least point */
    if (w > 1 && (red > 0 || p->lat > 0)) {
        int a = 1, b = w; /* the first r whose successor is no faster */
        while (a < b) {
            int r = a + (b - a) / 2;
            if (stage_time(p, c, red, r + 1) >= stage_time(p, c, red, r))
                b = r;
            else
                a = r + 1;
        }
        mid = a;
    }
    if (!(stage_time(p, c, red, mid) <= t))
        return 0;
    int a = 1, b = mid; /* the first r <= mid that fits */
    while (a < b) {
        int r = a + (b - a) / 2;
        if (stage_time(p, c, red, r) <= t)
            b = r;
        else
            a = r + 1;
    }
    *lo = a;
    a = mid, b = w; /* the last r >= mid that fits */
    while (a < b) {
        int r = b - (b - a) / 2;
        if (stage_time(p, c, red, r) <= t)
            a = r;
        else
            b = r - 1;
    }
    *hi = a;
    return 1;
}

/* The most microbatches q <= w a replica may stash with m * q within
 * room (the cap less its parameters); 0 when not even one fits. */
static int stash_for_cap(double m, double room, int w)
{
    if (m * w <= room)
        return w;
    if (!(m <= room))
        return 0;
    int q = (int)fmin(fmax(floor(room / m), 1), w);
    while (q < w && m * (q + 1) <= room)
        q++;
    while (q > 1 && m * q > room)
        q--;
    return q;
}

/* What a stage costs: c (f + b + w, and the receives of its boundaries
 * where stage_of adds them), its memory per stashed microbatch m, its
 * parameters' memory and its all-reduce term. */
typedef struct stage_sum {
    double c, m, prm, red;
} stage_sum;

/* Add layer e to a stage's sums. */
static void stage_grow(const planner *p, stage_sum *s, int e)
{
    s->c += p->c[e];
    s->m += p->m != NULL ? p->m[e] : 0;
    s->prm += p->prm != NULL ? p->prm[e] : 0;
    s->red += p->red != NULL ? p->red[e] : 0;
}

/* The receive of a stage that starts at layer i, and of one that ends at
 * layer e: the boundary before i and the one after e (none at the ends). */
static double cut_in(const planner *p, int i)
{
    return p->cut != NULL && i > 0 ? p->cut[i - 1] : 0;
}
static double cut_out(const planner *p, int e)
{
    return p->cut != NULL && e < p->n - 1 ? p->cut[e] : 0;
}

/* Layers i .. e with both boundaries, summed as stage_counts sums them
 * (layers in order, then the incoming and the outgoing receive), so the
 * reported stage times repeat its values to the last bit. */
static stage_sum stage_of(const planner *p, int i, int e)
{
    stage_sum s = {0, 0, 0, 0};
    for (int l = i; l <= e; l++)
        stage_grow(p, &s, l);
    s.c = s.c + cut_in(p, i) + cut_out(p, e);
    return s;
}

/* The OR of v[a .. b] over windows whose ends only move right: a queue of
 * two stacks, the front one holding suffix ORs (suffix[x] = v[x] | ... |
 * v[split - 1]), the back one a running OR of v[split .. hi]. Each entry
 * is pushed and moved once: O(1) a query, amortised. */
typedef struct window {
    const uint64_t *v;
    uint64_t *suffix, back;
    int lo, split, hi;
} window;

static uint64_t window_or(window *q, int a, int b)
{
    while (q->hi < b)
        q->back |= q->v[++q->hi];
    if (a > q->lo)
        q->lo = a;
    if (q->lo >= q->split) {
        uint64_t acc = 0;
        for (int x = q->hi; x >= q->lo; x--)
            q->suffix[x] = acc |= q->v[x];
        q->split = q->hi + 1;
        q->back = 0;
    }
    return q->suffix[q->lo] | q->back;
}

/* Which stage counts can run layers i.. on exactly k workers with every
 * stage time <= t and every worker's memory <= cap: bit s - 1 of COUNTS(i,
 * k) for s stages, for all i and k, from the last layer backwards (a
 * stage's stash depends on the workers after it). A set, not a least
 * count, because a lower bound on the stages needs to know whether a given
 * count is possible; a set, not a least and a greatest count, because
 * nothing here shows the possible counts form an interval, and one 64-bit
 * word costs no more than the two. A first stage of layers i .. e takes r
 * replicas from its run lo .. hi (replica_run) and from ceil(k / q) up
 * (its 1F1B stash is ceil(k / r) microbatches, q at most), leaving k - r
 * to the rest: the rest's counts for a window of worker counts, whose ends
 * only move right as k grows. An all-reduce makes more replicas cost
 * more, so the whole window matters, not only its largest count. Returns
 * the set for the whole chain on all workers. */
static uint64_t stage_counts(planner *p)
{
    int n = p->n, w = p->workers;
    for (int i = n - 1; i >= 0; i--) {
        for (int k = 0; k <= w; k++)
            COUNTS(p, i, k) = 0;
        stage_sum s = {0, 0, 0, 0};
        double cin = cut_in(p, i);
        for (int e = i; e < n; e++) {
            stage_grow(p, &s, e);
            int lo, hi, q = stash_for_cap(s.m, p->cap - s.prm, w);
            /* without its outgoing receive a stage's time and memory only
             * grow with e: past here no longer stage fits either */
            if (q < 1 || !replica_run(p, s.c + cin, s.red, p->t, w, &lo, &hi))
                break;
            if (!replica_run(p, s.c + cin + cut_out(p, e), s.red, p->t, w, &lo, &hi))
                continue;
            if (e == n - 1) { /* the last stage takes all k; its stash is 1 */
                for (int k = lo; k <= hi && k <= w; k++)
                    COUNTS(p, i, k) |= 1;
                continue;
            }
            window win = {&COUNTS(p, e + 1, 0), p->suffix, 0, 1, 1, 0};
            for (int k = lo + 1; k <= w; k++) {
                int rmin = lo > (k + q - 1) / q ? lo : (k + q - 1) / q;
                int rmax = hi < k - 1 ? hi : k - 1;
                if (rmin > rmax)
                    continue;
                /* without an all-reduce a suffix keeps every count when
                 * given a worker more (its first stage takes it and only
                 * gets faster): the window's OR is its last entry */
                uint64_t rest = p->red == NULL && p->lat == 0
                                    ? COUNTS(p, e + 1, k - rmin)
                                    : window_or(&win, k - rmax, k - rmin);
                /* bit 63 shifted out would be a 65th stage, which no
                 * plan holds */
                COUNTS(p, i, k) |= rest << 1;
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

/* The plain pipeline: up to min(workers, n) unreplicated stages, no cap
 * (the classic linear partition; with the boundaries' costs fewer stages
 * may be faster). least[i] is the fewest stages within t that cover layers
 * i.. (n + 1: none), in the first n + 1 entries of the counts table. */
static int fits_plain(planner *p, double t)
{
    int n = p->n, top = p->workers < n ? p->workers : n;
    uint64_t *least = p->counts;
    least[n] = 0;
    for (int i = n - 1; i >= 0; i--) {
        least[i] = (uint64_t)n + 1;
        double c = 0, cin = cut_in(p, i);
        for (int e = i; e < n; e++) {
            c += p->c[e];
            if (!(c + cin <= t))
                break; /* without its outgoing receive: only grows */
            if (stage_time(p, c + cin + cut_out(p, e), 0, 1) <= t &&
                least[e + 1] + 1 < least[i])
                least[i] = least[e + 1] + 1;
        }
    }
    return least[0] <= (uint64_t)top;
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
 * smallest (r_0, first[1], r_1, first[2], ...). A stage fits as the table
 * decided it: r in its replica run and its stash within the cap. */
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
            stage_sum t = {0, 0, 0, 0};
            for (int e = i; e < p->n && !found; e++) {
                stage_grow(p, &t, e);
                int lo, hi, q = stash_for_cap(t.m, p->cap - t.prm, p->workers);
                if (q >= 1 && r >= (k + q - 1) / q &&
                    replica_run(p, t.c + cut_in(p, i) + cut_out(p, e), t.red, p->t,
                                p->workers, &lo, &hi) &&
                    lo <= r && r <= hi && can_make(p, e + 1, k - r, s - 1)) {
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

/* Stage times, the slowest, and the plain pipeline's slowest (which
 * reuses the table). */
static void finish(planner *p, ladle_pipe_plan *plan)
{
    plan->slowest = 0;
    for (int j = 0; j < plan->stages; j++) {
        stage_sum t = stage_of(p, plan->first[j], plan->first[j + 1] - 1);
        plan->stage_time[j] = stage_time(p, t.c, t.red, plan->replicas[j]);
        plan->slowest = fmax(plan->slowest, plan->stage_time[j]);
    }
    plan->plain_slowest = smallest_fit(fits_plain, p, INFINITY);
}

/* Per layer of d: f + b + w (w may be NULL). */
static double *layer_costs(const ladle_pipe_plan_desc *d)
{
    int n = d->n;
    const double *f = d->f, *b = d->b, *w = d->w;
    double *c = ladle__calloc((size_t)n, sizeof *c);
    for (int l = 0; c != NULL && l < n; l++)
        c[l] = f[l] + b[l] + (w != NULL ? w[l] : 0);
    return c;
}

void ladle_pipe_plan_desc_init(ladle_pipe_plan_desc *d, int n, const double *f,
                               const double *b, const double *w)
{
    if (!LADLE_DESC_START(d))
        return;
    d->n = n;
    d->f = f;
    d->b = b;
    d->w = w;
}

/* Check what the descriptor adds to the costs and copy it into p (its
 * size already checked). */
static ladle_status take_model(planner *p, int n, const ladle_pipe_plan_desc *o)
{
    ladle_status st = LADLE_OK;
    const double *v[4] = {o->mem, o->param, o->reduce, o->cut};
    static const char *const names[4] = {"mem", "param", "reduce", "cut"};
    for (int a = 0; a < 4; a++)
        for (int l = 0; v[a] != NULL && l < (a == 3 ? n - 1 : n); l++)
            LADLE_CHECK(isfinite(v[a][l]) && v[a][l] >= 0, LADLE_ERR_ARG,
                        "%s[%d] is %g (finite and >= 0 needed)", names[a], l, v[a][l]);
    LADLE_CHECK(!isnan(o->mem_cap), LADLE_ERR_ARG, "the memory cap is NaN");
    LADLE_CHECK(isfinite(o->reduce_latency) && o->reduce_latency >= 0, LADLE_ERR_ARG,
                "reduce_latency is %g (finite and >= 0 needed)", o->reduce_latency);
    int reduces = o->reduce != NULL || o->reduce_latency > 0;
    LADLE_CHECK(!reduces || (o->microbatches >= 1 && o->microbatches <= 1 << 20),
                LADLE_ERR_ARG,
                "%d microbatches: an all-reduce cost needs the microbatches of a step "
                "(1 to 2^20) to spread it over",
                o->microbatches);
    p->m = o->mem;
    p->prm = o->param;
    p->cut = o->cut;
    p->red = o->reduce;
    p->lat = o->reduce_latency;
    p->mb = reduces ? o->microbatches : 1;
    p->cap = (o->mem != NULL || o->param != NULL) && o->mem_cap > 0 ? o->mem_cap : INFINITY;
fail:
    return st;
}

/* What both entry points check first, in this order: d, its size (before
 * reading a field), and the costs it must have; the messages name func. */
static ladle_status check_desc(const ladle_pipe_plan_desc *d, const char *func)
{
    if (d == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "%s is NULL", "d");
    ladle_status st = ladle__check_size(func, "d", d->size, sizeof *d);
    if (st != LADLE_OK)
        return st;
    if (d->f == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "%s is NULL", "f");
    if (d->b == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "%s is NULL", "b");
    return LADLE_OK;
}

/* The layers' costs checked, then the model taken into p (take_model). */
static ladle_status take_costs(planner *p, const ladle_pipe_plan_desc *d, const char *func)
{
    int l = bad_layer(d->n, d->f, d->b, d->w, NULL);
    if (l >= 0)
        return ladle__raise(LADLE_ERR_ARG, func, "layer %d: a cost is negative or not finite",
                            l);
    p->cap = INFINITY;
    p->mb = 1;
    return take_model(p, d->n, d);
}

/* The stage counts d asks for, checked for n layers on workers (the
 * messages name func), into p with the shape. */
static ladle_status take_stages(planner *p, const ladle_pipe_plan_desc *d, int n, int workers,
                                const char *func)
{
    int min_stages = d->min_stages, max_stages = d->max_stages;
    int most = n < workers ? n : workers; /* every stage takes a layer and a worker */
    if (min_stages < 0 || max_stages < 0)
        return ladle__raise(LADLE_ERR_ARG, func, "min_stages %d, max_stages %d: need 0 at least",
                            min_stages, max_stages);
    if (max_stages != 0 && min_stages > max_stages)
        return ladle__raise(LADLE_ERR_ARG, func, "min_stages %d is above max_stages %d",
                            min_stages, max_stages);
    if (min_stages > most)
        return ladle__raise(LADLE_ERR_ARG, func,
                            "min_stages %d: %d layers on %d workers make at most %d stages",
                            min_stages, n, workers, most);
    if (min_stages > LADLE_PIPE_MAX_STAGES)
        return ladle__raise(LADLE_ERR_ARG, func, "min_stages %d: a plan holds at most %d stages",
                            min_stages, LADLE_PIPE_MAX_STAGES);
    p->n = n;
    p->workers = workers;
    p->smin = min_stages > 1 ? min_stages : 1;
    p->smax = most;
    if (max_stages > 0 && max_stages < p->smax)
        p->smax = max_stages;
    if (p->smax > LADLE_PIPE_MAX_STAGES)
        p->smax = LADLE_PIPE_MAX_STAGES;
    p->range = (p->smax == 64 ? ~(uint64_t)0 : ((uint64_t)1 << p->smax) - 1) &
               ~(((uint64_t)1 << (p->smin - 1)) - 1);
    return LADLE_OK;
}

/* What a planner allocates (layer_costs, the tables). */
static void planner_free(planner *p)
{
    ladle__free((void *)p->c);
    ladle__free(p->counts);
    ladle__free(p->suffix);
}

ladle_status ladle_pipe_plan_create(const ladle_pipe_plan_desc *d, int workers,
                                    ladle_pipe_plan *plan)
{
    ladle_status st = LADLE_OK;
    planner p = {0};
    ladle_pipe_plan out;
    LADLE_CALL(check_desc(d, __func__));
    int n = d->n;
    LADLE_NOT_NULL(plan);
    LADLE_CHECK(n >= 1 && workers >= 1, LADLE_ERR_ARG,
                "%d layers, %d workers: need 1 at least", n, workers);
    LADLE_CHECK(((double)n + 1) * ((double)workers + 1) <= MAX_TABLE, LADLE_ERR_ARG,
                "%d layers on %d workers: (n + 1) * (workers + 1) must stay within %d", n,
                workers, MAX_TABLE);
    LADLE_CALL(take_costs(&p, d, __func__));
    LADLE_CALL(take_stages(&p, d, n, workers, __func__));
    p.c = layer_costs(d);
    p.counts = ladle__calloc((size_t)n * (size_t)(workers + 1), sizeof *p.counts);
    p.suffix = ladle__calloc((size_t)workers + 1, sizeof *p.suffix);
    LADLE_CHECK(p.c != NULL && p.counts != NULL && p.suffix != NULL, LADLE_ERR_ALLOC,
                "out of memory");

    if (!fits_time(&p, INFINITY)) {
        /* only the cap can forbid every plan: with none, smin stages of one
         * layer and one worker each, the last taking the rest, always do */
        double cap = p.cap;
        LADLE_CHECK(isfinite(cap), LADLE_ERR_INTERNAL,
                    "no plan of %d layers on %d workers, with no memory cap", n, workers);
        /* search up to an infinite cap, which fits as no cap does: the
         * whole chain's memory bounds one stage on every worker, not a
         * plan of more stages, whose first stage may stash its layers
         * once for every later worker */
        double least = smallest_fit(fits_cap, &p, INFINITY);
        LADLE_CHECK(0, LADLE_ERR_ARG,
                    "no split of %d layers on %d workers into %d to %d stages keeps every "
                    "worker's memory (stash and parameters) within %g (the smallest needs "
                    "%g)",
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
    planner_free(&p);
    return st;
}

/* The 0.1 names, kept one release (ladle/deprecated.h): the options
 * become the descriptor, with the layers' n, f, b and w. */

void ladle_pipe_plan_opts_init(ladle_pipe_plan_opts *o)
{
    ladle_pipe_plan_desc_init(o, 0, NULL, NULL, NULL);
}

/* The descriptor of a 0.1 call: opts (NULL: the defaults) with the layers.
 * The pointers are checked first, as the 0.1 calls did. */
static ladle_status desc_of_opts(const ladle_pipe_plan_opts *opts, int n, const double *f,
                                 const double *b, const double *w, const void *plan,
                                 ladle_pipe_plan_desc *d)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(f);
    LADLE_NOT_NULL(b);
    LADLE_NOT_NULL(plan);
    ladle_pipe_plan_desc_init(d, n, f, b, w);
    if (opts == NULL)
        return LADLE_OK;
    LADLE_CHECK_SIZE(opts);
    *d = *opts;
    d->n = n;
    d->f = f;
    d->b = b;
    d->w = w;
fail:
    return st;
}

ladle_status ladle_pipe_plan_create_ex(int n, const double *f, const double *b,
                                       const double *w, const ladle_pipe_plan_opts *opts,
                                       int workers, ladle_pipe_plan *plan)
{
    ladle_pipe_plan_desc d;
    ladle_status st = desc_of_opts(opts, n, f, b, w, plan, &d);
    return st != LADLE_OK ? st : ladle_pipe_plan_create(&d, workers, plan);
}

ladle_status ladle_pipe_plan_create_range(int n, const double *f, const double *b,
                                          const double *w, const double *mem,
                                          double mem_cap, int workers, int min_stages,
                                          int max_stages, ladle_pipe_plan *plan)
{
    ladle_pipe_plan_desc d;
    ladle_pipe_plan_desc_init(&d, n, f, b, w);
    d.mem = mem;
    d.mem_cap = mem_cap;
    d.min_stages = min_stages;
    d.max_stages = max_stages;
    return ladle_pipe_plan_create(&d, workers, plan);
}

ladle_status ladle_pipe_plan_explicit(const ladle_pipe_plan_desc *d, int stages,
                                      const int *first, const int *replicas,
                                      ladle_pipe_plan *plan)
{
    ladle_status st = LADLE_OK;
    planner p = {0};
    ladle_pipe_plan out;
    LADLE_CALL(check_desc(d, __func__));
    int n = d->n;
    LADLE_NOT_NULL(first);
    LADLE_NOT_NULL(plan);
    LADLE_CHECK(n >= 1, LADLE_ERR_ARG, "%d layers: need at least one", n);
    LADLE_CHECK(stages >= 1 && stages <= LADLE_PIPE_MAX_STAGES, LADLE_ERR_ARG,
                "%d stages: need 1 to %d", stages, LADLE_PIPE_MAX_STAGES);
    LADLE_CHECK(first[0] == 0 && first[stages] == n, LADLE_ERR_ARG,
                "the stages cover layers %d .. %d, not 0 .. %d", first[0],
                first[stages] - 1, n - 1);
    LADLE_CALL(take_costs(&p, d, __func__));
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
    p.c = layer_costs(d);
    p.counts = ladle__calloc((size_t)n + 1, sizeof *p.counts); /* fits_plain's */
    LADLE_CHECK(p.c != NULL && p.counts != NULL, LADLE_ERR_ALLOC, "out of memory");
    finish(&p, &out);
    *plan = out;
fail:
    planner_free(&p);
    return st;
}

ladle_status ladle_pipe_plan_explicit_ex(int n, const double *f, const double *b,
                                         const double *w, const ladle_pipe_plan_opts *opts,
                                         int stages, const int *first, const int *replicas,
                                         ladle_pipe_plan *plan)
{
    ladle_pipe_plan_desc d;
    ladle_status st = first != NULL
                          ? desc_of_opts(opts, n, f, b, w, plan, &d)
                          : ladle__raise(LADLE_ERR_NULL, __func__, "first is NULL");
    return st != LADLE_OK ? st
                          : ladle_pipe_plan_explicit(&d, stages, first, replicas, plan);
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
