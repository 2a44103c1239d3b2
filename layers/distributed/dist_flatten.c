/*
 * Distributed flatten (see ladle/distributed.h): x [N, ...] decomposed over
 * any grid becomes y [N, F] decomposed over p_y (D x Pf). A repartition R1
 * gathers each batch block whole onto column 0 of p_y (rank (b, 0) holds
 * rows of block b, every other dimension complete), where x's block and y's
 * block are the same bytes; a second repartition R2 splits the features
 * over the columns (none when Pf = 1, R1 then writing into y directly).
 * Both are permutations, so the backward is R1* R2* with nothing to add.
 */
#include <string.h>

#include "layers/distributed/dist.h"

typedef struct dflat {
    ladle_op *r1, *r2;       /* r2 NULL when p_y has one column */
    ladle_tensor *mid;       /* block b whole on (b, 0): the 2-D view */
    ladle_tensor *midx;      /* the same bytes in x's shape */
    ladle_tensor *viewx;     /* y's (or dy's) bytes in x's shape, when r2 is NULL */
} dflat;

static const ladle__part dflat_parts[] = {
    LADLE__PART_OP(dflat, r1), LADLE__PART_OP(dflat, r2), LADLE__PART_TENSOR(dflat, mid),
    LADLE__PART_TENSOR(dflat, midx), LADLE__PART_TENSOR(dflat, viewx), LADLE__PARTS_END};

static ladle_status df_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *x,
                               ladle_tensor *y, int64_t n)
{
    ladle_status st = LADLE_OK;
    dflat *v = op->impl;
    (void)ctx, (void)n;
    if (v->r2 == NULL) {
        LADLE_CALL(ladle_tensor_set_data(v->viewx, y->data));
        LADLE_CALL(ladle_op_forward(v->r1, x, v->viewx));
    } else {
        LADLE_CALL(ladle_op_forward(v->r1, x, v->midx));
        LADLE_CALL(ladle_op_forward(v->r2, v->mid, y));
    }
fail:
    return st;
}

static ladle_status df_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dy,
                                ladle_tensor *dx, int64_t n)
{
    ladle_status st = LADLE_OK;
    dflat *v = op->impl;
    (void)ctx, (void)n;
    if (dx == NULL)
        return LADLE_OK;
    if (v->r2 == NULL) {
        LADLE_CALL(ladle_tensor_set_data(v->viewx, dy->data));
        LADLE_CALL(ladle_op_adjoint(v->r1, v->viewx, dx));
    } else {
        LADLE_CALL(ladle_op_adjoint(v->r2, dy, v->mid));
        LADLE_CALL(ladle_op_adjoint(v->r1, v->midx, dx));
    }
fail:
    return st;
}

static void df_destroy(ladle_op *op) { ladle__parts_free(op->impl, dflat_parts, NULL); }

static const ladle_op_vtable dflat_vt = {
    .kind = LADLE_OP_DIST_FLATTEN,
    .name = "distributed flatten",
    .destroy = df_destroy,
    .layer_forward = df_forward,
    .layer_backward = df_backward,
};

/* Explicit layout on p_y: rank (b, 0) holds batch block b of `global`
 * whole, the other ranks nothing. */
static ladle_status column0(const ladle_partition *p_y, int ndim, const int64_t *global,
                            ladle_layout **l)
{
    ladle_status st = LADLE_OK;
    int size = ladle_partition_size(p_y), c[2];
    int rows = ladle_partition_shape(p_y)[0];
    int64_t *off = ladle__calloc((size_t)(size * ndim) + 1, sizeof(int64_t));
    int64_t *ext = ladle__calloc((size_t)(size * ndim) + 1, sizeof(int64_t));
    LADLE_CHECK(off && ext, LADLE_ERR_ALLOC, "out of memory");
    for (int r = 0; r < size; r++) {
        ladle_partition_coords_of(p_y, r, c);
        if (c[1] != 0)
            continue;
        off[r * ndim] = ladle__balanced_start(global[0], rows, c[0]);
        ext[r * ndim] = ladle__balanced_size(global[0], rows, c[0]);
        for (int d = 1; d < ndim; d++)
            ext[r * ndim + d] = global[d];
    }
    LADLE_CALL(ladle__layout_create_explicit(p_y, ndim, global, off, ext, l));
fail:
    ladle__free(off);
    ladle__free(ext);
    return st;
}

