/* The pipeline planner against a brute force over every split and replica
 * assignment, with and without a range of stage counts, and with the model
 * of ladle_pipe_plan_desc (boundaries, all-reduce, parameters); cases
 * worked out by hand, the memory cap, explicit plans and bad input. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "ladle/deprecated.h"
#include "ladle/pipeline.h"

/* ---- the brute force --------------------------------------------------- */

#define BF_MAX 8

typedef struct bf_plan {
    int stages;
    int first[BF_MAX + 1];
    int r[BF_MAX];
    double t;
} bf_plan;

typedef struct bf_problem {
    int n, workers, smin, smax;
    double c[BF_MAX], m[BF_MAX];
    double cap; /* <= 0: none */
    /* the model (all 0: none): a boundary's receive after layer i, the
     * parameters' memory and the all-reduce's terms */
    double cut[BF_MAX], prm[BF_MAX], red[BF_MAX], lat;
    int mb;
    bf_plan best, cur;
    int found;
    double tol_t; /* the best time, for the tie set of real costs */
    int min_stages;
    double least_stash;
} bf_problem;

/* The documented order: time, then stages, then (r_0, first[1], r_1, ...)
 * smallest first. */
static int bf_better(const bf_plan *a, const bf_plan *b)
{
    if (a->t != b->t)
        return a->t < b->t;
    if (a->stages != b->stages)
        return a->stages < b->stages;
    for (int j = 0; j < a->stages; j++) {
        if (a->r[j] != b->r[j])
            return a->r[j] < b->r[j];
        if (a->first[j + 1] != b->first[j + 1])
            return a->first[j + 1] < b->first[j + 1];
    }
    return 0;
}

/* The documented time of a stage of layers a .. e on r replicas, evaluated
 * in the order the header writes it, so that integer costs tie exactly. */
static double bf_stage_time(const bf_problem *q, int a, int e, int r)
{
    double c = 0, red = 0;
    for (int l = a; l <= e; l++) {
        c += q->c[l];
        red += q->red[l];
    }
    if (a > 0)
        c += q->cut[a - 1];
    if (e < q->n - 1)
        c += q->cut[e];
    double t = c / r;
    if (r > 1 && (red > 0 || q->lat > 0))
        t += (2.0 * (r - 1) / r * red + 2.0 * (r - 1) * q->lat) / q->mb;
    return t;
}

/* Score a complete plan: its time, or skip it when a stash passes the cap
 * or it has fewer stages than asked for; also the smallest largest stash of
 * any plan in the range. */
static void bf_score(bf_problem *q, int pass)
{
    bf_plan *p = &q->cur;
    double t = 0, stash = 0;
    int fits = 1;
    if (p->stages < q->smin)
        return;
    for (int j = 0; j < p->stages; j++) {
        double m = 0, prm = 0;
        for (int l = p->first[j]; l < p->first[j + 1]; l++) {
            m += q->m[l];
            prm += q->prm[l];
        }
        int after = 0;
        for (int i = j; i < p->stages; i++)
            after += p->r[i];
        int inflight = (after + p->r[j] - 1) / p->r[j];
        stash = fmax(stash, m * inflight + prm);
        if (q->cap > 0 && m * inflight + prm > q->cap)
            fits = 0;
        t = fmax(t, bf_stage_time(q, p->first[j], p->first[j + 1] - 1, p->r[j]));
    }
    p->t = t;
    if (pass == 0) {
        q->least_stash = fmin(q->least_stash, stash);
        if (fits && (!q->found || bf_better(p, &q->best))) {
            q->best = *p;
            q->found = 1;
        }
    } else if (fits && t <= q->tol_t && p->stages < q->min_stages) {
        q->min_stages = p->stages;
    }
}

/* Every split of layers i.. into stages, each with every replica count
 * that leaves the later stages one worker at least. */
static void bf_walk(bf_problem *q, int i, int k, int pass)
{
    bf_plan *p = &q->cur;
    if (i == q->n) {
        if (k == 0)
            bf_score(q, pass);
        return;
    }
    if (p->stages == q->smax || k == 0)
        return;
    for (int e = i; e < q->n; e++)
        for (int r = 1; r <= k; r++) {
            int j = p->stages;
            p->first[j] = i;
            p->r[j] = r;
            p->first[j + 1] = e + 1;
            p->stages++;
            bf_walk(q, e + 1, k - r, pass);
            p->stages--;
        }
}

static void bf_solve(bf_problem *q)
{
    q->found = 0;
    q->least_stash = INFINITY;
    q->cur.stages = 0;
    bf_walk(q, 0, q->workers, 0);
    if (!q->found)
        return;
    q->tol_t = q->best.t * (1 + 1e-12);
    q->min_stages = BF_MAX + 1;
    q->cur.stages = 0;
    bf_walk(q, 0, q->workers, 1);
}

/* The classic linear partition: exactly s stages, one worker each, the
 * smallest largest stage sum. */
static double bf_plain(const double *c, int i, int n, int s)
{
    if (s == 1) {
        double sum = 0;
        for (int l = i; l < n; l++)
            sum += c[l];
        return sum;
    }
    double best = INFINITY, sum = 0;
    for (int e = i; e <= n - s; e++) {
        sum += c[e];
        best = fmin(best, fmax(sum, bf_plain(c, e + 1, n, s - 1)));
    }
    return best;
}

/* The plain pipeline under the model: up to min(n, workers) stages of one
 * worker each, the boundaries' receives counted (fewer stages may win). */
static double bf_plain_model(const bf_problem *q, int i, int s)
{
    if (s == 1)
        return bf_stage_time(q, i, q->n - 1, 1);
    double best = bf_plain_model(q, i, 1);
    for (int e = i; e < q->n - 1; e++)
        best = fmin(best, fmax(bf_stage_time(q, i, e, 1), bf_plain_model(q, e + 1, s - 1)));
    return best;
}

/* A small seeded generator (xorshift64*), so a failure is repeatable. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng_next(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static double rng_unit(void) { return (double)(rng_next() >> 11) / 9007199254740992.0; }
static int rng_int(int lo, int hi)
{
    return lo + (int)(rng_next() % (uint64_t)(hi - lo + 1));
}

/* Stages non-empty and in order, replicas summing to the workers, stage
 * times matching the layers' costs. */
static int plan_sane(const ladle_pipe_plan *p, int n, int workers, const double *c)
{
    int ok = p->stages >= 1 && p->stages <= LADLE_PIPE_MAX_STAGES && p->first[0] == 0 &&
             p->first[p->stages] == n;
    int sum = 0;
    double slowest = 0;
    for (int j = 0; ok && j < p->stages; j++) {
        ok &= p->first[j + 1] > p->first[j] && p->replicas[j] >= 1;
        double s = 0;
        for (int l = p->first[j]; l < p->first[j + 1]; l++)
            s += c[l];
        ok &= fabs(p->stage_time[j] - s / p->replicas[j]) <= 1e-12 * (s / p->replicas[j]);
        slowest = fmax(slowest, p->stage_time[j]);
        sum += p->replicas[j];
    }
    return ok && sum == workers && p->slowest == slowest;
}

