/*
 * What the distributed layers share: the steps of their creation (the union
 * communicator, agreements, the layer op taking its parts), zero-volume
 * stand-ins, box copies, and the skeleton of a composite layer (a local
 * layer on this rank's block, its parameters, the sums of replicated
 * gradients and the contexts that hold the local layer's).
 */
#ifndef LADLE_DIST_H
#define LADLE_DIST_H

#include "layers/sequential/layer_impl.h"
#include "primitives/primitives_impl.h"
#include "src/core/backend.h"
#include "src/op/make.h"

/* The halo exchange over m's lx for the window w (periodic dimensions
 * included), agreed over m's communicator, and this rank's boxes in *g.
 * Collective over the members. */
ladle_status ladle__dist_halo(ladle__make *m, const ladle_window *w, ladle_op **halo,
                              ladle_halo_geometry *g);

/* P then H of the spatial layers: x (this rank's block) into its place in
 * the padded tensor, then the halo exchange fills the halo cells in place.
 * Collective over the halo's ranks. */
ladle_status ladle__dist_halo_in(const ladle_op *op, ladle_op *halo,
                                 const ladle_halo_geometry *g, const ladle_tensor *x,
                                 ladle_tensor *padded);

/* H* then P*: the halo cells of gpadded added back into their owners'
 * blocks, then this rank's block copied out to dx. Collective over the
 * halo's ranks. */
ladle_status ladle__dist_halo_out(const ladle_op *op, ladle_op *halo,
                                  const ladle_halo_geometry *g, ladle_tensor *gpadded,
                                  ladle_tensor *dx);

/* A tensor of dtype and shape on device (zero volume when any extent is 0). */
ladle_status ladle__dist_tensor(ladle_dtype dtype, ladle_device device, int ndim,
                                const int64_t *shape, ladle_tensor **t);
/* The same for a parameter and its gradient, counted as such
 * (ladle_memory_track). */
ladle_status ladle__dist_param(ladle_dtype dtype, ladle_device device, int ndim,
                               const int64_t *shape, ladle_tensor **t);
ladle_status ladle__dist_grad(ladle_dtype dtype, ladle_device device, int ndim,
                              const int64_t *shape, ladle_tensor **t);

/* Copy (or add, mode) the box of extent ext at offset soff of the
 * contiguous src to offset doff of the contiguous dst, on op's backend. */
ladle_status ladle__dist_box_copy(const ladle_op *op, ladle_box_mode mode, int nd,
                                  const int64_t *ext, const ladle_tensor *src,
                                  const int64_t *soff, ladle_tensor *dst,
                                  const int64_t *doff);

/* ladle__make_open over p_x and p_y for a layer whose arguments every rank
 * passes alike are x's shape (ndim extents, at most 5, folded in when local
 * is LADLE_OK), m's dtype and m's flags. Collective over the members. */
ladle_status ladle__dist_open_xy(ladle__make *m, const ladle_partition *p_x,
                                 const ladle_partition *p_y, int ndim,
                                 const int64_t *x_shape, ladle_status local);

/* The end of a linear layer's creation over m: when local is LADLE_OK the
 * layer op takes impl (*taken says whether it did; the caller then forgets
 * it) and is marked linear; then ladle__make_end. Collective over the
 * members. */
ladle_status ladle__dist_make_linear(ladle__make *m, ladle_status local,
                                     const ladle_op_vtable *vt, void *impl, int *taken,
                                     ladle_op **out);

/* Record in op's held[] (what the memory model reads) the bytes inner
 * holds: its own held[] and its workspace unless that is the caller's (a
 * planned exchange's as COMM, else WORKSPACE). For the ops a layer keeps
 * in its impl beside its base. inner may be NULL. Local. */
void ladle__dist_hold(ladle_op *op, const ladle_op *inner);

/* This rank's coordinates in p (all -1 outside it). */
void ladle__dist_coords(const ladle_partition *p, int *coords);

/*
 * The skeleton of a composite distributed layer. Its impl starts with a
 * ladle__dist_base (the first member, so op->impl points at both), and the
 * vtable slots below then serve it. Parameter i is the local layer's when
 * it has one, else param[i] / grad[i] (zero-volume stand-ins on ranks
 * without a block, or the layer's own tensors, as batch norm's). A ctx
 * holds the local layer's ctx and nsaved tensors shaped like saved_like[k]
 * (copied from saved_from[k] when that is not NULL), and a flag for the
 * layer's use.
 */
