/*
 * Max and average pooling on the GPU: the pooling slots of
 * src/core/backend.h (the CPU's are src/backends/cpu/pool.c and
 * pool_direct.c, the oracle).
 *
 * Every kernel is a grid-stride loop over one side of the pooling, so each
 * result is computed by one thread in a fixed order and written once:
 *   - forward: a thread per output walks its window's valid taps in
 *     row-major order (neighbouring threads hold neighbouring windows, so a
 *     warp's loads of one tap fall in a few lines). Max keeps the first
 *     winner by the contract's rule and saves the winning tap's number in
 *     its window: one byte when a window has at most 255 taps (all common
 *     ones: a quarter of the traffic of four), else four. Average sums in
 *     the element type and scales by the divisor's factors, three small
 *     tables pool_setup lays into the workspace.
 *   - backward: a thread per input element gathers from the outputs whose
 *     windows hold it (along each dimension a short range found by two
 *     divisions), in increasing output order: for max the dy of those whose
 *     saved tap is this element, for average every dy times its factors.
 *     No atomics, no zeroing pass: dx is overwritten element by element.
 *   - global average: a group of G threads per plane (G the largest power
 *     of two up to the plane's size, at most a block), so that planes of
 *     7 x 7 or 4 x 4 fill whole warps. Each thread sums its strided share
 *     in double, a tree in shared memory adds the shares in a fixed order;
 *     the backward writes dy / size over the plane with the same groups.
 * The window kernels come in two index types: int32, where every index and
 * intermediate stays below 2^31 (x and y under 2^31 elements: the usual
 * case), taking indices apart with dividers that multiply by a
 * precomputed reciprocal; and int64, which divides. 32-bit arithmetic
 * halves the registers (40 against 64 to 84) and the instructions of these
 * memory-bound kernels.
 */
#include <math.h>

#include "src/backends/cuda/kernel.h"

/* n / d for 0 <= n < 2^31 by a multiply and a shift (m and sh chosen for
 * d by Granlund and Montgomery's round-up method) in the kernels whose
 * indices all fit int32 (I = int32_t); a division in the others. */
typedef struct pool_div {
    int64_t d;
    uint32_t m, sh;
} pool_div;

static pool_div make_div(int64_t d)
{
    pool_div v = {d, 0, 0};
    if (d >= 1 && d < ((int64_t)1 << 31)) { /* 0: an empty extent, never divided by */
        while (((int64_t)1 << v.sh) < d)
            v.sh++;
        /* m = floor(2^32 (2^sh - d) / d) + 1, below 2^32 since 2^(sh-1) < d */
        uint64_t over = ((uint64_t)1 << v.sh) - (uint64_t)d;
        v.m = (uint32_t)((over << 32) / (uint64_t)d + 1);
    }
    return v;
}

template <class I> __device__ __forceinline__ I quot(const pool_div &v, I n)
{
    if constexpr (sizeof(I) == 4) {
        uint32_t u = (uint32_t)n, t = (uint32_t)(((uint64_t)u * v.m) >> 32);
        return (I)((t + u) >> v.sh); /* t <= u < 2^31: no overflow */
    } else {
        return n / (I)v.d;
    }
}

/* What the window kernels take besides their pointers: the geometry in
 * the kernel's index type, the plane sizes, and dividers for the sizes
 * that take an index apart. */
template <class I> struct pool_args {
    I in[3], out[3], k[3], s[3], p[3], d[3];
    I pin, pout;
    pool_div pout_div, pin_div;  /* an index of y or x: its plane */
    pool_div out1_div, out2_div; /* an in-plane index of y: its coordinates */
    pool_div in1_div, in2_div;   /* and of x */
    pool_div s_div[3];           /* the outputs holding an input */
};

