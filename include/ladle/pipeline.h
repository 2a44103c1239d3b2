/*
 * ladle/pipeline.h - pipeline schedules as data: generators, a validator,
 * a simulator and a planner.
 *
 * A pipeline splits a network into S stages, stage j a chain of layers. A
 * stage may be replicated r_j >= 1 times (data parallel inside the stage):
 * microbatch k goes to replica (k mod r_j) of stage j, and the backward of k
 * retraces that route. The pipeline runs on W workers (ranks); each stage
 * replica sits on exactly one worker, and a worker may hold several stages
 * (interleaved schedules hold v chunks per worker).
 *
 * A schedule is, for every worker, an ordered list of actions:
 *
 *   F(j,k)       forward of microbatch k through stage j
 *   B(j,k)       backward for the input (dx) of k through j
 *   W(j,k)       backward for the weights (dW += ...) of k through j
 *   SEND_F(j,k)  send j's output of k to the worker of (j+1, k)
 *   RECV_F(j,k)  receive j's input of k from the worker of (j-1, k)
 *   SEND_B(j,k)  send j's input gradient of k to the worker of (j-1, k)
 *   RECV_B(j,k)  receive j's output gradient of k from the worker of (j+1, k)
 *   REDUCE(j)    sum stage j's gradients over its replicas (all of them
 *                take part), then scale by 1/m
 *   STEP(j)      the optimizer step on stage j's parameters
 *
 * Sends never wait (each microbatch has its own buffers); a receive waits
 * for its send. Generated schedules carry their sends and receives, derived
 * from the compute order: a receive just before the compute that needs it,
 * a send just after the compute that produced it.
 *
 * An action prints as stage, kind, microbatch: "2F0", "1SEND_B3",
 * "0REDUCE". The text form of a schedule is one line per worker, the
 * actions separated by spaces; '#' starts a comment, and a header line
 * "# ladle-pipeline stages S microbatches m replicas r0,r1,..." may name
 * what the actions would otherwise imply.
 *
 * Schedules, their validation and simulation, and the planner do not
 * communicate: they are local computations that every rank can do alike.
 * The executor (ladle_pipeline_*) and the profiling pass say over which
 * ranks they are collective.
 */
#ifndef LADLE_PIPELINE_H
#define LADLE_PIPELINE_H

#include <stdio.h>

#include "core.h"
#include "op.h"
#include "optim.h"
#include "partition.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ladle_pipe_kind {
    LADLE_PIPE_F = 0,
    LADLE_PIPE_B = 1,
    LADLE_PIPE_W = 2,
    LADLE_PIPE_SEND_F = 3,
    LADLE_PIPE_RECV_F = 4,
    LADLE_PIPE_SEND_B = 5,
    LADLE_PIPE_RECV_B = 6,
    LADLE_PIPE_REDUCE = 7,
    LADLE_PIPE_STEP = 8
} ladle_pipe_kind;

/* One action; mb is -1 for REDUCE and STEP. */
typedef struct ladle_pipe_action {
    ladle_pipe_kind kind;
    int stage;
    int mb;
} ladle_pipe_action;

/* "F", "B", "W", "SEND_F", ... ("?" for an unknown kind). Local. */
LADLE_API const char *ladle_pipe_kind_name(ladle_pipe_kind kind);

typedef enum ladle_pipe_style {
    LADLE_PIPE_GPIPE = 0,       /* all forwards, then all backwards (fill-drain) */
    LADLE_PIPE_1F1B = 1,        /* p-j forwards in flight on stage j, then one
                                   forward, one backward; peak stash min(p-j, m) */
    LADLE_PIPE_INTERLEAVED = 2, /* 1F1B over v chunks per worker (stage s on
                                   worker s mod W), microbatches in groups of W */
    LADLE_PIPE_ZBH1 = 3,        /* 1F1B with the weight gradients deferred into
                                   the bubbles (zero-bubble H1) */
    LADLE_PIPE_HYBRID = 4,      /* 1F1B over replicated stages: each replica keeps
                                   ceil(sum_{i>=j} r_i / r_j) microbatches in flight */
    LADLE_PIPE_ZBV = 5          /* zero-bubble V: S = 2W stages, worker i holds
                                   stages i and S-1-i; split B and W fill the
                                   bubble at 1F1B's peak memory */
} ladle_pipe_style;

