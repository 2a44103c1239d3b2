/*
 * The halo exchange overlapped with the interior (LADLE_OVERLAP_HALO) for
 * the spatially partitioned convolution and pooling.
 *
 * The output block is cut into an interior I, whose windows read only
 * cells this rank holds before the exchange (its bulk, and the global
 * padding written at creation), and a shell of boundary boxes B_1 .. B_m
 * around it: along each split dimension in turn, the slab below and the
 * slab above the interior's range, within the interior's range of the
 * dimensions before it and whole in those after, so the boxes tile the
 * block. Each box has a local layer on the input box its windows read,
 * sharing the weights of the layer's local layer. With L_r the box's layer,
 * S_r its input box's selection and Y_r its output box's placement,
 *
 *   y  = sum_r Y_r L_r S_r H P x
 *   dx = P* H* (sum_r S_r* L_r* Y_r* dy)
 *
 * which is the layer without the overlap cut into the boxes. The forward
 * starts the exchange, computes I (S_I reads no halo cell), finishes the
 * exchange and computes the B_r. The backward computes the B_r, adds their
 * input gradients into the padded gradient (the halo cells' values are
 * then final), starts the exchange's adjoint, computes I into buffers of
 * its own, finishes the adjoint and only then adds I's gradient: the
 * received halos and I's part land in one order whatever the timing.
 *
 * I is computed in up to LADLE__DC_CHUNKS runs of samples, each a box of
 * its own, and the exchange's progress is called after each: over TCP, and
 * for the rendezvous of larger messages on RDMA networks, MPI moves a
 * message only inside MPI calls, so an exchange left alone while I is
 * computed would travel only once the end waits for it (scripts/net-halo.sh
 * measures this over an emulated link). A run that spans the block's whole
 * extent but for the samples reads and writes y and dy in place.
 *
 * The boxes' own buffers cost copies the plain layer does not make (y and
 * dy boxes, dy once more for the weight gradient), and the cut costs a
 * layer call per box and the padded gradient zeroed and added into: the
 * overlap pays where waiting on the exchange costs more than those
 * (bench_dist's conv-halo rows measure both; without the interior's copies
 * the cut alone was still 1.02-1.36 times the plain layer at 2 ranks,
 * docs/benchmarks.md).
 */
#include <string.h>

#include "layers/distributed/dist_conv_impl.h"

/* Append the part of output box [lo, hi) (every dimension) and its input
 * box to v. */
static void add_part(dconv *v, const spec *sp, const int64_t *lo, const int64_t *hi)
{
    dc_part *p = &v->part[v->nparts++];
    p->samples = 1;
    for (int i = 0; i < v->ndim; i++) {
        p->out_off[i] = lo[i];
        p->out_shape[i] = hi[i] - lo[i];
        p->in_off[i] = v->g.needed_offset[i];
        p->in_shape[i] = v->g.needed_shape[i];
        if (i >= 2) /* (the channels are whole in every box) */
            p->samples &= lo[i] == 0 && hi[i] == v->g.output_shape[i];
        if (i == 0) { /* a run of the block's samples */
            p->in_off[0] += lo[0];
            p->in_shape[0] = hi[0] - lo[0];
        } else if (i >= 2) {
            int j = i - 2;
            p->in_off[i] += sp->s[j] * lo[i];
            p->in_shape[i] = sp->s[j] * (hi[i] - lo[i] - 1) + sp->d[j] * (sp->k[j] - 1) + 1;
        }
    }
}

/* The interior's output range [a, b) along every dimension (the whole
 * block along the batch and the channels); 0 when it is empty. Where no
 * window reads the halo it is the whole block, and the cut has no shell. */
static int interior(const dconv *v, const spec *sp, const int64_t *gx, int64_t *a,
                    int64_t *b)
{
    const ladle_halo_geometry *g = &v->g;
    for (int i = 0; i < v->ndim; i++) {
        a[i] = 0;
        b[i] = g->output_shape[i];
    }
    for (int j = 0; j < sp->nd; j++) {
        int i = 2 + j;
        int64_t bo = g->bulk_offset[i], bl = g->bulk_shape[i], po = g->padded_offset[i];
        /* the cells held before the exchange: the bulk, and the padding
         * beyond a global edge the bulk touches */
        int64_t lo = po + bo > 0 ? bo : 0;
        int64_t hi = po + bo + bl < gx[i] ? bo + bl : g->padded_shape[i];
        int64_t no = g->needed_offset[i], s = sp->s[j];
        int64_t last =
            hi - 1 - no - sp->d[j] * (sp->k[j] - 1); /* the last window's start */
        a[i] = lo - no <= 0 ? 0 : (lo - no + s - 1) / s;
        b[i] = last < 0 ? 0 : last / s + 1;
        if (b[i] > g->output_shape[i])
            b[i] = g->output_shape[i];
        if (a[i] >= b[i])
            return 0;
    }
    return 1;
}

