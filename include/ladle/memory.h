/*
 * ladle/memory.h - memory the caller owns: parameters and gradients in the
 * caller's buffers (so a framework's optimizer owns the weights), contexts
 * and workspaces in caller memory, and an allocator hook for what ladle
 * still allocates itself.
 */
#ifndef LADLE_MEMORY_H
#define LADLE_MEMORY_H

#include "core.h"
#include "layers.h"
#include "op.h"

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

#ifdef __cplusplus
}
#endif

#endif /* LADLE_MEMORY_H */