/* "gpipe", "1f1b", "interleaved", "zbh1", "hybrid", "zbv" ("?" for an
 * unknown style). Local. */
LADLE_API const char *ladle_pipe_style_name(ladle_pipe_style style);
/* The style of one of those names into *style (set only on success). Local.
 * Returns LADLE_ERR_NULL, LADLE_ERR_ARG for an unknown name (the message
 * names it and lists the styles). */
LADLE_API ladle_status ladle_pipe_style_parse(const char *name, ladle_pipe_style *style);

/* The cost of each stage, in any time unit, for the simulator and for the
 * generators that order actions by simulated time (ZB-H1, hybrid). Arrays of
 * S entries; NULL arrays mean 1 (f, b, w) or 0 (the rest). A stage's costs
 * are those of one replica on one microbatch. send[j] is the time to move
 * stage j's output (and, backwards, its gradient) to the next stage;
 * reduce[j] the time of stage j's gradient reduction over its replicas,
 * step[j] its optimizer step. act[j] is the memory one stashed microbatch
 * takes on stage j (for peak memory; NULL counts microbatches). */
typedef struct ladle_pipe_costs {
    const double *f, *b, *w;
    const double *send, *reduce, *step;
    const double *act;
} ladle_pipe_costs;

typedef struct ladle_pipe_schedule ladle_pipe_schedule;

/* Generate a schedule of m microbatches over S stages with replicas[j]
 * replicas each (NULL: all 1; only the hybrid style replicates). Workers
 * are numbered stage by stage, replica by replica: stage 0's replicas are
 * workers 0..r_0-1, and so on. The interleaved style instead takes S = W*v
 * stages on W = S/v workers (chunks = v) and needs m to be a multiple of W.
 * The zbv style takes an even S = 2W on W workers (chunks 0 or 2) and any
 * m: worker i holds stages i and 2W-1-i (the V; stage W-1 hands over to
 * stage W on the same worker, and the first and last stages share worker
 * 0). Its order is fixed by its phases and does not depend on the costs
 * (it is best when F, B and W cost about the same). costs may be NULL
 * (unit costs). A generated schedule ends each worker's list with REDUCE
 * and STEP of its stages (REDUCE only where r_j > 1).
 * Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (an unknown
 * style, or another parameter out of range: the message says which),
 * LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_pipe_schedule_generate(ladle_pipe_style style, int stages,
                                                    const int *replicas, int chunks, int m,
                                                    const ladle_pipe_costs *costs,
                                                    ladle_pipe_schedule **sched);

/* A schedule's shape is bounded so that its tables (validator, simulator,
 * generators) stay small and their indices cannot overflow: 1 to 65536
 * workers and stages, 1 to 2^20 microbatches, stages x (m + 1) and
 * workers x stages at most 2^24, at most 2^26 actions per worker. Every
 * call that makes or grows a schedule refuses more with LADLE_ERR_ARG. */

/* An empty schedule for hand-made ones: W workers, S stages, m
 * microbatches; placement[j][q] (flattened, stage by stage) is the worker of
 * replica q of stage j, replicas as in _generate (NULL: all 1). With
 * placement NULL, stage j sits on worker j mod W. Local. */
LADLE_API ladle_status ladle_pipe_schedule_create(int workers, int stages, const int *replicas,
                                                  const int *placement, int m,
                                                  ladle_pipe_schedule **sched);
/* Append an action to a worker's list (no checks beyond the ranges; the
 * validator judges the whole). Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG
 * (a worker, kind, stage or microbatch out of range), LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_pipe_schedule_append(ladle_pipe_schedule *sched, int worker,
                                                  ladle_pipe_action action);
/* Insert the sends and receives a compute-only schedule implies (a list that
 * already has some keeps them and gets only the missing ones). Local.
 * Returns LADLE_ERR_NULL, LADLE_ERR_ARG, LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_pipe_schedule_add_comms(ladle_pipe_schedule *sched);
/* Free the schedule and set *sched to NULL. Accepts NULL. Local. */
LADLE_API ladle_status ladle_pipe_schedule_destroy(ladle_pipe_schedule **sched);