/* The parts' boxes: the interior's runs of samples, then the shell. */
static void cut(dconv *v, const spec *sp, const int64_t *a, const int64_t *b)
{
    /* runs of 2 samples or more: a convolution of one large image at a
     * time ran 6-10% slower than of two (bench_dist's 2x64x64² row) */
    int64_t lo[5], hi[5], n = b[0] - a[0];
    int runs = n / 2 < LADLE__DC_CHUNKS ? (int)(n / 2) : LADLE__DC_CHUNKS;
    if (runs < 1)
        runs = 1;
    for (int t = 0; t < v->ndim; t++)
        lo[t] = a[t], hi[t] = b[t];
    for (int c = 0; c < runs; c++) {
        lo[0] = a[0] + n * c / runs;
        hi[0] = a[0] + n * (c + 1) / runs;
        add_part(v, sp, lo, hi);
    }
    v->ninterior = runs;
    for (int j = 0; j < sp->nd; j++) {
        int i = 2 + j;
        for (int side = 0; side < 2; side++) {
            for (int t = 0; t < v->ndim; t++) {
                lo[t] = t < i ? a[t] : 0;
                hi[t] = t < i ? b[t] : v->g.output_shape[t];
            }
            lo[i] = side ? b[i] : 0;
            hi[i] = side ? v->g.output_shape[i] : a[i];
            if (hi[i] > lo[i])
                add_part(v, sp, lo, hi);
        }
    }
}

/* Part p's layer and buffers; its weights are the local layer's. */
static ladle_status make_part(dconv *v, dc_part *p, const kind *k, ladle_dtype dt,
                              ladle_device dev)
{
    ladle_status st = LADLE_OK;
    ladle_op *local = v->base.local;
    int n, nd = v->ndim;
    int64_t ys[LADLE_MAX_NDIM];
    LADLE_CALL(k->make_local(k, p->in_shape, 0, dt, dev, 0, &p->op));
    ladle_op_y_shape(p->op, &n, ys);
    for (int i = 0; i < nd; i++)
        LADLE_CHECK(i == 1 || ys[i] == p->out_shape[i], LADLE_ERR_INTERNAL,
                    "a box's layer makes %lld outputs along dimension %d, not %lld",
                    (long long)ys[i], i, (long long)p->out_shape[i]);
    p->out_shape[1] = ys[1];
    for (int i = 0; i < ladle_op_num_params(local); i++)
        LADLE_CALL(ladle_op_bind_param(p->op, i, ladle_op_param(local, i)->data,
                                       ladle_op_grad(local, i)->data));
    LADLE_CALL(ladle__dist_tensor(dt, dev, nd, p->in_shape, &p->x));
    LADLE_CALL(ladle__dist_tensor(dt, dev, nd, p->in_shape, &p->dx));
    if (p->samples) {
        LADLE_CALL(ladle__tensor_view(dt, dev, nd, p->out_shape, &p->y));
        LADLE_CALL(ladle__tensor_view(dt, dev, nd, p->out_shape, &p->dy));
    } else {
        LADLE_CALL(ladle__dist_tensor(dt, dev, nd, p->out_shape, &p->y));
        LADLE_CALL(ladle__dist_tensor(dt, dev, nd, p->out_shape, &p->dy));
    }
fail:
    return st;
}

/* Point part p's view v at its box inside t (a whole-sample run). */
static ladle_tensor *at_box(const dc_part *p, ladle_tensor *v, const ladle_tensor *t)
{
    size_t per = (size_t)(t->shape[0] > 0 ? t->numel / t->shape[0] : 0);
    v->data = (char *)t->data + (size_t)p->out_off[0] * per * ladle_dtype_size(t->dtype);
    return v;
}

