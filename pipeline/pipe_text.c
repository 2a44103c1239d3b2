/* Reading schedules from their text form: one line per worker, actions such
 * as "2F0", "1SEND_B3", "0REDUCE" separated by spaces (see ladle/pipeline.h). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipe.h"

typedef struct parsed {
    int workers, cap_workers;
    int *len, *cap;
    ladle_pipe_action **acts;
    int stages, m;       /* from the header, 0 when absent */
    int nrep, nplace;
    int rep[LADLE_PIPE_MAX_STAGES * 4], place[1024];
} parsed;

static void free_parsed(parsed *p)
{
    for (int w = 0; w < p->workers; w++)
        ladle__free(p->acts[w]);
    ladle__free(p->acts);
    ladle__free(p->len);
    ladle__free(p->cap);
}

/* One token into an action; 0 when it is not one. */
static int parse_action(const char *t, ladle_pipe_action *a)
{
    char *end;
    if (!isdigit((unsigned char)*t))
        return 0;
    long stage = strtol(t, &end, 10);
    if (stage > 1 << 16)
        return 0;
    for (int kind = LADLE_PIPE_STEP; kind >= LADLE_PIPE_F; kind--) {
        const char *name = ladle_pipe_kind_name(kind);
        size_t n = strlen(name);
        if (strncmp(end, name, n) != 0)
            continue;
        const char *rest = end + n;
        a->kind = kind;
        a->stage = (int)stage;
        if (!ladle__pipe_has_mb(kind)) {
            a->mb = -1;
            return *rest == '\0';
        }
        if (!isdigit((unsigned char)*rest))
            return 0;
        char *stop;
        long mb = strtol(rest, &stop, 10);
        if (*stop != '\0' || mb > 1 << 20) /* an overflow is LONG_MAX: refused too */
            return 0;
        a->mb = (int)mb;
        return 1;
    }
    return 0;
}

/* A header number: the whole token a decimal integer in [lo, hi]. */
static int parse_count(const char *t, long lo, long hi, int *out)
{
    char *end;
    if (!isdigit((unsigned char)*t))
        return 0;
    errno = 0;
    long v = strtol(t, &end, 10);
    if (*end != '\0' || errno == ERANGE || v < lo || v > hi)
        return 0;
    *out = (int)v;
    return 1;
}

/* "1,2,1" into list; the count, or -1 when malformed or too long. */
static int parse_list(const char *t, int *list, int cap)
{
    int n = 0;
    while (*t) {
        char *end;
        long v = strtol(t, &end, 10);
        if (end == t || n == cap || v < 0 || v > 1 << 16)
            return -1;
        list[n++] = (int)v;
        t = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0')
            return -1;
    }
    return n;
}

static ladle_status parse_header(parsed *p, char *line, int lineno)
{
    ladle_status st = LADLE_OK;
    char *save = NULL, *key = strtok_r(line, " \t", &save); /* "#" */
    key = strtok_r(NULL, " \t", &save);                    /* "ladle-pipeline" */
    while ((key = strtok_r(NULL, " \t", &save)) != NULL) {
        char *val = strtok_r(NULL, " \t", &save);
        LADLE_CHECK(val != NULL, LADLE_ERR_IO, "line %d: '%s' has no value", lineno, key);
        int stage_cap = (int)(sizeof p->rep / sizeof p->rep[0]);
        if (strcmp(key, "stages") == 0)
            LADLE_CHECK(parse_count(val, 1, stage_cap, &p->stages), LADLE_ERR_IO,
                        "line %d: stages '%s' is not a whole number from 1 to %d", lineno,
                        val, stage_cap);
        else if (strcmp(key, "microbatches") == 0)
            LADLE_CHECK(parse_count(val, 1, 1 << 20, &p->m), LADLE_ERR_IO,
                        "line %d: microbatches '%s' is not a whole number from 1 to %d",
                        lineno, val, 1 << 20);
        else if (strcmp(key, "replicas") == 0)
            p->nrep = parse_list(val, p->rep, (int)(sizeof p->rep / sizeof p->rep[0]));
        else if (strcmp(key, "placement") == 0)
            p->nplace = parse_list(val, p->place, (int)(sizeof p->place / sizeof p->place[0]));
        else
            LADLE_CHECK(0, LADLE_ERR_IO, "line %d: unknown header key '%s'", lineno, key);
        LADLE_CHECK(p->nrep >= 0 && p->nplace >= 0, LADLE_ERR_IO,
                    "line %d: bad list '%s' for %s", lineno, val, key);
    }
fail:
    return st;
}

static ladle_status add_worker(parsed *p)
{
    ladle_status st = LADLE_OK;
    if (p->workers == p->cap_workers) {
        int cap = p->cap_workers ? 2 * p->cap_workers : 16;
        int *len = ladle__calloc((size_t)cap, sizeof(int)), *c = ladle__calloc((size_t)cap, sizeof(int));
        ladle_pipe_action **acts = ladle__calloc((size_t)cap, sizeof *acts);
        if (len && c && acts && p->workers) {
            memcpy(len, p->len, sizeof(int) * (size_t)p->workers);
            memcpy(c, p->cap, sizeof(int) * (size_t)p->workers);
            memcpy(acts, p->acts, sizeof *acts * (size_t)p->workers);
        }
        if (!(len && c && acts)) {
            ladle__free(len), ladle__free(c), ladle__free(acts);
            LADLE_CHECK(0, LADLE_ERR_ALLOC, "out of memory");
        }
        ladle__free(p->len), ladle__free(p->cap), ladle__free(p->acts);
        p->len = len, p->cap = c, p->acts = acts, p->cap_workers = cap;
    }
    p->workers++;
fail:
    return st;
}

