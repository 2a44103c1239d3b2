/* Schedule generators: GPipe, 1F1B and interleaved 1F1B written out by
 * their rules; ZB-H1 and the replicated hybrid found by list scheduling
 * under the stage costs (see ladle/pipeline.h and docs/pipeline.md). */
#include <math.h>
#include <string.h>

#include "pipeline/pipe.h"

static ladle_pipe_action act(ladle_pipe_kind kind, int stage, int mb)
{
    ladle_pipe_action a = {kind, stage, mb};
    return a;
}

static ladle_status push(ladle_pipe_schedule *s, int w, ladle_pipe_kind kind, int stage, int mb)
{
    return ladle_pipe_schedule_append(s, w, act(kind, stage, mb));
}

/* A full backward, as GPipe and 1F1B define it: the input gradient goes to
 * the previous stage once the weight gradient is done too. */
static ladle_status full_backward(ladle_pipe_schedule *s, int j, int k)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(push(s, j, LADLE_PIPE_B, j, k));
    LADLE_CALL(push(s, j, LADLE_PIPE_W, j, k));
    if (j > 0)
        LADLE_CALL(push(s, j, LADLE_PIPE_SEND_B, j, k));
fail:
    return st;
}

static ladle_status gen_gpipe(ladle_pipe_schedule *s)
{
    ladle_status st = LADLE_OK;
    for (int j = 0; j < s->stages; j++) {
        for (int k = 0; k < s->m; k++)
            LADLE_CALL(push(s, j, LADLE_PIPE_F, j, k));
        for (int k = 0; k < s->m; k++)
            LADLE_CALL(full_backward(s, j, k));
    }
fail:
    return st;
}

static ladle_status gen_1f1b(ladle_pipe_schedule *s)
{
    ladle_status st = LADLE_OK;
    int p = s->stages, m = s->m;
    for (int j = 0; j < p; j++) {
        int warm = p - j - 1 < m ? p - j - 1 : m;
        for (int k = 0; k < warm; k++)
            LADLE_CALL(push(s, j, LADLE_PIPE_F, j, k));
        for (int k = 0; k < m - warm; k++) {
            LADLE_CALL(push(s, j, LADLE_PIPE_F, j, warm + k));
            LADLE_CALL(full_backward(s, j, k));
        }
        for (int k = m - warm; k < m; k++)
            LADLE_CALL(full_backward(s, j, k));
    }
fail:
    return st;
}

/* Megatron's interleaved order: worker r runs its v chunks (stages r, r+W,
 * ...) over microbatches in groups of W; the i-th forward of the worker is
 * chunk (i / W) mod v of microbatch (i / (W v)) W + i mod W, the i-th
 * backward the same with the chunks reversed. Worker r warms up with
 * 2 (W - r - 1) + (v - 1) W forwards. */
static void interleaved_at(int W, int v, int i, int backward, int r, int *stage, int *mb)
{
    int chunk = (i / W) % v;
    if (backward)
        chunk = v - 1 - chunk;
    *stage = chunk * W + r;
    *mb = (i / (W * v)) * W + i % W;
}

static ladle_status gen_interleaved(ladle_pipe_schedule *s, int v)
{
    ladle_status st = LADLE_OK;
    int W = s->workers, total = s->m * v;
    for (int r = 0; r < W; r++) {
        int warm = 2 * (W - r - 1) + (v - 1) * W, j, k;
        warm = warm < total ? warm : total;
        for (int i = 0; i < warm; i++) {
            interleaved_at(W, v, i, 0, r, &j, &k);
            LADLE_CALL(push(s, r, LADLE_PIPE_F, j, k));
        }
        for (int i = 0; i < total - warm; i++) {
            interleaved_at(W, v, warm + i, 0, r, &j, &k);
            LADLE_CALL(push(s, r, LADLE_PIPE_F, j, k));
            interleaved_at(W, v, i, 1, r, &j, &k);
            LADLE_CALL(push(s, r, LADLE_PIPE_B, j, k));
            LADLE_CALL(push(s, r, LADLE_PIPE_W, j, k));
        }
        for (int i = total - warm; i < total; i++) {
            interleaved_at(W, v, i, 1, r, &j, &k);
            LADLE_CALL(push(s, r, LADLE_PIPE_B, j, k));
            LADLE_CALL(push(s, r, LADLE_PIPE_W, j, k));
        }
    }
fail:
    return st;
}

/* ---- list scheduling ---------------------------------------------------- */

/* Each worker holds one stage replica and takes its microbatches in order.
 * Whenever a worker is free it starts, of the actions whose inputs have
 * arrived, a backward first, then a forward (while fewer than cap_b
 * microbatches wait for their backward and fewer than cap_w for their
 * weight gradient), then a deferred weight gradient. With fuse, W follows
 * B at once (the 1F1B form); otherwise W waits for a gap (zero bubble). */