static int close_to(double a, double b)
{
    return fabs(a - b) <= 1e-12 * fmax(fabs(a), fabs(b));
}

/* A refusal as the brute force expects one: LADLE_ERR_ARG, the message
 * naming the least memory of any plan, the plan untouched. */
static int bf_refused(const bf_problem *q, ladle_status st, const ladle_pipe_plan *p)
{
    char need[64];
    snprintf(need, sizeof need, "needs %g)", q->least_stash);
    return st == LADLE_ERR_ARG && p->stages == -7 &&
           strstr(ladle_error_message(), need) != NULL;
}

/* The brute force's plan exactly: stages, boundaries and replicas. */
static int bf_same(const bf_problem *q, const ladle_pipe_plan *p)
{
    return p->stages == q->best.stages &&
           !memcmp(p->first, q->best.first, sizeof(int) * (size_t)(p->stages + 1)) &&
           !memcmp(p->replicas, q->best.r, sizeof(int) * (size_t)p->stages);
}

/* Print a disagreement with the brute force. */
static void bf_report(const char *what, int trial, const bf_problem *q, int min_stages,
                      int max_stages, ladle_status st, const ladle_pipe_plan *p)
{
    fprintf(stderr,
            "%s trial %d: n %d workers %d stages %d..%d cap %g lat %g mb %d: %s (%s)\n",
            what, trial, q->n, q->workers, min_stages, max_stages, q->cap, q->lat, q->mb,
            ladle_status_name(st), ladle_error_message());
    fprintf(stderr, "  got %d stages, slowest %.17g, plain %.17g:", p->stages, p->slowest,
            p->plain_slowest);
    for (int j = 0; j >= 0 && j < p->stages && j < BF_MAX; j++)
        fprintf(stderr, " [%d..%d]x%d", p->first[j], p->first[j + 1] - 1, p->replicas[j]);
    fprintf(stderr, "\n  brute force (%d): %d stages, slowest %.17g:", q->found,
            q->best.stages, q->best.t);
    for (int j = 0; j < q->best.stages; j++)
        fprintf(stderr, " [%d..%d]x%d", q->best.first[j], q->best.first[j + 1] - 1,
                q->best.r[j]);
    fprintf(stderr, "\n");
}

/* ---- the tests --------------------------------------------------------- */

/* Random chains of up to 7 layers on up to 5 workers, with and without a
 * memory cap, a stage limit and a least stage count. Integer costs make
 * ties exact, so there the whole plan must be the brute force's under the
 * documented tie rule; real costs check the time and the stage count. */
START_TEST(brute_force)
{
    int bad = 0, refused = 0, capped = 0, ranged = 0, trials = 6000;
    for (int trial = 0; trial < trials; trial++) {
        bf_problem q;
        memset(&q, 0, sizeof q);
        int integer = trial % 2 == 0;
        q.n = rng_int(1, 7);
        q.workers = rng_int(1, 5);
        int max_stages = rng_int(0, 3) == 0 ? rng_int(1, q.n) : 0;
        /* half the trials ask for a least stage count through the range
         * call (0 and 1 among them: no bound), the others use the plain
         * call */
        int use_range = trial % 4 >= 2, min_stages = 1;
        if (use_range) {
            int top = q.n < q.workers ? q.n : q.workers;
            if (max_stages > 0 && max_stages < top)
                top = max_stages;
            min_stages = rng_int(0, top);
            ranged += min_stages > 1;
        }
        double f[BF_MAX], b[BF_MAX], w[BF_MAX];
        for (int l = 0; l < q.n; l++) {
            f[l] = integer ? rng_int(0, 4) : rng_unit();
            b[l] = integer ? rng_int(0, 4) : 2 * rng_unit();
            w[l] = integer ? rng_int(0, 2) : rng_unit();
            q.c[l] = f[l] + b[l] + w[l];
            q.m[l] = rng_int(0, 5);
        }
        int use_cap = trial % 3 != 0;
        double total_m = 0;
        for (int l = 0; l < q.n; l++)
            total_m += q.m[l];
        q.cap = use_cap ? rng_int(1, (int)total_m + 2) : 0;
        q.smax = q.n < q.workers ? q.n : q.workers;
        if (max_stages > 0 && max_stages < q.smax)
            q.smax = max_stages;
        q.smin = min_stages;
        bf_solve(&q);

        ladle_pipe_plan p;
        memset(&p, 0, sizeof p);
        p.stages = -7;
        ladle_pipe_plan_desc d;
        ladle_pipe_plan_desc_init(&d, q.n, f, b, w);
        d.mem = use_cap ? q.m : NULL;
        d.mem_cap = q.cap;
        d.min_stages = use_range ? min_stages : 0;
        d.max_stages = max_stages;
        ladle_status st = ladle_pipe_plan_create(&d, q.workers, &p);
        int ok;
        if (!q.found) {
            ok = bf_refused(&q, st, &p);
            refused++;
        } else {
            ok = st == LADLE_OK && plan_sane(&p, q.n, q.workers, q.c) &&
                 p.stages <= q.smax && p.stages >= min_stages &&
                 close_to(p.slowest, q.best.t);
            if (integer)
                ok &= bf_same(&q, &p);
            else
                ok &= p.stages == q.min_stages;
            int plain_s = q.n < q.workers ? q.n : q.workers;
            ok &= close_to(p.plain_slowest, bf_plain(q.c, 0, q.n, plain_s));
            capped += use_cap;
        }
        ladle_error_clear();
        if (!ok && bad++ < 5)
            bf_report("chain", trial, &q, min_stages, max_stages, st, &p);
    }
    LT_ASSERT(bad == 0, "%d of %d random chains disagree with the brute force", bad,
              trials);
    /* the cases the generator made must include both outcomes of the cap */
    LT_ASSERT(refused > 10 && capped > 100 && ranged > 500,
              "only %d refused, %d capped and %d ranged plans", refused, capped, ranged);
}
END_TEST

/* The same brute force under ladle_pipe_plan_desc's model: random
 * boundary receives, parameter memory and all-reduce costs (from none to
 * large enough that replicas slow a stage down), with and without a cap and
 * stage bounds. The plan, its stage times and the plain pipeline must be
 * the brute force's, and ladle_pipe_plan_explicit must time the plan
 * alike. */
