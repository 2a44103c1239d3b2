/*
 * ladle/memory.h - memory the caller owns: parameters and gradients in the
 * caller's buffers (so a framework's optimizer owns the weights), contexts
 * and workspaces in caller memory, and an allocator hook for what ladle
 * still allocates itself.
 */
#ifndef LADLE_MEMORY_H
#define LADLE_MEMORY_H

#include "comm.h"
#include "core.h"
#include "graph.h"
#include "layers.h"
#include "network.h"
#include "op.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parameter i of a layer (and its gradient, unless grad is NULL) lives in
 * caller memory from now on: param holds the contiguous, row-major shard of
 * ladle_op_param_shard's local shape (ladle_tensor_shape(ladle_op_param(op,
 * i))), of the layer's dtype, on its device, aligned to its elements; grad
 * the same for the gradient. Nothing is copied: the buffers' contents are
 * the parameter and its gradient from then on (read ladle's initial values
 * out first with ladle_tensor_read to keep them). ladle frees its own
 * memory for them now and never frees the caller's, which must outlive the
 * op. ladle_op_param and ladle_op_grad keep returning the same tensors, so
 * optimizers and networks made before or after see the new memory. On a
 * rank whose shard is zero-volume the buffers may be NULL. Works for the
 * built-in layers with parameters (sequential and distributed) and
 * containers (their layers' parameters); not for custom ops, whose
 * parameters are the caller's already. Local; not while a call of the op
 * runs. Returns LADLE_ERR_NULL (op; a NULL buffer for a shard that holds
 * elements), LADLE_ERR_ARG (not a layer, i out of range, a misaligned
 * buffer), LADLE_ERR_DEVICE (a buffer that is not memory of the op's
 * device, where its backend can tell), LADLE_ERR_UNSUPPORTED (a custom op).
 * On failure nothing changed. */
LADLE_API ladle_status ladle_op_bind_param(ladle_op *op, int i, void *param, void *grad);

/* Bytes that ladle_ctx_create_in needs for a context of op: 0 when op's
 * contexts cannot live in caller memory (containers, distributed layers,
 * custom ops, whose contexts hold more than one block; and layers off the
 * CPU that save state). Local. */
LADLE_API size_t ladle_ctx_bytes(const ladle_op *op);

/* Bytes of saved state ctx holds on its op's device: what the op saves
 * for its backward (ladle_ctx_bytes less the header) plus, for a
 * container, its layers' contexts and the intermediate activations and
 * gradients it owns, recursively. The x and y the caller keeps for the
 * backward are the caller's, not counted. This is the activation memory of
 * one microbatch in flight; compare it with and without
 * ladle_recompute_create. Local. 0 for NULL. */
LADLE_API size_t ladle_ctx_bytes_held(const ladle_ctx *ctx);

/* A context of op in the caller's mem (bytes >= ladle_ctx_bytes(op),
 * aligned to 64 bytes, host memory): the same as ladle_ctx_create's but
 * allocating nothing. ladle_ctx_destroy releases nothing of it either; mem
 * is the caller's again after it. Local. Returns LADLE_ERR_NULL,
 * LADLE_ERR_ARG (not a layer; bytes too small, naming the size needed;
 * misaligned mem), LADLE_ERR_UNSUPPORTED (ladle_ctx_bytes is 0 for op). */
LADLE_API ladle_status ladle_ctx_create_in(const ladle_op *op, void *mem, size_t bytes,
                                           ladle_ctx **ctx);

/* The op's planned workspace (ladle_op_workspace_bytes, the primitives'
 * message buffers) moves to the caller's mem, bytes >= that size, memory of
 * the op's device: ladle frees its own and never frees mem, which must
 * outlive the op (or the next call of this). Several ops may share one
 * workspace as long as their calls never overlap. A layer whose workspace
 * is scratch (the attention, the tensor-parallel layers) then trusts
 * nothing left in it from an earlier call: the tensor-parallel layers
 * gather again what their weight pass needs. (A graph shares one workspace
 * among such layers by itself, keeping a record of what it holds.) Calls with a workspace of
 * 0 bytes accept any mem (NULL too). Local; not while a call of the op
 * runs. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (too small, naming the size
 * needed), LADLE_ERR_DEVICE (memory of another device, where the backend
 * can tell), LADLE_ERR_STATE (a split call in flight). */
LADLE_API ladle_status ladle_op_set_workspace(ladle_op *op, void *mem, size_t bytes);

/* An allocator for what ladle allocates itself: the objects, their plans,
 * and the memory of CPU tensors and buffers (device memory of other
 * devices stays their backend's). alloc returns bytes of memory aligned to
 * align (a power of two, at most 64) or NULL; free gets back exactly a
 * pointer, its size and device from alloc. */
typedef struct ladle_allocator {
    size_t size; /* sizeof(ladle_allocator) */
    void *(*alloc)(void *user, size_t bytes, size_t align, ladle_device device);
    void (*free)(void *user, void *ptr, size_t bytes, ladle_device device);
    void *user;
} ladle_allocator;

/* Make a (copied) the calling thread's allocator; NULL restores ladle's
 * own. Per thread, like the error message, so that ladle keeps no global
 * mutable state and threads embedding ladle for different owners never see
 * each other's allocator. Every block ladle allocates records the
 * allocator current then and is freed through it, whichever thread frees
 * it, so objects made under an allocator may outlive its being current
 * (its user pointer must stay valid until they are destroyed). Forward,
 * adjoint, backward and the optimizer steps never allocate, so they never
 * call it. Local. Returns LADLE_ERR_ARG (a size that is not
 * sizeof(ladle_allocator)), LADLE_ERR_NULL (alloc or free NULL). */
LADLE_API ladle_status ladle_allocator_set(const ladle_allocator *a);

/*
 * Memory accounting. A tracker counts, per kind, the bytes ladle allocates
 * on the CPU device (tensors, contexts, workspaces, buffers) and in host
 * objects (plans, tables: kind OTHER) while it is the calling thread's
 * tracker; each block remembers its tracker and kind, so freeing it, on any
 * thread, takes its bytes off the same figures. The counters live in the
 * tracker, which the caller creates: ladle keeps no global figures. Device
 * memory of other backends (CUDA) is not counted yet. Counting happens
 * where ladle allocates, at creation; forward, adjoint, backward and the
 * optimizer steps allocate nothing, so they leave the figures alone.
 */
typedef enum ladle_memory_kind {
    LADLE_MEM_PARAMS = 0,      /* the layers' parameters */
    LADLE_MEM_GRADS = 1,       /* their gradients */
    LADLE_MEM_OPTIM = 2,       /* optimizer states: momenta, moments, f32 masters */
    LADLE_MEM_ACTIVATIONS = 3, /* saved contexts, a chain's or graph's intermediate
                                  values and their gradients */
    LADLE_MEM_GATHER = 4,      /* gathered copies of sharded parameters */
    LADLE_MEM_WORKSPACE = 5,   /* the layers' scratch workspaces */
    LADLE_MEM_COMM = 6,  /* message buffers: the primitives' workspaces, gradient buckets */
    LADLE_MEM_OTHER = 7, /* the rest: host objects, plans, constants */
    LADLE_MEM_KINDS = 8
} ladle_memory_kind;

/* The kind's name ("params", "grads", "optim", "activations", "gather",
 * "workspace", "comm", "other"), or "unknown". Local. */
LADLE_API const char *ladle_memory_kind_name(ladle_memory_kind kind);

typedef struct ladle_memory_tracker ladle_memory_tracker;

/* A tracker with every figure 0, not yet any thread's. Local. Returns
 * LADLE_ERR_NULL, LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_memory_tracker_create(ladle_memory_tracker **t);

/* Frees the tracker and nulls *t; NULL and *t NULL are fine. The tracker
 * must be no thread's (ladle_memory_track(NULL) first), and blocks it still
 * counts (current bytes above 0) must be freed first: LADLE_ERR_STATE,
 * naming the bytes, otherwise, and nothing is freed. Local. */
LADLE_API ladle_status ladle_memory_tracker_destroy(ladle_memory_tracker **t);

/* Make t the calling thread's tracker (NULL: none): what ladle allocates on
 * this thread from now on counts in t, until another call. Per thread,
 * like the allocator (ladle_allocator_set). A tracker is not thread safe:
 * the blocks it counts must be made and freed by one thread at a time.
 * Local. Returns LADLE_OK. */
LADLE_API ladle_status ladle_memory_track(ladle_memory_tracker *t);

/* The calling thread's tracker, or NULL. Local. */
LADLE_API ladle_memory_tracker *ladle_memory_tracking(void);

/* A tracker's figures: current[k] the bytes of kind k held now, peak[k] the
 * most held at once since creation (or the last reset); total and
 * peak_total the same over all kinds (peak_total is at most the sum of the
 * kinds' peaks, which need not have come at once). Bytes are what ladle
 * asked for, without its allocators' headers. */
typedef struct ladle_memory_stats {
    size_t size; /* sizeof(ladle_memory_stats), set by ladle_memory_stats_init */
    size_t current[LADLE_MEM_KINDS];
    size_t peak[LADLE_MEM_KINDS];
    size_t total, peak_total;
} ladle_memory_stats;

/* Zero s and set its size. Local. */
LADLE_API void ladle_memory_stats_init(ladle_memory_stats *s);

/* Fill s (its size set by ladle_memory_stats_init) with t's figures, this
 * rank's. Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (s->size). */
LADLE_API ladle_status ladle_memory_report(const ladle_memory_tracker *t,
                                           ladle_memory_stats *s);

/* The element-wise maximum over the ranks of comm of each rank's s (which
 * ladle_memory_report or a model filled), in place: every figure becomes
 * the largest any rank has. Collective over comm: every rank of comm calls
 * it. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (s->size), LADLE_ERR_MPI. */
LADLE_API ladle_status ladle_memory_stats_max(ladle_memory_stats *s, ladle_comm comm);

/* Start t's peaks again from what it holds now (peak = current). Local.
 * Returns LADLE_ERR_NULL. */
LADLE_API ladle_status ladle_memory_reset_peak(ladle_memory_tracker *t);

/* The figures for one rank of a chain and its optimizer, computed from
 * their shapes and sizes without allocating: parameters and gradients
 * from each layer's parameter shards, the optimizer's states by its kind
 * (SGD with momentum one per parameter, Adam and AdamW two, each f32 for
 * 2-byte parameters, which also get an f32 master and the widest f32
 * gradient), activations from each context's ladle_ctx_bytes_held plus the
 * chain's intermediate values and gradients (one microbatch in flight),
 * workspaces (shared ones once), the gradient buckets and the
 * distributed layers' own reductions as comm (at ZeRO stages 1 and 2 the
 * optimizer's states are the buckets' parameter slices'). Host
 * objects (OTHER) are not modelled (0). current[k] = peak[k] is the
 * figure of kind k, total = peak_total their sum: ladle allocates at
 * creation only, so the peak of a step is what creation left. opt may be
 * NULL (no optimizer). Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG
 * (s->size, a bad opt). */
LADLE_API ladle_status ladle_network_memory_model(const ladle_network *net,
                                                  const ladle_optimizer_desc *opt,
                                                  ladle_memory_stats *s);
/* The same for a finalized graph: its layers, its values and their
 * gradients as activations. Local. LADLE_ERR_STATE for a graph not
 * finalized. */
LADLE_API ladle_status ladle_graph_memory_model(const ladle_graph *g,
                                                const ladle_optimizer_desc *opt,
                                                ladle_memory_stats *s);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_MEMORY_H */