template <class I> static pool_args<I> make_args(const ladle_pool_geom *g)
{
    pool_args<I> a;
    for (int d = 0; d < 3; d++) {
        a.in[d] = (I)g->in[d];
        a.out[d] = (I)g->out[d];
        a.k[d] = (I)g->k[d];
        a.s[d] = (I)g->s[d];
        a.p[d] = (I)g->p[d];
        a.d[d] = (I)g->d[d];
        a.s_div[d] = make_div(g->s[d]);
    }
    a.pin = (I)(g->in[0] * g->in[1] * g->in[2]);
    a.pout = (I)(g->out[0] * g->out[1] * g->out[2]);
    a.pout_div = make_div(a.pout);
    a.pin_div = make_div(a.pin);
    a.out1_div = make_div(g->out[1]);
    a.out2_div = make_div(g->out[2]);
    a.in1_div = make_div(g->in[1]);
    a.in2_div = make_div(g->in[2]);
    return a;
}

/* Whether every index and intermediate of the window kernels over `planes`
 * planes stays below 2^31: the indices of x and y, and along each
 * dimension the padded extent and a stride past it (o s, t d, c + p). */
static int fits_int32(const ladle_pool_geom *g, int64_t planes)
{
    const int64_t lim = (int64_t)1 << 31;
    int64_t pin = g->in[0] * g->in[1] * g->in[2], pout = g->out[0] * g->out[1] * g->out[2];
    int ok = planes * pin < lim && planes * pout < lim;
    for (int d = 0; d < 3; d++)
        ok = ok && g->in[d] + 2 * g->p[d] + g->s[d] + g->k[d] * g->d[d] < lim;
    return ok;
}

/* The coordinates of in-plane index r in extents (., e1, e2), dividers
 * by e1 and e2. */
template <class I>
__device__ __forceinline__ void coords(I r, I e1, I e2, const pool_div &d1,
                                       const pool_div &d2, I *c)
{
    I t = quot(d2, r);
    c[2] = r - t * e2;
    c[0] = quot(d1, t);
    c[1] = t - c[0] * e1;
}

/* The valid taps [*lo, *hi) of a window whose first tap is input b: k taps
 * d apart over n inputs (the loop over them is empty when there are none). */
template <class I>
__device__ __forceinline__ void valid_taps(I b, I k, I d, I n, I *lo, I *hi)
{
    if (d == 1) {
        *lo = b < 0 ? -b : 0;
        *hi = n - b < k ? n - b : k;
    } else {
        I h = n - b <= 0 ? 0 : (n - b + d - 1) / d;
        *lo = b < 0 ? (-b + d - 1) / d : 0;
        *hi = h < k ? h : k;
    }
}

/* The outputs [*lo, *hi] whose windows may hold input c along dimension d
 * (each does for dilation 1; otherwise only those with d | c + p - o s). */
template <class I>
__device__ __forceinline__ void holders(const pool_args<I> &a, int d, I c, I *lo, I *hi)
{
    I u = c + a.p[d], v = u - (a.k[d] - 1) * a.d[d];
    I h = quot(a.s_div[d], u);
    *hi = h < a.out[d] - 1 ? h : a.out[d] - 1;
    *lo = v <= 0 ? 0 : quot(a.s_div[d], v + a.s[d] - 1);
}

/* The tap of output o's window along dimension d that is input c, or -1. */
template <class I>
__device__ __forceinline__ I tap_of(const pool_args<I> &a, int d, I c, I o)
{
    I w = c + a.p[d] - o * a.s[d];
    if (a.d[d] == 1)
        return w;
    return w % a.d[d] == 0 ? w / a.d[d] : -1;
}

/* val takes the place of best: larger, or the first NaN over a number */
template <class T> __device__ __forceinline__ bool wins(T val, T best)
{
    return val > best || (val != val && best == best);
}

/* The window of output o (coordinates in o): its first tap per dimension
 * and its valid taps. */
template <class I>
__device__ __forceinline__ void window(const pool_args<I> &a, const I *o, I *b, I *lo,
                                       I *hi)
{
    for (int d = 0; d < 3; d++) {
        b[d] = o[d] * a.s[d] - a.p[d];
        valid_taps(b[d], a.k[d], a.d[d], a.in[d], &lo[d], &hi[d]);
    }
}