typedef struct ladle__dist_base {
    ladle_op *local;
    int nparams;
    ladle_tensor *param[LADLE_MAX_PARAMS],
        *grad[LADLE_MAX_PARAMS]; /* grad[i] may be param[i] */
    /* the sums of replicated gradients: an all-sum-reduce per parameter
     * (or NULL), run in place on a view of the gradient in its shape, with
     * its groups (a group id and an element count per partition rank) */
    ladle_op *sync[LADLE_MAX_PARAMS];
    ladle_tensor *view[LADLE_MAX_PARAMS];
    int *gid[LADLE_MAX_PARAMS];
    int64_t *cnt[LADLE_MAX_PARAMS];
    int nsaved;
    const ladle_tensor *saved_like[2], *saved_from[2];
} ladle__dist_base;

/* The bytes a skeleton's ctx holds (its ctx_held slot). */
struct ladle_ctx;
size_t ladle__dist_ctx_held(const struct ladle_ctx *ctx);
typedef struct ladle__dist_ctx {
    ladle_ctx *local;
    ladle_tensor *saved[2];
    int ready;
} ladle__dist_ctx;

/* Free what the base owns (not the struct around it). */
void ladle__dist_base_free(ladle__dist_base *b);
/* The part-table entry of an impl's base (its member `base`). */
void ladle__dist_base_part(void *member, const ladle_backend *be);
#define LADLE__PART_DIST_BASE(T) LADLE__PART(T, base, ladle__dist_base_part)

/*
 * The plumbing of a layer over a weight grid (the distributed linear, the
 * convolution over a weight grid): y = R (I (x) L_ij) B x', with B the
 * broadcast of this rank's input x' onto the workers, L_ij the worker's
 * local layer (the base's), and R the sum-reduce of the partial outputs
 * onto y's owners; dx' = B* L_ij* R* dy. A ctx holds the broadcast x'
 * (saved[0], the local layer's saved input) and the spread dy (saved[1],
 * which the weight pass reuses; ready says it holds the current dy's): set
 * the base's saved_like to xb and dyp.
 */
typedef struct ladle__dist_grid {
    ladle_op *bcast, *reduce; /* B and R */
    ladle_tensor *xb, *dyp;   /* on the workers, for calls without a ctx */
    ladle_tensor *yp, *dxp;   /* the partial y and the partial dx */
} ladle__dist_grid;

/* The end of a weight-grid layer's creation: the layer op over m (x of
 * shape xs, or lx's box when NULL) takes impl (*taken says whether it did;
 * the caller then forgets it), weighted, linear without bias, of fans
 * fan_in and fan_out and initialised (the block of the global
 * initialisation, not the block's own); then ladle__make_end. Collective
 * over the members. */
ladle_status ladle__dist_grid_end(ladle__make *m, const ladle_op_vtable *vt, void *impl,
                                  const int64_t *xs, int bias, double fan_in,
                                  double fan_out, uint64_t seed, int *taken,
                                  ladle_op **out);

/* Free what the grid owns; and the part-table entry of an impl's grid
 * (its member `grid`). */
void ladle__dist_grid_free(ladle__dist_grid *g);
void ladle__dist_grid_part(void *member, const ladle_backend *be);
#define LADLE__PART_DIST_GRID(T) LADLE__PART(T, grid, ladle__dist_grid_part)
/* y = R L B x (c may be NULL). Collective over B's and R's ranks. */
ladle_status ladle__dist_grid_forward(ladle__dist_base *b, ladle__dist_grid *g,
                                      ladle__dist_ctx *c, const ladle_tensor *x,
                                      ladle_tensor *y);
/* dx = B* L* R* dy: the local layer's backward with a ctx, its adjoint
 * without one (a layer without bias). Collective over B's and R's ranks. */
ladle_status ladle__dist_grid_backward(ladle__dist_base *b, ladle__dist_grid *g,
                                       ladle__dist_ctx *c, const ladle_tensor *dy,
                                       ladle_tensor *dx);
