/* Pipeline schedules as data: construction, the sends and receives a
 * compute order implies, and the text form (see ladle/pipeline.h). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipe.h"
#include "train/grow.h"

static const char *const kind_names[] = {"F",      "B",      "W",      "SEND_F", "RECV_F",
                                         "SEND_B", "RECV_B", "REDUCE", "STEP"};
static const char *const style_names[] = {"gpipe", "1f1b",   "interleaved",
                                          "zbh1",  "hybrid", "zbv"};

const char *ladle_pipe_kind_name(ladle_pipe_kind kind)
{
    return kind >= LADLE_PIPE_F && kind <= LADLE_PIPE_STEP ? kind_names[kind] : "?";
}

const char *ladle_pipe_style_name(ladle_pipe_style style)
{
    return style >= LADLE_PIPE_GPIPE && style <= LADLE_PIPE_ZBV ? style_names[style] : "?";
}

ladle_status ladle_pipe_style_parse(const char *name, ladle_pipe_style *style)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(name);
    LADLE_NOT_NULL(style);
    for (int i = LADLE_PIPE_GPIPE; i <= LADLE_PIPE_ZBV; i++)
        if (strcmp(name, style_names[i]) == 0) {
            *style = (ladle_pipe_style)i;
            return LADLE_OK;
        }
    LADLE_CHECK(
        0, LADLE_ERR_ARG,
        "'%s' is not a schedule style (gpipe, 1f1b, interleaved, zbh1, hybrid, zbv)", name);
fail:
    return st;
}

void ladle__pipe_format(char *buf, size_t size, ladle_pipe_action a)
{
    if (ladle__pipe_has_mb(a.kind))
        snprintf(buf, size, "%d%s%d", a.stage, ladle_pipe_kind_name(a.kind), a.mb);
    else
        snprintf(buf, size, "%d%s", a.stage, ladle_pipe_kind_name(a.kind));
}

ladle_pipe_action ladle__pipe_matching_send(ladle_pipe_action recv)
{
    ladle_pipe_action s = recv;
    if (recv.kind == LADLE_PIPE_RECV_F) {
        s.kind = LADLE_PIPE_SEND_F;
        s.stage = recv.stage - 1;
    } else {
        s.kind = LADLE_PIPE_SEND_B;
        s.stage = recv.stage + 1;
    }
    return s;
}

static void free_sched(ladle_pipe_schedule *s)
{
    if (s == NULL)
        return;
    for (int w = 0; s->acts != NULL && w < s->workers; w++)
        ladle__free(s->acts[w]);
    ladle__free(s->acts);
    ladle__free(s->len);
    ladle__free(s->cap);
    ladle__free(s->replicas);
    ladle__free(s->rep_first);
    ladle__free(s->placement);
    ladle__free(s);
}

ladle_status ladle__pipe_alloc(int workers, int stages, const int *replicas,
                               const int *placement, int m, ladle_pipe_schedule **out)
{
    ladle_status st = LADLE_OK;
    ladle_pipe_schedule *s = NULL;
    LADLE_NOT_NULL(out);
    LADLE_CHECK(workers >= 1 && workers <= 1 << 16, LADLE_ERR_ARG,
                "%d workers (1 to 65536 are allowed)", workers);
    LADLE_CHECK(stages >= 1 && stages <= 1 << 16, LADLE_ERR_ARG,
                "%d stages (1 to 65536 are allowed)", stages);
    LADLE_CHECK(m >= 1 && m <= 1 << 20, LADLE_ERR_ARG, "%d microbatches (1 to 2^20 allowed)", m);
    LADLE_CHECK((int64_t)stages * (m + 1) <= LADLE_PIPE_MAX_CELLS &&
                    (int64_t)workers * stages <= LADLE_PIPE_MAX_CELLS,
                LADLE_ERR_ARG,
                "%d stages, %d microbatches and %d workers are too many: stages x "
                "(microbatches + 1) and workers x stages may not pass 2^24",
                stages, m, workers);
    int64_t total = 0; /* at most stages x workers: within the bound above */
    for (int j = 0; j < stages; j++) {
        int r = replicas ? replicas[j] : 1;
        LADLE_CHECK(r >= 1 && r <= workers, LADLE_ERR_ARG,
                    "stage %d has %d replicas (1 to %d workers)", j, r, workers);
        total += r;
    }
    s = ladle__calloc(1, sizeof *s);
    LADLE_CHECK(s != NULL, LADLE_ERR_ALLOC, "out of memory");
    s->workers = workers;
    s->stages = stages;
    s->m = m;
    s->replicas = ladle__calloc((size_t)stages, sizeof(int));
    s->rep_first = ladle__calloc((size_t)stages + 1, sizeof(int));
    s->placement = ladle__calloc((size_t)total, sizeof(int));
    s->len = ladle__calloc((size_t)workers, sizeof(int));
    s->cap = ladle__calloc((size_t)workers, sizeof(int));
    s->acts = ladle__calloc((size_t)workers, sizeof(ladle_pipe_action *));
    LADLE_CHECK(s->replicas && s->rep_first && s->placement && s->len && s->cap && s->acts,
                LADLE_ERR_ALLOC, "out of memory");
    for (int j = 0, at = 0; j < stages; j++) {
        s->replicas[j] = replicas ? replicas[j] : 1;
        s->rep_first[j] = at;
        for (int q = 0; q < s->replicas[j]; q++, at++) {
            int w = placement ? placement[at] : (replicas ? at : j) % workers;
            LADLE_CHECK(w >= 0 && w < workers, LADLE_ERR_ARG,
                        "replica %d of stage %d is placed on worker %d of %d", q, j, w, workers);
            for (int e = s->rep_first[j]; e < at; e++)
                LADLE_CHECK(s->placement[e] != w, LADLE_ERR_ARG,
                            "two replicas of stage %d are placed on worker %d", j, w);
            s->placement[at] = w;
        }
        s->rep_first[j + 1] = at;
    }
    *out = s;
    return LADLE_OK;