/* Read a schedule in the text form above. Without a header, the stages,
 * microbatches, replicas and placement are read off the actions: the
 * workers holding stage j's actions are its replicas, in worker order. A
 * compute-only file gets its sends and receives added. The result is not
 * validated yet; *sched is set only on success. Local. Returns LADLE_ERR_IO (with
 * the line and token: an unknown action, a number out of range, a header
 * value that is not a whole number: stages 1 to 256, microbatches 1 to
 * 2^20; for load also a missing file, a directory, a read error, each with
 * the system's reason), LADLE_ERR_ARG (a shape beyond the bounds above),
 * LADLE_ERR_NULL, LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_pipe_schedule_load(const char *path, ladle_pipe_schedule **sched);
LADLE_API ladle_status ladle_pipe_schedule_parse(const char *text, ladle_pipe_schedule **sched);
/* Write it in the same form (with the header). Local. Returns
 * LADLE_ERR_NULL, LADLE_ERR_IO. */
LADLE_API ladle_status ladle_pipe_schedule_write(const ladle_pipe_schedule *sched, FILE *out);

/* The shape of a schedule. Local. */
LADLE_API int ladle_pipe_schedule_workers(const ladle_pipe_schedule *sched);
LADLE_API int ladle_pipe_schedule_stages(const ladle_pipe_schedule *sched);
LADLE_API int ladle_pipe_schedule_microbatches(const ladle_pipe_schedule *sched);
LADLE_API int ladle_pipe_schedule_replicas(const ladle_pipe_schedule *sched, int stage);
/* The worker of replica q of stage j, and the replica that runs microbatch
 * k of stage j (k mod r_j); -1 out of range. Local. */
LADLE_API int ladle_pipe_schedule_worker(const ladle_pipe_schedule *sched, int stage, int replica);
LADLE_API int ladle_pipe_schedule_route(const ladle_pipe_schedule *sched, int stage, int mb);
/* A worker's actions: their number, and the list (borrowed). Local. */
LADLE_API int ladle_pipe_schedule_length(const ladle_pipe_schedule *sched, int worker);
LADLE_API const ladle_pipe_action *ladle_pipe_schedule_actions(const ladle_pipe_schedule *sched,
                                                               int worker);

/* ---- validation -------------------------------------------------------- */

/* What the validator found. */
typedef struct ladle_pipe_report {
    int ok;             /* 1 when the schedule is valid */
    int worker, step;   /* where the first error is (-1 when none) */
    int peak_stash_max; /* the largest peak over workers */
    int *peak_stash;    /* per worker: most microbatches whose forward is done
                           and whose weight gradient is not, at any time */
    char *message;      /* the error (or "valid"), then the rank x step grid
                           with the failing action marked */
} ladle_pipe_report;

/* Check a schedule before any message is sent: every (stage, microbatch)
 * has exactly one F, B and W, on the worker its route names, in the order
 * F, B, W; every send has its receive on the right worker and every receive
 * its send; a receive comes before the compute that needs it and a send
 * after the compute that produces it; REDUCE of a replicated stage on each
 * replica after its weight gradients; STEP after REDUCE; and running all
 * workers (sends never wait, receives wait for their send) finishes: no
 * deadlock. Local. Returns LADLE_OK whether or not the schedule is
 * valid (report->ok says), LADLE_ERR_NULL or LADLE_ERR_ALLOC (and then
 * leaves *report as it was). Release the report with ladle_pipe_report_destroy. */
LADLE_API ladle_status ladle_pipe_schedule_validate(const ladle_pipe_schedule *sched,
                                                    ladle_pipe_report *report);
/* Free what the report holds and zero it (the struct itself is the
 * caller's). Accepts NULL and a zeroed report. Local. Returns LADLE_OK. */
LADLE_API ladle_status ladle_pipe_report_destroy(ladle_pipe_report *report);

/* ---- simulation -------------------------------------------------------- */

/* One action as simulated or measured: its worker, the action, start and end. */
typedef struct ladle_pipe_event {
    int worker;
    ladle_pipe_action action;
    double start, end;
} ladle_pipe_event;

typedef struct ladle_pipe_sim {
    double makespan;         /* the end of the last action */
    double busy;             /* compute time (F, B, W) summed over workers */
    double bubble;           /* 1 - busy / (workers * makespan) */
    double *peak_memory;     /* per worker: the most stashed activation memory
                                (costs->act; microbatches without it), plus the
                                parameters' of its stages (ladle_pipe_sim_desc) */
    double peak_memory_max;
    int nevents;
    ladle_pipe_event *events; /* every action with its simulated times */
} ladle_pipe_sim;