/* The local layer's weight pass on the spread dy. Collective over R's
 * ranks (when the ctx does not hold dy's spread yet). */
ladle_status ladle__dist_grid_backward_weight(ladle__dist_base *b, ladle__dist_grid *g,
                                              ladle__dist_ctx *c, const ladle_tensor *dy);

/* dx = the base's local layer's backward of dy: on c's local ctx, or
 * without a ctx (c NULL) its adjoint, the backward of a layer linear in x;
 * nothing where the base has no local layer. Collective as that layer. */
ladle_status ladle__dist_local_backward(const ladle__dist_base *b, const ladle__dist_ctx *c,
                                        const ladle_tensor *dy, ladle_tensor *dx);

/* A ctx's parts as ladle__dist_ctx_init makes them, in c; and freed (c
 * itself stays). */
ladle_status ladle__dist_ctx_fill(const ladle_op *op, ladle__dist_ctx *c);
void ladle__dist_ctx_empty(ladle__dist_ctx *c);

/* The layer_forward slot of the distributed losses: LADLE_ERR_ARG, a loss
 * runs through ladle_loss_forward. Local. */
ladle_status ladle__dist_loss_no_layer(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                                       ladle_tensor *y, int64_t n);

/* h with a loss descriptor's label smoothing folded in, and its class
 * weights when the descriptor checked good (local is LADLE_OK): the values
 * every member of a distributed loss must pass alike beyond its integers. */
uint64_t ladle__dist_loss_hash(uint64_t h, const ladle_loss_desc *d, ladle_status local);

/* Vtable slots for a layer whose impl starts with a ladle__dist_base. */
ladle_status ladle__dist_ctx_init(const ladle_op *op, ladle_ctx *ctx);
void ladle__dist_ctx_fini(ladle_ctx *ctx);
int ladle__dist_num_params(const ladle_op *op);
ladle_tensor *ladle__dist_param_at(const ladle_op *op, int i, int grad, const char **name);
void ladle__dist_set_training(ladle_op *op, int training);
ladle_status ladle__dist_sync_grads(ladle_op *op);
/* After ladle_op_bind_param: the view the sum of parameter i's copies runs
 * on follows the gradient's new memory. */
void ladle__dist_param_bound(ladle_op *op, int i);

/* The slots above, all of them, for a vtable: what a composite layer whose
 * parameters are its local layer's, summed over their copies, takes from
 * the skeleton (the weight-grid layers: linear and the conv grid). */
#define LADLE__DIST_BASE_SLOTS                                                             \
    .ctx_init = ladle__dist_ctx_init, .ctx_fini = ladle__dist_ctx_fini,                    \
    .ctx_held = ladle__dist_ctx_held,                                                     \
    .num_params = ladle__dist_num_params, .param_at = ladle__dist_param_at,                \
    .set_training = ladle__dist_set_training, .sync_grads = ladle__dist_sync_grads,        \
    .param_bound = ladle__dist_param_bound

/* The sync fields of a parameter's place: the sum over its copies (or
 * NULL), its partition, and its groups as given. */
void ladle__dist_sync_info(const ladle_op *sync, const int *gid, const int64_t *counts,
                           ladle__pinfo *info);

/* The place of a per-channel parameter (batch and group norm's gamma and
 * beta: this rank's channels c_off.. of x's channel dimension 1, summed by
 * base's sync[0]); the ranks with coordinate 0 on every other axis own the
 * blocks. */
void ladle__dist_channel_param_info(const ladle_op *op, const ladle__dist_base *base,
                                    int64_t c_off, ladle__pinfo *info);

/* Plan base's sync[0], the sum of the per-channel parameters' gradients
 * over the ranks that hold the same channels (cid: each rank's group, as
 * ladle__all_sum_reduce_groups takes it; counts: scratch of p_x's size).
 * base takes cid and counts (then NULL). Collective over p_x. */
ladle_status ladle__dist_channel_sync_plan(ladle__make *m, ladle__dist_base *base,
                                           const ladle_partition *p_x, int **cid,
                                           int64_t **counts);

/* Sum the first n gradients over their copies with base's sync[0] (the
 * per-channel parameters above). Collective over the copies. */