fail:
    free_sched(s);
    return st;
}

ladle_status ladle_pipe_schedule_create(int workers, int stages, const int *replicas,
                                        const int *placement, int m,
                                        ladle_pipe_schedule **sched)
{
    return ladle__pipe_alloc(workers, stages, replicas, placement, m, sched);
}

ladle_status ladle_pipe_schedule_destroy(ladle_pipe_schedule **sched)
{
    if (sched == NULL || *sched == NULL)
        return LADLE_OK;
    free_sched(*sched);
    *sched = NULL;
    return LADLE_OK;
}

ladle_status ladle_pipe_schedule_append(ladle_pipe_schedule *s, int worker,
                                        ladle_pipe_action a)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(s);
    LADLE_CHECK(worker >= 0 && worker < s->workers, LADLE_ERR_ARG, "worker %d of %d", worker,
                s->workers);
    LADLE_CHECK(a.kind >= LADLE_PIPE_F && a.kind <= LADLE_PIPE_STEP, LADLE_ERR_ARG,
                "unknown action kind %d", a.kind);
    LADLE_CHECK(a.stage >= 0 && a.stage < s->stages, LADLE_ERR_ARG, "stage %d of %d", a.stage,
                s->stages);
    LADLE_CHECK(ladle__pipe_has_mb(a.kind) ? a.mb >= 0 && a.mb < s->m : a.mb == -1,
                LADLE_ERR_ARG, "%s with microbatch %d (of %d)", ladle_pipe_kind_name(a.kind),
                a.mb, s->m);
    LADLE_CHECK(s->len[worker] < LADLE_PIPE_MAX_ACTIONS, LADLE_ERR_ARG,
                "worker %d already has %d actions (the most a list may hold)", worker,
                s->len[worker]);
    st = ladle__pipe_push(&s->acts[worker], &s->len[worker], &s->cap[worker], a, __func__);
fail:
    return st;
}

ladle_status ladle__pipe_push(ladle_pipe_action **acts, int *len, int *cap,
                              ladle_pipe_action a, const char *func)
{
    ladle_pipe_action *grown =
        ladle__grow_int(*acts, *len, *len + 1, cap, sizeof *grown, 64);
    if (grown == NULL)
        return ladle__raise(LADLE_ERR_ALLOC, func, "out of memory");
    *acts = grown;
    grown[(*len)++] = a;
    return LADLE_OK;
}

/* ---- the sends and receives a compute order implies -------------------- */

/* Replace worker w's list by `list` (n actions), appending one by one. */
static ladle_status refill(ladle_pipe_schedule *s, int w, const ladle_pipe_action *list, int n)
{
    ladle_status st = LADLE_OK;
    s->len[w] = 0;
    for (int i = 0; i < n; i++)
        LADLE_CALL(ladle_pipe_schedule_append(s, w, list[i]));
fail:
    return st;
}

static ladle_pipe_action act(ladle_pipe_kind kind, int stage, int mb)
{
    ladle_pipe_action a = {kind, stage, mb};
    return a;
}

/* The kinds of the messages action a on worker w needs (-1 for none): the
 * receive before it and the send after it, where the neighbouring stage's
 * part of its microbatch runs on another worker. */
static void messages_around(const ladle_pipe_schedule *s, int w, ladle_pipe_action a,
                            int *before, int *after)
{
    int j = a.stage, k = a.mb;
    *before = *after = -1;
    if (a.kind == LADLE_PIPE_F) {
        if (j > 0 && ladle__pipe_owner(s, j - 1, k) != w)
            *before = LADLE_PIPE_RECV_F;
        if (j < s->stages - 1 && ladle__pipe_owner(s, j + 1, k) != w)
            *after = LADLE_PIPE_SEND_F;
    } else if (a.kind == LADLE_PIPE_B) {
        if (j < s->stages - 1 && ladle__pipe_owner(s, j + 1, k) != w)
            *before = LADLE_PIPE_RECV_B;
        if (j > 0 && ladle__pipe_owner(s, j - 1, k) != w)
            *after = LADLE_PIPE_SEND_B;
    }
}

