/* The schedule validator: per-action rules, completeness, and a run of all
 * workers that finds deadlocks, before any message is sent. Errors come
 * with the worker x step grid and the failing action marked. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipe.h"

typedef struct checker {
    const ladle_pipe_schedule *s;
    int *where, *at;    /* per key: the worker and step of the action, or -1 */
    int *held;          /* per (worker, stage): the replica it holds, or -1 */
    int *local_count;   /* per (worker, stage, kind REDUCE/STEP) */
    int bad_worker, bad_step;
    char why[512];
} checker;

static int fail_at(checker *c, int w, int i, const char *fmt, ...) LADLE_PRINTF(4, 5);

static int fail_at(checker *c, int w, int i, const char *fmt, ...)
{
    if (c->bad_worker >= 0)
        return 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    c->bad_worker = w;
    c->bad_step = i;
    return 0;
}

static ladle_pipe_action mk(ladle_pipe_kind kind, int stage, int mb)
{
    ladle_pipe_action a = {kind, stage, mb};
    return a;
}

/* 1 when `a` ran on worker w before the current step (the table is filled
 * in order). */
static int seen(const checker *c, int w, ladle_pipe_action a)
{
    return c->where[ladle__pipe_key(c->s, a)] == w;
}

/* 1 when action kind at stage j of microbatch k needs a message (its
 * neighbour stage runs elsewhere). */
static int needs_message(const ladle_pipe_schedule *s, ladle_pipe_kind kind, int j, int k)
{
    int next = kind == LADLE_PIPE_SEND_F || kind == LADLE_PIPE_RECV_B;
    int other = next ? j + 1 : j - 1;
    if (other < 0 || other >= s->stages)
        return 0;
    return ladle__pipe_owner(s, other, k) != ladle__pipe_owner(s, j, k);
}

/* The rules of an action of a whole stage (a reduce or a step, t its
 * name): once per worker, on a worker holding the stage, after all its
 * weight gradients (and a step of a replicated stage after its reduce). */
static int check_stage_action(checker *c, int w, int i, ladle_pipe_action a, const char *t)
{
    const ladle_pipe_schedule *s = c->s;
    char u[48];
    int j = a.stage;
    int q = c->held[w * s->stages + j];
    if (q < 0)
        return fail_at(c, w, i, "%s on worker %d, which holds no replica of stage %d", t, w, j);
    if (++c->local_count[(w * s->stages + j) * 2 + (a.kind == LADLE_PIPE_STEP)] > 1)
        return fail_at(c, w, i, "a second %s on worker %d", t, w);
    if (a.kind == LADLE_PIPE_REDUCE && s->replicas[j] == 1)
        return fail_at(c, w, i, "%s: stage %d has one replica, nothing to reduce", t, j);
    for (int mb = q; mb < s->m; mb += s->replicas[j])
        if (!seen(c, w, mk(LADLE_PIPE_W, j, mb))) {
            ladle__pipe_format(u, sizeof u, mk(LADLE_PIPE_W, j, mb));
            return fail_at(c, w, i, "%s before %s: the gradients are not complete", t, u);
        }
    if (a.kind == LADLE_PIPE_STEP && s->replicas[j] > 1 &&
        c->local_count[(w * s->stages + j) * 2] == 0)
        return fail_at(c, w, i, "%s before %dREDUCE: replicas would step apart", t, j);
    return 1;
}

/* The actions that must come before a (of a microbatch) on its worker,
 * into need; how many. */