template <class T, class W, class I>
__global__ void max_forward(pool_args<I> a, int64_t n, const T *x, T *y, W *saved)
{
    LADLE_GRID_STRIDE(j, n) {
        I q = (I)j, pl = quot(a.pout_div, q), o[3], b[3], lo[3], hi[3];
        coords(q - pl * a.pout, a.out[1], a.out[2], a.out1_div, a.out2_div, o);
        window(a, o, b, lo, hi);
        const T *xp = x + pl * a.pin;
        T best = (T)-INFINITY;
        I at = -1;
        for (I t0 = lo[0]; t0 < hi[0]; t0++) {
            I r0 = (b[0] + t0 * a.d[0]) * a.in[1] + b[1];
            for (I t1 = lo[1]; t1 < hi[1]; t1++) {
                const T *row = xp + (r0 + t1 * a.d[1]) * a.in[2] + b[2];
                I tap = (t0 * a.k[1] + t1) * a.k[2];
                for (I t2 = lo[2]; t2 < hi[2]; t2++) {
                    T v = row[t2 * a.d[2]];
                    if (at < 0 || wins(v, best)) {
                        best = v;
                        at = tap + t2;
                    }
                }
            }
        }
        y[q] = best;
        if (saved != NULL)
            saved[q] = (W)at; /* -1: no winner (255 in a byte, never a tap) */
    }
}

template <class T, class W, class I>
__global__ void max_backward(pool_args<I> a, int64_t n, const T *dy, T *dx, const W *saved)
{
    LADLE_GRID_STRIDE(j, n) {
        I i = (I)j, pl = quot(a.pin_div, i), c[3], lo[3], hi[3];
        coords(i - pl * a.pin, a.in[1], a.in[2], a.in1_div, a.in2_div, c);
        for (int d = 0; d < 3; d++)
            holders(a, d, c[d], &lo[d], &hi[d]);
        const T *g = dy + pl * a.pout;
        const W *w = saved + pl * a.pout;
        T acc = 0;
        for (I o0 = lo[0]; o0 <= hi[0]; o0++) {
            I t0 = tap_of(a, 0, c[0], o0);
            if (t0 < 0)
                continue;
            for (I o1 = lo[1]; o1 <= hi[1]; o1++) {
                I t1 = tap_of(a, 1, c[1], o1);
                if (t1 < 0)
                    continue;
                I q = (o0 * a.out[1] + o1) * a.out[2], tap = (t0 * a.k[1] + t1) * a.k[2];
                for (I o2 = lo[2]; o2 <= hi[2]; o2++) {
                    I t2 = tap_of(a, 2, c[2], o2);
                    if (t2 >= 0 && w[q + o2] == (W)(tap + t2))
                        acc += g[q + o2];
                }
            }
        }
        dx[i] = acc;
    }
}

/* r: the divisor's factors along dimensions 0, 1, 2, one per output, one
 * table after another (pool_setup) */
template <class T, class I>
__global__ void avg_forward(pool_args<I> a, int64_t n, const T *x, T *y, const T *r)
{
    const T *r1 = r + a.out[0], *r2 = r1 + a.out[1];
    LADLE_GRID_STRIDE(j, n) {
        I q = (I)j, pl = quot(a.pout_div, q), o[3], b[3], lo[3], hi[3];
        coords(q - pl * a.pout, a.out[1], a.out[2], a.out1_div, a.out2_div, o);
        window(a, o, b, lo, hi);
        const T *xp = x + pl * a.pin;
        T sum = 0;
        for (I t0 = lo[0]; t0 < hi[0]; t0++) {
            I r0 = (b[0] + t0 * a.d[0]) * a.in[1] + b[1];
            for (I t1 = lo[1]; t1 < hi[1]; t1++) {
                const T *row = xp + (r0 + t1 * a.d[1]) * a.in[2] + b[2];
                for (I t2 = lo[2]; t2 < hi[2]; t2++)
                    sum += row[t2 * a.d[2]];
            }
        }
        y[q] = sum * (r[o[0]] * r1[o[1]] * r2[o[2]]);
    }
}