ladle_status ladle_pipe_schedule_add_comms(ladle_pipe_schedule *s)
{
    ladle_status st = LADLE_OK;
    char *have = NULL;
    ladle_pipe_action *list = NULL;
    LADLE_NOT_NULL(s);
    have = ladle__calloc((size_t)ladle__pipe_keys(s), 1);
    LADLE_CHECK(have != NULL, LADLE_ERR_ALLOC, "out of memory");
    for (int w = 0; w < s->workers; w++) {
        int n = s->len[w], at = 0;
        memset(have, 0, (size_t)ladle__pipe_keys(s));
        for (int i = 0; i < n; i++)
            have[ladle__pipe_key(s, s->acts[w][i])] = 1;
        /* every action can gain at most two neighbours; plus REDUCE and STEP */
        list = ladle__calloc((size_t)(3 * n + 2 * s->stages + 1), sizeof *list);
        LADLE_CHECK(list != NULL, LADLE_ERR_ALLOC, "out of memory");
        for (int i = 0; i < n; i++) {
            ladle_pipe_action a = s->acts[w][i], c;
            int j = a.stage, k = a.mb;
            int before, after;
            messages_around(s, w, a, &before, &after);
            c = act(before, j, k);
            if (before >= 0 && !have[ladle__pipe_key(s, c)]) {
                list[at++] = c;
                have[ladle__pipe_key(s, c)] = 1;
            }
            list[at++] = a;
            c = act(after, j, k);
            if (after >= 0 && !have[ladle__pipe_key(s, c)]) {
                list[at++] = c;
                have[ladle__pipe_key(s, c)] = 1;
            }
        }
        /* every stage this worker holds ends with its reduction and step */
        for (int j = 0; j < s->stages; j++) {
            int holds = 0;
            for (int q = 0; q < s->replicas[j]; q++)
                holds |= s->placement[s->rep_first[j] + q] == w;
            if (!holds)
                continue;
            if (s->replicas[j] > 1 && !have[ladle__pipe_key(s, act(LADLE_PIPE_REDUCE, j, -1))])
                list[at++] = act(LADLE_PIPE_REDUCE, j, -1);
            if (!have[ladle__pipe_key(s, act(LADLE_PIPE_STEP, j, -1))])
                list[at++] = act(LADLE_PIPE_STEP, j, -1);
        }
        LADLE_CALL(refill(s, w, list, at));
        ladle__free(list);
        list = NULL;
    }
fail:
    ladle__free(list);
    ladle__free(have);
    return st;
}

/* ---- accessors ---------------------------------------------------------- */

int ladle_pipe_schedule_workers(const ladle_pipe_schedule *s) { return s ? s->workers : 0; }
int ladle_pipe_schedule_stages(const ladle_pipe_schedule *s) { return s ? s->stages : 0; }
int ladle_pipe_schedule_microbatches(const ladle_pipe_schedule *s) { return s ? s->m : 0; }

int ladle_pipe_schedule_replicas(const ladle_pipe_schedule *s, int stage)
{
    return s && stage >= 0 && stage < s->stages ? s->replicas[stage] : 0;
}

int ladle_pipe_schedule_worker(const ladle_pipe_schedule *s, int stage, int replica)
{
    if (s == NULL || stage < 0 || stage >= s->stages || replica < 0 ||
        replica >= s->replicas[stage])
        return -1;
    return s->placement[s->rep_first[stage] + replica];
}

int ladle_pipe_schedule_route(const ladle_pipe_schedule *s, int stage, int mb)
{
    if (s == NULL || stage < 0 || stage >= s->stages || mb < 0 || mb >= s->m)
        return -1;
    return mb % s->replicas[stage];
}

int ladle_pipe_schedule_length(const ladle_pipe_schedule *s, int worker)
{
    return s && worker >= 0 && worker < s->workers ? s->len[worker] : 0;
}

const ladle_pipe_action *ladle_pipe_schedule_actions(const ladle_pipe_schedule *s, int worker)
{
    return s && worker >= 0 && worker < s->workers ? s->acts[worker] : NULL;
}

/* ---- text form ---------------------------------------------------------- */

ladle_status ladle_pipe_schedule_write(const ladle_pipe_schedule *s, FILE *out)
{
    ladle_status st = LADLE_OK;
    char tok[64];
    LADLE_NOT_NULL(s);
    LADLE_NOT_NULL(out);
    fprintf(out, "# ladle-pipeline stages %d microbatches %d replicas ", s->stages, s->m);
    for (int j = 0; j < s->stages; j++)
        fprintf(out, "%s%d", j ? "," : "", s->replicas[j]);
    fprintf(out, " placement ");
    for (int e = 0; e < s->rep_first[s->stages]; e++)
        fprintf(out, "%s%d", e ? "," : "", s->placement[e]);
    fputc('\n', out);
    for (int w = 0; w < s->workers; w++) {
        for (int i = 0; i < s->len[w]; i++) {
            ladle__pipe_format(tok, sizeof tok, s->acts[w][i]);
            fprintf(out, "%s%s", i ? " " : "", tok);
        }
        fputc('\n', out);
    }
    LADLE_CHECK(!ferror(out), LADLE_ERR_IO, "writing the schedule failed");
fail:
    return st;
}