/* The checks every rank makes alike; *feat gets the features per sample. */
static ladle_status flat_checks(const ladle_partition *p_x, int ndim,
                                const int64_t *x_shape, const ladle_partition *p_y,
                                ladle_dtype dtype, unsigned flags, int64_t *feat,
                                const char *f)
{
    int64_t numel = 0;
    /* a checked shape first: then the product of its extents cannot overflow */
    ladle_status st = ladle__check_shape(f, ndim, x_shape, &numel);
    if (st != LADLE_OK)
        return st;
    for (int d = 1; d < ndim; d++)
        *feat *= x_shape[d];
    if (!ladle__is_real(dtype))
        return ladle__raise(LADLE_ERR_DTYPE, f, "dtype %s is not f32 or f64",
                            ladle_dtype_name(dtype));
    if (ndim < 2 || ladle_partition_ndim(p_x) != ndim || ladle_partition_ndim(p_y) != 2)
        return ladle__raise(LADLE_ERR_PARTITION, f,
                            "x needs 2 or more dimensions on a grid of as many, and p_y 2");
    if (flags & ~(unsigned)LADLE_CHECKED)
        return ladle__raise(LADLE_ERR_ARG, f, "unknown flags 0x%x", flags);
    if (x_shape[0] < ladle_partition_shape(p_y)[0] || *feat < ladle_partition_shape(p_y)[1])
        return ladle__raise(LADLE_ERR_SHAPE, f,
                            "a batch of %lld and %lld features on a %dx%d grid",
                            (long long)x_shape[0], (long long)*feat,
                            ladle_partition_shape(p_y)[0], ladle_partition_shape(p_y)[1]);
    return LADLE_OK;
}

/* The layouts: x's and y's, and block b whole on (b, 0) of p_y in x's shape
 * and in y's (mx, my). Local. */
static ladle_status plan_layouts(ladle__make *m, const ladle_partition *p_x, int ndim,
                                 const int64_t *x_shape, const ladle_partition *p_y,
                                 const int64_t *yg, ladle_layout **mx, ladle_layout **my)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(ladle_layout_create_balanced(p_x, ndim, x_shape, &m->lx));
    LADLE_CALL(ladle_layout_create_balanced(p_y, 2, yg, &m->ly));
    LADLE_CALL(column0(p_y, ndim, x_shape, mx));
    LADLE_CALL(column0(p_y, 2, yg, my));
fail:
    return st;
}

/* The middle block (2-D) and its views in x's shape. Local. */
static ladle_status allocate(ladle__make *m, dflat *v, const ladle_layout *mx,
                             const ladle_layout *my)
{
    ladle_status st = LADLE_OK;
    int ndim = ladle_layout_ndim(mx);
    int64_t mxs[LADLE_MAX_NDIM], mys[2];
    ladle_layout_box(mx, LADLE_SELF, NULL, mxs);
    ladle_layout_box(my, LADLE_SELF, NULL, mys);
    LADLE_CALL(ladle__dist_tensor(m->dtype, m->device, 2, mys, &v->mid));
    LADLE_CALL(ladle_tensor_wrap(m->dtype, m->device, ndim, mxs, NULL, v->mid->data, &v->midx));
    LADLE_CALL(ladle_tensor_wrap(m->dtype, m->device, ndim, mxs, NULL, v->mid->data, &v->viewx));
fail:
    return st;
}

ladle_status ladle_dist_flatten_create(const ladle_partition *p_x, const int64_t x_shape[],
                                       const ladle_partition *p_y, ladle_dtype dtype,
                                       ladle_device device, unsigned flags, ladle_op **out)
{
    const char *f = __func__;
    ladle_status st = LADLE_OK, local = LADLE_OK;
    ladle__make m = {f, dtype, device, flags, MPI_COMM_NULL, NULL, NULL};
    dflat *v = NULL;
    ladle_layout *mx = NULL, *my = NULL;
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(p_y);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    int ndim = ladle_partition_ndim(p_x);
    int64_t feat = 1;
    local = flat_checks(p_x, ndim, x_shape, p_y, dtype, flags, &feat, f);
    int64_t yg[2] = {local == LADLE_OK ? x_shape[0] : 0, feat};
    LADLE_CALL(ladle__dist_open_xy(&m, p_x, p_y, ndim, x_shape, local));
    v = ladle__calloc(1, sizeof *v);
    local = ladle__make_alloc_ok(&m, v != NULL);
    if (local == LADLE_OK)
        local = plan_layouts(&m, p_x, ndim, x_shape, p_y, yg, &mx, &my);
    LADLE_CALL(ladle__make_step(m.comm, local, f));
    LADLE_CALL(ladle__make_step(
        m.comm, ladle_repartition_create(m.lx, mx, dtype, device, flags, &v->r1), f));
    if (ladle_partition_shape(p_y)[1] > 1)
        LADLE_CALL(ladle__make_step(
            m.comm, ladle_repartition_create(my, m.ly, dtype, device, flags, &v->r2), f));
    int taken = 0;
    st = ladle__dist_make_linear(&m, allocate(&m, v, mx, my), &dflat_vt, v, &taken, out);
    if (taken)
        v = NULL;
fail:
    ladle__make_close(&m);
    ladle__parts_free(v, dflat_parts, NULL);
    ladle_layout_destroy(&mx);
    ladle_layout_destroy(&my);
    return st;
}