ladle_status ladle__dist_channel_sync(ladle__dist_base *base, int n);

/* Whether this rank holds a block of the per-channel layer op's x. Local. */
int ladle__dist_channel_member(const ladle_op *op);

/* The per-rank scratch of a per-channel layer's creation, one entry per
 * rank of p_x: its statistics group (gid), its channel block (cid) and an
 * element count; ladle__dist_channel_sync_plan takes cid and counts. */
typedef struct ladle__dist_groups {
    int *gid, *cid;
    int64_t *counts;
} ladle__dist_groups;

/* g's arrays for size ranks, zeroed; nonzero when all three were made.
 * Local. */
int ladle__dist_groups_alloc(ladle__dist_groups *g, int size);
/* Free what g still holds (NULL members: nothing). */
void ladle__dist_groups_free(ladle__dist_groups *g);

/* gamma (param[0], ones) and beta (param[1], zeros) of cs channels with
 * their gradients, in m's dtype on m's device. Local. */
ladle_status ladle__dist_channel_params(ladle__make *m, ladle__dist_base *base, int64_t cs);

/*
 * What differs between the creations of the per-channel layers (batch and
 * group norm), whose skeleton is ladle__dist_channel_create. d is the
 * layer's descriptor, arg what validate hands on to the other steps.
 */
typedef struct ladle__dist_channel_kind {
    size_t impl_size;
    const ladle__part *parts;
    const ladle_op_vtable *vt;
    /* The checks every rank makes alike (global facts only). Local. */
    ladle_status (*validate)(const void *d, const ladle_partition *p_x, int ndim,
                             const int64_t *x_shape, ladle_dtype dtype, void *arg,
                             const char *func);
    /* The arguments every rank of p_x must pass alike. */
    uint64_t (*hash)(const void *d, const ladle_partition *const *parts, int ndim,
                     const int64_t *x_shape, ladle_dtype dtype, const void *arg);
    /* m's lx, this rank's place in impl and each rank's groups (g's gid and
     * cid). Local. */
    ladle_status (*plan)(ladle__make *m, void *impl, const void *d,
                         const ladle_partition *p_x, int ndim, const int64_t *x_shape,
                         const void *arg, ladle__dist_groups *g);
    /* The reductions over p_x, taking g's cid and counts. Collective over p_x. */
    ladle_status (*reductions)(ladle__make *m, void *impl, const ladle_partition *p_x,
                               ladle__dist_groups *g);
    /* The impl's tensors and host arrays. Local. */
    ladle_status (*allocate)(ladle__make *m, void *impl);
    /* After the op took impl: what lives on the op's backend. Local. */
    ladle_status (*attach)(ladle_op *op, void *impl);
} ladle__dist_channel_kind;

/* A per-channel layer of kind k over p_x (x of global shape x_shape, d's
 * size already checked, flags its flags), raised for func: the checks, the
 * agreement, the plan and the layer op. Collective over p_x. */
ladle_status ladle__dist_channel_create(const ladle__dist_channel_kind *k, const void *d,
                                        unsigned flags, const ladle_partition *p_x,
                                        const int64_t *x_shape, ladle_dtype dtype,
                                        ladle_device device, void *arg, ladle_op **out,
                                        const char *func);

/* Parameter i's group of rank r of the replicas' partition: its id and its
 * element count (0 for a rank without the parameter). */
typedef void (*ladle__dist_group_fn)(const void *arg, int i, int r, int *gid,
                                     int64_t *count);

/* Plan the sums of the first np parameters' gradients over their copies on
 * p: the groups from group(), one grouped all-sum-reduce each and the view
 * it runs on. Every step is agreed over m's communicator. Collective over
 * the members. */
ladle_status ladle__dist_replicas(ladle__make *m, ladle__dist_base *b, int np,
                                  const ladle_partition *p, ladle__dist_group_fn group,
                                  const void *arg);

/* The view that b->sync[i] sums in place: the gradient of parameter i in
 * the sync's shape on this rank (same bytes). Local. */
ladle_status ladle__dist_sync_view(ladle__make *m, ladle__dist_base *b, int i);

#endif /* LADLE_DIST_H */
