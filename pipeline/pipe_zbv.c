/* The zero-bubble V schedule (ZB-V; Qi et al., "Zero Bubble Pipeline
 * Parallelism", and its V-shaped follow-up): S = 2W stages, worker i holds
 * chunk "a" (stage i, on the way down the V) and chunk "b" (stage S-1-i, on
 * the way back up), so the forward of a microbatch goes 0, 1, .., W-1 and
 * returns W-1, .., 0, and its backward retraces that. The backward is split
 * into B (the input gradient, on the critical path) and W (the weight
 * gradient, which waits to fill what would otherwise be idle).
 *
 * The order is written out by phases, counted in chunk-sized slots (unit
 * costs, a chunk being half a stage): worker i's first input of chunk b
 * arrives 2(W-i)-1 slots after its first of chunk a, and its first gradient
 * of chunk b 2i slots after that, which fixes the warm-up. In the steady
 * phase each microbatch costs every worker F, B and W on both chunks, and
 * a worker holds at most 2W chunk activations (W microbatches of a whole
 * stage: the peak 1F1B has on its first stage) because each W follows its
 * B before a new forward enters. The cool-down delays the weight
 * gradients so that the input gradients, on which the other workers wait,
 * go first. Every count is clamped to m, and an action is placed only
 * after those it needs on its own worker, so any m gives a valid order. */
#include "pipeline/pipe.h"

enum { CHUNK_A = 0, CHUNK_B = 1 };

/* Short names for the phase tables below; END closes a list of put3. */
static const ladle_pipe_kind F = LADLE_PIPE_F, B = LADLE_PIPE_B, W = LADLE_PIPE_W,
                             END = LADLE_PIPE_STEP;

/* One worker's progress: the next microbatch of F, B and W per chunk. */
typedef struct zbv_worker {
    ladle_pipe_schedule *s;
    int w, m;
    int stage[2];
    int nf[2], nb[2], nw[2];
} zbv_worker;

/* May (kind, chunk) take its next microbatch now? Within m, and after what
 * it needs on this worker: F of b after F of a (the turn of the V), B of b
 * after F of b, B of a after B of b (the gradient comes back through b),
 * W after its B. */
static int can(const zbv_worker *z, ladle_pipe_kind kind, int c)
{
    if (kind == LADLE_PIPE_F)
        return z->nf[c] < z->m && (c == CHUNK_A || z->nf[CHUNK_B] < z->nf[CHUNK_A]);
    if (kind == LADLE_PIPE_B)
        return c == CHUNK_B ? z->nb[c] < z->nf[c] : z->nb[CHUNK_A] < z->nb[CHUNK_B];
    return z->nw[c] < z->nb[c];
}

/* Place (kind, chunk) if it can go now; skipped otherwise (the phase
 * counts assume m is large; the clamp keeps small m valid). */
static ladle_status put(zbv_worker *z, ladle_pipe_kind kind, int c)
{
    if (!can(z, kind, c))
        return LADLE_OK;
    int *next = kind == LADLE_PIPE_F ? z->nf : kind == LADLE_PIPE_B ? z->nb : z->nw;
    ladle_pipe_action a = {kind, z->stage[c], next[c]++};
    return ladle_pipe_schedule_append(z->s, z->w, a);
}

/* Up to three actions in a row, a chunk each (END ends the list early). */
static ladle_status put3(zbv_worker *z, ladle_pipe_kind k0, int c0, ladle_pipe_kind k1,
                         int c1, ladle_pipe_kind k2, int c2)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(put(z, k0, c0));
    if (k1 != END)
        LADLE_CALL(put(z, k1, c1));
    if (k2 != END)
        LADLE_CALL(put(z, k2, c2));
fail:
    return st;
}

/* Warm-up: forwards of a until the first input of b arrives, then a and b
 * alternate until the first gradient of b arrives; from then on each
 * forward of b is followed by its B and W, which keeps the stash at 2W. */
static ladle_status warm_up(zbv_worker *z, int p, int i)
{
    ladle_status st = LADLE_OK;
    for (int r = 0; r < 2 * (p - i) - 1; r++)
        LADLE_CALL(put(z, F, CHUNK_A));
    for (int r = 0; r < i; r++)
        LADLE_CALL(put3(z, F, CHUNK_B, F, CHUNK_A, END, 0));
    for (int r = 0; r < p - i; r++)
        LADLE_CALL(put3(z, F, CHUNK_B, B, CHUNK_B, W, CHUNK_B));
fail:
    return st;
}

/* Steady phase, then cool-down: each microbatch's six actions while
 * forwards remain; then the input gradients first (both chunks), the
 * weight gradients of a in the gaps the later workers leave, and the rest
 * of the weight gradients last. */
static ladle_status steady_cool(zbv_worker *z, int p, int i)
{
    ladle_status st = LADLE_OK;
    while (z->nf[CHUNK_B] < z->m) {
        LADLE_CALL(put3(z, F, CHUNK_A, B, CHUNK_A, W, CHUNK_A));
        LADLE_CALL(put3(z, F, CHUNK_B, B, CHUNK_B, W, CHUNK_B));
    }
    for (int r = 0; r < i; r++)
        LADLE_CALL(put3(z, B, CHUNK_A, B, CHUNK_B, END, 0));
    for (int r = 0; r < p - i; r++)
        LADLE_CALL(put3(z, B, CHUNK_A, W, CHUNK_A, END, 0));
    while (z->nb[CHUNK_A] < z->m) /* what the clamps left (small m) */
        LADLE_CALL(put3(z, B, CHUNK_B, B, CHUNK_A, END, 0));
    while (z->nw[CHUNK_B] < z->m)
        LADLE_CALL(put(z, W, CHUNK_B));
    while (z->nw[CHUNK_A] < z->m)
        LADLE_CALL(put(z, W, CHUNK_A));
fail:
    return st;
}

ladle_status ladle__pipe_gen_zbv(ladle_pipe_schedule *s)
{
    ladle_status st = LADLE_OK;
    int p = s->workers;
    for (int i = 0; i < p; i++) {
        zbv_worker z = {s, i, s->m, {i, 2 * p - 1 - i}, {0, 0}, {0, 0}, {0, 0}};
        LADLE_CALL(warm_up(&z, p, i));
        LADLE_CALL(steady_cool(&z, p, i));
        LADLE_CHECK(z.nw[CHUNK_A] == s->m && z.nw[CHUNK_B] == s->m, LADLE_ERR_INTERNAL,
                    "zbv: worker %d placed %d and %d of %d weight gradients", i,
                    z.nw[CHUNK_A], z.nw[CHUNK_B], s->m);
    }
fail:
    return st;
}

void ladle__pipe_v_placement(int workers, int *placement)
{
    for (int j = 0; j < 2 * workers; j++)
        placement[j] = j < workers ? j : 2 * workers - 1 - j;
}