typedef struct lister {
    const ladle_pipe_schedule *s;
    const ladle_pipe_costs *c;
    int fuse;
    int *cap_b, *cap_w;
    int *last;              /* per worker: the last F or B it ran */
    double *f_end, *b_end;  /* per (stage, mb); -1 until scheduled */
    double *free_at;        /* per worker */
    int *nf, *nb, *nw;      /* per worker: next F, B, W (counted in its microbatches) */
    int *stage_of, *replica_of;
} lister;

static double cost(const double *v, int j, double dflt) { return v ? v[j] : dflt; }

/* The i-th microbatch of replica q of a stage with r replicas. */
static int nth_mb(int q, int r, int i) { return q + i * r; }
static int count_mbs(int q, int r, int m) { return m > q ? (m - q + r - 1) / r : 0; }

/* When the next action of `kind` on worker w could start, or INFINITY. */
static double ready(const lister *L, int w, ladle_pipe_kind kind)
{
    const ladle_pipe_schedule *s = L->s;
    int j = L->stage_of[w], q = L->replica_of[w], r = s->replicas[j];
    int n = count_mbs(q, r, s->m), m = s->m;
    if (kind == LADLE_PIPE_F) {
        if (L->nf[w] >= n || L->nf[w] - L->nb[w] >= L->cap_b[w] || L->nf[w] - L->nw[w] >= L->cap_w[w])
            return INFINITY;
        int k = nth_mb(q, r, L->nf[w]);
        if (j == 0)
            return 0.0;
        double t = L->f_end[(j - 1) * m + k];
        return t < 0 ? INFINITY : t + cost(L->c ? L->c->send : NULL, j - 1, 0.0);
    }
    if (kind == LADLE_PIPE_B) {
        if (L->nb[w] >= L->nf[w])
            return INFINITY;
        int k = nth_mb(q, r, L->nb[w]);
        if (j == s->stages - 1)
            return L->f_end[j * m + k];
        double t = L->b_end[(j + 1) * m + k];
        return t < 0 ? INFINITY : t + cost(L->c ? L->c->send : NULL, j, 0.0);
    }
    return L->nw[w] < L->nb[w] ? L->b_end[j * m + nth_mb(q, r, L->nw[w])] : INFINITY;
}

/* Pick worker w's next action: *start and *kind, or *start = INFINITY. */
static void choose(const lister *L, int w, double *start, int *kind)
{
    static const int first_b[3] = {LADLE_PIPE_B, LADLE_PIPE_F, LADLE_PIPE_W};
    static const int first_f[3] = {LADLE_PIPE_F, LADLE_PIPE_B, LADLE_PIPE_W};
    /* forwards and backwards alternate once the pipeline is full, as in 1F1B */
    const int *order = L->last[w] == LADLE_PIPE_B ? first_f : first_b;
    double t[3], earliest = INFINITY;
    for (int i = 0; i < 3; i++) {
        t[i] = ready(L, w, order[i]);
        earliest = t[i] < earliest ? t[i] : earliest;
    }
    *start = INFINITY;
    if (earliest == INFINITY)
        return;
    double at = L->free_at[w] > earliest ? L->free_at[w] : earliest;
    for (int i = 0; i < 3; i++)
        if (t[i] <= at) {
            *start = at;
            *kind = order[i];
            return;
        }
}

static ladle_status run_lister(lister *L, ladle_pipe_schedule *out)
{
    ladle_status st = LADLE_OK;
    const ladle_pipe_schedule *s = L->s;
    int W = s->workers, m = s->m, left = 0;
    for (int w = 0; w < W; w++)
        left += 3 * count_mbs(L->replica_of[w], s->replicas[L->stage_of[w]], m);
    while (left > 0) {
        int best = -1, kind = 0;
        double when = INFINITY;
        for (int w = 0; w < W; w++) {
            double t;
            int k;
            choose(L, w, &t, &k);
            if (t < when) {
                when = t, best = w, kind = k;
            }
        }
        LADLE_CHECK(best >= 0, LADLE_ERR_INTERNAL, "list scheduling found no action to run");
        int j = L->stage_of[best], q = L->replica_of[best], r = s->replicas[j];
        const ladle_pipe_costs *c = L->c;
        int *next = kind == LADLE_PIPE_F ? L->nf : kind == LADLE_PIPE_B ? L->nb : L->nw;
        int k = nth_mb(q, r, next[best]++);
        double dur = kind == LADLE_PIPE_F   ? cost(c ? c->f : NULL, j, 1.0)
                     : kind == LADLE_PIPE_B ? cost(c ? c->b : NULL, j, 1.0)
                                            : cost(c ? c->w : NULL, j, 1.0);
        LADLE_CALL(push(out, best, kind, j, k));
        if (kind != LADLE_PIPE_W)
            L->last[best] = kind;
        left--;
        if (kind == LADLE_PIPE_F)
            L->f_end[j * m + k] = when + dur;
        else if (kind == LADLE_PIPE_B)
            L->b_end[j * m + k] = when + dur;
        if (kind == LADLE_PIPE_B && L->fuse) {
            /* the gradient leaves first; the weight gradient follows at once */
            if (j > 0)
                LADLE_CALL(push(out, best, LADLE_PIPE_SEND_B, j, k));
            dur += cost(c ? c->w : NULL, j, 1.0);
            LADLE_CALL(push(out, best, LADLE_PIPE_W, j, k));
            L->nw[best]++;
            left--;
        }
        L->free_at[best] = when + dur;
    }
fail:
    return st;
}

