/*
 * The raw baselines of bench_gpu: the CUDA runtime and cuBLAS called
 * directly, with none of ladle in between, on a stream of their own. Built
 * by nvcc from bench/gpu_raw.cu (make CUDA=1 only). Every call returns 0,
 * or -1 with the failing call and CUDA's reason in gpu_raw_error().
 *
 * Matrices are row-major, as in ladle: c[m, n] = op(a) op(b) + beta c, with
 * op(a) m x k and op(b) k x n, ta / tb nonzero for a transpose.
 */
#ifndef LADLE_BENCH_GPU_RAW_H
#define LADLE_BENCH_GPU_RAW_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpu_raw gpu_raw;

/* A stream and a cuBLAS handle on the current device; tf32 nonzero lets
 * cuBLAS round f32 products through TF32 tensor cores (as ladle's
 * LADLE_DEVICE_TF32). */
int gpu_raw_open(int tf32, gpu_raw **r);
void gpu_raw_close(gpu_raw **r);
const char *gpu_raw_error(const gpu_raw *r);

/* device memory of bytes, filled from host (bytes of it), freed */
int gpu_raw_alloc(gpu_raw *r, size_t bytes, const void *host, void **dev);
void gpu_raw_free(gpu_raw *r, void *dev);
/* pinned host memory */
int gpu_raw_host_alloc(gpu_raw *r, size_t bytes, void **host);
void gpu_raw_host_free(gpu_raw *r, void *host);

/* queued on the stream */
int gpu_raw_sgemm(gpu_raw *r, int ta, int tb, int64_t m, int64_t n, int64_t k,
                  const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                  float *c, int64_t ldc);
int gpu_raw_copy(gpu_raw *r, void *dst, const void *src, size_t bytes);
/* dev -> host, then host -> dev, in order on the stream */
int gpu_raw_stage(gpu_raw *r, void *host, void *dev, size_t bytes);
/* wait for the stream */
int gpu_raw_sync(gpu_raw *r);

#ifdef __cplusplus
}
#endif

#endif
