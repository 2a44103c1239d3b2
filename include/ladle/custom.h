/*
 * ladle/custom.h - operators and layers written by the user, from callbacks.
 *
 * A custom op is a ladle_op whose forward and adjoint (or backward) are the
 * caller's functions. Once created it is an op like the built-in ones: the
 * dot-product test (ladle_adjoint_test) checks a linear one's adjoint, the
 * gradient test (ladle_gradient_test) a nonlinear one's backward, and
 * sequentials, networks, pipelines and checkpoints take it as a layer.
 *
 * Two kinds:
 *  - linear (desc.linear = 1): forward is a linear operator F and `adjoint`
 *    is F*. ladle_op_forward / ladle_op_adjoint run them; as a layer the
 *    backward is the adjoint (dx = F* dy).
 *  - nonlinear (desc.linear = 0): forward is y = f(x) and `adjoint` is the
 *    backward, dx = (df/dx)^T dy at the point the forward of the same
 *    context saved (ladle_layer_forward / ladle_layer_backward).
 *
 * Where x and y live: either two layouts (a distributed op; its calls are
 * collective over the union of the layouts' partitions, and the callbacks
 * run on every rank that created the op, with this rank's blocks, which are
 * zero-volume on ranks that hold nothing) or two local shapes (a rank-local
 * op: its calls never communicate). The shapes are fixed at creation: every
 * call passes exactly them, unless the op is `batched` (below).
 *
 * Callbacks return 0 for success. Anything else fails the ladle call with
 * LADLE_ERR_CALLBACK; the callback may say why first with ladle_custom_fail.
 * On a distributed op the ranks agree on the outcome after each callback
 * (one small all-reduce per call), so a callback that fails on one rank
 * fails the call on every rank with the failing rank's message.
 *
 * Callbacks receive the tensors the ladle call received (contiguous, of the
 * op's dtype, on the op's device): on a device, their data is the device's
 * and host code reaches it through ladle_tensor_read / ladle_tensor_write
 * or ladle's own ops. A callback may call ladle (other ops, their forward
 * and adjoint), never the op it serves. It may not keep the tensors after
 * it returns.
 */
#ifndef LADLE_CUSTOM_H
#define LADLE_CUSTOM_H

#include "core.h"
#include "layout.h"
#include "op.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ladle_custom_desc {
    size_t size;      /* sizeof(ladle_custom_desc), set by ladle_custom_desc_init */
    const char *name; /* for messages (copied); NULL: "custom" */
    ladle_dtype dtype;   /* f32 or f64 */
    ladle_device device; /* where x, y, the parameters and gradients live */

    /* either both layouts (a distributed op; the shapes below stay unset,
     * or equal this rank's boxes) ... */
    const ladle_layout *x_layout, *y_layout;
    /* ... or both local shapes (a rank-local op; ndim 0 is a scalar) */
    int x_ndim;
    const int64_t *x_shape;
    int y_ndim;
    const int64_t *y_shape;

    /* 1: forward is linear and `adjoint` its adjoint; 0: a nonlinear layer
     * and `adjoint` its backward (vector-Jacobian product) */
    int linear;

    /* y = F x (or f(x)); saved: this context's scratch (below) */
    int (*forward)(void *user, const ladle_tensor *x, ladle_tensor *y, void *saved);
    /* dx = F* dy, or (df/dx)^T dy at the forward's point; dx is overwritten */
    int (*adjoint)(void *user, const ladle_tensor *dy, ladle_tensor *dx, void *saved);
    /* optional (required with parameters): grads[i] += (df/dparams[i])^T dy
     * for every parameter, at the forward's point */
    int (*backward_weight)(void *user, const ladle_tensor *dy, void *saved);

    /* bytes of host scratch per context that forward may fill for the
     * backward calls of the same context. saved is NULL when this is 0, and
     * for a linear op called outside a layer context (ladle_op_forward,
     * ladle_op_adjoint); a nonlinear op's context-free forwards (inference,
     * the gradient test's differences) get the op's own scratch. */
    size_t saved_bytes;

    /* parameters (borrowed: they and the arrays must outlive the op):
     * num_params tensors of the op's dtype on its device, contiguous, each
     * with a gradient of its shape and a distinct name (checkpoints find a
     * parameter by its name). On a distributed op every rank passes the same
     * names and shapes; each parameter is held whole by every rank and
     * written to a checkpoint by the op's first rank. */
    int num_params;
    ladle_tensor *const *params;
    ladle_tensor *const *grads;
    const char *const *param_names;

    /* passed to every callback; destroy (may be NULL) is called with it
     * exactly once, when the op is destroyed (never when creation fails:
     * user is then still the caller's) */
    void *user;
    void (*destroy)(void *user);

    /* nonzero: dimension 0 of x and y is the batch (both need one), and
     * calls may pass a smaller batch than the shapes above (a short last
     * batch; sequentials need it). The callbacks then see the call's
     * tensors; saved_bytes is still sized for the full batch. 0: every call
     * passes exactly the shapes above. */
    int batched;
} ladle_custom_desc;

/* Zero the descriptor and set its size: a rank-local, nonlinear op in f64
 * on the CPU, no callbacks. Local. Accepts NULL (does nothing). */
LADLE_API void ladle_custom_desc_init(ladle_custom_desc *d);

/* An op from d (which is read, not kept; name and the shapes are copied).
 * Collective over the union of the layouts' partitions for a distributed
 * op (the ranks agree on the outcome), local for a rank-local one.
 * Returns LADLE_ERR_NULL (d, op, forward, adjoint, backward_weight with
 * parameters, a NULL shape, parameter, gradient or name), LADLE_ERR_ARG (a
 * size that is not this library's sizeof(ladle_custom_desc), one layout
 * without the other, a negative or oversized parameter count, repeated
 * names, a parameter that is strided, batched without a dimension to
 * batch), LADLE_ERR_SHAPE (ndim out of
 * 0..LADLE_MAX_NDIM, a negative extent, a shape that disagrees with its
 * layout, a gradient of another shape), LADLE_ERR_DTYPE, LADLE_ERR_DEVICE
 * (a device ladle was built without; a parameter on another device),
 * LADLE_ERR_PARTITION, LADLE_ERR_ALLOC, LADLE_ERR_MPI, LADLE_ERR_REMOTE. */
LADLE_API ladle_status ladle_custom_create(const ladle_custom_desc *d, ladle_op **op);

/* Called by a callback that is about to return nonzero: msg (copied, cut
 * at about 900 bytes) becomes the text of the LADLE_ERR_CALLBACK message.
 * Per thread, like ladle_error_message. Returns 1, so a callback can end
 * with `return ladle_custom_fail("why");`. msg NULL clears it. Local. */
LADLE_API int ladle_custom_fail(const char *msg);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_CUSTOM_H */