static ladle_status gen_listed(ladle_pipe_schedule *s, const ladle_pipe_costs *costs, int zb)
{
    ladle_status st = LADLE_OK;
    int W = s->workers, S = s->stages, m = s->m;
    lister L;
    memset(&L, 0, sizeof L);
    L.s = s;
    L.c = costs;
    L.fuse = !zb;
    size_t nw = (size_t)W, nsm = (size_t)S * (size_t)m;
    L.cap_b = ladle__calloc(nw, sizeof(int));
    L.cap_w = ladle__calloc(nw, sizeof(int));
    L.last = ladle__calloc(nw, sizeof(int));
    L.nf = ladle__calloc(nw, sizeof(int));
    L.nb = ladle__calloc(nw, sizeof(int));
    L.nw = ladle__calloc(nw, sizeof(int));
    L.stage_of = ladle__calloc(nw, sizeof(int));
    L.replica_of = ladle__calloc(nw, sizeof(int));
    L.free_at = ladle__calloc(nw, sizeof(double));
    L.f_end = ladle__calloc(nsm, sizeof(double));
    L.b_end = ladle__calloc(nsm, sizeof(double));
    LADLE_CHECK(L.cap_b && L.cap_w && L.last && L.nf && L.nb && L.nw && L.stage_of && L.replica_of &&
                    L.free_at && L.f_end && L.b_end,
                LADLE_ERR_ALLOC, "out of memory");
    for (size_t i = 0; i < nsm; i++)
        L.f_end[i] = L.b_end[i] = -1;
    for (int j = 0; j < S; j++) {
        /* a replica needs about as many microbatches in flight as there are
         * workers from its stage to the end, shared among its replicas */
        int downstream = 0;
        for (int i = j; i < S; i++)
            downstream += s->replicas[i];
        for (int q = 0; q < s->replicas[j]; q++) {
            int w = s->placement[s->rep_first[j] + q];
            L.stage_of[w] = j;
            L.replica_of[w] = q;
            L.cap_b[w] = (downstream + s->replicas[j] - 1) / s->replicas[j];
            /* ZB-H1 keeps 1F1B's peak memory: at most S stashed on any worker */
            /* ZB-H1 stashes at most S microbatches on any worker, as 1F1B
             * does on its first; stage j defers up to j weight gradients */
            L.cap_w[w] = zb ? S : L.cap_b[w];
        }
    }
    LADLE_CALL(run_lister(&L, s));
fail:
    ladle__free(L.cap_b), ladle__free(L.cap_w), ladle__free(L.last), ladle__free(L.nf), ladle__free(L.nb);
    ladle__free(L.nw), ladle__free(L.stage_of), ladle__free(L.replica_of);
    ladle__free(L.free_at), ladle__free(L.f_end), ladle__free(L.b_end);
    return st;
}

ladle_status ladle__pipe_check_values(int n, const double *const *v,
                                      const char *const *names, int S)
{
    ladle_status st = LADLE_OK;
    for (int i = 0; i < n; i++)
        for (int j = 0; v[i] != NULL && j < S; j++)
            LADLE_CHECK(isfinite(v[i][j]) && v[i][j] >= 0, LADLE_ERR_ARG,
                        "cost %s of stage %d is %g (finite and >= 0 needed)", names[i], j,
                        v[i][j]);
fail:
    return st;
}

ladle_status ladle__pipe_check_costs(const ladle_pipe_costs *c, int S)
{
    if (c == NULL)
        return LADLE_OK;
    const double *const v[7] = {c->f, c->b, c->w, c->send, c->reduce, c->step, c->act};
    static const char *const names[7] = {"f", "b", "w", "send", "reduce", "step", "act"};
    return ladle__pipe_check_values(7, v, names, S);
}