/* What the simulator models beyond the costs, per stage or stage boundary
 * (arrays of S entries; NULL: 0). Set it up with ladle_pipe_sim_desc_init.
 *  - recv[j]: the worker time a receive across boundary j (stage j's
 *    output to stage j + 1, or its gradient back to stage j) takes on the
 *    receiving worker once the message has arrived: the copy out of the
 *    transport, which shared-memory MPI makes the receiver do. costs->send
 *    stays the delay before it arrives.
 *  - param[j]: the memory stage j's parameters take on each of its workers
 *    (weights, gradients and optimizer state), in costs->act's unit: added
 *    to peak_memory once per stage a worker holds. */
typedef struct ladle_pipe_sim_desc {
    size_t size; /* sizeof(ladle_pipe_sim_desc), set by ladle_pipe_sim_desc_init */
    const double *recv;
    const double *param;
} ladle_pipe_sim_desc;

/* Set d's size and its defaults: no receive time, no parameter memory
 * (recv and param NULL). Accepts NULL. Local. */
LADLE_API void ladle_pipe_sim_desc_init(ladle_pipe_sim_desc *d);

/* Replay a valid schedule under the given costs (NULL: unit costs) and what
 * d adds (NULL: nothing beyond the costs): each worker runs its list in
 * order; an action starts when its worker is free and what it needs is
 * there (a receive: its send's end plus the transfer time, then d->recv of
 * the receiver's time; a backward: its forward; a REDUCE: every replica's
 * REDUCE reached). Sends take no worker time. Local.
 * Everything is checked first: *sim is written only on success and left as
 * it was on failure; it owns its arrays (release with
 * ladle_pipe_sim_destroy). Returns LADLE_ERR_ARG for an invalid schedule
 * (with the validator's message), costs or d's values that are negative or
 * not finite, or a d not set up by ladle_pipe_sim_desc_init (its size below
 * this struct's first release); LADLE_ERR_NULL, LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_pipe_simulate(const ladle_pipe_schedule *sched,
                                           const ladle_pipe_costs *costs,
                                           const ladle_pipe_sim_desc *d,
                                           ladle_pipe_sim *sim);

/* Free what the simulation holds and zero it (the struct is the caller's).
 * Accepts NULL and a zeroed one. Local. Returns LADLE_OK. */
LADLE_API ladle_status ladle_pipe_sim_destroy(ladle_pipe_sim *sim);

/* The bubble of a list of events (simulated or measured) over W workers, as
 * the simulator defines it. Local. */
LADLE_API double ladle_pipe_events_bubble(int workers, int nevents,
                                          const ladle_pipe_event *events);

/* A timeline picture of events (one row per worker, one box per compute
 * action, coloured by kind, labelled with the microbatch) as SVG, and the
 * same events as Chrome-trace JSON (chrome://tracing, Perfetto); time_unit
 * is the number of microseconds in one unit of the events' times. Local.
 * Returns LADLE_ERR_NULL, LADLE_ERR_IO. */
LADLE_API ladle_status ladle_pipe_write_svg(FILE *out, const char *title, int workers,
                                            int nevents, const ladle_pipe_event *events);
LADLE_API ladle_status ladle_pipe_write_trace(FILE *out, int workers, int nevents,
                                              const ladle_pipe_event *events, double time_unit);

/* ---- planning ---------------------------------------------------------- */

/* The profiling pass: each layer's forward, input-gradient and
 * weight-gradient seconds on random data of its shapes (the medians of reps
 * rounds, after one untimed round), into f[i], b[i], w[i]: the planner's
 * per-layer costs. The layers' gradients are zeroed afterwards. Local;
 * collective over a distributed layer's ranks if one is among them (its calls);
 * allocates its tensors. f, b and w are written only once every layer has
 * been timed. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (n outside 1 to 2^20,
 * reps outside 1 to 1000, an entry that is not a layer), the layers'
 * codes. */
LADLE_API ladle_status ladle_pipe_profile(int n, ladle_op *const layers[], int reps, double f[],
                                          double b[], double w[]);

