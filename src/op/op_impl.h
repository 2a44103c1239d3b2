/*
 * The inside of ladle_op: a small vtable plus what every operator shares
 * (layouts, this rank's local shapes, its private communicator, the planned
 * schedules and workspace). Primitives are plan builders on top of this.
 */
#ifndef LADLE_OP_IMPL_H
#define LADLE_OP_IMPL_H

#include "src/comm/schedule.h"

/* Where a parameter's local shard sits in the global parameter. A
 * sequential layer's parameters are whole (offset 0, global = local). Every
 * rank of a distributed layer reports the same parameters with the same
 * global shapes; a rank without a shard holds a zero-volume tensor. */
typedef struct ladle__pinfo {
    int ndim;
    int64_t global[LADLE_MAX_NDIM];
    int64_t offset[LADLE_MAX_NDIM];
    int owner;      /* this rank writes the shard (one writer per shard) */
    ladle_op *sync; /* all-sum-reduce over the ranks holding copies, or NULL */
    /* sync's groups, so that a network can merge gradients into buckets:
     * its partition, a group id and an element count per partition rank */
    const ladle_partition *sync_p;
    const int *sync_gid;
    const int64_t *sync_counts;
} ladle__pinfo;

typedef struct ladle_op_vtable {
    ladle_op_kind kind; /* what the op is: compare this, never the name */
    const char *name;   /* for messages */
    /* Run with arguments already checked. NULL: run the planned schedule. */
    ladle_status (*forward)(ladle_op *op, const ladle_tensor *x, ladle_tensor *y);
    ladle_status (*adjoint)(ladle_op *op, const ladle_tensor *dy, ladle_tensor *dx);
    /* Free impl; may be NULL. */
    void (*destroy)(ladle_op *op);
    /* Layers (NULL for the primitives), with arguments checked and n the
     * call's batch. ctx may be NULL in forward (nothing to save) and, for
     * layers linear in x, in backward. dx may be NULL in backward. */
    ladle_status (*layer_forward)(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                  ladle_tensor *y, int64_t n);
    ladle_status (*layer_backward)(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                   ladle_tensor *dx, int64_t n);
    ladle_status (*layer_backward_weight)(ladle_op *op, ladle_ctx *ctx,
                                          const ladle_tensor *dy, int64_t n);
    /* Composite layers (optional): their contexts hold more than a buffer,
     * and their parameters and mode are their parts'. */
    ladle_status (*ctx_init)(const ladle_op *op, ladle_ctx *ctx);
    void (*ctx_fini)(ladle_ctx *ctx);
    /* Bytes the composite's ctx->impl holds (its parts' ctxs included),
     * for ladle_ctx_bytes_held; optional (NULL: none). */
    size_t (*ctx_held)(const ladle_ctx *ctx);
    int (*num_params)(const ladle_op *op);
    /* parameter i (grad 0) or its gradient (grad 1), and its name */
    ladle_tensor *(*param_at)(const ladle_op *op, int i, int grad, const char **name);
    void (*set_training)(ladle_op *op, int training);
    /* Distributed layers: parameter i's place in the global parameter
     * (NULL: whole tensors). */
    void (*param_info)(const ladle_op *op, int i, ladle__pinfo *info);
    /* Sum the gradients of replicated parameters over their copies
     * (collective); NULL when no parameter is replicated. */
    ladle_status (*sync_grads)(ladle_op *op);
    /* State that is not a parameter but belongs in a checkpoint (batch
     * norm's running statistics): buffer i and where its shard sits. */
    int (*num_buffers)(const ladle_op *op);
    ladle_tensor *(*buffer_at)(const ladle_op *op, int i, ladle__pinfo *info);
    /* After ladle_op_bind_param moved parameter i or its gradient: renew
     * what views them (optional). */
    void (*param_bound)(ladle_op *op, int i);
    /* After the op's workspace moved (ladle_op_set_workspace, or a
     * container sharing one among its layers): renew what views it
     * (optional). */
    void (*ws_bound)(ladle_op *op);
    /* Distributed losses: their own ladle_loss_forward/backward. */
    ladle_status (*loss_forward)(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *input,
                                 const ladle_tensor *target, ladle_tensor *loss);
    ladle_status (*loss_backward)(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dloss,
                                  ladle_tensor *dinput);
    /* Containers (optional): how many layers they are made of, and layer
     * i of them (borrowed), in order. */
    int (*num_parts)(const ladle_op *op);
    ladle_op *(*part_at)(const ladle_op *op, int i);
} ladle_op_vtable;