static int prerequisites(const ladle_pipe_schedule *s, ladle_pipe_action a,
                         ladle_pipe_action need[2])
{
    int j = a.stage, k = a.mb;
    int nneed = 0;
    switch (a.kind) {
    case LADLE_PIPE_F:
        if (j > 0)
            need[nneed++] = needs_message(s, LADLE_PIPE_RECV_F, j, k)
                                ? mk(LADLE_PIPE_RECV_F, j, k)
                                : mk(LADLE_PIPE_F, j - 1, k);
        break;
    case LADLE_PIPE_B:
        need[nneed++] = mk(LADLE_PIPE_F, j, k);
        if (j < s->stages - 1)
            need[nneed++] = needs_message(s, LADLE_PIPE_RECV_B, j, k)
                                ? mk(LADLE_PIPE_RECV_B, j, k)
                                : mk(LADLE_PIPE_B, j + 1, k);
        break;
    case LADLE_PIPE_W:
    case LADLE_PIPE_SEND_B:
        need[nneed++] = mk(LADLE_PIPE_B, j, k);
        break;
    case LADLE_PIPE_SEND_F:
        need[nneed++] = mk(LADLE_PIPE_F, j, k);
        break;
    default:
        break;
    }
    return nneed;
}

/* The rules one action must satisfy where it stands. */
static int check_action(checker *c, int w, int i, ladle_pipe_action a)
{
    const ladle_pipe_schedule *s = c->s;
    char t[48], u[48];
    int j = a.stage, k = a.mb;
    ladle__pipe_format(t, sizeof t, a);
    if (!ladle__pipe_has_mb(a.kind))
        return check_stage_action(c, w, i, a, t);
    int64_t key = ladle__pipe_key(s, a);
    if (c->where[key] >= 0)
        return fail_at(c, w, i, "a second %s (the first is at worker %d, step %d)", t,
                       c->where[key], c->at[key]);
    int owner = ladle__pipe_owner(s, j, k);
    if (owner != w)
        return fail_at(c, w, i,
                       "%s on worker %d: microbatch %d of stage %d goes to replica %d, on worker %d",
                       t, w, k, j, k % s->replicas[j], owner);
    if (!ladle__pipe_is_compute(a.kind) && !needs_message(s, a.kind, j, k))
        return fail_at(c, w, i, "%s moves nothing: %s", t,
                       (a.kind == LADLE_PIPE_SEND_F || a.kind == LADLE_PIPE_RECV_B) &&
                               j == s->stages - 1
                           ? "it is the last stage"
                       : (a.kind == LADLE_PIPE_RECV_F || a.kind == LADLE_PIPE_SEND_B) && j == 0
                           ? "it is the first stage"
                           : "the neighbouring stage runs on this worker");
    ladle_pipe_action need[2];
    int nneed = prerequisites(s, a, need);
    for (int n = 0; n < nneed; n++)
        if (!seen(c, w, need[n])) {
            ladle__pipe_format(u, sizeof u, need[n]);
            return fail_at(c, w, i, "%s comes before %s on worker %d", t, u, w);
        }
    c->where[key] = w;
    c->at[key] = i;
    return 1;
}

/* Every action that must exist does. */
static void check_complete(checker *c)
{
    const ladle_pipe_schedule *s = c->s;
    char t[48];
    for (int j = 0; j < s->stages && c->bad_worker < 0; j++)
        for (int k = 0; k < s->m && c->bad_worker < 0; k++)
            for (int kind = LADLE_PIPE_F; kind <= LADLE_PIPE_RECV_B; kind++) {
                ladle_pipe_action a = mk(kind, j, k);
                if (!ladle__pipe_is_compute(kind) && !needs_message(s, kind, j, k))
                    continue;
                if (c->where[ladle__pipe_key(s, a)] >= 0)
                    continue;
                int w = ladle__pipe_owner(s, j, k);
                ladle__pipe_format(t, sizeof t, a);
                fail_at(c, w, s->len[w], "%s is missing on worker %d", t, w);
                break;
            }
    for (int j = 0; j < s->stages && c->bad_worker < 0; j++)
        for (int q = 0; q < s->replicas[j]; q++) {
            int w = s->placement[s->rep_first[j] + q];
            int *cnt = &c->local_count[(w * s->stages + j) * 2];
            if (s->replicas[j] > 1 && cnt[0] == 0)
                fail_at(c, w, s->len[w], "%dREDUCE is missing on worker %d", j, w);
            else if (cnt[1] == 0)
                fail_at(c, w, s->len[w], "%dSTEP is missing on worker %d", j, w);
        }
}