START_TEST(brute_force_model)
{
    int bad = 0, refused = 0, replicas_hurt = 0, trials = 5000;
    for (int trial = 0; trial < trials; trial++) {
        bf_problem q;
        memset(&q, 0, sizeof q);
        int integer = trial % 2 == 0;
        q.n = rng_int(1, 7);
        q.workers = rng_int(1, 5);
        double f[BF_MAX], b[BF_MAX], w[BF_MAX];
        int use_cut = rng_int(0, 3) != 0, use_red = rng_int(0, 3) != 0,
            use_prm = rng_int(0, 2) != 0, use_cap = trial % 3 != 0;
        double red_scale = rng_int(0, 2) == 0 ? 20 : 2;
        for (int l = 0; l < q.n; l++) {
            f[l] = integer ? rng_int(0, 4) : rng_unit();
            b[l] = integer ? rng_int(0, 4) : 2 * rng_unit();
            w[l] = integer ? rng_int(0, 2) : rng_unit();
            q.c[l] = f[l] + b[l] + w[l];
            q.m[l] = rng_int(0, 5);
            q.prm[l] = use_prm ? rng_int(0, 4) : 0;
            /* half the layers reduce nothing: a stage of them has room
             * for the replicas that another stage's all-reduce refuses */
            q.red[l] = !use_red || rng_int(0, 1) ? 0
                       : integer                 ? rng_int(0, (int)red_scale)
                                                 : red_scale * rng_unit();
            q.cut[l] = !use_cut || l == q.n - 1 ? 0 : integer ? rng_int(0, 3) : rng_unit();
        }
        q.lat = use_red && rng_int(0, 1) ? (integer ? rng_int(0, 2) : rng_unit()) : 0;
        q.mb = rng_int(1, 8);
        double total = 0;
        for (int l = 0; l < q.n; l++)
            total += q.m[l] + q.prm[l];
        q.cap = use_cap ? rng_int(1, (int)total + 4) : 0;
        int top = q.n < q.workers ? q.n : q.workers;
        int max_stages = rng_int(0, 3) == 0 ? rng_int(1, q.n) : 0;
        if (max_stages > 0 && max_stages < top)
            top = max_stages;
        int min_stages = rng_int(0, 2) == 0 ? rng_int(0, top) : 0;
        q.smax = top;
        q.smin = min_stages;
        bf_solve(&q);

        ladle_pipe_plan_desc o;
        ladle_pipe_plan_desc_init(&o, q.n, f, b, w);
        o.mem = use_cap ? q.m : NULL;
        o.mem_cap = q.cap;
        o.min_stages = min_stages;
        o.max_stages = max_stages;
        o.param = use_prm ? q.prm : NULL;
        o.cut = use_cut ? q.cut : NULL;
        o.reduce = use_red ? q.red : NULL;
        o.reduce_latency = q.lat;
        o.microbatches = q.mb;
        if (!use_cap) /* the brute force's memory then counts nothing */
            for (int l = 0; l < q.n; l++)
                q.m[l] = q.prm[l] = 0;
        ladle_pipe_plan p, e;
        memset(&p, 0, sizeof p);
        p.stages = -7;
        ladle_status st = ladle_pipe_plan_create(&o, q.workers, &p);
        int ok;
        if (!q.found) {
            ok = bf_refused(&q, st, &p);
            refused++;
        } else {
            ok = st == LADLE_OK && p.stages >= 1 && p.stages <= q.smax &&
                 p.stages >= min_stages && p.first[0] == 0 && p.first[p.stages] == q.n;
            int sum = 0;
            double slowest = 0;
            for (int j = 0; ok && j < p.stages; j++) {
                ok &= p.first[j + 1] > p.first[j] && p.replicas[j] >= 1;
                if (!ok)
                    break;
                sum += p.replicas[j];
                double t = bf_stage_time(&q, p.first[j], p.first[j + 1] - 1, p.replicas[j]);
                ok &= close_to(p.stage_time[j], t);
                slowest = fmax(slowest, p.stage_time[j]);
                if (p.replicas[j] > 1 && bf_stage_time(&q, p.first[j], p.first[j + 1] - 1,
                                                       p.replicas[j] - 1) < t)
                    replicas_hurt++;
            }
            ok &= sum == q.workers && p.slowest == slowest && close_to(p.slowest, q.best.t);
            if (integer)
                ok &= ok && bf_same(&q, &p);
            else
                ok &= p.stages == q.min_stages;
            int plain_s = q.n < q.workers ? q.n : q.workers;
            ok &= close_to(p.plain_slowest, bf_plain_model(&q, 0, plain_s));
            if (ok) {
                LT_OK(ladle_pipe_plan_explicit(&o, p.stages, p.first, p.replicas, &e));
                ok &= e.slowest == p.slowest && e.plain_slowest == p.plain_slowest;
            }
        }
        ladle_error_clear();
        if (!ok && bad++ < 5)
            bf_report("model", trial, &q, min_stages, max_stages, st, &p);
    }
    LT_ASSERT(bad == 0, "%d of %d random chains disagree with the brute force", bad,
              trials);
    /* the generator must reach plans where a replica fewer would be faster
     * (the all-reduce outweighs it), and refusals by the cap */
    LT_ASSERT(refused > 10 && replicas_hurt > 50,
              "only %d refused, %d with replicas that hurt", refused, replicas_hurt);
}
END_TEST

/* {4, 4} on 2 workers, by hand. Free communication: one stage on both
 * workers, 8 / 2 = 4 (tying two stages of 4, fewer stages win). With an
 * all-reduce of bandwidth term 1 a layer over 4 microbatches the one stage
 * takes 4 + (2 (1 / 2) 2) / 4 = 4.5; two stages joined by a boundary of
 * receive time 1 take 4 + 1 = 5 each, so the one stage stays; at 0.25 the
 * two stages win at 4.25. The plain pipeline is the better of one worker
 * (8) and the two stages. A latency of 1 a step adds 2 (1) 1 / 4 = 0.5. */
