/*
 * Copies and boxes on the GPU (the CPU's are src/backends/cpu/box.c).
 *
 * copy: a plain device-to-device cudaMemcpyAsync when the two ranges are
 * disjoint. cudaMemcpy is undefined for overlapping ranges, so an
 * overlapping copy is split: when the shift between the ranges is at least
 * a sixteenth of the length, into at most 16 runs as long as the shift,
 * each disjoint from its own destination, queued from the end the copy
 * moves towards; a shorter shift goes to one block that copies round after
 * round in the safe direction, a barrier between each round's loads and
 * its stores. Overlapping copies are rare (ladle copies in place or between
 * distinct buffers), so that block's modest speed is acceptable.
 *
 * Boxes (copy_box, pack, unpack): the box is shaped for a walk
 * (src/backends/cuda/walk.h: unit extents dropped, dimensions contiguous on
 * both sides merged). A whole box that is then contiguous becomes a memset
 * (ZERO) or a memcpy (COPY); anything else is one grid-stride kernel whose
 * neighbouring threads take neighbouring elements, so rows of unit stride
 * on both sides, the common case, move coalesced. COPY and ZERO move the
 * elements' bits as unsigned words; ADD adds in the dtype.
 */
#include "src/backends/cuda/walk.h"
#include "src/core/half.h"

namespace
{

template <class T, int MODE> __global__ void box_kernel(ladle_walk w, const T *src, T *dst)
{
    ladle_walk_each(w, [&](int64_t so, int64_t dof) {
        if (MODE == LADLE_BOX_COPY)
            dst[dof] = src[so];
        else if (MODE == LADLE_BOX_ADD)
            dst[dof] = dst[dof] + src[so];
        else
            dst[dof] = T(0);
    });
}

/* ADD of the 2-byte formats (BF: bf16, else f16): the sum in double,
 * rounded once, as the CPU's box copy does */
template <int BF> __global__ void box_add_half(ladle_walk w, const uint16_t *src, uint16_t *dst)
{
    ladle_walk_each(w, [&](int64_t so, int64_t dof) {
        double a = BF ? ladle__bf16_to_f32(dst[dof]) : ladle__f16_to_f32(dst[dof]);
        double b = BF ? ladle__bf16_to_f32(src[so]) : ladle__f16_to_f32(src[so]);
        dst[dof] = BF ? ladle__f64_to_bf16(a + b) : ladle__f64_to_f16(a + b);
    });
}

/* An overlapping copy by one block: rounds of blockDim.x * K words, from
 * the end when dst lies above src (a round's stores land above everything
 * the later rounds read), else from the start. The barrier puts every
 * store of a round after every load of it, and so after the loads of the
 * rounds before. */
template <class W> __global__ void shift_copy(const W *src, W *dst, int64_t n, int up)
{
    enum { K = 4 };
    int64_t round = (int64_t)blockDim.x * K;
    for (int64_t done = 0; done < n; done += round) {
        int64_t lo = up ? (n - done > round ? n - done - round : 0) : done;
        int64_t hi = up ? n - done : (done + round < n ? done + round : n);
        W v[K];
        LADLE_UNROLL
        for (int k = 0; k < K; k++) {
            int64_t j = lo + threadIdx.x + (int64_t)k * blockDim.x;
            if (j < hi)
                v[k] = src[j];
        }
        __syncthreads();
        LADLE_UNROLL
        for (int k = 0; k < K; k++) {
            int64_t j = lo + threadIdx.x + (int64_t)k * blockDim.x;
            if (j < hi)
                dst[j] = v[k];
        }
    }
}

/* An overlapping copy is split into at most this many memcpys. */
const int64_t COPY_RUNS = 16;

ladle_status copy_overlapping(const ladle_backend *be, size_t es, int64_t n,
                              const char *src, char *dst)
{
    cudaStream_t st = ladle__cuda_stream(be);
    int up = dst > src;
    ptrdiff_t bytes = up ? dst - src : src - dst;
    if (bytes % (ptrdiff_t)es != 0) /* no tensor's elements lie so */
        return ladle__raise(LADLE_ERR_ARG, "copy",
                            "overlapping ranges %td bytes apart, not whole elements",
                            bytes);
    int64_t shift = (int64_t)(bytes / (ptrdiff_t)es);
    if (shift * COPY_RUNS >= n) {
        /* runs as long as the shift: each is disjoint from its destination,
         * and what the later runs read lies behind it */
        for (int64_t done = 0; done < n; done += shift) {
            int64_t len = n - done < shift ? n - done : shift;
            size_t at = (size_t)(up ? n - done - len : done) * es;
            LADLE_CUDA_TRY("copy", cudaMemcpyAsync(dst + at, src + at, (size_t)len * es,
                                                   cudaMemcpyDeviceToDevice, st));
        }
        return LADLE_OK;
    }
    if (es == 2) {
        auto k = shift_copy<uint16_t>;
        LADLE_LAUNCH_SYNC(k, 1, 1024, 0, st, (const uint16_t *)src, (uint16_t *)dst, n, up);
    } else if (es == 4) {
        auto k = shift_copy<uint32_t>;
        LADLE_LAUNCH_SYNC(k, 1, 1024, 0, st, (const uint32_t *)src, (uint32_t *)dst, n, up);
    } else {
        auto k = shift_copy<uint64_t>;
        LADLE_LAUNCH_SYNC(k, 1, 1024, 0, st, (const uint64_t *)src, (uint64_t *)dst, n, up);
    }
    LADLE_CUDA_LAUNCHED("copy");
    return LADLE_OK;
}

template <class T>
ladle_status launch_box(const ladle_backend *be, void (*k)(ladle_walk, const T *, T *),
                        const ladle_walk &w, unsigned blocks, const void *src, void *dst)
{
    LADLE_LAUNCH(k, blocks, LADLE_CUDA_THREADS, 0, ladle__cuda_stream(be), w,
                 (const T *)src, (T *)dst);
    LADLE_CUDA_LAUNCHED("copy_box");
    return LADLE_OK;
}

/* COPY and ZERO move the elements' bits as words W. */
template <class W>
ladle_status move_box(const ladle_backend *be, ladle_box_mode mode, const ladle_walk &w,
                      unsigned blocks, const void *src, void *dst)
{
    if (mode == LADLE_BOX_COPY)
        return launch_box(be, box_kernel<W, LADLE_BOX_COPY>, w, blocks, src, dst);
    return launch_box(be, box_kernel<W, LADLE_BOX_ZERO>, w, blocks, src, dst);
}

bool disjoint(const void *a, const void *b, size_t bytes)
{
    const char *x = (const char *)a, *y = (const char *)b;
    return x + bytes <= y || y + bytes <= x;
}

void contiguous(int ndim, const int64_t *ext, int64_t *str)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        str[d] = s;
        s *= ext[d];
    }
}

} // namespace