/* An empty schedule of zbv's shape: an even number of stages in a V over
 * half as many workers. */
static ladle_status alloc_v(int stages, int chunks, int m, ladle_pipe_schedule **out)
{
    ladle_status st = LADLE_OK;
    int *placement = NULL;
    LADLE_CHECK(stages % 2 == 0, LADLE_ERR_ARG,
                "zbv: %d stages (an even number: two chunks on each worker)", stages);
    LADLE_CHECK(chunks == 0 || chunks == 2, LADLE_ERR_ARG,
                "zbv: %d chunks per worker (the V holds 2)", chunks);
    placement = ladle__calloc((size_t)stages, sizeof(int));
    LADLE_CHECK(placement != NULL, LADLE_ERR_ALLOC, "out of memory");
    ladle__pipe_v_placement(stages / 2, placement);
    LADLE_CALL(ladle__pipe_alloc(stages / 2, stages, NULL, placement, m, out));
fail:
    ladle__free(placement);
    return st;
}

ladle_status ladle_pipe_schedule_generate(ladle_pipe_style style, int stages, const int *replicas,
                                          int chunks, int m, const ladle_pipe_costs *costs,
                                          ladle_pipe_schedule **out)
{
    ladle_status st = LADLE_OK;
    ladle_pipe_schedule *s = NULL;
    LADLE_NOT_NULL(out);
    LADLE_CHECK(style >= LADLE_PIPE_GPIPE && style <= LADLE_PIPE_ZBV, LADLE_ERR_ARG,
                "unknown schedule style %d", (int)style);
    LADLE_CHECK(stages >= 1 && stages <= 1 << 16 && m >= 1 && m <= 1 << 20, LADLE_ERR_ARG,
                "%d stages and %d microbatches (1 to 65536 and 1 to 2^20)", stages, m);
    LADLE_CALL(ladle__pipe_check_costs(costs, stages));
    int workers = stages;
    if (style == LADLE_PIPE_HYBRID) {
        workers = 0;
        for (int j = 0; replicas != NULL && j < stages; j++) {
            /* bounded before the sum, which then cannot overflow */
            LADLE_CHECK(replicas[j] >= 1 && replicas[j] <= 1 << 16 &&
                            workers <= (1 << 16) - replicas[j],
                        LADLE_ERR_ARG,
                        "stage %d has %d replicas (at most 65536 workers in all)", j,
                        replicas[j]);
            workers += replicas[j];
        }
        if (replicas == NULL)
            workers = stages;
    } else {
        for (int j = 0; replicas != NULL && j < stages; j++)
            LADLE_CHECK(replicas[j] == 1, LADLE_ERR_ARG,
                        "the %s schedule does not replicate stages (stage %d has %d replicas);"
                        " use hybrid",
                        ladle_pipe_style_name(style), j, replicas[j]);
        replicas = NULL;
    }
    if (style == LADLE_PIPE_INTERLEAVED && chunks > 1) {
        LADLE_CHECK(stages % chunks == 0, LADLE_ERR_ARG,
                    "interleaved: %d stages do not split into %d chunks per worker", stages,
                    chunks);
        workers = stages / chunks;
        LADLE_CHECK(m % workers == 0, LADLE_ERR_ARG,
                    "interleaved: %d microbatches are not a multiple of the %d workers", m,
                    workers);
    } else if (style == LADLE_PIPE_INTERLEAVED) {
        LADLE_CHECK(chunks == 1 || chunks == 0, LADLE_ERR_ARG, "%d chunks per worker", chunks);
        style = LADLE_PIPE_1F1B; /* one chunk per worker is plain 1F1B */
    }
    if (style == LADLE_PIPE_ZBV)
        LADLE_CALL(alloc_v(stages, chunks, m, &s));
    else
        LADLE_CALL(ladle__pipe_alloc(workers, stages, replicas, NULL, m, &s));
    if (style == LADLE_PIPE_ZBV)
        LADLE_CALL(ladle__pipe_gen_zbv(s));
    else if (style == LADLE_PIPE_GPIPE)
        LADLE_CALL(gen_gpipe(s));
    else if (style == LADLE_PIPE_1F1B)
        LADLE_CALL(gen_1f1b(s));
    else if (style == LADLE_PIPE_INTERLEAVED)
        LADLE_CALL(gen_interleaved(s, chunks));
    else
        LADLE_CALL(gen_listed(s, costs, style == LADLE_PIPE_ZBH1));
    LADLE_CALL(ladle_pipe_schedule_add_comms(s));
    *out = s;
    s = NULL;
fail:
    ladle_pipe_schedule_destroy(&s);
    return st;
}