START_TEST(model_by_hand)
{
    double f[2] = {4, 4}, zero[2] = {0, 0}, red[2] = {1, 1}, cut[1] = {1},
           quarter[1] = {0.25};
    ladle_pipe_plan_desc o;
    ladle_pipe_plan p;
    ladle_pipe_plan_desc_init(&o, 2, f, zero, NULL);
    LT_OK(ladle_pipe_plan_create(&o, 2, &p));
    LT_ASSERT(p.stages == 1 && p.replicas[0] == 2 && p.slowest == 4 && p.plain_slowest == 4,
              "free: %d stages, slowest %g, plain %g", p.stages, p.slowest,
              p.plain_slowest);
    o.reduce = red;
    o.microbatches = 4;
    o.cut = cut;
    LT_OK(ladle_pipe_plan_create(&o, 2, &p));
    LT_ASSERT(p.stages == 1 && p.replicas[0] == 2 && p.slowest == 4.5 &&
                  p.stage_time[0] == 4.5 && p.plain_slowest == 5,
              "cut 1: %d stages, slowest %g, plain %g", p.stages, p.slowest,
              p.plain_slowest);
    o.cut = quarter;
    LT_OK(ladle_pipe_plan_create(&o, 2, &p));
    LT_ASSERT(
        p.stages == 2 && p.first[1] == 1 && p.slowest == 4.25 && p.stage_time[0] == 4.25 &&
            p.stage_time[1] == 4.25 && p.plain_slowest == 4.25,
        "cut 0.25: %d stages, slowest %g, plain %g", p.stages, p.slowest, p.plain_slowest);
    o.cut = cut;
    o.reduce = NULL;
    o.reduce_latency = 1;
    LT_OK(ladle_pipe_plan_create(&o, 2, &p));
    LT_ASSERT(p.stages == 1 && p.slowest == 4.5, "latency 1: %d stages, slowest %g",
              p.stages, p.slowest);
    /* the explicit plan of two stages under the same model */
    int first[3] = {0, 1, 2};
    LT_OK(ladle_pipe_plan_explicit(&o, 2, first, NULL, &p));
    LT_ASSERT(p.stage_time[0] == 5 && p.stage_time[1] == 5 && p.slowest == 5 &&
                  p.plain_slowest == 5,
              "explicit: %g %g, plain %g", p.stage_time[0], p.stage_time[1],
              p.plain_slowest);

    /* {2, 3} on 3 workers, the second layer's all-reduce 20 over one
     * microbatch: one stage takes 5 / 3 + (2 (2 / 3) 20) = 28.3; {0} x 1,
     * {1} x 2 takes 1.5 + 20; {0} x 2, {1} x 1 takes max(1, 3) = 3. The
     * first stage needs one replica for the time 3, but takes two, because
     * the second cannot: more workers for it make it slower. */
    double f23[2] = {2, 3}, red20[2] = {0, 20};
    ladle_pipe_plan_desc_init(&o, 2, f23, zero, NULL);
    o.reduce = red20;
    o.microbatches = 1;
    LT_OK(ladle_pipe_plan_create(&o, 3, &p));
    LT_ASSERT(p.stages == 2 && p.replicas[0] == 2 && p.replicas[1] == 1 && p.slowest == 3,
              "{2, 3}: %d stages, replicas %d %d, slowest %g", p.stages, p.replicas[0],
              p.replicas[1], p.slowest);

    /* Parameters against the cap: stash 1 a layer, parameters 3 a layer.
     * One stage on both workers holds 1 x ceil(2 / 2) x 2 + 6 = 8; two
     * stages hold 1 x 2 + 3 = 5 and 1 + 3 = 4. A cap of 7 forces the two
     * stages (which tie at 4 without costs); under 5 nothing fits, and the
     * message says 5 would. */
    double one[2] = {1, 1}, three[2] = {3, 3};
    ladle_pipe_plan_desc_init(&o, 2, f, zero, NULL);
    o.mem = one;
    o.param = three;
    o.mem_cap = 8;
    LT_OK(ladle_pipe_plan_create(&o, 2, &p));
    LT_ASSERT(p.stages == 1, "cap 8: %d stages", p.stages);
    o.mem_cap = 7;
    LT_OK(ladle_pipe_plan_create(&o, 2, &p));
    LT_ASSERT(p.stages == 2 && p.slowest == 4, "cap 7: %d stages, slowest %g", p.stages,
              p.slowest);
    o.mem_cap = 4.5;
    p.stages = -7;
    ladle_status st = ladle_pipe_plan_create(&o, 2, &p);
    LT_ASSERT(st == LADLE_ERR_ARG && p.stages == -7 &&
                  strstr(ladle_error_message(), "needs 5)") != NULL,
              "cap 4.5: %s: %s", ladle_status_name(st), ladle_error_message());
    ladle_error_clear();
    /* parameters alone (no stash memory) count against the cap too */
    o.mem = NULL;
    o.mem_cap = 5.5;
    LT_OK(ladle_pipe_plan_create(&o, 2, &p));
    LT_ASSERT(p.stages == 2, "parameters alone, cap 5.5: %d stages", p.stages);
}
END_TEST

/* Descriptors that are not set up, values negative or not finite, an
 * all-reduce without microbatches: refused, the plan untouched. */
START_TEST(model_bad_input)
{
    double f[3] = {1, 2, 3}, b[3] = {0, 0, 0}, neg[3] = {1, -1, 1}, nan_[3] = {1, NAN, 1},
           inf[2] = {0, INFINITY};
    int first[3] = {0, 1, 3};
    ladle_pipe_plan_desc o;
    ladle_pipe_plan p;
    p.stages = -7;
    memset(&o, 0, sizeof o); /* no size: not set up */
    o.n = 3, o.f = f, o.b = b;
    LT_FAILS(ladle_pipe_plan_create(&o, 2, &p), LADLE_ERR_ARG);
    LT_FAILS(ladle_pipe_plan_explicit(&o, 2, first, NULL, &p), LADLE_ERR_ARG);
    const double *arrays[3] = {neg, nan_, inf};
    for (int a = 0; a < 3; a++)
        for (int which = 0; which < 4; which++) {
            ladle_pipe_plan_desc_init(&o, 3, f, b, NULL);
            o.microbatches = 2;
            const double *v = arrays[a];
            if (which == 0)
                o.param = v;
            else if (which == 1)
                o.cut = v;
            else if (which == 2)
                o.reduce = v;
            else
                o.mem = v, o.mem_cap = 10;
            if (which == 1 && a == 2)
                continue; /* inf[1] is past the 2 boundaries of 3 layers */
            LT_FAILS(ladle_pipe_plan_create(&o, 2, &p), LADLE_ERR_ARG);
            LT_FAILS(ladle_pipe_plan_explicit(&o, 2, first, NULL, &p), LADLE_ERR_ARG);
        }
    /* cut has n - 1 entries: its last is not read */
    double cut_ok[3] = {1, 1, NAN};
    ladle_pipe_plan_desc_init(&o, 3, f, b, NULL);
    o.cut = cut_ok;
    ladle_pipe_plan q;
    LT_OK(ladle_pipe_plan_create(&o, 2, &q));
    double red[3] = {1, 1, 1};
    ladle_pipe_plan_desc_init(&o, 3, f, b, NULL);
    o.reduce = red; /* no microbatches */
    LT_FAILS(ladle_pipe_plan_create(&o, 2, &p), LADLE_ERR_ARG);
    o.microbatches = (1 << 20) + 1;
    LT_FAILS(ladle_pipe_plan_create(&o, 2, &p), LADLE_ERR_ARG);
    ladle_pipe_plan_desc_init(&o, 3, f, b, NULL);
    o.reduce_latency = -1;
    o.microbatches = 2;
    LT_FAILS(ladle_pipe_plan_create(&o, 2, &p), LADLE_ERR_ARG);
    o.reduce_latency = NAN;
    LT_FAILS(ladle_pipe_plan_create(&o, 2, &p), LADLE_ERR_ARG);
    ladle_pipe_plan_desc_init(&o, 3, f, b, NULL);
    o.mem_cap = NAN;
    LT_FAILS(ladle_pipe_plan_create(&o, 2, &p), LADLE_ERR_ARG);
    ladle_pipe_plan_desc_init(&o, 3, f, b, NULL);
    o.min_stages = -1;
    LT_FAILS(ladle_pipe_plan_create(&o, 2, &p), LADLE_ERR_ARG);
    o.min_stages = 3; /* 3 layers on 2 workers make 2 stages at most */
    LT_FAILS(ladle_pipe_plan_create(&o, 2, &p), LADLE_ERR_ARG);
    o.f = NULL;
    LT_FAILS(ladle_pipe_plan_create(&o, 2, &p), LADLE_ERR_NULL);
    o.f = f;
    LT_FAILS(ladle_pipe_plan_create(&o, 2, NULL), LADLE_ERR_NULL);
    LT_FAILS(ladle_pipe_plan_create(NULL, 2, &p), LADLE_ERR_NULL);
    LT_FAILS(ladle_pipe_plan_explicit(NULL, 2, first, NULL, &p), LADLE_ERR_NULL);
    LT_ASSERT(p.stages == -7, "a failed call wrote the plan");
    ladle_pipe_plan_desc_init(NULL, 3, f, b, NULL); /* accepted */
}
END_TEST