static ladle_status read_lines(parsed *p, char *text)
{
    ladle_status st = LADLE_OK;
    char *save = NULL;
    int lineno = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        if (strncmp(line, "# ladle-pipeline", 16) == 0) {
            LADLE_CALL(parse_header(p, line, lineno));
            continue;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *tsave = NULL, *tok = strtok_r(line, " \t\r,", &tsave);
        if (tok == NULL)
            continue;
        LADLE_CALL(add_worker(p));
        for (; tok; tok = strtok_r(NULL, " \t\r,", &tsave)) {
            ladle_pipe_action a;
            LADLE_CHECK(parse_action(tok, &a), LADLE_ERR_IO,
                        "line %d: '%s' is no action (such as 0F1, 2SEND_B0, 1REDUCE)", lineno,
                        tok);
            int w = p->workers - 1;
            LADLE_CALL(ladle__pipe_push(&p->acts[w], &p->len[w], &p->cap[w], a, __func__));
        }
    }
    LADLE_CHECK(p->workers > 0, LADLE_ERR_IO, "the schedule has no actions");
fail:
    return st;
}

/* Without a header: the stages and microbatches the actions name, and as
 * replicas of stage j the workers that compute it, in worker order. */
static ladle_status infer_shape(parsed *p)
{
    ladle_status st = LADLE_OK;
    int S = 0, m = 0;
    for (int w = 0; w < p->workers; w++)
        for (int i = 0; i < p->len[w]; i++) {
            S = p->acts[w][i].stage + 1 > S ? p->acts[w][i].stage + 1 : S;
            m = p->acts[w][i].mb + 1 > m ? p->acts[w][i].mb + 1 : m;
        }
    if (p->stages == 0)
        p->stages = S;
    if (p->m == 0)
        p->m = m;
    LADLE_CHECK(p->stages <= (int)(sizeof p->rep / sizeof p->rep[0]), LADLE_ERR_IO,
                "%d stages: a schedule file may name at most %d", p->stages,
                (int)(sizeof p->rep / sizeof p->rep[0]));
    if (p->nrep == 0 && p->nplace == 0) {
        for (int j = 0; j < p->stages; j++) {
            p->rep[j] = 0;
            for (int w = 0; w < p->workers; w++) {
                int holds = 0;
                for (int i = 0; i < p->len[w] && !holds; i++)
                    holds = p->acts[w][i].stage == j && ladle__pipe_is_compute(p->acts[w][i].kind);
                if (!holds)
                    continue;
                LADLE_CHECK(p->nplace < (int)(sizeof p->place / sizeof p->place[0]),
                            LADLE_ERR_IO, "too many stage replicas");
                p->place[p->nplace++] = w;
                p->rep[j]++;
            }
            LADLE_CHECK(p->rep[j] > 0, LADLE_ERR_IO, "no worker computes stage %d", j);
        }
        p->nrep = p->stages;
    }
    LADLE_CHECK(p->nrep == p->stages, LADLE_ERR_IO, "%d replica counts for %d stages", p->nrep,
                p->stages);
    int total = 0;
    for (int j = 0; j < p->stages; j++)
        total += p->rep[j];
    LADLE_CHECK(p->nplace == 0 || p->nplace == total, LADLE_ERR_IO,
                "%d placements for %d stage replicas", p->nplace, total);
fail:
    return st;
}

ladle_status ladle_pipe_schedule_parse(const char *text, ladle_pipe_schedule **out)
{
    ladle_status st = LADLE_OK;
    parsed p;
    ladle_pipe_schedule *s = NULL;
    char *copy = NULL;
    memset(&p, 0, sizeof p);
    LADLE_NOT_NULL(text);
    LADLE_NOT_NULL(out);
    copy = ladle__calloc(strlen(text) + 1, 1);
    LADLE_CHECK(copy != NULL, LADLE_ERR_ALLOC, "out of memory");
    memcpy(copy, text, strlen(text));
    LADLE_CALL(read_lines(&p, copy));
    LADLE_CALL(infer_shape(&p));
    LADLE_CALL(ladle__pipe_alloc(p.workers, p.stages, p.rep, p.nplace ? p.place : NULL, p.m, &s));
    for (int w = 0; w < p.workers; w++)
        for (int i = 0; i < p.len[w]; i++)
            LADLE_CALL(ladle_pipe_schedule_append(s, w, p.acts[w][i]));
    LADLE_CALL(ladle_pipe_schedule_add_comms(s));
    *out = s;
    s = NULL;
fail:
    ladle_pipe_schedule_destroy(&s);
    free_parsed(&p);
    ladle__free(copy);
    return st;
}

ladle_status ladle_pipe_schedule_load(const char *path, ladle_pipe_schedule **out)
{
    ladle_status st = LADLE_OK;
    char *text = NULL;
    size_t size = 0;
    LADLE_NOT_NULL(path);
    LADLE_NOT_NULL(out);
    LADLE_CALL(ladle__read_file(__func__, path, (int64_t)1 << 30, &text, &size));
    LADLE_CHECK(memchr(text, '\0', size) == NULL, LADLE_ERR_IO, "%s is not a text file",
                path);
    LADLE_CALL(ladle_pipe_schedule_parse(text, out));
fail:
    ladle__free(text);
    return st;
}