/* The planner's costs around the compute (ladle_pipe_plan_desc's cut,
 * reduce and reduce_latency), measured on comm between its ranks 0 and 1:
 * cut[i] (i < n - 1), the worker time of a boundary after layer i: the
 * one-way time of its output (the bytes of the y it was made for, one
 * microbatch) less a one-byte message's, which is latency (it delays the
 * receiver but takes none of its time); cut[n - 1] = 0. reduce[i], the
 * bandwidth term of a two-replica all-reduce of layer i's parameters (its
 * time less a one-element all-reduce's); *latency, half a one-element
 * all-reduce (a two-replica ring takes two steps). Medians of reps rounds
 * after two untimed ones; every rank gets rank 0's values. On one rank all
 * are 0. Collective over comm (its traffic on a private duplicate);
 * allocates a buffer of the largest message. Returns LADLE_ERR_NULL,
 * LADLE_ERR_ARG (comm MPI_COMM_NULL, n outside 1 to 2^20, reps outside 1
 * to 1000, an entry that is not a layer, an output or parameters beyond
 * one MPI message of 2^31 - 1 bytes, ranks that passed layers of other
 * sizes), LADLE_ERR_ALLOC, LADLE_ERR_REMOTE (another rank failed). */
LADLE_API ladle_status ladle_pipe_profile_comm(ladle_comm comm, int n,
                                               ladle_op *const layers[], int reps,
                                               double cut[], double reduce[],
                                               double *latency);

/* A plan: the stage boundaries (stage j is layers first[j] .. first[j+1]-1)
 * and the replica count of every stage. */
typedef struct ladle_pipe_plan {
    int stages;
    /* deprecated: read the three arrays through ladle_pipe_plan_first,
     * ladle_pipe_plan_replicas and ladle_pipe_plan_stage_time, which keep
     * working when the stage limit (64) changes and the struct becomes
     * opaque */
    int first[64 + 1];
    int replicas[64];
    double stage_time[64];   /* (f + b + w) / r_j of each stage, per microbatch */
    double slowest;          /* the largest stage_time: the time per microbatch */
    double plain_slowest;    /* the same for the best plan without replication:
                                min(workers, n) stages of one worker each, no
                                memory cap (the classic linear partition) */
} ladle_pipe_plan;

/* Stage j's first layer (j == stages: one past the last layer), its number
 * of replicas, and its time per microbatch ((f + b + w) / replicas); -1 (or
 * NaN) for plan NULL or j out of range. Local. */
LADLE_API int ladle_pipe_plan_first(const ladle_pipe_plan *plan, int j);
LADLE_API int ladle_pipe_plan_replicas(const ladle_pipe_plan *plan, int j);
LADLE_API double ladle_pipe_plan_stage_time(const ladle_pipe_plan *plan, int j);

#define LADLE_PIPE_MAX_STAGES 64

/* The planner's input: n layers with their costs, the bounds a plan must
 * keep, and what surrounds the compute. Set it up with
 * ladle_pipe_plan_desc_init(&d, n, f, b, w), which sets size, n and the
 * three cost arrays and gives every other field its default (0 or NULL: no
 * memory cap, no stage bounds, nothing beyond f, b and w). The arrays are
 * borrowed for the call; arrays are per layer (n entries) unless said.
 *  - f, b, w: each layer's forward, input-gradient and weight-gradient time
 *    per microbatch (w may be NULL: counted in b).
 *  - mem, mem_cap: one stashed microbatch's memory, and with mem_cap > 0
 *    the most each worker may hold (mem NULL: parameters only).
 *  - min_stages, max_stages: plans of that many stages only (0 or 1: no
 *    lower bound; 0: no limit beyond min(workers, n,
 *    LADLE_PIPE_MAX_STAGES)); min_stages = max_stages for exactly that
 *    many.
 *  - cut (n - 1 entries): the worker time one stage boundary after layer i
 *    costs each of the two stages it joins, per microbatch: the receive of
 *    layer i's output on the later stage, and of its gradient on the
 *    earlier one (with shared-memory MPI the receiver copies the bytes).
 *  - reduce, reduce_latency, microbatches: reduce[i] is the bandwidth part
 *    of all-reducing layer i's gradients between two replicas (its
 *    gradient's bytes over the bandwidth); a ring all-reduce over r
 *    replicas moves 2 (r - 1) / r of them, in 2 (r - 1) steps of
 *    reduce_latency each. Charged once an optimizer step to every worker of
 *    a replicated stage, so it is spread over the step's microbatches
 *    (required, 1 to 2^20, when reduce or reduce_latency is given). It
 *    overlaps the other stages' work, not the stage's own (the executor
 *    reduces after the stage's last backward).
 *  - param: the memory layer i's parameters take (weights, gradients,
 *    optimizer state) on every worker of its stage, in mem's unit.
 * A stage of layers a .. e on r replicas then takes, per microbatch,
 *     (sum f + b + w + cut[a - 1] + cut[e]) / r
 *       + (2 (r - 1) / r sum reduce + 2 (r - 1) reduce_latency) / microbatches
 * (no cut before the first layer or after the last), and each of its
 * workers holds (sum mem) x ceil(sum_{i>=j} r_i / r_j) + sum param (its
 * 1F1B stash and its parameters), which mem_cap bounds. More replicas then
 * no longer only help: the all-reduce grows with r, and the planner weighs
 * the two exactly. */