/* Run every worker: sends never wait, a receive waits for its send, a
 * REDUCE for every replica of its stage to reach it. */
static void check_progress(checker *c, int *pc)
{
    const ladle_pipe_schedule *s = c->s;
    char *done = ladle__calloc((size_t)ladle__pipe_keys(s), 1);
    if (done == NULL) {
        fail_at(c, 0, 0, "out of memory");
        return;
    }
    for (int moved = 1; moved;) {
        moved = 0;
        for (int w = 0; w < s->workers; w++)
            while (pc[w] < s->len[w]) {
                ladle_pipe_action a = s->acts[w][pc[w]];
                if (a.kind == LADLE_PIPE_RECV_F || a.kind == LADLE_PIPE_RECV_B) {
                    if (!done[ladle__pipe_key(s, ladle__pipe_matching_send(a))])
                        break;
                } else if (a.kind == LADLE_PIPE_REDUCE) {
                    int all = 1;
                    for (int q = 0; q < s->replicas[a.stage] && all; q++) {
                        int v = s->placement[s->rep_first[a.stage] + q];
                        all = pc[v] < s->len[v] && s->acts[v][pc[v]].kind == LADLE_PIPE_REDUCE &&
                              s->acts[v][pc[v]].stage == a.stage;
                    }
                    if (!all)
                        break;
                    for (int q = 0; q < s->replicas[a.stage]; q++) {
                        int v = s->placement[s->rep_first[a.stage] + q];
                        if (v != w)
                            pc[v]++;
                    }
                }
                done[ladle__pipe_key(s, a)] = 1;
                pc[w]++;
                moved = 1;
            }
    }
    for (int w = 0; w < s->workers; w++)
        if (pc[w] < s->len[w]) {
            char t[48], u[48];
            ladle_pipe_action a = s->acts[w][pc[w]];
            ladle__pipe_format(t, sizeof t, a);
            if (a.kind == LADLE_PIPE_REDUCE)
                fail_at(c, w, pc[w], "deadlock: worker %d waits at %s for the other replicas", w,
                        t);
            else {
                ladle_pipe_action snd = ladle__pipe_matching_send(a);
                int v = ladle__pipe_owner(s, snd.stage, snd.mb);
                char x[48] = "its end";
                ladle__pipe_format(u, sizeof u, snd);
                if (pc[v] < s->len[v])
                    ladle__pipe_format(x, sizeof x, s->acts[v][pc[v]]);
                fail_at(c, w, pc[w],
                        "deadlock: worker %d waits at %s for %s from worker %d, which is stuck "
                        "at step %d (%s)",
                        w, t, u, v, pc[v], x);
            }
            break;
        }
    ladle__free(done);
}

/* The rank x step grid around the error, the failing action in brackets. */
static char *grid(const checker *c, const char *head)
{
    const ladle_pipe_schedule *s = c->s;
    int lo = 0, hi = 0, len = 0;
    for (int w = 0; w < s->workers; w++)
        len = s->len[w] > len ? s->len[w] : len;
    int center = c->bad_worker >= 0 ? c->bad_step : 0;
    lo = center - 6 > 0 ? center - 6 : 0;
    hi = lo + 13 < len + 1 ? lo + 13 : len + 1;
    size_t cap = strlen(head) + 64 + (size_t)(s->workers + 1) * (size_t)(hi - lo + 2) * 16;
    char *out = ladle__calloc(cap, 1), t[48];
    if (out == NULL)
        return NULL;
    size_t n = (size_t)snprintf(out, cap, "%s\n%-9s", head, "step");
    for (int i = lo; i < hi; i++)
        n += (size_t)snprintf(out + n, cap - n, " %-11d", i);
    for (int w = 0; w < s->workers; w++) {
        n += (size_t)snprintf(out + n, cap - n, "\nworker %-2d", w);
        for (int i = lo; i < hi; i++) {
            int mark = w == c->bad_worker && i == c->bad_step;
            if (i < s->len[w])
                ladle__pipe_format(t, sizeof t, s->acts[w][i]);
            else
                snprintf(t, sizeof t, "%s", mark ? "(end)" : "");
            char cell[64];
            snprintf(cell, sizeof cell, mark ? "[%s]" : "%s", t);
            n += (size_t)snprintf(out + n, cap - n, " %-11s", cell);
        }
    }
    snprintf(out + n, cap - n, "\n");
    return out;
}

