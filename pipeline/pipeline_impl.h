/*
 * The pipeline executor's private structures, shared by pipeline.c
 * (planning) and pipeline_run.c (a step, the timeline). Never installed.
 */
#ifndef LADLE_PIPELINE_IMPL_H
#define LADLE_PIPELINE_IMPL_H

#include "pipeline/pipe.h"
#include "src/comm/schedule.h"
#include "src/op/op_impl.h"

/* One message of a stage boundary: the peer (a rank of the pipeline's
 * communicator) and the box of this rank's local tensor it carries, at
 * element `at` of the staging buffer when the tensor is not sent whole. */
typedef struct piece {
    int peer;
    int64_t lo[LADLE_MAX_NDIM], ext[LADLE_MAX_NDIM];
    int64_t count, at;
} piece;

/* The messages of one boundary crossing of one microbatch on this rank,
 * planned as a schedule of the communication engine: a send packs each
 * piece into the staging (its workspace) and sends it, a receive lands each
 * piece there and unpacks it; a piece that is the whole tensor travels from
 * or into the tensor itself. The engine stages device memory for MPI. */
typedef struct route {
    int n;
    int whole; /* one piece that is the whole local tensor: no packing */
    piece *p;
    ladle_sched *sched;
} route;


typedef struct slot {
    int mb;               /* -1 when free */
    ladle_tensor *x;      /* the stage input (owned), or a view of the caller's batch */
    ladle_tensor *tgt;    /* the target's block (last stage): owned or a view */
    ladle_tensor **y, **dy;
    ladle_ctx **ctx, *lctx;
    void *xin, *yout, *dyin; /* device staging for pieces not the whole tensor */
    int in_posted, dy_posted;
} slot;

typedef struct held {
    int stage, replica, n;
    ladle_op **layers;
    /* this rank's boxes of the stage's input and output (global offsets,
     * local shapes), and of the last stage's target */
    int in_nd, out_nd, tgt_nd;
    int64_t in_off[LADLE_MAX_NDIM], in_shape[LADLE_MAX_NDIM];
    int64_t out_off[LADLE_MAX_NDIM], out_shape[LADLE_MAX_NDIM];
    int64_t tgt_off[LADLE_MAX_NDIM], tgt_shape[LADLE_MAX_NDIM];
    int x_view, tgt_view;     /* the box is the whole microbatch: no copy */
    route *fsend, *frecv, *bsend, *brecv; /* per microbatch */
    int nslots;
    slot *slots;
    int *slot_of;             /* per microbatch */
    ladle_tensor **dxbuf;     /* per microbatch: the input gradient sent back */
    void **dxpack;            /* per microbatch: its staging */
    ladle_optimizer *opt;
    ladle_partition *p_rep;   /* the replicas' ranks (replicated stages) */
    ladle_op *reduce;         /* all-sum-reduce among the same positions */
    ladle_tensor *gbuf;
} held;

struct ladle_pipeline {
    int active, worker, wrank, m;
    ladle_pipe_schedule *sched;
    ladle_partition *p_all;   /* every worker's ranks */
    MPI_Comm comm;
    int nheld;
    held *held;
    held **by_stage;
    ladle_op *loss, *loss_local;
    const ladle_backend *be;  /* the device of this rank's stages */
    int mean;                 /* the loss is a mean: scale gradients by 1/m */
    ladle_tensor *lossval, *dloss;
    int64_t x_mb_rows, tgt_mb_rows; /* rows per microbatch of the caller's tensors */
    int64_t x_glob[LADLE_MAX_NDIM], tgt_glob[LADLE_MAX_NDIM]; /* their global shapes */
    int loss_counts;          /* this rank adds the loss (one per last-stage replica) */
    double loss_sum;
    int nevents, cap_events;
    ladle_pipe_event *events;
    double t0;
};

/* pipeline_route.c: this rank's box of an op's input (out 0) or output
 * (the whole local tensor for a sequential layer); every stage replica's
 * boxes in a table every rank holds; the check that consecutive stages
 * agree on global shapes; the four routes of each microbatch of held
 * stage h. */
void ladle__pipe_own_box(const ladle_op *op, int out, int64_t *off, int64_t *shape);
ladle_status ladle__pipe_share_boxes(ladle_pipeline *pl, ladle_partition *const *workers,
                                     int nheld, const ladle_pipe_stage held[], int64_t **table);
ladle_status ladle__pipe_check_boundaries(const ladle_pipe_schedule *s,
                                          ladle_partition *const *workers, const int64_t *table);
ladle_status ladle__pipe_plan_routes(ladle_pipeline *pl, ladle_partition *const *workers,
                                     const int64_t *table, held *h);

#endif /* LADLE_PIPELINE_IMPL_H */
