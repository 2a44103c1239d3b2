/*
 * The CUDA backend's attention slots (attn_forward, attn_backward) against
 * the CPU backend's (test/cuda_pair.h): causal and full, one to several
 * samples and heads, sequences shorter and longer than a kernel's tile of
 * keys (128 threads), head widths odd and past a block's width, and more
 * rows than the grid (the emulator's grid is 32 blocks, 128 rows at most
 * before the kernels stride), in f32 and f64.
 *
 * Tolerances. f64 agrees to 1e-12 (test/cuda_pair.h). The CPU widens an
 * f32 head to double (f32_tiles off) and the GPU computes in double: the
 * two differ by the order of their double sums, and an f32 output by the
 * one ulp of rounding between two doubles that close, 1.2e-7 of 1 + |v|:
 * ATTN_F32 with room; the log-sum-exp, kept in double, to 1e-12 in both.
 * The backward runs from the CPU's o and lse, so only its own sums differ.
 * With f32_tiles the GPU's dot products and accumulators are f32 sums of d
 * or T terms: each output within 20 f32 epsilons (ATTN_TILES) of 1 + |v|
 * of the double path's, the bound test_attention sets for the CPU's.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_pair.h"

#define ATTN_F32 2.5e-7
#define ATTN_TILES 2.4e-6

static void attn_case(ladle_dtype dt, int64_t batch, int64_t heads, int64_t seq, int64_t d,
                      int causal)
{
    char what[128];
    snprintf(what, sizeof what, "attention %s n=%lld h=%lld T=%lld d=%lld",
             causal ? "causal" : "full", (long long)batch, (long long)heads, (long long)seq,
             (long long)d);
    ladle_attn_geom g = {.batch = batch,
                         .heads = heads,
                         .seq = seq,
                         .head_dim = d,
                         .block = seq < 16 ? seq : 16,
                         .scale = 1.0 / sqrt((double)d),
                         .causal = causal};
    int64_t nqkv = batch * seq * 3 * heads * d, no = batch * seq * heads * d;
    int64_t nl = batch * heads * seq;
    void *qkv = cp_random(dt, nqkv, -2, 2, 81 + (uint64_t)nqkv);
    void *dout = cp_random(dt, no, -1, 1, 82 + (uint64_t)no);
    void *o = cp_host(dt, no), *dqkv = cp_host(dt, nqkv);
    double *lse = cp_host(LADLE_F64, nl),
           *ws = cp_host(LADLE_F64, ladle__attn_ws_count(&g));
    CP_CPU(attn_forward, dt, &g, qkv, o, lse, ws);
    CP_CPU(attn_backward, dt, &g, qkv, o, lse, dout, dqkv, ws);

    void *g_qkv = cp_upload(dt, nqkv, qkv), *g_o = cp_upload(dt, no, NULL);
    void *g_lse = cp_upload(LADLE_F64, nl, NULL);
    void *g_ws = cp_upload(LADLE_F64, ladle__attn_ws_count(&g), NULL);
    CP_GPU(attn_forward, dt, &g, g_qkv, g_o, g_lse, g_ws);
    CP_CLOSE(dt, no, g_o, o, cp_tol(dt, ATTN_F32), what);
    CP_CLOSE(LADLE_F64, nl, g_lse, lse, 1e-12, what);
    void *c_o = cp_upload(dt, no, o), *c_lse = cp_upload(LADLE_F64, nl, lse);
    void *g_dout = cp_upload(dt, no, dout), *g_dqkv = cp_upload(dt, nqkv, NULL);
    CP_GPU(attn_backward, dt, &g, g_qkv, c_o, c_lse, g_dout, g_dqkv, g_ws);
    CP_CLOSE(dt, nqkv, g_dqkv, dqkv, cp_tol(dt, ATTN_F32), what);
    if (dt == LADLE_F32) { /* the f32 tiles: within ATTN_TILES of the double path */
        g.f32_tiles = 1;
        CP_GPU(attn_forward, dt, &g, g_qkv, g_o, g_lse, g_ws);
        CP_CLOSE(dt, no, g_o, o, ATTN_TILES, what);
        CP_CLOSE(LADLE_F64, nl, g_lse, lse, ATTN_TILES, what);
        CP_GPU(attn_backward, dt, &g, g_qkv, c_o, c_lse, g_dout, g_dqkv, g_ws);
        CP_CLOSE(dt, nqkv, g_dqkv, dqkv, ATTN_TILES, what);
    }

    void *dev[] = {g_qkv, g_o, g_lse, g_ws, c_o, c_lse, g_dout, g_dqkv};
    void *host[] = {qkv, dout, o, dqkv, lse, ws};
    CP_RELEASE(dev, host);
}

START_TEST(attention_against_cpu)
{
    static const int64_t shapes[][4] = {{1, 1, 1, 1},   {2, 3, 7, 5},   {1, 2, 130, 16},
                                        {3, 1, 40, 33}, {1, 1, 9, 150}, {2, 2, 50, 8}};
    const int count = (int)(sizeof shapes / sizeof shapes[0]);
    for (int d = 0; d < 2; d++)
        for (int causal = 0; causal < 2; causal++)
            for (int s = 0; s < count; s++)
                attn_case(cp_dtype(d), shapes[s][0], shapes[s][1], shapes[s][2],
                          shapes[s][3], causal);
}
END_TEST

/* A head too wide for the kernels' shared memory is refused, not run. */
START_TEST(wide_heads_refused)
{
    ladle_attn_geom g = {.batch = 1,
                         .heads = 1,
                         .seq = 2,
                         .head_dim = 4000,
                         .block = 2,
                         .scale = 1.0,
                         .causal = 1};
    int64_t nqkv = 2 * 3 * 4000, no = 2 * 4000;
    void *g_qkv = cp_upload(LADLE_F32, nqkv, NULL), *g_o = cp_upload(LADLE_F32, no, NULL);
    void *g_lse = cp_upload(LADLE_F64, 2, NULL);
    ladle_status st =
        cp_gpu()->fn->attn_forward(cp_gpu(), LADLE_F32, &g, g_qkv, g_o, g_lse, NULL);
    LT_ASSERT(st == LADLE_ERR_UNSUPPORTED && strstr(ladle_error_message(), "wider") != NULL,
              "a head of 4000: %s: %s", ladle_status_name(st), ladle_error_message());
    ladle_error_clear();
    cp_free(g_qkv);
    cp_free(g_o);
    cp_free(g_lse);
}
END_TEST

LT_SUITE("cuda_attn", "cuda_attn", 0, attention_against_cpu, wide_heads_refused)
