/*
 * Adaptive average and max pooling and interpolation on the GPU (the plane
 * walker's slots; the CPU's are src/backends/cpu/adaptive.c and interp.c).
 * Both map each output of the output box to a few inputs of the input box
 * through one definition shared with the CPU and the distributed layers
 * (ladle__adaptive_window, ladle__interp_taps in src/core/backend.h,
 * compiled for the device too).
 *
 *   - forward: a thread per output element, gathering its window or taps
 *     in double in the CPU's order and rounding once.
 *   - backward: a thread per input element, gathering (no atomics, dx
 *     written once): along each dimension the outputs reading input i form
 *     one run, since the windows' ends and the taps' first index rise with
 *     the output index; two binary searches find it. Per dimension a
 *     weight (1 / the window's extent, or the sum of the taps' weights at
 *     i), and dx[i] is the sum over the runs' product of dy times those
 *     weights, in double, rounded once: as accurate as the CPU's scatter,
 *     which adds in the dtype, or more.
 *   - adaptive max: the forward a thread per output, scanning its window in
 *     the CPU's row-major order (the first of equal values wins, and the
 *     first NaN); the backward a thread per input over the same run of
 *     outputs, adding the dy of those whose saved winner it is, in output
 *     order and in double, rounded once.
 */
#include "src/backends/cuda/kernel.h"

/* Volume of a box of extents n[0..2]. */
__device__ __forceinline__ int64_t box_volume(const int64_t n[3])
{
    return n[0] * n[1] * n[2];
}

/* Element e of a box of extents n as its three indices. */
__device__ __forceinline__ void box_index(const int64_t n[3], int64_t e, int64_t idx[3])
{
    idx[2] = e % n[2];
    idx[1] = e / n[2] % n[1];
    idx[0] = e / (n[2] * n[1]);
}

/* ---- adaptive average pooling ---- */

/* The window of local output o along a, local to the input box. */
__device__ __forceinline__ void local_window(const ladle_adaptive_geom &g, int a, int64_t o,
                                             int64_t *b, int64_t *e)
{
    ladle__adaptive_window(g.in[a], g.out[a], g.y_off[a] + o, b, e);
    *b -= g.x_off[a];
    *e -= g.x_off[a];
}

/* The first local output along a whose window ends after local input i
 * (ends 0) or begins after it (ends 1); y_n[a] when there is none. */
