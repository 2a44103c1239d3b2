/*
 * Pipeline schedules: the private structure behind ladle_pipe_schedule and
 * the helpers its files share (see ladle/pipeline.h).
 */
#ifndef LADLE_PIPE_H
#define LADLE_PIPE_H

#include "src/core/internal.h"
#include "ladle/pipeline.h"

struct ladle_pipe_schedule {
    int workers, stages, m;
    int *replicas;  /* r_j */
    int *rep_first; /* stage j's replicas are placement[rep_first[j] ..] */
    int *placement; /* the worker of each (stage, replica) */
    int *len, *cap; /* per worker */
    ladle_pipe_action **acts;
};

/* Bounds on a schedule's shape: its tables have stages x (m + 1) and
 * workers x stages cells, and one worker's list at most MAX_ACTIONS
 * entries; below them no index of the validator, simulator or generators
 * (int arithmetic) can overflow. */
#define LADLE_PIPE_MAX_CELLS (1 << 24)
#define LADLE_PIPE_MAX_ACTIONS (1 << 26)

/* The worker that runs (stage, mb); -1 out of range. */
static inline int ladle__pipe_owner(const ladle_pipe_schedule *s, int stage, int mb)
{
    if (stage < 0 || stage >= s->stages || mb < 0)
        return -1;
    return s->placement[s->rep_first[stage] + mb % s->replicas[stage]];
}

/* 1 for F, B and W. */
static inline int ladle__pipe_is_compute(ladle_pipe_kind kind)
{
    return kind == LADLE_PIPE_F || kind == LADLE_PIPE_B || kind == LADLE_PIPE_W;
}

/* 1 for the kinds that name a microbatch. */
static inline int ladle__pipe_has_mb(ladle_pipe_kind kind)
{
    return kind >= LADLE_PIPE_F && kind <= LADLE_PIPE_RECV_B;
}

/* Append a to one worker's list (its actions, length and capacity),
 * growing the list; out of memory is raised for func. Local. */
ladle_status ladle__pipe_push(ladle_pipe_action **acts, int *len, int *cap,
                              ladle_pipe_action a, const char *func);

/* The action's text ("2SEND_F3") into buf. */
void ladle__pipe_format(char *buf, size_t size, ladle_pipe_action a);

/* The sending action a receive waits for, and where that runs: for
 * RECV_F(j,k) it is SEND_F(j-1,k), for RECV_B(j,k) SEND_B(j+1,k). */
ladle_pipe_action ladle__pipe_matching_send(ladle_pipe_action recv);

/* Every cost of S stages finite and >= 0 (costs may be NULL). */
ladle_status ladle__pipe_check_costs(const ladle_pipe_costs *costs, int stages);
/* The same for n per-stage arrays v[i] (NULL: skipped), named names[i] in
 * the message. */
ladle_status ladle__pipe_check_values(int n, const double *const *v,
                                      const char *const *names, int stages);

/* A schedule of the same shape with empty lists. */
ladle_status ladle__pipe_alloc(int workers, int stages, const int *replicas,
                               const int *placement, int m, ladle_pipe_schedule **out);

/* The zero-bubble V order (pipe_zbv.c) into s, a schedule of 2W stages on
 * W workers placed by ladle__pipe_v_placement, with empty lists. */
ladle_status ladle__pipe_gen_zbv(ladle_pipe_schedule *s);
/* The V: stage j on worker j for j < W, on worker 2W-1-j after (2W entries). */
void ladle__pipe_v_placement(int workers, int *placement);

/* Index of (kind, stage, mb) in a table of 9 * stages * (m + 1) entries. */
static inline int64_t ladle__pipe_key(const ladle_pipe_schedule *s, ladle_pipe_action a)
{
    return ((int64_t)a.kind * s->stages + a.stage) * (s->m + 1) + (a.mb + 1);
}

static inline int64_t ladle__pipe_keys(const ladle_pipe_schedule *s)
{
    return (int64_t)9 * s->stages * (s->m + 1);
}

#endif /* LADLE_PIPE_H */
