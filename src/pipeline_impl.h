/*
 * The pipeline executor's private structures, shared by pipeline.c
 * (planning) and pipeline_run.c (a step, the timeline). Never installed.
 */
#ifndef LADLE_PIPELINE_IMPL_H
#define LADLE_PIPELINE_IMPL_H

#include "op_impl.h"
#include "pipe.h"

typedef struct slot {
    int mb;               /* -1 when free */
    ladle_tensor *x;      /* the stage input (owned), or a view of the user's batch */
    ladle_tensor *tgt;    /* view of the target's microbatch (last stage) */
    ladle_tensor **y, **dy;
    ladle_ctx **ctx, *lctx;
    MPI_Request sent;     /* the output's send */
} slot;

typedef struct held {
    int stage, replica, n;
    ladle_op **layers;
    int nslots;
    slot *slots;
    int *slot_of;         /* per microbatch */
    ladle_tensor **dxbuf; /* per microbatch: the input gradient sent back */
    MPI_Request *dxsent;
    ladle_optimizer *opt;
    ladle_partition *p_rep;
    ladle_op *reduce;     /* all-sum-reduce over the replicas */
    ladle_tensor *gbuf;
} held;

struct ladle_pipeline {
    int active, worker, m;
    ladle_pipe_schedule *sched;
    MPI_Comm comm;
    int nheld;
    held *held;
    held **by_stage;
    ladle_op *loss;
    int mean;                 /* the loss is a mean: scale gradients by 1/m */
    ladle_tensor *lossval, *dloss;
    int64_t tgt_mb_bytes, x_mb_bytes;
    double loss_sum;
    int nevents, cap_events;
    ladle_pipe_event *events;
    double t0;
};

#endif /* LADLE_PIPELINE_IMPL_H */