ladle_status ladle__dc_overlap_plan(dconv *v, const kind *k, const spec *sp,
                                    const int64_t *global_x, ladle_dtype dt,
                                    ladle_device dev)
{
    ladle_status st = LADLE_OK;
    int64_t a[5] = {0}, b[5] = {0};
    /* other padding modes fill the global edges from cells the exchange
     * brings: nothing is final before it ends */
    if (v->direct || v->base.local == NULL || v->mode != LADLE_PAD_ZEROS ||
        !interior(v, sp, global_x, a, b))
        return LADLE_OK;
    cut(v, sp, a, b);
    for (int r = 0; r < v->nparts; r++)
        LADLE_CALL(make_part(v, &v->part[r], k, dt, dev));
    v->base.nsaved = 0; /* each part's ctx saves its own input box */
fail:
    if (st != LADLE_OK)
        ladle__dc_overlap_free(v);
    return st;
}

void ladle__dc_overlap_free(dconv *v)
{
    for (int r = 0; r < v->nparts; r++) {
        dc_part *p = &v->part[r];
        ladle_op_destroy(&p->op);
        ladle_tensor_destroy(&p->x);
        ladle_tensor_destroy(&p->y);
        ladle_tensor_destroy(&p->dy);
        ladle_tensor_destroy(&p->dx);
    }
    memset(v->part, 0, sizeof v->part);
    v->nparts = v->ninterior = 0;
}

ladle_status ladle__dc_overlap_rebind(dconv *v, int i)
{
    ladle_status st = LADLE_OK;
    ladle_op *local = v->base.local;
    for (int r = 0; r < v->nparts; r++)
        LADLE_CALL(ladle_op_bind_param(v->part[r].op, i, ladle_op_param(local, i)->data,
                                       ladle_op_grad(local, i)->data));
fail:
    return st;
}

ladle_status ladle__dc_overlap_ctx_init(const dconv *v, dc_ctx *c, ladle_dtype dt,
                                        ladle_device dev)
{
    ladle_status st = LADLE_OK;
    for (int r = 0; r < v->nparts; r++) {
        LADLE_CALL(ladle__dist_tensor(dt, dev, v->ndim, v->part[r].in_shape, &c->px[r]));
        LADLE_CALL(ladle_ctx_create(v->part[r].op, &c->pc[r]));
    }
fail:
    return st;
}

void ladle__dc_overlap_ctx_fini(dc_ctx *c)
{
    for (int r = 0; r < LADLE__DC_MAX_PARTS; r++) {
        ladle_ctx_destroy(&c->pc[r]);
        ladle_tensor_destroy(&c->px[r]);
    }
}

/* Part r's forward: its input box out of the padded tensor, its outputs
 * into their box of y. */
static ladle_status part_forward(const ladle_op *op, dconv *v, dc_ctx *c, int r,
                                 ladle_tensor *y)
{
    ladle_status st = LADLE_OK;
    dc_part *p = &v->part[r];
    int64_t zero[LADLE_MAX_NDIM] = {0};
    ladle_tensor *xp = c ? c->px[r] : p->x, *yp = p->samples ? at_box(p, p->y, y) : p->y;
    LADLE_CALL(ladle__dist_box_copy(op, LADLE_BOX_COPY, v->ndim, p->in_shape, v->padded,
                                    p->in_off, xp, zero));
    LADLE_CALL(ladle_layer_forward(p->op, c ? c->pc[r] : NULL, xp, yp));
    if (!p->samples)
        LADLE_CALL(ladle__dist_box_copy(op, LADLE_BOX_COPY, v->ndim, p->out_shape, yp, zero,
                                        y, p->out_off));
fail:
    return st;
}

ladle_status ladle__dc_overlap_forward(const ladle_op *op, dconv *v, dc_ctx *c,
                                       const ladle_tensor *x, ladle_tensor *y)
{
    ladle_status st = LADLE_OK;
    int64_t zero[LADLE_MAX_NDIM] = {0};
    int begun = 0;
    LADLE_CALL(ladle__dist_box_copy(op, LADLE_BOX_COPY, v->ndim, v->g.bulk_shape, x, zero,
                                    v->padded, v->g.bulk_offset));
    LADLE_CALL(ladle_halo_exchange_begin(v->halo, v->padded));
    begun = 1;
    for (int r = 0; r < v->ninterior; r++) {
        LADLE_CALL(part_forward(op, v, c, r, y));
        LADLE_CALL(ladle_halo_exchange_progress(v->halo, NULL));
    }
    begun = 0;
    LADLE_CALL(ladle_halo_exchange_end(v->halo, v->padded));
    for (int r = v->ninterior; r < v->nparts; r++)
        LADLE_CALL(part_forward(op, v, c, r, y));
    if (v->rescale)
        LADLE_CALL(ladle__dc_rescale(op, v, y->shape[0], y, y));
fail:
    if (begun) /* the neighbours wait on this rank's messages */
        (void)ladle_halo_exchange_end(v->halo, v->padded);
    return st;
}