ladle_status ladle__cuda_copy(const ladle_backend *be, ladle_dtype dtype, int64_t n,
                              const void *src, void *dst)
{
    size_t es = ladle_dtype_size(dtype);
    if (n <= 0 || src == dst)
        return LADLE_OK;
    if (!disjoint(src, dst, (size_t)n * es))
        return copy_overlapping(be, es, n, (const char *)src, (char *)dst);
    LADLE_CUDA_TRY("copy",
                   cudaMemcpyAsync(dst, src, (size_t)n * es, cudaMemcpyDeviceToDevice,
                                   ladle__cuda_stream(be)));
    return LADLE_OK;
}

ladle_status ladle__cuda_copy_box(const ladle_backend *be, ladle_dtype dtype,
                                  ladle_box_mode mode, int ndim, const int64_t *ext,
                                  const void *src, const int64_t *sstr, void *dst,
                                  const int64_t *dstr)
{
    static const int64_t none[LADLE_MAX_NDIM] = {0};
    int64_t e[LADLE_MAX_NDIM], ss[LADLE_MAX_NDIM], ds[LADLE_MAX_NDIM];
    size_t es = ladle_dtype_size(dtype);
    /* ZERO reads no source: its strides may be absent */
    const int64_t *read = mode == LADLE_BOX_ZERO ? none : sstr;
    int nd = ladle__walk_shape(ndim, ext, read, dstr, e, ss, ds);
    if (nd == 0)
        return LADLE_OK;
    cudaStream_t st = ladle__cuda_stream(be);
    if (nd == 1 && ds[0] == 1) {
        size_t bytes = (size_t)e[0] * es;
        if (mode == LADLE_BOX_ZERO) { /* zero bits are 0.0 */
            LADLE_CUDA_TRY("copy_box", cudaMemsetAsync(dst, 0, bytes, st));
            return LADLE_OK;
        }
        if (mode == LADLE_BOX_COPY && ss[0] == 1 && disjoint(src, dst, bytes)) {
            LADLE_CUDA_TRY("copy_box",
                           cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st));
            return LADLE_OK;
        }
    }
    int64_t vol = 1;
    for (int k = 0; k < nd; k++)
        vol *= e[k];
    unsigned blocks = ladle__cuda_blocks(be, vol, LADLE_CUDA_THREADS);
    ladle_walk w = ladle__walk_make(nd, e, ss, ds, (int64_t)blocks * LADLE_CUDA_THREADS);
    if (mode != LADLE_BOX_ADD)
        return es == 2   ? move_box<uint16_t>(be, mode, w, blocks, src, dst)
               : es == 4 ? move_box<uint32_t>(be, mode, w, blocks, src, dst)
                         : move_box<uint64_t>(be, mode, w, blocks, src, dst);
    if (dtype == LADLE_BF16)
        return launch_box(be, box_add_half<1>, w, blocks, src, dst);
    if (dtype == LADLE_F16)
        return launch_box(be, box_add_half<0>, w, blocks, src, dst);
    if (dtype == LADLE_F32)
        return launch_box(be, box_kernel<float, LADLE_BOX_ADD>, w, blocks, src, dst);
    if (dtype == LADLE_F64)
        return launch_box(be, box_kernel<double, LADLE_BOX_ADD>, w, blocks, src, dst);
    /* an i64 box adds as integers */
    return launch_box(be, box_kernel<long long, LADLE_BOX_ADD>, w, blocks, src, dst);
}

ladle_status ladle__cuda_pack(const ladle_backend *be, ladle_dtype dtype, int ndim,
                              const int64_t *ext, const void *src, const int64_t *sstr,
                              void *dst)
{
    int64_t dstr[LADLE_MAX_NDIM];
    contiguous(ndim, ext, dstr);
    return ladle__cuda_copy_box(be, dtype, LADLE_BOX_COPY, ndim, ext, src, sstr, dst, dstr);
}

ladle_status ladle__cuda_unpack(const ladle_backend *be, ladle_dtype dtype,
                                ladle_box_mode mode, int ndim, const int64_t *ext,
                                const void *src, void *dst, const int64_t *dstr)
{
    int64_t sstr[LADLE_MAX_NDIM];
    contiguous(ndim, ext, sstr);
    return ladle__cuda_copy_box(be, dtype, mode, ndim, ext, src, sstr, dst, dstr);
}
