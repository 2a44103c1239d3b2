/*
 * A strided box walked by a grid-stride loop, shared by the box copies
 * (box.cu: a source and a destination offset per element) and the random
 * fills (random.cu: the generator's counter and the element's offset).
 *
 * Each element of the box, in row-major order, has two offsets, a and b,
 * each a sum of index times stride. The host first drops unit extents and
 * merges neighbouring dimensions that are contiguous with each other in
 * both offsets (ladle__walk_shape), so most boxes become a few long rows;
 * ladle__walk_make then precomputes the walk for a grid of a given size.
 * On the device, ladle_walk_each hands each thread its elements: the
 * thread divides its first index into the box's digits once, and each
 * step of the grid stride adds the stride's own digits with carries, the
 * offsets following by precomputed increments, so the loop has no
 * division. Neighbouring threads take neighbouring elements: rows that are
 * unit stride are read and written coalesced.
 */
#ifndef LADLE_BACKEND_CUDA_WALK_H
#define LADLE_BACKEND_CUDA_WALK_H

#include <string.h>

#include "src/backends/cuda/cuda.h"

/* Loops over the dimensions are unrolled on the GPU, so the digits stay in
 * registers (g++ does not know nvcc's pragma). */
#ifdef LADLE_CUDA_EMU
#define LADLE_UNROLL
#else
#define LADLE_UNROLL _Pragma("unroll")
#endif

/* The walk, passed to kernels by value: dimensions right-aligned (the
 * innermost at LADLE_MAX_NDIM - 1, from `first` on), the grid stride as a
 * row-major index (its digits), the offsets that stride adds, and what a
 * carry out of a digit adds. */
typedef struct ladle_walk {
    int first;
    int64_t vol;
    int64_t ext[LADLE_MAX_NDIM], str_a[LADLE_MAX_NDIM], str_b[LADLE_MAX_NDIM];
    int64_t step[LADLE_MAX_NDIM];
    int64_t step_a, step_b;
    int64_t wrap_a[LADLE_MAX_NDIM], wrap_b[LADLE_MAX_NDIM];
} ladle_walk;

/* The box ext[0..ndim-1] with strides a and b, unit extents dropped and
 * mergeable dimensions merged, into e, sa, sb; returns their count: 0 for
 * an empty box, 1 (one element) for ndim 0. */
static inline int ladle__walk_shape(int ndim, const int64_t *ext, const int64_t *a,
                                    const int64_t *b, int64_t *e, int64_t *sa, int64_t *sb)
{
    int nd = 0;
    for (int d = 0; d < ndim; d++)
        if (ext[d] <= 0)
            return 0;
    for (int d = 0; d < ndim; d++) {
        if (ext[d] == 1)
            continue;
        if (nd > 0 && sa[nd - 1] == ext[d] * a[d] && sb[nd - 1] == ext[d] * b[d]) {
            e[nd - 1] *= ext[d];
            sa[nd - 1] = a[d];
            sb[nd - 1] = b[d];
        } else {
            e[nd] = ext[d];
            sa[nd] = a[d];
            sb[nd] = b[d];
            nd++;
        }
    }
    if (nd == 0) { /* one element, a contiguous run of one */
        e[0] = sa[0] = sb[0] = 1;
        nd = 1;
    }
    return nd;
}

/* The walk of a shaped box (nd >= 1) by a grid of `threads` threads. */
static inline ladle_walk ladle__walk_make(int nd, const int64_t *e, const int64_t *sa,
                                          const int64_t *sb, int64_t threads)
{
    ladle_walk w;
    memset(&w, 0, sizeof w);
    w.first = LADLE_MAX_NDIM - nd;
    w.vol = 1;
    for (int d = 0; d < LADLE_MAX_NDIM; d++)
        w.ext[d] = 1;
    for (int k = 0; k < nd; k++) {
        w.ext[w.first + k] = e[k];
        w.str_a[w.first + k] = sa[k];
        w.str_b[w.first + k] = sb[k];
        w.vol *= e[k];
    }
    int64_t r = threads;
    for (int d = LADLE_MAX_NDIM - 1; d >= w.first; d--) {
        w.step[d] = d > w.first ? r % w.ext[d] : r;
        r = d > w.first ? r / w.ext[d] : 0;
        w.step_a += w.step[d] * w.str_a[d];
        w.step_b += w.step[d] * w.str_b[d];
        if (d > w.first) { /* this digit back by its extent, the next one up */
            w.wrap_a[d] = w.str_a[d - 1] - w.ext[d] * w.str_a[d];
            w.wrap_b[d] = w.str_b[d - 1] - w.ext[d] * w.str_b[d];
        }
    }
    return w;
}

/* f(a, b) for every element this thread takes of the grid's walk over w
 * (the grid of the `threads` given to ladle__walk_make). */
template <class F> __device__ __forceinline__ void ladle_walk_each(const ladle_walk &w, F f)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    if (i >= w.vol)
        return;
    int64_t idx[LADLE_MAX_NDIM], a = 0, b = 0, r = i;
    LADLE_UNROLL
    for (int d = LADLE_MAX_NDIM - 1; d >= 0; d--) {
        idx[d] = 0;
        if (d >= w.first) {
            idx[d] = d > w.first ? r % w.ext[d] : r;
            r = d > w.first ? r / w.ext[d] : 0;
            a += idx[d] * w.str_a[d];
            b += idx[d] * w.str_b[d];
        }
    }
    for (;;) {
        f(a, b);
        i += stride;
        if (i >= w.vol)
            return;
        /* the outermost digit is not kept: it never wraps */
        a += w.step_a;
        b += w.step_b;
        int64_t carry = 0;
        LADLE_UNROLL
        for (int d = LADLE_MAX_NDIM - 1; d >= 1; d--) {
            if (d > w.first) {
                idx[d] += w.step[d] + carry;
                carry = idx[d] >= w.ext[d];
                if (carry) {
                    idx[d] -= w.ext[d];
                    a += w.wrap_a[d];
                    b += w.wrap_b[d];
                }
            }
        }
    }
}

#endif /* LADLE_BACKEND_CUDA_WALK_H */