/* Part r's dy: its box of dy. */
static ladle_status part_dy(const ladle_op *op, dconv *v, int r, const ladle_tensor *dy,
                            const ladle_tensor **out)
{
    dc_part *p = &v->part[r];
    int64_t zero[LADLE_MAX_NDIM] = {0};
    if (p->samples) {
        *out = at_box(p, p->dy, dy);
        return LADLE_OK;
    }
    *out = p->dy;
    return ladle__dist_box_copy(op, LADLE_BOX_COPY, v->ndim, p->out_shape, dy, p->out_off,
                                p->dy, zero);
}

/* Part r's input gradient into its buffer. */
static ladle_status part_backward(const ladle_op *op, dconv *v, dc_ctx *c, int r,
                                  const ladle_tensor *dy)
{
    ladle_status st = LADLE_OK;
    dc_part *p = &v->part[r];
    const ladle_tensor *dyp = NULL;
    LADLE_CALL(part_dy(op, v, r, dy, &dyp));
    if (c)
        LADLE_CALL(ladle_layer_backward(p->op, c->pc[r], dyp, p->dx));
    else
        LADLE_CALL(ladle_op_adjoint(p->op, dyp, p->dx));
fail:
    return st;
}

static ladle_status part_add(const ladle_op *op, dconv *v, int r)
{
    dc_part *p = &v->part[r];
    int64_t zero[LADLE_MAX_NDIM] = {0};
    return ladle__dist_box_copy(op, LADLE_BOX_ADD, v->ndim, p->in_shape, p->dx, zero,
                                v->gpadded, p->in_off);
}

ladle_status ladle__dc_overlap_backward(const ladle_op *op, dconv *v, dc_ctx *c,
                                        const ladle_tensor *dy, ladle_tensor *dx)
{
    ladle_status st = LADLE_OK;
    int64_t zero[LADLE_MAX_NDIM] = {0};
    int begun = 0;
    LADLE_CALL(ladle_tensor_fill(v->gpadded, 0.0));
    if (v->rescale) {
        LADLE_CALL(ladle__dc_rescale(op, v, dy->shape[0], dy, v->dyr));
        dy = v->dyr;
    }
    for (int r = v->ninterior; r < v->nparts; r++) {
        LADLE_CALL(part_backward(op, v, c, r, dy));
        LADLE_CALL(part_add(op, v, r));
    }
    LADLE_CALL(ladle_halo_exchange_adjoint_begin(v->halo, v->gpadded));
    begun = 1;
    for (int r = 0; r < v->ninterior; r++) {
        LADLE_CALL(part_backward(op, v, c, r, dy));
        LADLE_CALL(ladle_halo_exchange_progress(v->halo, NULL));
    }
    begun = 0;
    LADLE_CALL(ladle_halo_exchange_adjoint_end(v->halo, v->gpadded));
    for (int r = 0; r < v->ninterior; r++)
        LADLE_CALL(part_add(op, v, r));
    LADLE_CALL(ladle__dist_box_copy(op, LADLE_BOX_COPY, v->ndim, v->g.bulk_shape,
                                    v->gpadded, v->g.bulk_offset, dx, zero));
fail:
    if (begun)
        (void)ladle_halo_exchange_adjoint_end(v->halo, v->gpadded);
    return st;
}

ladle_status ladle__dc_overlap_weight(const ladle_op *op, dconv *v, dc_ctx *c,
                                      const ladle_tensor *dy)
{
    ladle_status st = LADLE_OK;
    for (int r = 0; r < v->nparts; r++) {
        const ladle_tensor *dyp = NULL;
        LADLE_CALL(part_dy(op, v, r, dy, &dyp));
        LADLE_CALL(ladle_layer_backward_weight(v->part[r].op, c->pc[r], dyp));
    }
fail:
    return st;
}
