/* Global average pooling on whole images for the builder (see
 * src/train/builder_impl.h). */
#include "ladle/custom.h"
#include "layers/dist.h"
#include "src/train/builder_impl.h"

typedef struct gap_user {
    ladle_op *pool; /* NULL on ranks outside the head */
    ladle_ctx *ctx;
} gap_user;

static int gap_forward(void *user, const ladle_tensor *x, ladle_tensor *y, void *saved)
{
    gap_user *u = user;
    if (u->pool && ladle_layer_forward(u->pool, u->ctx, x, y) != LADLE_OK)
        return ladle_custom_fail(ladle_error_message());
    return 0;
}

static int gap_backward(void *user, const ladle_tensor *dy, ladle_tensor *dx, void *saved)
{
    gap_user *u = user;
    if (u->pool && ladle_layer_backward(u->pool, u->ctx, dy, dx) != LADLE_OK)
        return ladle_custom_fail(ladle_error_message());
    return 0;
}

static void gap_free(void *user)
{
    gap_user *u = user;
    ladle_ctx_destroy(&u->ctx);
    ladle_op_destroy(&u->pool);
    ladle__free(u);
}

ladle_status ladle__gap_whole_images(const ladle_partition *p_images, const ladle_partition *p_head,
                                     const int64_t xs[4], ladle_dtype dtype, ladle_device device,
                                     ladle_op **op)
{
    ladle_status st = LADLE_OK;
    ladle_layout *lx = NULL, *ly = NULL;
    int64_t box[4], ys[2] = {xs[0], xs[1]};
    gap_user *u = ladle__calloc(1, sizeof *u);
    LADLE_CHECK(u != NULL, LADLE_ERR_ALLOC, "out of memory");
    LADLE_CALL(ladle_layout_create_balanced(p_images, 4, xs, &lx));
    LADLE_CALL(ladle_layout_create_balanced(p_head, 2, ys, &ly));
    LADLE_CALL(ladle_layout_box(lx, LADLE_SELF, NULL, box));
    if (box[0] > 0) {
        LADLE_CALL(ladle_global_avg_pool_create(4, box, dtype, device, &u->pool));
        LADLE_CALL(ladle_ctx_create(u->pool, &u->ctx));
    }
    ladle_custom_desc d;
    ladle_custom_desc_init(&d);
    d.name = "global average pooling";
    d.dtype = dtype;
    d.device = device;
    d.x_layout = lx;
    d.y_layout = ly;
    d.forward = gap_forward;
    d.adjoint = gap_backward;
    d.user = u;
    d.destroy = gap_free;
    LADLE_CALL(ladle_custom_create(&d, op));
    u = NULL; /* the op's */
fail:
    if (u)
        gap_free(u);
    ladle_layout_destroy(&lx);
    ladle_layout_destroy(&ly);
    return st;
}
