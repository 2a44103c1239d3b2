/*
 * The CPU backend: the table of the CPU's slots and its one instance. Every
 * slot runs to completion before it returns, so the CPU needs no events and
 * its memory is open to host code and MPI.
 */
#include <cblas.h>

#include "src/backends/cpu/cpu.h"

const ladle_backend_table ladle__cpu_table = {
    .version = LADLE_BACKEND_VERSION,
    .name = "cpu",
    /* memory */
    .alloc = ladle__cpu_alloc,
    .free = ladle__cpu_free,
    .to_device = ladle__cpu_to_device,
    .to_host = ladle__cpu_to_host,
    /* order */
    .synchronize = ladle__cpu_synchronize,
    /* copies and boxes */
    .copy = ladle__cpu_copy,
    .copy_box = ladle__cpu_copy_box,
    .pack = ladle__cpu_pack,
    .unpack = ladle__cpu_unpack,
    /* vectors */
    .add = ladle__cpu_add,
    .axpy = ladle__cpu_axpy,
    .dot2 = ladle__cpu_dot2,
    .fill = ladle__cpu_fill,
    .scal = ladle__cpu_scal,
    .abs_max = ladle__cpu_abs_max,
    /* random fills */
    .fill_random = ladle__cpu_fill_random,
    .fill_init = ladle__cpu_fill_init,
    /* dense linear algebra */
    .gemm = ladle__cpu_gemm,
    /* activations and softmax */
    .act_forward = ladle__cpu_act_forward,
    .act_backward = ladle__cpu_act_backward,
    .softmax_forward = ladle__cpu_softmax_forward,
    .softmax_backward = ladle__cpu_softmax_backward,
    /* losses */
    .loss_forward = ladle__cpu_loss_forward,
    .loss_backward = ladle__cpu_loss_backward,
    .find_outside = ladle__cpu_find_outside,
    .find_non_finite = ladle__cpu_find_non_finite,
    /* dropout */
    .dropout = ladle__cpu_dropout,
    /* batch norm */
    .bn_moment = ladle__cpu_bn_moment,
    .bn_dsums = ladle__cpu_bn_dsums,
    .bn_affine = ladle__cpu_bn_affine,
    /* pooling */
    .pool_plan = ladle__cpu_pool_plan,
    .pool_setup = ladle__cpu_pool_setup,
    .pool_forward = ladle__cpu_pool_forward,
    .pool_backward = ladle__cpu_pool_backward,
    /* convolution: im2col, the wide path, bias */
    .conv_im2col = ladle__cpu_conv_im2col,
    .conv_col2im = ladle__cpu_conv_col2im,
    .conv_wide_im2col = ladle__cpu_conv_wide_im2col,
    .conv_wide_grid = ladle__cpu_conv_wide_grid,
    .bias_add = ladle__cpu_bias_add,
    .bias_grad = ladle__cpu_bias_grad,
    /* optimizer updates */
    .optim_step = ladle__cpu_optim_step,
    /* interpolation */
    .interp_forward = ladle__cpu_interp_forward,
    .interp_backward = ladle__cpu_interp_backward,
    /* revision 4 */
    .loss_weight_sum = ladle__cpu_loss_weight_sum,
    .adaptive_pool_forward = ladle__cpu_adaptive_pool_forward,
    .adaptive_pool_backward = ladle__cpu_adaptive_pool_backward,
    /* layer norm, RMS norm, the token embedding */
    .norm_forward = ladle__cpu_norm_forward,
    .norm_backward = ladle__cpu_norm_backward,
    .norm_weight_grad = ladle__cpu_norm_weight_grad,
    .embed_forward = ladle__cpu_embed_forward,
    .embed_backward = ladle__cpu_embed_backward,
    /* revision 5: attention */
    .attn_forward = ladle__cpu_attn_forward,
    .attn_backward = ladle__cpu_attn_backward,
    /* revision 6: the direct convolution */
    .conv_direct_plan = ladle__cpu_conv_direct_plan,
    .conv_direct_forward = ladle__cpu_conv_direct_forward,
    .conv_direct_weight = ladle__cpu_conv_direct_weight,
    .conv_direct_backward = ladle__cpu_conv_direct_backward,
    .lse_rows = ladle__cpu_lse_rows,
    .exp_rows = ladle__cpu_exp_rows,
    /* revision 10: adaptive max pooling */
    .adaptive_max_forward = ladle__cpu_adaptive_max_forward,
    .adaptive_max_backward = ladle__cpu_adaptive_max_backward,
    /* revision 11 */
    .convert = ladle__cpu_convert,
    /* revision 12: the bf16 GEMM */
    .gemm_half = ladle__cpu_gemm_half,
    .gemm_half_ws = ladle__cpu_gemm_half_ws,
};

const ladle_backend ladle__cpu_backend = {
    .fn = &ladle__cpu_table,
    .device = LADLE_CPU,
    .host_access = 1,
    .mpi_access = 1,
};

ladle_status ladle_set_num_threads(int n)
{
    if (n < 1)
        return ladle__raise(LADLE_ERR_ARG, __func__, "%d threads", n);
    openblas_set_num_threads(n);
    return LADLE_OK;
}

int ladle_get_num_threads(void) { return openblas_get_num_threads(); }