/* {1, 1, 3, 1} on 4 workers. The plain pipeline is one layer per worker,
 * slowest 3. Replicated, all four layers on one stage of 4 replicas run at
 * 6 / 4 = 1.5; no split does better (two stages leave the heavy layer's
 * stage at 4/2, 5/3 or worse). */
START_TEST(by_hand)
{
    double f[4] = {1, 1, 3, 1}, zero[4] = {0, 0, 0, 0};
    ladle_pipe_plan p;
    ladle_pipe_plan_desc d;
    ladle_pipe_plan_desc_init(&d, 4, f, zero, NULL);
    LT_OK(ladle_pipe_plan_create(&d, 4, &p));
    LT_ASSERT(p.stages == 1 && p.replicas[0] == 4 && p.slowest == 1.5 &&
                  p.plain_slowest == 3,
              "%d stages, slowest %g, plain %g", p.stages, p.slowest, p.plain_slowest);
    /* the same through the accessors (the arrays are deprecated) */
    LT_ASSERT(ladle_pipe_plan_first(&p, 0) == 0 && ladle_pipe_plan_first(&p, 1) == 4 &&
                  ladle_pipe_plan_replicas(&p, 0) == 4 &&
                  ladle_pipe_plan_stage_time(&p, 0) == p.stage_time[0] &&
                  ladle_pipe_plan_first(&p, 2) == -1 && ladle_pipe_plan_replicas(&p, 1) == -1 &&
                  isnan(ladle_pipe_plan_stage_time(&p, -1)) &&
                  ladle_pipe_plan_first(NULL, 0) == -1,
              "accessors: first %d %d, replicas %d", ladle_pipe_plan_first(&p, 0),
              ladle_pipe_plan_first(&p, 1), ladle_pipe_plan_replicas(&p, 0));

    /* w counts like f and b */
    double half[4] = {0.5, 0.5, 1.5, 0.5};
    ladle_pipe_plan_desc_init(&d, 4, half, zero, half);
    LT_OK(ladle_pipe_plan_create(&d, 4, &p));
    LT_ASSERT(p.slowest == 1.5 && p.plain_slowest == 3, "with w: slowest %g", p.slowest);

    /* Stash 1 per layer, cap 3: one stage stashes 4 x 1. The first stage
     * keeps ceil(4 / r_0) microbatches of each of its layers in flight, so
     * it holds layer 0 alone on 2 or 3 replicas; two stages {0} x 2,
     * {1..3} x 2 give 5 / 2 = 2.5, and three stages leave {2, 3} (4) on
     * one worker. */
    double one[4] = {1, 1, 1, 1};
    ladle_pipe_plan_desc_init(&d, 4, f, zero, NULL);
    d.mem = one;
    d.mem_cap = 3;
    LT_OK(ladle_pipe_plan_create(&d, 4, &p));
    LT_ASSERT(p.stages == 2 && p.first[1] == 1 && p.replicas[0] == 2 &&
                  p.replicas[1] == 2 && p.slowest == 2.5 && p.plain_slowest == 3,
              "capped at 3: %d stages, first[1] %d, replicas %d %d, slowest %g", p.stages,
              p.first[1], p.replicas[0], p.replicas[1], p.slowest);
    /* The least stash of any plan is 2 ({0} x 2, {1} x 1, {2, 3} x 1); under
     * that nothing fits, and the message says what would. */
    d.mem_cap = 2;
    LT_OK(ladle_pipe_plan_create(&d, 4, &p));
    LT_ASSERT(p.slowest == 4 && p.stages == 3, "capped at 2: %d stages, slowest %g",
              p.stages, p.slowest);
    p.stages = -7;
    d.mem_cap = 1.9;
    LT_FAILS(ladle_pipe_plan_create(&d, 4, &p), LADLE_ERR_ARG);
    LT_ASSERT(p.stages == -7, "a failed call wrote the plan");
    /* a cap of 0 means none */
    d.mem_cap = 0;
    LT_OK(ladle_pipe_plan_create(&d, 4, &p));
    LT_ASSERT(p.slowest == 1.5, "cap 0: slowest %g", p.slowest);
}
END_TEST

/* {1, 1, 3, 1} on 4 workers again, now asking for a pipeline. Three stages
 * at least: the heavy layer needs two replicas, so the others get one each
 * and the best is 2, reached by {0, 1}, {2} x 2, {3} (the heavy layer alone)
 * and by {0}, {1}, {2, 3} x 2 and {0}, {1, 2} x 2, {3}. The tie rule (fewest
 * replicas, then earliest end, stage by stage) picks {0}, {1}, {2, 3} x 2.
 * Exactly two: {0}, {1..3} x 3 at 5 / 3. Exactly four: the plain pipeline. */