#define LADLE_MAX_PARAMS 4

/* What a scratch workspace holds (see ladle_op.ws_scratch): the op that
 * wrote it last and that op's own labels of its regions (0: nothing
 * reusable). One record serves every op sharing the memory. */
typedef struct ladle__ws_tags {
    const void *who;
    uint64_t what[2];
} ladle__ws_tags;

struct ladle_op {
    const ladle_op_vtable *vt;
    ladle_dtype dtype;
    unsigned flags;
    ladle_layout *x_layout, *y_layout;
    int x_ndim, y_ndim;
    int64_t x_shape[LADLE_MAX_NDIM], y_shape[LADLE_MAX_NDIM];
    int64_t x_numel, y_numel;
    MPI_Comm comm; /* private; MPI_COMM_NULL on ranks outside the op */
    int active;    /* this rank is in one of the op's partitions */
    int in_place;  /* forward/adjoint accept x == y */
    int busy;      /* a begin/end call is in flight */
    ladle_sched *fwd, *adj;
    void *ws;
    size_t ws_bytes;
    int ws_caller; /* ws is the caller's (ladle_op_set_workspace) */
    /* ws_scratch: the op keeps nothing in ws between calls that it does
     * not check against ws_tags first, so ops that run one call at a time
     * may share one ws (a graph shares it among its layers). ws_tags is
     * the record of what ws holds: the op's own ws_own_tags, a container's
     * shared one, or NULL when nothing may be trusted (caller memory). */
    int ws_scratch;
    ladle__ws_tags *ws_tags, ws_own_tags;
    const ladle_backend *be;
    void *impl;

    /* layers */
    int layer;      /* has the layer calls */
    int linear;     /* linear in x: the backward needs no ctx, adjoint works */
    int batched;    /* dimension 0 of x and y is the batch, smaller in calls */
    int x_ids;      /* x holds LADLE_I64 ids (an embedding): no dx */
    int training;
    int nparams;
    ladle_tensor *params[LADLE_MAX_PARAMS];
    ladle_tensor *grads[LADLE_MAX_PARAMS];
    const char *param_names[LADLE_MAX_PARAMS];
    /* bytes of the blocks the op holds besides its parameters, gradients
     * and ws, by kind (ladle__op_alloc): what the memory model reads */
    size_t held[LADLE_MEM_KINDS];
    size_t ctx_bytes; /* what each ctx owns for the op's saved state */
    /* weighted layers (linear, convolution): parameter 0 is the weight and
     * parameter 1, if present, the bias; the fans set their initialisation */
    int weighted;
    double fan_in, fan_out;
    uint64_t step; /* dropout: the step of the next forward */
    uint64_t gen;  /* forwards with a ctx so far (each ctx keeps its number) */
    /* while not NULL, ladle_ctx_create takes this op's ctx_bytes from it
     * (a recomputation wrapper sets it while it plans its scratch) */
    struct ladle__ctx_arena *ctx_arena;
};

/* One block that a tree of ctxs takes its saved state from, in order, each
 * part 64-byte aligned; with base NULL the ctxs allocate their own and the
 * arena only counts what they would have taken. */
typedef struct ladle__ctx_arena {
    char *base;
    size_t size, used;
    size_t held; /* the ctx_bytes taken, unaligned (ladle_ctx_bytes_held's count) */
} ladle__ctx_arena;

/* A tensor of a ctx of op (a composite's activations): from op's arena
 * when it has one with memory (a borrowing tensor), else its own. */
ladle_status ladle__ctx_tensor(const ladle_op *op, int ndim, const int64_t *shape,
                               ladle_tensor **t);

