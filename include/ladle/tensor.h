/*
 * ladle/tensor.h - one rank's local shard of a tensor.
 *
 * A tensor has an element type, a device, a shape of up to LADLE_MAX_NDIM
 * dimensions, strides (in elements) and a data pointer. It either owns its
 * memory (ladle_tensor_create) or borrows the caller's
 * (ladle_tensor_wrap, the embedding path: no copy is forced on the caller).
 * A tensor whose shape has a zero extent is zero-volume: it is what a rank
 * passes when it holds nothing of a distributed tensor. None of these calls
 * is collective.
 */
#ifndef LADLE_TENSOR_H
#define LADLE_TENSOR_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ladle_tensor ladle_tensor;

/* Create a contiguous (row-major) tensor on device that owns its memory,
 * filled with zeros. ndim may be 0 (a scalar); an extent may be 0 (zero
 * volume, no memory is allocated). A tensor holds at most 2^57 elements,
 * and its extents multiplied with zeros counted as ones may not pass 2^57
 * either (its strides must fit). *t is set only on success. Local.
 * Returns LADLE_ERR_NULL, LADLE_ERR_ARG (bad ndim or dtype),
 * LADLE_ERR_SHAPE (negative extent, a volume or strides too large),
 * LADLE_ERR_DEVICE (ladle built without the device's backend),
 * LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_tensor_create(ladle_dtype dtype, ladle_device device, int ndim,
                                           const int64_t shape[], ladle_tensor **t);

/* Wrap caller memory without copying. strides (in elements, non-negative)
 * may be NULL for the contiguous row-major layout; the last element's offset
 * must stay below 2^57 (else LADLE_ERR_ARG). data may be NULL only when
 * the volume is zero. The memory must outlive the tensor; destroying the
 * tensor does not free it. Local. Returns the codes of ladle_tensor_create. */
LADLE_API ladle_status ladle_tensor_wrap(ladle_dtype dtype, ladle_device device, int ndim,
                                         const int64_t shape[], const int64_t strides[],
                                         void *data, ladle_tensor **t);

/* Point a wrapping tensor at other caller memory of the same layout, so a
 * framework can reuse one wrapper for every call without allocating.
 * Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG for an owning tensor. */
LADLE_API ladle_status ladle_tensor_set_data(ladle_tensor *t, void *data);

/* Free the tensor (and its memory if owned) and set *t to NULL. Accepts
 * t == NULL and *t == NULL. Local. */
LADLE_API ladle_status ladle_tensor_destroy(ladle_tensor **t);

/* Accessors; each returns 0 / NULL for t == NULL. The shape and stride
 * arrays have ladle_tensor_ndim() entries and live as long as the tensor.
 * Local. */
LADLE_API ladle_dtype ladle_tensor_dtype(const ladle_tensor *t);
LADLE_API ladle_device ladle_tensor_device(const ladle_tensor *t);
LADLE_API int ladle_tensor_ndim(const ladle_tensor *t);
LADLE_API const int64_t *ladle_tensor_shape(const ladle_tensor *t);
LADLE_API const int64_t *ladle_tensor_strides(const ladle_tensor *t);
LADLE_API int64_t ladle_tensor_numel(const ladle_tensor *t);
LADLE_API void *ladle_tensor_data(const ladle_tensor *t);
/* 1 when the strides are the row-major ones of the shape (always true for a
 * zero-volume tensor), else 0. Local. */
LADLE_API int ladle_tensor_is_contiguous(const ladle_tensor *t);

/* Set every element to value, on the tensor's device. Local. Returns
 * LADLE_ERR_NULL, LADLE_ERR_DEVICE, and LADLE_ERR_UNSUPPORTED for an i64
 * tensor that is strided or not in host memory. */
LADLE_API ladle_status ladle_tensor_fill(ladle_tensor *t, double value);

/* Copy src into dst elementwise; shapes and dtypes must match (strides may
 * differ). The two may live on different devices when one of them is host
 * memory (the CPU) and both are contiguous. Returns once the copy is done.
 * Local. Returns LADLE_ERR_NULL, LADLE_ERR_SHAPE, LADLE_ERR_DTYPE,
 * LADLE_ERR_DEVICE, LADLE_ERR_UNSUPPORTED (strided tensors on two devices). */
LADLE_API ladle_status ladle_tensor_copy(ladle_tensor *dst, const ladle_tensor *src);

/* dst = src converted elementwise between f32, f64, bf16 and f16 (any
 * pair; the same dtype copies): rounded to nearest, ties to even, values
 * past the target's range to inf, NaN kept as a quiet NaN, subnormals
 * kept; from f64 to bf16 or f16 rounded once (no double rounding). The
 * bits are the same on every device. Shapes must match; both tensors
 * contiguous, on one device, not overlapping. Queued on the device like
 * the layers' calls (on the CPU done on return). Local. Returns
 * LADLE_ERR_NULL, LADLE_ERR_DTYPE (i64 or an unknown dtype),
 * LADLE_ERR_SHAPE, LADLE_ERR_DEVICE (two devices, or none built),
 * LADLE_ERR_UNSUPPORTED (strided), LADLE_ERR_ARG (overlapping). */
LADLE_API ladle_status ladle_tensor_convert(ladle_tensor *dst, const ladle_tensor *src);

/* Copy a contiguous tensor's numel elements, wherever it lives, to host
 * memory (read) or from it (write); returns once the copy is done. This is
 * how host code reaches a device tensor: its data pointer is the device's.
 * Local. Returns LADLE_ERR_NULL, LADLE_ERR_DEVICE, LADLE_ERR_UNSUPPORTED
 * (strided). */
LADLE_API ladle_status ladle_tensor_read(const ladle_tensor *t, void *host);
LADLE_API ladle_status ladle_tensor_write(ladle_tensor *t, const void *host);

/* Element index of t (row-major over the shape, whatever the strides) as a
 * double, and setting it: f32, f64, bf16, f16 (set rounds to nearest
 * even, once) and i64 (converted, exact up to 2^53).
 * Each call is one synchronous transfer through the tensor's backend, so it
 * is slow on a device: meant for tests and small scalars, never for loops
 * over data. Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG (index
 * outside 0 .. numel-1), LADLE_ERR_DTYPE, LADLE_ERR_DEVICE. */
LADLE_API ladle_status ladle_tensor_get(const ladle_tensor *t, int64_t index, double *value);
LADLE_API ladle_status ladle_tensor_set(ladle_tensor *t, int64_t index, double value);

/* Sum over all elements of a * b, accumulated in double. Shapes, dtypes and
 * devices must match. Local; the sum is over this rank's tensor only.
 * Returns the codes of ladle_tensor_copy. */
LADLE_API ladle_status ladle_tensor_dot(const ladle_tensor *a, const ladle_tensor *b,
                                        double *result);

/* Fill with uniform random values in [-1, 1) from a counter-based generator:
 * element i (in row-major order) gets a value that depends only on
 * (seed, stream, i), so the same call gives the same values on any rank
 * count. Local. Returns LADLE_ERR_NULL. */
LADLE_API ladle_status ladle_tensor_fill_random(ladle_tensor *t, uint64_t seed,
                                                uint64_t stream);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_TENSOR_H */