__device__ __forceinline__ int64_t first_window(const ladle_adaptive_geom &g, int a,
                                                int64_t i, int begins)
{
    int64_t lo = 0, hi = g.y_n[a];
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2, b, e;
        local_window(g, a, mid, &b, &e);
        if ((begins ? b : e) > i)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Along each dimension the run a thread sums over: forward, output o's
 * window (of local inputs); backward, the local outputs whose windows hold
 * input o. */
__device__ __forceinline__ void adaptive_runs(const ladle_adaptive_geom &g, int adjoint,
                                              const int64_t o[3], int64_t lo[3],
                                              int64_t hi[3])
{
    for (int a = 0; a < 3; a++) {
        if (adjoint) {
            lo[a] = first_window(g, a, o[a], 0);
            hi[a] = first_window(g, a, o[a], 1);
        } else {
            local_window(g, a, o[a], &lo[a], &hi[a]);
        }
    }
}

/* The size of local output o's window. */
__device__ __forceinline__ double window_size(const ladle_adaptive_geom &g, int64_t oz,
                                              int64_t oy, int64_t ox)
{
    int64_t b[3], e[3], o[3] = {oz, oy, ox};
    for (int a = 0; a < 3; a++)
        local_window(g, a, o[a], &b[a], &e[a]);
    return (double)((e[0] - b[0]) * (e[1] - b[1]) * (e[2] - b[2]));
}

/* Forward (ADJ 0): each output's window summed in order and divided by
 * its size; backward (ADJ 1): each input's sum of dy / size over the
 * outputs holding it. A thread per element of dst. */
template <class T, int ADJ>
__global__ void adaptive_kernel(ladle_adaptive_geom g, int64_t planes, const T *src, T *dst)
{
    const int64_t *ns = ADJ ? g.y_n : g.x_n, *nd = ADJ ? g.x_n : g.y_n;
    int64_t vs = box_volume(ns), vd = box_volume(nd);
    LADLE_GRID_STRIDE(e, planes * vd)
    {
        int64_t o[3], lo[3], hi[3];
        box_index(nd, e % vd, o);
        adaptive_runs(g, ADJ, o, lo, hi);
        const T *sp = src + e / vd * vs;
        double acc = 0;
        for (int64_t z = lo[0]; z < hi[0]; z++)
            for (int64_t yy = lo[1]; yy < hi[1]; yy++)
                for (int64_t xx = lo[2]; xx < hi[2]; xx++) {
                    double v = (double)sp[(z * ns[1] + yy) * ns[2] + xx];
                    acc += ADJ ? v / window_size(g, z, yy, xx) : v;
                }
        dst[e] = (T)(ADJ ? acc : acc / window_size(g, o[0], o[1], o[2]));
    }
}

/* ---- adaptive max pooling ---- */

/* v takes the place of m: larger, or the first NaN over a number. */
__device__ __forceinline__ bool max_wins(double v, double m)
{
    return v > m || (v != v && m == m);
}

/* A thread per output: the first largest value of its window (the first
 * NaN), and its index in the plane when idx is not NULL. */
template <class T>
__global__ void adaptive_max_fwd_kernel(ladle_adaptive_geom g, int64_t planes, const T *x,
                                        int64_t *idx, T *y)
{
    int64_t ny = box_volume(g.y_n), nx = box_volume(g.x_n);
    LADLE_GRID_STRIDE(e, planes * ny)
    {
        int64_t o[3], lo[3], hi[3];
        box_index(g.y_n, e % ny, o);
        adaptive_runs(g, 0, o, lo, hi);
        const T *xp = x + e / ny * nx;
        int64_t win = (lo[0] * g.x_n[1] + lo[1]) * g.x_n[2] + lo[2];
        double m = (double)xp[win];
        for (int64_t z = lo[0]; z < hi[0]; z++)
            for (int64_t yy = lo[1]; yy < hi[1]; yy++)
                for (int64_t xx = lo[2]; xx < hi[2]; xx++) {
                    int64_t k = (z * g.x_n[1] + yy) * g.x_n[2] + xx;
                    double v = (double)xp[k];
                    if (max_wins(v, m)) {
                        m = v;
                        win = k;
                    }
                }
        y[e] = (T)m;
        if (idx != NULL)
            idx[e] = win;
    }
}

/* A thread per input: the sum of dy over the outputs whose window holds it
 * and whose saved winner it is. */
template <class T>
__global__ void adaptive_max_bwd_kernel(ladle_adaptive_geom g, int64_t planes, const T *dy,
                                        const int64_t *idx, T *dx)
{
    int64_t ny = box_volume(g.y_n), nx = box_volume(g.x_n);
    LADLE_GRID_STRIDE(e, planes * nx)
    {
        int64_t i[3], lo[3], hi[3], self = e % nx, base = e / nx * ny;
        box_index(g.x_n, self, i);
        adaptive_runs(g, 1, i, lo, hi);
        double acc = 0;
        for (int64_t oz = lo[0]; oz < hi[0]; oz++)
            for (int64_t oy = lo[1]; oy < hi[1]; oy++)
                for (int64_t ox = lo[2]; ox < hi[2]; ox++) {
                    int64_t o = base + (oz * g.y_n[1] + oy) * g.y_n[2] + ox;
                    if (idx[o] == self)
                        acc += (double)dy[o];
                }
        dx[e] = (T)acc;
    }
}

/* ---- interpolation ---- */

/* The taps of local output o along a, local to the input box. */
__device__ __forceinline__ void local_taps(const ladle_interp_geom &g, int a, int64_t o,
                                           int64_t i[2], double w[2])
{
    ladle__interp_taps(&g, a, g.y_off[a] + o, i, w);
    i[0] -= g.x_off[a];
    i[1] -= g.x_off[a];
}

/* The first local output along a whose first tap is at least i (above 0)
 * or above i (above 1); y_n[a] when there is none. */
__device__ __forceinline__ int64_t first_tap(const ladle_interp_geom &g, int a, int64_t i,
                                             int above)
{
    int64_t lo = 0, hi = g.y_n[a];
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2, t[2];
        double w[2];
        local_taps(g, a, mid, t, w);
        if (above ? t[0] > i : t[0] >= i)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* The weight with which local output o along a reads local input i: the
 * sum of its taps' weights there (nearest has one tap). */
__device__ __forceinline__ double tap_weight(const ladle_interp_geom &g, int a, int64_t o,
                                             int64_t i)
{
    int64_t t[2];
    double w[2];
    local_taps(g, a, o, t, w);
    return (t[0] == i ? w[0] : 0.0) + (g.linear && t[1] == i ? w[1] : 0.0);
}

template <class T>
__global__ void interp_fwd_kernel(ladle_interp_geom g, int64_t planes, const T *x, T *y)
{
    int64_t ny = box_volume(g.y_n), nx = box_volume(g.x_n);
    int nt = g.linear ? 2 : 1;
    LADLE_GRID_STRIDE(e, planes * ny)
    {
        int64_t o[3], t[3][2];
        double w[3][2];
        box_index(g.y_n, e % ny, o);
        for (int a = 0; a < 3; a++)
            local_taps(g, a, o[a], t[a], w[a]);
        const T *xp = x + e / ny * nx;
        double acc = 0;
        for (int a = 0; a < nt; a++)
            for (int b = 0; b < nt; b++)
                for (int c = 0; c < nt; c++) {
                    double wt = w[0][a] * w[1][b] * w[2][c];
                    acc += wt *
                           (double)xp[(t[0][a] * g.x_n[1] + t[1][b]) * g.x_n[2] + t[2][c]];
                }
        y[e] = (T)acc;
    }
}

template <class T>
__global__ void interp_bwd_kernel(ladle_interp_geom g, int64_t planes, const T *dy, T *dx)
{
    int64_t ny = box_volume(g.y_n), nx = box_volume(g.x_n);
    LADLE_GRID_STRIDE(e, planes * nx)
    {
        int64_t i[3], lo[3], hi[3];
        box_index(g.x_n, e % nx, i);
        /* a linear output's second tap is its first's neighbour: the
         * outputs reading i have their first tap at i - 1 or i */
        for (int a = 0; a < 3; a++) {
            lo[a] = first_tap(g, a, g.linear ? i[a] - 1 : i[a], 0);
            hi[a] = first_tap(g, a, i[a], 1);
        }
        const T *gp = dy + e / nx * ny;
        double acc = 0;
        for (int64_t oz = lo[0]; oz < hi[0]; oz++) {
            double wz = tap_weight(g, 0, oz, i[0]);
            for (int64_t oy = lo[1]; oy < hi[1]; oy++) {
                double wzy = wz * tap_weight(g, 1, oy, i[1]);
                for (int64_t ox = lo[2]; ox < hi[2]; ox++)
                    acc += wzy * tap_weight(g, 2, ox, i[2]) *
                           (double)gp[(oz * g.y_n[1] + oy) * g.y_n[2] + ox];
            }
        }
        dx[e] = (T)acc;
    }
}

/* ---- the slots ---- */

/* Launch kf (f32) or kd (f64) over n items, a thread each. */
#define PLANES_LAUNCH(kf, kd, dtype, n, slot, g, planes, src, dst)                         \
    do {                                                                                   \
        if ((n) == 0)                                                                      \
            return LADLE_OK;                                                               \
        unsigned grid_ = ladle__cuda_blocks(be, (n), LADLE_CUDA_THREADS);                  \
        cudaStream_t st_ = ladle__cuda_stream(be);                                         \
        if ((dtype) == LADLE_F32)                                                          \
            LADLE_LAUNCH(kf, grid_, LADLE_CUDA_THREADS, 0, st_, *(g), planes,              \
                         (const float *)(src), (float *)(dst));                            \
        else                                                                               \
            LADLE_LAUNCH(kd, grid_, LADLE_CUDA_THREADS, 0, st_, *(g), planes,              \
                         (const double *)(src), (double *)(dst));                          \
        LADLE_CUDA_LAUNCHED(slot);                                                         \
        return LADLE_OK;                                                                   \
    } while (0)

static int64_t volume(const int64_t n[3]) { return n[0] * n[1] * n[2]; }

/* Either direction of adaptive pooling: over the outputs (ADJ 0) or the
 * inputs (ADJ 1). */
template <int ADJ>
static ladle_status adaptive(const ladle_backend *be, ladle_dtype dtype,
                             const ladle_adaptive_geom *g, int64_t planes, const void *src,
                             void *dst, const char *slot)
{
    auto kf = adaptive_kernel<float, ADJ>;
    auto kd = adaptive_kernel<double, ADJ>;
    PLANES_LAUNCH(kf, kd, dtype, planes * volume(ADJ ? g->x_n : g->y_n), slot, g, planes,
                  src, dst);
}

ladle_status ladle__cuda_adaptive_pool_forward(const ladle_backend *be, ladle_dtype dtype,
                                               const ladle_adaptive_geom *g, int64_t planes,
                                               const void *x, void *y)
{
    return adaptive<0>(be, dtype, g, planes, x, y, "adaptive_pool_forward");
}

ladle_status ladle__cuda_adaptive_pool_backward(const ladle_backend *be, ladle_dtype dtype,
                                                const ladle_adaptive_geom *g,
                                                int64_t planes, const void *dy, void *dx)
{
    return adaptive<1>(be, dtype, g, planes, dy, dx, "adaptive_pool_backward");
}

ladle_status ladle__cuda_interp_forward(const ladle_backend *be, ladle_dtype dtype,
                                        const ladle_interp_geom *g, int64_t planes,
                                        const void *x, void *y)
{
    PLANES_LAUNCH(interp_fwd_kernel<float>, interp_fwd_kernel<double>, dtype,
                  planes * volume(g->y_n), "interp_forward", g, planes, x, y);
}

ladle_status ladle__cuda_interp_backward(const ladle_backend *be, ladle_dtype dtype,
                                         const ladle_interp_geom *g, int64_t planes,
                                         const void *dy, void *dx)
{
    PLANES_LAUNCH(interp_bwd_kernel<float>, interp_bwd_kernel<double>, dtype,
                  planes * volume(g->x_n), "interp_backward", g, planes, dy, dx);
}

/* Launch kernel k (its f32 instance kf, f64 kd) over n items, a thread
 * each, on g, planes, src, idx and dst. */
template <class KF, class KD, class I>
static ladle_status max_launch(const ladle_backend *be, ladle_dtype dtype, KF kf, KD kd,
                               int64_t n, const ladle_adaptive_geom *g, int64_t planes,
                               const void *src, I *idx, void *dst, const char *slot)
{
    if (n == 0)
        return LADLE_OK;
    unsigned grid = ladle__cuda_blocks(be, n, LADLE_CUDA_THREADS);
    cudaStream_t st = ladle__cuda_stream(be);
    if (dtype == LADLE_F32)
        LADLE_LAUNCH(kf, grid, LADLE_CUDA_THREADS, 0, st, *g, planes, (const float *)src,
                     idx, (float *)dst);
    else
        LADLE_LAUNCH(kd, grid, LADLE_CUDA_THREADS, 0, st, *g, planes, (const double *)src,
                     idx, (double *)dst);
    LADLE_CUDA_LAUNCHED(slot);
    return LADLE_OK;
}

ladle_status ladle__cuda_adaptive_max_forward(const ladle_backend *be, ladle_dtype dtype,
                                              const ladle_adaptive_geom *g, int64_t planes,
                                              const void *x, void *y, int64_t *idx)
{
    return max_launch(be, dtype, adaptive_max_fwd_kernel<float>,
                      adaptive_max_fwd_kernel<double>, planes * volume(g->y_n), g, planes,
                      x, idx, y, "adaptive_max_forward");
}

ladle_status ladle__cuda_adaptive_max_backward(const ladle_backend *be, ladle_dtype dtype,
                                               const ladle_adaptive_geom *g, int64_t planes,
                                               const void *dy, const int64_t *idx, void *dx)
{
    return max_launch(be, dtype, adaptive_max_bwd_kernel<float>,
                      adaptive_max_bwd_kernel<double>, planes * volume(g->x_n), g, planes,
                      dy, idx, dx, "adaptive_max_backward");
}