START_TEST(stage_range)
{
    double f[4] = {1, 1, 3, 1}, zero[4] = {0, 0, 0, 0};
    ladle_pipe_plan p, e;
    ladle_pipe_plan_desc d;
    ladle_pipe_plan_desc_init(&d, 4, f, zero, NULL);
    d.min_stages = 3;
    LT_OK(ladle_pipe_plan_create(&d, 4, &p));
    LT_ASSERT(p.stages == 3 && p.slowest == 2 && p.plain_slowest == 3 && p.first[1] == 1 &&
                  p.first[2] == 2 && p.replicas[0] == 1 && p.replicas[1] == 1 &&
                  p.replicas[2] == 2,
              "3 stages at least: %d stages, first %d %d, replicas %d %d %d, slowest %g",
              p.stages, p.first[1], p.first[2], p.replicas[0], p.replicas[1], p.replicas[2],
              p.slowest);
    /* the heavy layer alone on two replicas ties */
    int first[4] = {0, 2, 3, 4}, replicas[3] = {1, 2, 1};
    LT_OK(ladle_pipe_plan_explicit(&d, 3, first, replicas, &e));
    LT_ASSERT(e.slowest == p.slowest, "{0, 1}, {2} x 2, {3}: slowest %g", e.slowest);
    d.max_stages = 3;
    LT_OK(ladle_pipe_plan_create(&d, 4, &p));
    LT_ASSERT(p.stages == 3 && p.slowest == 2, "exactly 3: %d stages, slowest %g", p.stages,
              p.slowest);
    d.min_stages = d.max_stages = 2;
    LT_OK(ladle_pipe_plan_create(&d, 4, &p));
    LT_ASSERT(p.stages == 2 && p.first[1] == 1 && p.replicas[0] == 1 &&
                  p.replicas[1] == 3 && p.slowest == 5.0 / 3,
              "exactly 2: %d stages, first[1] %d, replicas %d %d, slowest %g", p.stages,
              p.first[1], p.replicas[0], p.replicas[1], p.slowest);
    d.min_stages = 4, d.max_stages = 0;
    LT_OK(ladle_pipe_plan_create(&d, 4, &p));
    LT_ASSERT(p.stages == 4 && p.slowest == 3 && p.slowest == p.plain_slowest,
              "4 stages: %d stages, slowest %g", p.stages, p.slowest);
    /* no lower bound: 0 and 1 are the plain call */
    for (int lo = 0; lo <= 1; lo++) {
        d.min_stages = lo;
        LT_OK(ladle_pipe_plan_create(&d, 4, &p));
        LT_ASSERT(p.stages == 1 && p.replicas[0] == 4 && p.slowest == 1.5,
                  "min_stages %d: %d stages, slowest %g", lo, p.stages, p.slowest);
    }
    /* with a cap the refusal names the least stash of a plan in the range:
     * two stages stash at least 3 ({0} x 2, {1..3} x 2: the second holds
     * three layers; a first stage of two layers or more on at most 3 of the
     * 4 workers keeps two microbatches of each) */
    double one[4] = {1, 1, 1, 1};
    p.stages = -7;
    d.mem = one, d.mem_cap = 1.5;
    d.min_stages = d.max_stages = 2;
    ladle_status st = ladle_pipe_plan_create(&d, 4, &p);
    LT_ASSERT(st == LADLE_ERR_ARG && strstr(ladle_error_message(), "needs 3)") != NULL,
              "%s: %s", ladle_status_name(st), ladle_error_message());
    ladle_error_clear();

    /* more stages than layers or workers, a range upside down, a negative
     * bound, more than a plan holds */
    ladle_pipe_plan_desc_init(&d, 4, f, zero, NULL);
    d.min_stages = 5;
    LT_FAILS(ladle_pipe_plan_create(&d, 4, &p), LADLE_ERR_ARG);
    LT_FAILS(ladle_pipe_plan_create(&d, 8, &p), LADLE_ERR_ARG);
    d.min_stages = 4;
    LT_FAILS(ladle_pipe_plan_create(&d, 3, &p), LADLE_ERR_ARG);
    d.min_stages = 3, d.max_stages = 2;
    LT_FAILS(ladle_pipe_plan_create(&d, 4, &p), LADLE_ERR_ARG);
    d.min_stages = -1, d.max_stages = 0;
    LT_FAILS(ladle_pipe_plan_create(&d, 4, &p), LADLE_ERR_ARG);
    enum { N = 100 };
    double g[N];
    for (int l = 0; l < N; l++)
        g[l] = 1 + l % 3;
    ladle_pipe_plan_desc dg;
    ladle_pipe_plan_desc_init(&dg, N, g, g, NULL);
    dg.min_stages = 65;
    LT_FAILS(ladle_pipe_plan_create(&dg, N, &p), LADLE_ERR_ARG);
    d.min_stages = 3;
    d.f = NULL;
    LT_FAILS(ladle_pipe_plan_create(&d, 4, &p), LADLE_ERR_NULL);
    d.f = f;
    LT_FAILS(ladle_pipe_plan_create(&d, 4, NULL), LADLE_ERR_NULL);
    LT_ASSERT(p.stages == -7, "a failed call wrote the plan");
    /* 64, the most a plan holds, is a valid lower bound */
    dg.min_stages = 64;
    LT_OK(ladle_pipe_plan_create(&dg, N, &p));
    LT_ASSERT(p.stages == 64, "64 stages at least: %d", p.stages);
}
END_TEST

/* Equal costs with as many workers as layers: the plain pipeline puts one
 * layer on each worker; the planner reaches the same time per microbatch
 * with fewer stages (its first tie rule), here one stage on every worker. */
START_TEST(equal_costs)
{
    double f[6] = {2, 2, 2, 2, 2, 2}, b[6] = {1, 1, 1, 1, 1, 1};
    int first[7] = {0, 1, 2, 3, 4, 5, 6};
    ladle_pipe_plan p, e;
    ladle_pipe_plan_desc d;
    ladle_pipe_plan_desc_init(&d, 6, f, b, NULL);
    LT_OK(ladle_pipe_plan_create(&d, 6, &p));
    LT_OK(ladle_pipe_plan_explicit(&d, 6, first, NULL, &e));
    LT_ASSERT(p.slowest == 3 && p.plain_slowest == 3 && p.stages == 1 && p.replicas[0] == 6,
              "%d stages, slowest %g, plain %g", p.stages, p.slowest, p.plain_slowest);
    LT_ASSERT(e.slowest == 3 && e.plain_slowest == 3 && e.stages == 6,
              "one layer per stage: slowest %g, plain %g", e.slowest, e.plain_slowest);
    /* twice the workers: half the time; three stages at most is no limit */
    d.max_stages = 3;
    LT_OK(ladle_pipe_plan_create(&d, 12, &p));
    LT_ASSERT(p.slowest == 1.5 && p.plain_slowest == 3, "12 workers: slowest %g, plain %g",
              p.slowest, p.plain_slowest);
}
END_TEST

/* Chains too long for the brute force: the plan is well formed, at least
 * the total over the workers, no slower than the plain pipeline, and as
 * fast as the explicit plan of its own boundaries says. Also more stages
 * than a plan holds would allow: the planner stops at 64. */