ladle_status ladle_pipe_schedule_validate(const ladle_pipe_schedule *s,
                                          ladle_pipe_report *out)
{
    ladle_status st = LADLE_OK;
    checker c;
    int *pc = NULL;
    ladle_pipe_report rep, *r = &rep; /* *out is written only on success */
    memset(&c, 0, sizeof c);
    memset(&rep, 0, sizeof rep);
    LADLE_NOT_NULL(s);
    LADLE_NOT_NULL(out);
    c.s = s;
    c.bad_worker = -1;
    size_t keys = (size_t)ladle__pipe_keys(s), ws = (size_t)s->workers * (size_t)s->stages;
    c.where = ladle__calloc(keys, sizeof(int));
    c.at = ladle__calloc(keys, sizeof(int));
    c.held = ladle__calloc(ws, sizeof(int));
    c.local_count = ladle__calloc(2 * ws, sizeof(int));
    pc = ladle__calloc((size_t)s->workers, sizeof(int));
    r->peak_stash = ladle__calloc((size_t)s->workers, sizeof(int));
    LADLE_CHECK(c.where && c.at && c.held && c.local_count && pc && r->peak_stash,
                LADLE_ERR_ALLOC, "out of memory");
    memset(c.where, -1, keys * sizeof(int));
    memset(c.held, -1, ws * sizeof(int));
    for (int j = 0; j < s->stages; j++)
        for (int q = 0; q < s->replicas[j]; q++)
            c.held[s->placement[s->rep_first[j] + q] * s->stages + j] = q;
    for (int w = 0; w < s->workers; w++) {
        int stash = 0;
        for (int i = 0; i < s->len[w] && c.bad_worker < 0; i++) {
            ladle_pipe_action a = s->acts[w][i];
            check_action(&c, w, i, a);
            stash += (a.kind == LADLE_PIPE_F) - (a.kind == LADLE_PIPE_W);
            r->peak_stash[w] = stash > r->peak_stash[w] ? stash : r->peak_stash[w];
        }
        r->peak_stash_max = r->peak_stash[w] > r->peak_stash_max ? r->peak_stash[w]
                                                                 : r->peak_stash_max;
    }
    if (c.bad_worker < 0)
        check_complete(&c);
    if (c.bad_worker < 0)
        check_progress(&c, pc);
    r->ok = c.bad_worker < 0;
    r->worker = c.bad_worker;
    r->step = c.bad_worker >= 0 ? c.bad_step : -1;
    char head[640];
    if (r->ok)
        snprintf(head, sizeof head, "valid: %d workers, %d stages, %d microbatches", s->workers,
                 s->stages, s->m);
    else
        snprintf(head, sizeof head, "invalid schedule: worker %d, step %d: %s", c.bad_worker,
                 c.bad_step, c.why);
    r->message = grid(&c, head);
    LADLE_CHECK(r->message != NULL, LADLE_ERR_ALLOC, "out of memory");
    *out = rep;
    memset(&rep, 0, sizeof rep);
fail:
    ladle_pipe_report_destroy(&rep);
    ladle__free(c.where), ladle__free(c.at), ladle__free(c.held), ladle__free(c.local_count);
    ladle__free(pc);
    return st;
}

ladle_status ladle_pipe_report_destroy(ladle_pipe_report *r)
{
    if (r == NULL)
        return LADLE_OK;
    ladle__free(r->peak_stash);
    ladle__free(r->message);
    memset(r, 0, sizeof *r);
    return LADLE_OK;
}
