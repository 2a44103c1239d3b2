/*
 * What the convolution's two paths (conv.c's im2col, conv_wide.c's wide
 * rows) share: their planned buffers and the bias of a chunk of images.
 */
#include "layers/sequential/conv_impl.h"

ladle_status ladle__conv_buffer(const ladle_backend *be, int64_t rows, int64_t cols,
                                size_t es, const char *what, void **out)
{
    int64_t n = 0;
    size_t bytes = 0;
    if (!ladle__mul_ok(rows, cols, &n) || !ladle__bytes_ok(n, es, &bytes))
        return ladle__raise(LADLE_ERR_SHAPE, "ladle_conv_create",
                            "the %s (%lld x %lld elements) is too large", what,
                            (long long)rows, (long long)cols);
    return be->fn->alloc(be, bytes, out);
}

/*
 * The bias of a chunk of images, added (or its gradient summed) while the
 * GEMM's output (or input) is still in the cache: one pass over y at the
 * end read and wrote LeNet's first convolution's 4.8 MB output from memory,
 * and one over dy read as much (4% of a training step together). Where the
 * host cannot reach the memory (a GPU), a call per chunk would be a kernel
 * launch per chunk, so the layer takes the one pass there.
 */
ladle_status ladle__conv_bias_chunk(const ladle_op *op, int grad, const void *t, int64_t n0,
                                    int64_t nb, int64_t g)
{
    ladle_status st = LADLE_OK;
    const conv *v = op->impl;
    size_t es = ladle_dtype_size(op->dtype);
    if (op->nparams < 2 || !op->be->host_access)
        return LADLE_OK;
    ladle_tensor *bt = grad ? op->grads[1] : op->params[1];
    char *b = (char *)bt->data + (size_t)(g * v->cog) * es;
    /* one call for the chunk where its images' channels are contiguous
     * (one group), else one an image */
    int64_t rows = v->g == 1 ? nb : 1, ch = v->g == 1 ? v->co : v->cog;
    for (int64_t i = n0; i < n0 + nb; i += rows) {
        char *at = (char *)t + (size_t)((i * v->co + g * v->cog) * v->pout) * es;
        if (grad)
            LADLE_CALL(op->be->fn->bias_grad(op->be, op->dtype, rows, ch, v->pout, at, b));
        else
            LADLE_CALL(op->be->fn->bias_add(op->be, op->dtype, rows, ch, v->pout, b, at));
    }
fail:
    return st;
}