START_TEST(large)
{
    enum { N = 150 };
    double f[N], b[N], m[N];
    for (int l = 0; l < N; l++) {
        f[l] = rng_unit() * (l % 17 == 0 ? 10 : 1);
        b[l] = 2 * f[l];
        m[l] = 1 + rng_int(0, 3);
    }
    int sizes[3][2] = {{N, 7}, {N, 100}, {40, 200}};
    for (int s = 0; s < 3; s++) {
        int n = sizes[s][0], workers = sizes[s][1];
        double c[N], total = 0;
        for (int l = 0; l < n; l++)
            total += c[l] = f[l] + b[l];
        ladle_pipe_plan p, e;
        ladle_pipe_plan_desc d;
        ladle_pipe_plan_desc_init(&d, n, f, b, NULL);
        d.mem = s == 1 ? m : NULL;
        d.mem_cap = 3000;
        LT_OK(ladle_pipe_plan_create(&d, workers, &p));
        LT_OK(ladle_pipe_plan_explicit(&d, p.stages, p.first, p.replicas, &e));
        LT_ASSERT(
            plan_sane(&p, n, workers, c) && p.slowest >= total / workers * (1 - 1e-12) &&
                p.slowest <= p.plain_slowest && e.slowest == p.slowest &&
                e.plain_slowest == p.plain_slowest,
            "%d layers on %d workers: %d stages, slowest %g (total / workers %g), plain %g",
            n, workers, p.stages, p.slowest, total / workers, p.plain_slowest);
        /* a range of stage counts: in it, and no faster than with none */
        ladle_pipe_plan r;
        int lo = workers < 8 ? workers : 8, hi = 2 * lo;
        d.min_stages = lo, d.max_stages = hi;
        LT_OK(ladle_pipe_plan_create(&d, workers, &r));
        LT_OK(ladle_pipe_plan_explicit(&d, r.stages, r.first, r.replicas, &e));
        LT_ASSERT(plan_sane(&r, n, workers, c) && r.stages >= lo && r.stages <= hi &&
                      r.slowest >= p.slowest && e.slowest == r.slowest,
                  "%d layers on %d workers, %d to %d stages: %d stages, slowest %g (%g "
                  "with no range)",
                  n, workers, lo, hi, r.stages, r.slowest, p.slowest);
    }
}
END_TEST

START_TEST(explicit_plans)
{
    double f[4] = {1, 1, 3, 1}, b[4] = {0, 0, 0, 0};
    int first[4] = {0, 2, 3, 4}, replicas[3] = {1, 2, 1};
    ladle_pipe_plan p;
    ladle_pipe_plan_desc d;
    ladle_pipe_plan_desc_init(&d, 4, f, b, NULL);
    LT_OK(ladle_pipe_plan_explicit(&d, 3, first, replicas, &p));
    LT_ASSERT(p.stages == 3 && p.stage_time[0] == 2 && p.stage_time[1] == 1.5 &&
                  p.stage_time[2] == 1 && p.slowest == 2 && p.plain_slowest == 3,
              "stage times %g %g %g, slowest %g, plain %g", p.stage_time[0],
              p.stage_time[1], p.stage_time[2], p.slowest, p.plain_slowest);

    p.stages = -7;
    int empty[4] = {0, 2, 2, 4}, back[4] = {0, 3, 2, 4}, late[4] = {1, 2, 3, 4},
        short_[4] = {0, 1, 2, 3}, long_[4] = {0, 1, 2, 5}, zero_r[3] = {1, 0, 1};
    LT_FAILS(ladle_pipe_plan_explicit(&d, 3, empty, replicas, &p), LADLE_ERR_ARG);
    LT_FAILS(ladle_pipe_plan_explicit(&d, 3, back, replicas, &p), LADLE_ERR_ARG);
    LT_FAILS(ladle_pipe_plan_explicit(&d, 3, late, replicas, &p), LADLE_ERR_ARG);
    LT_FAILS(ladle_pipe_plan_explicit(&d, 3, short_, replicas, &p), LADLE_ERR_ARG);
    LT_FAILS(ladle_pipe_plan_explicit(&d, 3, long_, replicas, &p), LADLE_ERR_ARG);
    LT_FAILS(ladle_pipe_plan_explicit(&d, 3, first, zero_r, &p), LADLE_ERR_ARG);
    LT_FAILS(ladle_pipe_plan_explicit(&d, 0, first, replicas, &p), LADLE_ERR_ARG);
    LT_FAILS(ladle_pipe_plan_explicit(&d, 65, first, replicas, &p), LADLE_ERR_ARG);
    d.n = 0;
    LT_FAILS(ladle_pipe_plan_explicit(&d, 3, first, replicas, &p), LADLE_ERR_ARG);
    double nan_f[4] = {1, NAN, 3, 1};
    ladle_pipe_plan_desc_init(&d, 4, nan_f, b, NULL);
    LT_FAILS(ladle_pipe_plan_explicit(&d, 3, first, replicas, &p), LADLE_ERR_ARG);
    d.f = NULL;
    LT_FAILS(ladle_pipe_plan_explicit(&d, 3, first, replicas, &p), LADLE_ERR_NULL);
    d.f = f, d.b = NULL;
    LT_FAILS(ladle_pipe_plan_explicit(&d, 3, first, replicas, &p), LADLE_ERR_NULL);
    d.b = b;
    LT_FAILS(ladle_pipe_plan_explicit(&d, 3, NULL, replicas, &p), LADLE_ERR_NULL);
    LT_FAILS(ladle_pipe_plan_explicit(&d, 3, first, replicas, NULL), LADLE_ERR_NULL);
    LT_ASSERT(p.stages == -7, "a failed call wrote the plan");
}
END_TEST

START_TEST(bad_input)
{
    double f[4] = {1, 1, 3, 1}, b[4] = {0, 0, 0, 0}, m[4] = {1, 1, 1, 1};
    double neg[4] = {1, -1, 3, 1}, inf[4] = {1, 1, INFINITY, 1}, nan_m[4] = {1, NAN, 1, 1};
    ladle_pipe_plan p;
    ladle_pipe_plan_desc d;
    p.stages = -7;
    ladle_pipe_plan_desc_init(&d, 0, f, b, NULL);
    LT_FAILS(ladle_pipe_plan_create(&d, 4, &p), LADLE_ERR_ARG);
    d.n = 4;
    LT_FAILS(ladle_pipe_plan_create(&d, 0, &p), LADLE_ERR_ARG);
    d.max_stages = -1;
    LT_FAILS(ladle_pipe_plan_create(&d, 4, &p), LADLE_ERR_ARG);
    ladle_pipe_plan_desc_init(&d, 4, neg, b, NULL);
    LT_FAILS(ladle_pipe_plan_create(&d, 4, &p), LADLE_ERR_ARG);
    ladle_pipe_plan_desc_init(&d, 4, f, b, inf);
    LT_FAILS(ladle_pipe_plan_create(&d, 4, &p), LADLE_ERR_ARG);
    ladle_pipe_plan_desc_init(&d, 4, f, b, NULL);
    d.mem = nan_m, d.mem_cap = 3;
    LT_FAILS(ladle_pipe_plan_create(&d, 4, &p), LADLE_ERR_ARG);
    d.mem = m, d.mem_cap = NAN;
    LT_FAILS(ladle_pipe_plan_create(&d, 4, &p), LADLE_ERR_ARG);
    ladle_pipe_plan_desc_init(&d, 1 << 20, f, b, NULL);
    LT_FAILS(ladle_pipe_plan_create(&d, 1 << 20, &p), LADLE_ERR_ARG);
    ladle_pipe_plan_desc_init(&d, 4, NULL, b, NULL);
    LT_FAILS(ladle_pipe_plan_create(&d, 4, &p), LADLE_ERR_NULL);
    ladle_pipe_plan_desc_init(&d, 4, f, NULL, NULL);
    LT_FAILS(ladle_pipe_plan_create(&d, 4, &p), LADLE_ERR_NULL);
    ladle_pipe_plan_desc_init(&d, 4, f, b, NULL);
    LT_FAILS(ladle_pipe_plan_create(&d, 4, NULL), LADLE_ERR_NULL);
    LT_ASSERT(p.stages == -7, "a failed call wrote the plan");
}
END_TEST