typedef struct ladle_pipe_plan_desc {
    size_t size; /* sizeof(ladle_pipe_plan_desc), set by ladle_pipe_plan_desc_init */
    int n;       /* the layers */
    const double *f, *b, *w; /* per layer: the compute (w may be NULL) */
    const double *mem;       /* per layer: one stashed microbatch's memory */
    double mem_cap;          /* > 0: each worker's memory at most this; 0: no cap */
    int min_stages;          /* 0 or 1: no lower bound */
    int max_stages;          /* 0: no limit beyond min(workers, n, 64) */
    const double *param;     /* per layer: parameter memory */
    const double *cut;       /* n - 1 entries: a boundary's receive time */
    const double *reduce;    /* per layer: the all-reduce's bandwidth term */
    double reduce_latency;   /* one step of a ring all-reduce */
    int microbatches;        /* per optimizer step */
} ladle_pipe_plan_desc;

/* Set d's size, n, f, b and w, and every other field to its default (see
 * above). Accepts NULL. Local. */
LADLE_API void ladle_pipe_plan_desc_init(ladle_pipe_plan_desc *d, int n, const double *f,
                                         const double *b, const double *w);

/* Choose stage boundaries and replica counts for d's layers on `workers`
 * workers so that the slowest stage's time (the model above; without cut
 * and reduce sum(f + b + w over its layers) / r_j) is as fast as it can be;
 * no stage is empty, sum r_j = workers, the stage count is within d's
 * bounds and at most min(workers, n, LADLE_PIPE_MAX_STAGES), and with a
 * cap every worker's memory is within it. The plan is exact: among plans
 * of the least slowest time it has the fewest stages counted from
 * min_stages (less pipeline fill; with free communication and no cap that
 * is often one stage on every worker, which ties or beats any pipeline:
 * a lower bound asks for a pipeline), then, stage by stage from the first,
 * the fewest replicas and then the earliest end: the lexicographically
 * smallest (r_0, first[1], r_1, first[2], ...). stage_time, slowest and
 * plain_slowest are the modelled times (the plain pipeline: up to
 * min(workers, n) unreplicated stages, no cap, no bounds). Costs
 * O(64 n^2 workers) at most and a table of 8 bytes for each of
 * n * (workers + 1) entries; (n + 1) * (workers + 1) may not pass 2^24.
 * Sets *plan only on success. Local. Returns
 * LADLE_ERR_NULL (d, f, b or plan NULL), LADLE_ERR_ARG (a d not set up by
 * ladle_pipe_plan_desc_init, n or workers below 1 or too large, a cost or
 * memory negative or not finite: the message names the array and entry; a
 * cap that is NaN; an all-reduce cost without microbatches; min_stages
 * negative, above a non-zero max_stages, above min(n, workers) or above
 * LADLE_PIPE_MAX_STAGES; no plan fits the cap: the message says what the
 * smallest stash of a plan in the range is), LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_pipe_plan_create(const ladle_pipe_plan_desc *d, int workers,
                                              ladle_pipe_plan *plan);
/* The plan of explicit boundaries (first[0] = 0, strictly increasing,
 * first[stages] = n) and replicas (each >= 1; NULL: all 1) of d's layers,
 * timed as ladle_pipe_plan_create times its own (d's stage bounds and cap
 * are not applied); plain_slowest is that of the sum of the replicas as
 * workers. Sets *plan only on success. Local. Returns LADLE_ERR_NULL (d,
 * f, b, first or plan NULL), LADLE_ERR_ARG (a d not set up by
 * ladle_pipe_plan_desc_init, an empty stage, boundaries that do not cover
 * 0 .. n-1, a replica count below 1, a cost negative or not finite),
 * LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_pipe_plan_explicit(const ladle_pipe_plan_desc *d, int stages,
                                                const int *first, const int *replicas,
                                                ladle_pipe_plan *plan);

/* ---- execution --------------------------------------------------------- */