/* One microbatch's saved state. */
struct ladle_ctx {
    const ladle_op *op;
    const ladle_tensor *x, *y; /* the forward's, borrowed */
    const ladle_tensor *target;
    int64_t batch;
    int ready;
    int training; /* the op's mode at the forward */
    uint64_t step;
    uint64_t gen; /* the op's count of forwards at this ctx's last forward */
    double divisor; /* a loss's mean divisor at the forward, when it depends on the labels */
    void *buf;  /* ctx_bytes of the op's own saved state */
    void *impl; /* composite layers' own state (ctx_init) */
    int in_caller_mem; /* the ctx and its buf are the caller's (ladle_ctx_create_in) */
    int buf_in_arena;  /* buf is part of a ladle__ctx_arena: not the ctx's to free */
};

/* A layer op over fixed shapes on device (LADLE_ERR_DEVICE, raised for func,
 * when ladle has no backend for it); shapes get batch dimension 0 when
 * batched. */
ladle_status ladle__layer_new(const ladle_op_vtable *vt, ladle_dtype dtype, ladle_device device,
                              int x_ndim, const int64_t *x_shape, int y_ndim,
                              const int64_t *y_shape, int batched, ladle_op **out,
                              const char *func);
/* Add a zeroed parameter of shape (and its gradient) to a layer, on the
 * layer's device. */
ladle_status ladle__layer_add_param(ladle_op *op, const char *name, int ndim,
                                    const int64_t *shape, ladle_tensor **param);
/* Fill t with init from a counter-based generator keyed by (seed, stream,
 * element index); fan-in and fan-out set the bounds. */
ladle_status ladle__init_tensor(ladle_tensor *t, ladle_init init, double fan_in,
                                double fan_out, uint64_t seed, uint64_t stream);
/* The same for a shard: element i of t takes the value of its global index
 * in the parameter described by info. */
ladle_status ladle__init_shard(ladle_tensor *t, const ladle__pinfo *info, ladle_init init,
                               double fan_in, double fan_out, uint64_t seed, uint64_t stream);
/* Parameter i's place (whole tensors for sequential layers). */
void ladle__param_info(const ladle_op *op, int i, ladle__pinfo *info);
void ladle__layer_destroy(ladle_op *op);
/* A communicator of a distributed layer's ranks: its own, or for a
 * container the first one among its layers (MPI_COMM_NULL for sequential
 * layers). Borrowed; for agreements at a container's creation. */
MPI_Comm ladle__layer_comm(const ladle_op *op);
ladle_status ladle__layer_op_forward(ladle_op *op, const ladle_tensor *x, ladle_tensor *y);
ladle_status ladle__layer_op_adjoint(ladle_op *op, const ladle_tensor *dy, ladle_tensor *dx);
/* Check that a layer's dtype is f32 or f64 and the shape well-formed. */
ladle_status ladle__layer_check_args(const char *func, ladle_dtype dtype, int ndim,
                                     const int64_t *shape, int min_ndim);
/* The same for a layer that also takes bf16 (linear, activations): bf16 on a
 * device whose backend has the bf16 kernels (gemm_half), else LADLE_ERR_DTYPE. */
ladle_status ladle__layer_check_bf16(const char *func, ladle_dtype dtype, ladle_device device,
                                     int ndim, const int64_t *shape, int min_ndim);

/* The zeroed op every op and layer starts as: vtable vt, dtype, device's
 * backend (LADLE_ERR_DEVICE, raised for func, when ladle has none), no
 * communicator yet. LADLE_ERR_ALLOC is raised for who, the caller. */
ladle_status ladle__op_alloc(const ladle_op_vtable *vt, ladle_dtype dtype, ladle_device device,
                             const char *func, const char *who, ladle_op **out);

/* A new op on device over the layouts (both retained), with local shapes
 * filled in for the calling rank; LADLE_ERR_DEVICE (raised for func) when
 * ladle has no backend for the device. */
ladle_status ladle__op_new(const ladle_op_vtable *vt, ladle_dtype dtype, ladle_device device,
                           unsigned flags, const ladle_layout *x, const ladle_layout *y,
                           ladle_op **out, const char *func);