/* A descriptor whose size is not this library's (a struct that never went
 * through ladle_pipe_plan_desc_init, or one of other headers) is refused by
 * both calls before any other field is read, with a message that says so,
 * and the plan is left alone. */
START_TEST(desc_size)
{
    double f[2] = {1, 1}, b[2] = {0, 0};
    int first[3] = {0, 1, 2};
    ladle_pipe_plan p;
    p.stages = -7;
    ladle_pipe_plan_desc d;
    ladle_pipe_plan_desc_init(&d, 2, f, b, NULL);
    size_t sizes[2] = {0, sizeof d - 1};
    for (int i = 0; i < 2; i++) {
        d.size = sizes[i];
        ladle_status st = ladle_pipe_plan_create(&d, 2, &p);
        LT_ASSERT(st == LADLE_ERR_ARG && strstr(ladle_error_message(), "descriptor size"),
                  "create, size %zu: %s: %s", sizes[i], ladle_status_name(st),
                  ladle_error_message());
        ladle_error_clear();
        st = ladle_pipe_plan_explicit(&d, 2, first, NULL, &p);
        LT_ASSERT(st == LADLE_ERR_ARG && strstr(ladle_error_message(), "descriptor size"),
                  "explicit, size %zu: %s: %s", sizes[i], ladle_status_name(st),
                  ladle_error_message());
        ladle_error_clear();
    }
    LT_ASSERT(p.stages == -7, "a refused descriptor wrote the plan");
    /* its defaults: no cap, no bounds, nothing beyond the compute */
    ladle_pipe_plan_desc_init(&d, 2, f, b, NULL);
    LT_ASSERT(d.size == sizeof d && d.n == 2 && d.f == f && d.b == b && d.w == NULL &&
                  d.mem == NULL && d.mem_cap == 0 && d.min_stages == 0 &&
                  d.max_stages == 0 && d.param == NULL && d.cut == NULL &&
                  d.reduce == NULL && d.reduce_latency == 0 && d.microbatches == 0,
              "the descriptor's defaults");
}
END_TEST

static int same_plan(const ladle_pipe_plan *a, const ladle_pipe_plan *b)
{
    return !memcmp(a, b, sizeof *a);
}

/* The 0.1 names (ladle/deprecated.h) give what their replacements give,
 * bit for bit, and refuse what they refused. */
START_TEST(deprecated)
{
    double f[4] = {1, 1, 3, 1}, b[4] = {1, 0, 2, 0}, w[4] = {0, 1, 0, 1},
           mem[4] = {1, 2, 1, 1}, cut[3] = {0.5, 0.25, 0.5}, red[4] = {1, 0, 2, 1};
    int first[4] = {0, 2, 3, 4}, replicas[3] = {1, 2, 1};
    ladle_pipe_plan want, got;
    memset(&want, 0, sizeof want), memset(&got, 0, sizeof got);
    ladle_pipe_plan_desc d;
    ladle_pipe_plan_desc_init(&d, 4, f, b, w);
    d.mem = mem;
    d.mem_cap = 12;
    d.cut = cut;
    d.reduce = red;
    d.reduce_latency = 0.1;
    d.microbatches = 4;
    d.min_stages = 2;
    int same = 1;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    ladle_pipe_plan_opts o;
    ladle_pipe_plan_opts_init(&o);
    ladle_pipe_plan_desc blank;
    ladle_pipe_plan_desc_init(&blank, 0, NULL, NULL, NULL);
    same &= !memcmp(&o, &blank, sizeof o);
    o.mem = mem;
    o.mem_cap = 12;
    o.cut = cut;
    o.reduce = red;
    o.reduce_latency = 0.1;
    o.microbatches = 4;
    o.min_stages = 2;
    /* _ex: the options with the layers apart */
    LT_OK(ladle_pipe_plan_create(&d, 4, &want));
    LT_OK(ladle_pipe_plan_create_ex(4, f, b, w, &o, 4, &got));
    same &= same_plan(&want, &got);
    LT_OK(ladle_pipe_plan_explicit(&d, 3, first, replicas, &want));
    LT_OK(ladle_pipe_plan_explicit_ex(4, f, b, w, &o, 3, first, replicas, &got));
    same &= same_plan(&want, &got);
    /* no options: the compute alone */
    ladle_pipe_plan_desc_init(&d, 4, f, b, w);
    LT_OK(ladle_pipe_plan_create(&d, 4, &want));
    LT_OK(ladle_pipe_plan_create_ex(4, f, b, w, NULL, 4, &got));
    same &= same_plan(&want, &got);
    LT_OK(ladle_pipe_plan_explicit(&d, 3, first, replicas, &want));
    LT_OK(ladle_pipe_plan_explicit_ex(4, f, b, w, NULL, 3, first, replicas, &got));
    same &= same_plan(&want, &got);
    /* _range: the cap and the bounds */
    d.mem = mem, d.mem_cap = 6, d.min_stages = 2, d.max_stages = 3;
    LT_OK(ladle_pipe_plan_create(&d, 4, &want));
    LT_OK(ladle_pipe_plan_create_range(4, f, b, w, mem, 6, 4, 2, 3, &got));
    same &= same_plan(&want, &got);
    /* what they refused */
    o.size = 0;
    LT_FAILS(ladle_pipe_plan_create_ex(4, f, b, w, &o, 4, &got), LADLE_ERR_ARG);
    LT_FAILS(ladle_pipe_plan_explicit_ex(4, f, b, w, &o, 3, first, NULL, &got),
             LADLE_ERR_ARG);
    LT_FAILS(ladle_pipe_plan_create_ex(4, NULL, b, w, &o, 4, &got), LADLE_ERR_NULL);
    LT_FAILS(ladle_pipe_plan_explicit_ex(4, f, b, w, NULL, 3, NULL, NULL, &got),
             LADLE_ERR_NULL);
    LT_FAILS(ladle_pipe_plan_create_range(4, f, b, w, NULL, 0, 4, 5, 0, &got),
             LADLE_ERR_ARG);
    ladle_pipe_plan_opts_init(NULL); /* accepted, as before */
#pragma GCC diagnostic pop
    LT_ASSERT(same, "a deprecated call's plan differs from its replacement's");
}
END_TEST

LT_SUITE("pipe_plan", "pipe_plan", 120, brute_force, brute_force_model, model_by_hand,
         model_bad_input, by_hand, stage_range, equal_costs, large, explicit_plans,
         bad_input, desc_size, deprecated)