typedef struct ladle_pipeline ladle_pipeline;

/* A stage this rank runs: the schedule's stage number and its chain of
 * sequential layers (layer i's y shape is layer i+1's x shape; the batch
 * dimension of the first layer's x is the microbatch). */
typedef struct ladle_pipe_stage {
    int stage;
    int n;
    ladle_op *const *layers;
} ladle_pipe_stage;

/* The executor of one schedule on the workers of p_pipe, a 1-d partition
 * (worker w is partition rank w; it must have as many ranks as the schedule
 * has workers). Each rank passes the stages the schedule places on its
 * worker (held, nheld of them) and, on the worker(s) of the last stage, the
 * loss (a sequential loss over the last layer's output, mean or sum; NULL
 * elsewhere); the layers and the loss become the pipeline's on success.
 * A rank's stages and loss live on one device, whose memory the host must
 * reach (the CPU: stage boundaries hand tensor memory to MPI); x and target
 * must be there too. Every stage gets an optimizer made from opt. The
 * schedule is validated and copied; every buffer is planned here: each held
 * stage gets as many microbatch slots (inputs, activations, contexts,
 * gradients) as the schedule ever has in flight on it. Collective over the
 * members of p_pipe (other ranks get an inactive pipeline whose calls do
 * nothing). Returns LADLE_ERR_NULL, LADLE_ERR_ARG (an invalid schedule, with
 * its grid; stages that do not match the placement), LADLE_ERR_SHAPE (stage
 * boundaries whose sizes disagree), LADLE_ERR_DEVICE (layers on two
 * devices), LADLE_ERR_UNSUPPORTED (a device the host cannot reach),
 * LADLE_ERR_PARTITION, LADLE_ERR_ALLOC, LADLE_ERR_MPI,
 * LADLE_ERR_REMOTE. */
LADLE_API ladle_status ladle_pipeline_create(const ladle_partition *p_pipe,
                                             const ladle_pipe_schedule *sched, int nheld,
                                             const ladle_pipe_stage held[], ladle_op *loss,
                                             const ladle_optimizer_desc *opt,
                                             ladle_pipeline **pipeline);
/* What every rank of ladle_pipeline_create_workers passes alike: the
 * schedule (validated and copied) and the optimizer every stage gets (its
 * fields are read at the call). Set it up with ladle_pipeline_desc_init;
 * both are required. Later options of the executor are fields here. */
typedef struct ladle_pipeline_desc {
    size_t size; /* sizeof(ladle_pipeline_desc), set by ladle_pipeline_desc_init */
    const ladle_pipe_schedule *sched;
    const ladle_optimizer_desc *opt;
} ladle_pipeline_desc;

/* Set d's size, schedule and optimizer. Accepts NULL. Local. */
LADLE_API void ladle_pipeline_desc_init(ladle_pipeline_desc *d,
                                        const ladle_pipe_schedule *sched,
                                        const ladle_optimizer_desc *opt);

/* ladle_pipeline_create over workers that are partitions: worker w of
 * d->sched runs on workers[w] (nworkers of them, as many as the schedule
 * has workers; any shape; a rank belongs to one worker at most), so a stage
 * may be a chain of distributed layers (ladle/distributed.h) on its
 * worker's ranks, every rank of the worker running the worker's list. Each
 * rank passes the stages the schedule places on its worker (held, nheld of
 * them) and, on the ranks of the last stage's workers, the loss (NULL
 * elsewhere); the layers and the loss become the pipeline's on success. A
 * stage boundary is a repartition: each rank of the sending replica sends
 * each rank of the receiving one the intersection of its output box with
 * the other's input box (the layouts of the stage's last and the next
 * stage's first layer; a sequential layer's box is its whole tensor), and
 * the backward sends the input gradient's the other way. A stage on several
 * ranks must begin and end with distributed layers, and the last stage's
 * loss must be distributed (ladle_dist_loss_create). A replicated stage's
 * replicas are partitions of the same shape: their gradients are summed
 * rank by rank (rank i of every replica), after each layer's own copies
 * (ladle_layer_sync_gradients). x and target are still the whole batch on
 * the ranks that read them; each rank takes its block. A worker holding two
 * consecutive stages must be one rank (LADLE_ERR_UNSUPPORTED). Collective
 * over the union of the workers. Returns the codes of
 * ladle_pipeline_create, and LADLE_ERR_ARG for a d not set up by
 * ladle_pipeline_desc_init, LADLE_ERR_NULL for its schedule or optimizer
 * NULL. */