/* The private communicator of the members of a and b (b may be NULL or equal
 * to a), in union order: a's ranks, then b's ranks not in a. On members,
 * *comm is new and to_comm[root rank] gives the comm rank of each member (-1
 * for others); on other ranks *comm is MPI_COMM_NULL. Collective over the
 * members. */
ladle_status ladle__op_comm(const ladle_partition *a, const ladle_partition *b,
                            MPI_Comm *comm, int **to_comm);
/* The same for the union of np partitions (NULL entries skipped). */
ladle_status ladle__op_comm_list(int np, const ladle_partition *const *ps, MPI_Comm *comm,
                                 int **to_comm);

/* The last step of every create: finalise both schedules on *comm, allocate
 * and touch the workspace, and agree with the other members on the outcome
 * (local: this rank's status so far; hash: the arguments every member must
 * have passed alike). Takes *op and *comm (both set to NULL; *op may be
 * NULL when creation failed early). On success the op goes to *out, on
 * failure it is destroyed. */
ladle_status ladle__op_finish(ladle_op **op, MPI_Comm *comm, ladle_status local,
                              uint64_t hash, ladle_op **out, const char *func);

/* The largest tag an op's communicator accepts. */
int ladle__tag_ub(MPI_Comm comm);

/* Check a call's tensors against the op (local checks, then an agreement
 * when the op is checked). */
ladle_status ladle__op_check_io(ladle_op *op, const ladle_tensor *in, int in_is_x,
                                const ladle_tensor *out, const char *func);

/* A planned op's forward split in two (all-sum-reduce buckets overlapping
 * a backward pass): start posts it, progress advances it without waiting,
 * wait finishes it. */
ladle_status ladle__op_start(ladle_op *op, ladle_tensor *x, ladle_tensor *y);
/* A scratch op's record of what its workspace holds (see ws_tags): claim
 * before writing any of it (a first write by this op clears what another
 * op left); label region r (0 or 1, the op's own regions) as holding what
 * (0: nothing reusable); holds says whether it does. Without a record
 * (caller memory) nothing is held. */
static inline void ladle__ws_claim(ladle_op *op)
{
    ladle__ws_tags *t = op->ws_tags;
    if (t && t->who != op) {
        t->who = op;
        t->what[0] = t->what[1] = 0;
    }
}
static inline void ladle__ws_label(ladle_op *op, int r, uint64_t what)
{
    if (op->ws_tags)
        op->ws_tags->what[r] = what;
}
static inline int ladle__ws_holds(const ladle_op *op, int r, uint64_t what)
{
    const ladle__ws_tags *t = op->ws_tags;
    return t && what != 0 && t->who == op && t->what[r] == what;
}
/* Give a scratch op (ws_scratch) mem, at least its ws_bytes on its device,
 * shared with other scratch ops under the one record tags; the owner of mem
 * frees it after the ops. Local; nothing is checked. */
void ladle__op_share_ws(ladle_op *op, void *mem, ladle__ws_tags *tags);

/* A block of the op's own (freed by the op's destroy through be->fn->free),
 * counted as kind and recorded in op->held for the memory model. */
ladle_status ladle__op_block(ladle_op *op, ladle_memory_kind kind, size_t bytes,
                             void **out);
/* One workspace for the scratch ops among ops[0 .. n-1] whose workspace is
 * not the caller's (ws_tags not NULL), on the backend of the first of them
 * (ops on others keep theirs): *mem, as large as the largest, under the one
 * record *tags, which must live as long. With fewer than two such ops
 * nothing changes and *mem is NULL. The caller frees *mem through
 * (*be)->fn->free after the ops. Local. Returns LADLE_ERR_ALLOC. */
ladle_status ladle__share_scratch(int n, ladle_op *const ops[], void **mem,
                                  const ladle_backend **be, ladle__ws_tags *tags);
ladle_status ladle__op_progress(ladle_op *op, int *done);
ladle_status ladle__op_wait(ladle_op *op);

/* 1 if the op was asked to agree on checks (flag or environment). */
unsigned ladle__op_flags_from_env(unsigned flags);

#endif /* LADLE_OP_IMPL_H */