template <class T, class I>
__global__ void avg_backward(pool_args<I> a, int64_t n, const T *dy, T *dx, const T *r)
{
    const T *r1 = r + a.out[0], *r2 = r1 + a.out[1];
    LADLE_GRID_STRIDE(j, n) {
        I i = (I)j, pl = quot(a.pin_div, i), c[3], lo[3], hi[3];
        coords(i - pl * a.pin, a.in[1], a.in[2], a.in1_div, a.in2_div, c);
        for (int d = 0; d < 3; d++)
            holders(a, d, c[d], &lo[d], &hi[d]);
        const T *g = dy + pl * a.pout;
        T acc = 0;
        for (I o0 = lo[0]; o0 <= hi[0]; o0++) {
            if (tap_of(a, 0, c[0], o0) < 0)
                continue;
            for (I o1 = lo[1]; o1 <= hi[1]; o1++) {
                if (tap_of(a, 1, c[1], o1) < 0)
                    continue;
                I q = (o0 * a.out[1] + o1) * a.out[2];
                T f = r[o0] * r1[o1];
                for (I o2 = lo[2]; o2 <= hi[2]; o2++)
                    if (tap_of(a, 2, c[2], o2) >= 0)
                        acc += g[q + o2] * (f * r2[o2]);
            }
        }
        dx[i] = acc;
    }
}

/* The factors of average pooling's divisor (see the contract): entry j of
 * the three tables laid end to end. */
template <class T> __global__ void avg_factors(ladle_pool_geom g, int64_t n, T *r)
{
    LADLE_GRID_STRIDE(j, n) {
        int d = j < g.out[0] ? 0 : j < g.out[0] + g.out[1] ? 1 : 2;
        int64_t o = j - (d > 0 ? g.out[0] : 0) - (d > 1 ? g.out[1] : 0);
        int64_t b = o * g.s[d] - g.p[d];
        int64_t e = b + g.k[d] < g.in[d] + g.p[d] ? b + g.k[d] : g.in[d] + g.p[d];
        int64_t lo = b > 0 ? b : 0, hi = e < g.in[d] ? e : g.in[d];
        int64_t count = g.count_include_pad ? e - b : hi - lo;
        r[j] = count > 0 ? (T)(1.0 / (double)count) : (T)0;
    }
}

/* Global average: groups of 2^shift threads, one per plane. */
template <class T>
__global__ void global_forward(int64_t planes, int64_t pin, int shift, const T *x, T *y)
{
    __shared__ double part[LADLE_CUDA_THREADS];
    unsigned t = threadIdx.x, size = 1u << shift, lane = t & (size - 1);
    int64_t per = blockDim.x >> shift;
    /* the same number of rounds for every thread of a block: the barriers */
    for (int64_t first = blockIdx.x * per; first < planes; first += gridDim.x * per) {
        int64_t pl = first + (t >> shift);
        double s = 0;
        if (pl < planes)
            for (int64_t j = lane; j < pin; j += size)
                s += (double)x[pl * pin + j];
        part[t] = s;
        __syncthreads();
        for (unsigned h = size >> 1; h > 0; h >>= 1) {
            if (lane < h)
                part[t] += part[t + h];
            __syncthreads();
        }
        /* each group's lane 0 reads only its own slot, which no thread
         * writes before it does again: no barrier before the next round */
        if (lane == 0 && pl < planes)
            y[pl] = (T)(part[t] / (double)pin);
    }
}

template <class T>
__global__ void global_backward(int64_t planes, int64_t pin, int shift, const T *dy, T *dx)
{
    unsigned size = 1u << shift, lane = threadIdx.x & (size - 1);
    int64_t per = blockDim.x >> shift;
    for (int64_t first = blockIdx.x * per; first < planes; first += gridDim.x * per) {
        int64_t pl = first + (threadIdx.x >> shift);
        if (pl >= planes)
            continue;
        T v = (T)(dy[pl] / (double)pin);
        for (int64_t j = lane; j < pin; j += size)
            dx[pl * pin + j] = v;
    }
}

/* The group size of global average for planes of pin elements: log2 of
 * the largest power of two up to pin, at most a block. */