LADLE_API ladle_status ladle_pipeline_create_workers(
    const ladle_pipeline_desc *d, int nworkers, ladle_partition *const workers[], int nheld,
    const ladle_pipe_stage held[], ladle_op *loss, ladle_pipeline **pipeline);
/* Destroy the pipeline with its layers, loss and optimizers; *pipeline
 * becomes NULL. Accepts NULL. Collective over the members of p_pipe (the
 * union of the workers): it frees the pipeline's duplicate of their
 * communicator and its distributed layers' communicators with
 * MPI_Comm_free, which MPI counts as collective though it waits for no
 * other rank (it only marks communicators for release). */
LADLE_API ladle_status ladle_pipeline_destroy(ladle_pipeline **pipeline);

/* One training step: the schedule's actions in order over m microbatches
 * (microbatch k is rows [k b, (k+1) b) of x and target, b the first layer's
 * batch), ending with each stage's gradients summed over its replicas and
 * over the microbatches, divided by m (the mean over the whole batch for a
 * mean loss: exact when m is not a multiple of a replica count), the
 * optimizer step and zeroed gradients. x (the whole batch, m b rows) is
 * read on the workers of stage 0, target on those of the last stage; other
 * ranks may pass NULL. *loss (may be NULL) gets the mean microbatch loss on
 * every worker. Collective over the members of p_pipe. Returns
 * LADLE_ERR_NULL, LADLE_ERR_SHAPE, LADLE_ERR_DTYPE, the layers' codes,
 * LADLE_ERR_MPI, and LADLE_ERR_NUMERIC on every worker when a microbatch's
 * loss is not finite: the schedule still runs to its end (so no worker is
 * left waiting), *loss gets the non-finite value, and the optimizer step
 * has been taken with the gradients of that loss, so the parameters may no
 * longer be finite (restore them from a checkpoint). */
LADLE_API ladle_status ladle_pipeline_step(ladle_pipeline *pipeline, const ladle_tensor *x,
                                           const ladle_tensor *target, double *loss);

/* The last step's compute actions (F, B, W, REDUCE, STEP) on this worker
 * with their start and end in seconds since the step began (borrowed).
 * Local. Returns LADLE_ERR_NULL. */
LADLE_API ladle_status ladle_pipeline_events(const ladle_pipeline *pipeline, int *n,
                                             const ladle_pipe_event **events);
/* Every worker's events of the last step, gathered on worker 0 into
 * *events (release with ladle_pipe_events_destroy; NULL and 0 elsewhere).
 * *n and *events are set only on success. Collective over the members of
 * p_pipe. Returns LADLE_ERR_NULL, LADLE_ERR_ALLOC, LADLE_ERR_MPI. */
LADLE_API ladle_status ladle_pipeline_gather_events(ladle_pipeline *pipeline, int *n,
                                                    ladle_pipe_event **events);
/* Free events from ladle_pipeline_gather_events and set *events to NULL.
 * Accepts NULL. Local. Returns LADLE_OK. */
LADLE_API ladle_status ladle_pipe_events_destroy(ladle_pipe_event **events);

/* The accessors below are local. */

/* The optimizer of a stage this rank holds (to change its learning rate),
 * or NULL. Local. */
LADLE_API ladle_optimizer *ladle_pipeline_optimizer(const ladle_pipeline *pipeline, int stage);
/* The layers of a stage this rank holds (borrowed), or NULL; *n their number.
 * Local. */
LADLE_API ladle_op *const *ladle_pipeline_layers(const ladle_pipeline *pipeline, int stage,
                                                 int *n);
/* This rank's worker (-1 outside the pipeline). Local. */
LADLE_API int ladle_pipeline_worker(const ladle_pipeline *pipeline);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_PIPELINE_H */
