/*
 * The inside of ladle_graph (include/ladle/graph.h): values, nodes, the
 * planned order. graph_build.c builds it, graph_plan.c finalizes it,
 * graph.c runs it.
 * Never installed.
 */
#ifndef LADLE_GRAPH_IMPL_H
#define LADLE_GRAPH_IMPL_H

#include "ladle/graph.h"
#include "layers/distributed/dist.h"
#include "train/buckets.h"

typedef enum gkind { G_INPUT, G_LAYER, G_ADD, G_CONCAT, G_SPLIT, G_LOSS, G_REPART } gkind;

typedef struct gvalue {
    int node; /* the node that makes it */
    int nd;   /* this rank's shape */
    int64_t shape[LADLE_MAX_NDIM];
    ladle_layout *layout;   /* a reference, or NULL */
    const ladle_tensor *y;  /* the forward's (buf, or the caller's for an input) */
    ladle_tensor *buf, *dy; /* owned */
    int uses;               /* input slots that read it */
    int written;            /* dy holds a contribution in this backward */
    int tokens;             /* a graph input of LADLE_I64 token ids, read only by
                               layers that take ids (an embedding): no dy */
} gvalue;

typedef struct gnode {
    gkind kind;
    char name[LADLE_GRAPH_NAME_MAX];
    ladle_op *op;          /* layer, loss or inserted repartition (owned) */
    int nin, *in;          /* the values read */
    int nout, out;         /* the values made: out .. out + nout - 1 */
    int dim;               /* concat, split */
    int64_t *sizes;        /* split */
    double weight;         /* loss */
    int index;             /* loss: its index; layer: its place in the layer order */
    const ladle_layout *want; /* repartition: the layout it makes */
    ladle_ctx *ctx;
    ladle_tensor **scratch; /* per input slot: a later contribution's buffer */
    int *via_scratch;       /* this backward's choice per slot */
    const ladle_tensor **tx;
    ladle_tensor **tdx;
    ladle_tensor *lossval, *dloss;
} gnode;

struct ladle_graph {
    ladle_dtype dtype;
    ladle_device device;
    size_t bucket_bytes;
    int nnodes, capnodes, nvalues, capvalues;
    gnode *nodes;
    gvalue *values;
    int ninputs, nlosses, nouts;
    int *outs;
    int finalized, broken;
    double loss_scale; /* the losses' gradients are their weights times it */
    int norder, *order; /* node indices, topological */
    int nlayers;
    ladle_op **layers;
    int nparams;
    char **pnames;
    int nrepart;
    ladle__buckets *buckets;
    MPI_Comm parent;
    double sync_wait;
    int forwarded, lossed;
    /* the one workspace of the scratch layers (ladle__share_scratch) */
    void *scratch;
    const ladle_backend *scratch_be;
    ladle__ws_tags scratch_tags;
    /* the outermost sequentials' activations for calls without a ctx */
    void *seq_mem;
    const ladle_backend *seq_be;
};

/* Room for one more node and nout more values (graph_build.c). */
ladle_status ladle__graph_grow(ladle_graph *g, int nout);
/* Plan the graph (graph_build.c: the body of ladle_graph_finalize). */
ladle_status ladle__graph_plan(ladle_graph *g);

/* The ops directly under op: a container's parts, a recomputation
 * wrapper's inner layer, a distributed layer's local one (how many, and
 * the i-th; train/graph_plan.c). */
int ladle__op_parts_of(const ladle_op *op);
ladle_op *ladle__op_part_of(const ladle_op *op, int i);

#endif /* LADLE_GRAPH_IMPL_H */