static int global_shift(int64_t pin)
{
    int shift = 0;
    while (shift < 8 && ((int64_t)2 << shift) <= pin)
        shift++;
    return shift;
}

/* Max pooling's winners: one byte per output while a window has at most
 * 255 taps (255 stands for none), else int32. */
static int byte_winners(const ladle_pool_geom *g)
{
    return g->k[0] * g->k[1] * g->k[2] <= 255;
}

template <class T>
static ladle_status global_launch(const ladle_backend *be, int backward, int64_t planes,
                                  int64_t pin, const T *src, T *dst)
{
    int shift = global_shift(pin);
    int64_t per = LADLE_CUDA_THREADS >> shift;
    unsigned blocks = ladle__cuda_blocks(be, (planes + per - 1) / per, 1);
    cudaStream_t st = ladle__cuda_stream(be);
    if (backward) {
        LADLE_LAUNCH(global_backward<T>, blocks, LADLE_CUDA_THREADS, 0, st, planes, pin,
                     shift, src, dst);
        LADLE_CUDA_LAUNCHED("pool_backward");
    } else {
        LADLE_LAUNCH_SYNC(global_forward<T>, blocks, LADLE_CUDA_THREADS, 0, st, planes, pin,
                          shift, src, dst);
        LADLE_CUDA_LAUNCHED("pool_forward");
    }
    return LADLE_OK;
}

/* The window kernels in index type I (the kernel's work: the outputs for
 * a forward, the inputs for a backward). */
template <class T, class I>
static ladle_status forward_i(const ladle_backend *be, const ladle_pool_geom *g,
                              int64_t planes, const T *x, T *y, void *saved, const void *ws)
{
    pool_args<I> a = make_args<I>(g);
    int64_t n = planes * a.pout;
    if (n == 0)
        return LADLE_OK;
    unsigned blocks = ladle__cuda_blocks(be, n, LADLE_CUDA_THREADS);
    cudaStream_t st = ladle__cuda_stream(be);
    if (g->kind == LADLE_POOL_AVG) {
        auto k = avg_forward<T, I>;
        LADLE_LAUNCH(k, blocks, LADLE_CUDA_THREADS, 0, st, a, n, x, y, (const T *)ws);
    } else if (byte_winners(g)) {
        auto k = max_forward<T, uint8_t, I>;
        LADLE_LAUNCH(k, blocks, LADLE_CUDA_THREADS, 0, st, a, n, x, y, (uint8_t *)saved);
    } else {
        auto k = max_forward<T, int32_t, I>;
        LADLE_LAUNCH(k, blocks, LADLE_CUDA_THREADS, 0, st, a, n, x, y, (int32_t *)saved);
    }
    LADLE_CUDA_LAUNCHED("pool_forward");
    return LADLE_OK;
}

template <class T, class I>
static ladle_status backward_i(const ladle_backend *be, const ladle_pool_geom *g,
                               int64_t planes, const T *dy, T *dx, const void *saved,
                               const void *ws)
{
    pool_args<I> a = make_args<I>(g);
    int64_t n = planes * a.pin;
    if (n == 0)
        return LADLE_OK;
    unsigned blocks = ladle__cuda_blocks(be, n, LADLE_CUDA_THREADS);
    cudaStream_t st = ladle__cuda_stream(be);
    if (g->kind == LADLE_POOL_AVG) {
        auto k = avg_backward<T, I>;
        LADLE_LAUNCH(k, blocks, LADLE_CUDA_THREADS, 0, st, a, n, dy, dx, (const T *)ws);
    } else if (byte_winners(g)) {
        auto k = max_backward<T, uint8_t, I>;
        LADLE_LAUNCH(k, blocks, LADLE_CUDA_THREADS, 0, st, a, n, dy, dx,
                     (const uint8_t *)saved);
    } else {
        auto k = max_backward<T, int32_t, I>;
        LADLE_LAUNCH(k, blocks, LADLE_CUDA_THREADS, 0, st, a, n, dy, dx,
                     (const int32_t *)saved);
    }
    LADLE_CUDA_LAUNCHED("pool_backward");
    return LADLE_OK;
}

template <class T>
static ladle_status forward_t(const ladle_backend *be, const ladle_pool_geom *g,
                              int64_t planes, const T *x, T *y, void *saved, const void *ws)
{
    if (g->global)
        return global_launch<T>(be, 0, planes, g->in[0] * g->in[1] * g->in[2], x, y);
    if (fits_int32(g, planes))
        return forward_i<T, int32_t>(be, g, planes, x, y, saved, ws);
    return forward_i<T, int64_t>(be, g, planes, x, y, saved, ws);
}

template <class T>
static ladle_status backward_t(const ladle_backend *be, const ladle_pool_geom *g,
                               int64_t planes, const T *dy, T *dx, const void *saved,
                               const void *ws)
{
    if (g->global)
        return global_launch<T>(be, 1, planes, g->in[0] * g->in[1] * g->in[2], dy, dx);
    if (fits_int32(g, planes))
        return backward_i<T, int32_t>(be, g, planes, dy, dx, saved, ws);
    return backward_i<T, int64_t>(be, g, planes, dy, dx, saved, ws);
}

ladle_status ladle__cuda_pool_plan(const ladle_backend *be, ladle_dtype dtype,
                                   const ladle_pool_geom *g, size_t *ws_bytes,
                                   size_t *saved_bytes)
{
    int64_t pout = g->out[0] * g->out[1] * g->out[2];
    *ws_bytes = 0;
    *saved_bytes = 0;
    if (g->global)
        return LADLE_OK;
    if (g->k[0] * g->k[1] * g->k[2] > INT32_MAX)
        return ladle__raise(LADLE_ERR_SHAPE, "pool_plan", "windows above 2^31 taps");
    if (g->kind == LADLE_POOL_MAX)
        *saved_bytes = (byte_winners(g) ? 1 : sizeof(int32_t)) * (size_t)pout;
    else
        *ws_bytes = (size_t)(g->out[0] + g->out[1] + g->out[2]) * ladle_dtype_size(dtype);
    return LADLE_OK;
}

ladle_status ladle__cuda_pool_setup(const ladle_backend *be, ladle_dtype dtype,
                                    const ladle_pool_geom *g, void *ws)
{
    if (g->global || g->kind != LADLE_POOL_AVG)
        return LADLE_OK;
    int64_t n = g->out[0] + g->out[1] + g->out[2];
    unsigned blocks = ladle__cuda_blocks(be, n, LADLE_CUDA_THREADS);
    cudaStream_t st = ladle__cuda_stream(be);
    if (dtype == LADLE_F32)
        LADLE_LAUNCH(avg_factors<float>, blocks, LADLE_CUDA_THREADS, 0, st, *g, n,
                     (float *)ws);
    else
        LADLE_LAUNCH(avg_factors<double>, blocks, LADLE_CUDA_THREADS, 0, st, *g, n,
                     (double *)ws);
    LADLE_CUDA_LAUNCHED("pool_setup");
    return LADLE_OK;
}

ladle_status ladle__cuda_pool_forward(const ladle_backend *be, ladle_dtype dtype,
                                      const ladle_pool_geom *g, int64_t planes,
                                      const void *x, void *y, void *saved, void *ws)
{
    if (planes <= 0)
        return LADLE_OK;
    if (dtype == LADLE_F32)
        return forward_t<float>(be, g, planes, (const float *)x, (float *)y, saved, ws);
    return forward_t<double>(be, g, planes, (const double *)x, (double *)y, saved, ws);
}

ladle_status ladle__cuda_pool_backward(const ladle_backend *be, ladle_dtype dtype,
                                       const ladle_pool_geom *g, int64_t planes,
                                       const void *dy, void *dx, const void *saved,
                                       void *ws)
{
    if (planes <= 0)
        return LADLE_OK;
    if (dtype == LADLE_F32)
        return backward_t<float>(be, g, planes, (const float *)dy, (float *)dx, saved, ws);
    return backward_t<double>(be, g, planes, (const double *)dy, (double *)dx, saved, ws);
}
