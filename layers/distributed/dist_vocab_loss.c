/*
 * Vocabulary-parallel cross entropy (see ladle/distributed.h): logits of
 * global shape M x C split over p_x (D x P), rows over the D row blocks
 * and classes over the P vocabulary ranks, labels replicated over the
 * vocabulary ranks of a row block.
 *
 * A row's loss needs its log-sum-exp L = log sum_c exp(x_c) over classes
 * that live on P ranks. Each rank computes the log-sum-exp l_r of its own
 * slice (max-shifted, in double); L = m + log sum_r exp(l_r - m) with m the
 * largest l_r is then exact and stable. The P values reach every rank of
 * the row block through one all-sum-reduce in which rank r writes slot r
 * of the row and leaves the other slots 0: an all-gather written as a sum
 * of zero-padded blocks, so the max and the sum of the softmax are both
 * taken from the gathered values, bitwise alike on every rank, and no
 * non-linear collective is needed. The same message carries the target
 * logit (only the rank holding the label's class writes it; the others
 * add 0), the slice's weighted logit sum for label smoothing, the sum of
 * the ranks' labels (each rank checks its own against their mean) and the
 * ranks' verdicts on their input. A second all-sum-reduce, over the whole grid, adds the
 * blocks' losses and label weights so every rank holds the batch's loss.
 *
 * The backward needs no message: d loss / d x_c = g (softmax_c s - q_c),
 * with softmax_c = exp(x_c - L) from the saved L, q the smoothed weighted
 * one-hot and s its sum, involves only the rank's own classes.
 *
 * The slice's log-sum-exps and the backward's exponentials are the CPU
 * backend's (lse_rows, exp_rows: vectorised, one exponential a logit a
 * pass); the rest are host loops over rows. On another device the layer
 * stages: its forward copies the logits and labels to host buffers made at
 * creation, computes there and copies the loss back; its backward copies
 * them again (the ctx keeps the caller's device tensors, as on the CPU, and
 * its rows' log-sum-exps in device memory) and copies dx back. That is one
 * copy of the rank's logit block each way a step, beside the two
 * reductions the layer makes anyway on the host.
 */
#include <math.h>
#include <string.h>

#include "layers/distributed/dist.h"
#include "layers/sequential/loss_impl.h"

typedef struct vloss {
    int64_t rows, classes; /* M and C */
    int nrow, nvoc;        /* D and P */
    int row, col;          /* this rank's row block and vocabulary slice, or -1 */
    int64_t mb, vr, voff;  /* its rows, its classes and their first */
    int64_t mbmax;         /* the rows of the largest row block */
    ladle_reduction reduction;
    double smoothing;
    double *weight; /* C class weights (host), or NULL */
    double wtotal;  /* their sum (C without weights) */
    int ignore;
    int64_t ignore_index;
    int label_divisor;    /* the mean divides by the labels' weight */
    ladle_op *row_sum;    /* all-sum-reduce of the row statistics over P */
    ladle_op *block_sum;  /* all-sum-reduce of the totals over p_x */
    ladle_tensor *stats;  /* mbmax (P + 3) + 2 doubles */
    ladle_tensor *rowbuf; /* 2 mbmax doubles: the slices' log-sum-exps; the rows'
                           * factors and label logits */
    ladle_tensor *totals; /* TOTALS doubles */
    /* a device's layer stages through these host copies (else all NULL) */
    ladle_tensor *hx, *ht, *hval, *hdx, *hdl; /* logits, labels, loss, dx, dloss */
    double *hlse;                             /* the rows' log-sum-exps */
} vloss;

/* A row's statistics: P log-sum-exps, then these. */
enum { S_TARGET, S_SMOOTH, S_LABELS, S_ROW };
/* The totals over the row blocks. */
enum { T_LOSS, T_WEIGHT, T_FAILED, T_CODES, T_BAD_ROWS, T_NONFINITE, TOTALS };

static int64_t row_len(const vloss *v) { return v->nvoc + S_ROW; }

static const ladle__part vloss_parts[] = {LADLE__PART_OP(vloss, row_sum),
                                          LADLE__PART_OP(vloss, block_sum),
                                          LADLE__PART_TENSOR(vloss, stats),
                                          LADLE__PART_TENSOR(vloss, totals),
                                          LADLE__PART_TENSOR(vloss, rowbuf),
                                          LADLE__PART_HOST(vloss, weight),
                                          LADLE__PART_TENSOR(vloss, hx),
                                          LADLE__PART_TENSOR(vloss, ht),
                                          LADLE__PART_TENSOR(vloss, hval),
                                          LADLE__PART_TENSOR(vloss, hdx),
                                          LADLE__PART_TENSOR(vloss, hdl),
                                          LADLE__PART_HOST(vloss, hlse),
                                          LADLE__PARTS_END};

static double at(const void *x, ladle_dtype dt, int64_t i)
{
    return dt == LADLE_F64 ? ((const double *)x)[i] : (double)((const float *)x)[i];
}

static void put(void *x, ladle_dtype dt, int64_t i, double value)
{
    if (dt == LADLE_F64)
        ((double *)x)[i] = value;
    else
        ((float *)x)[i] = (float)value;
}

static double class_weight(const vloss *v, int64_t c)
{
    return v->weight ? v->weight[c] : 1.0;
}

/* This rank's checks of a forward's tensors. */
static ladle_status check_forward(const ladle_op *op, const ladle_tensor *x,
                                  const ladle_tensor *t, const ladle_tensor *out,
                                  const char *f)
{
    const vloss *v = op->impl;
    if (x == NULL || t == NULL || out == NULL)
        return ladle__raise(LADLE_ERR_NULL, f, "%s is NULL",
                            x == NULL   ? "input"
                            : t == NULL ? "target"
                                        : "loss");
    if (x->dtype != op->dtype || out->dtype != op->dtype)
        return ladle__raise(LADLE_ERR_DTYPE, f, "input is %s and loss %s: the loss is %s",
                            ladle_dtype_name(x->dtype), ladle_dtype_name(out->dtype),
                            ladle_dtype_name(op->dtype));
    if (t->dtype != LADLE_I64)
        return ladle__raise(LADLE_ERR_DTYPE, f, "target is %s, expected i64 labels",
                            ladle_dtype_name(t->dtype));
    if (x->device != op->be->device || t->device != op->be->device ||
        out->device != op->be->device)
        return ladle__raise(LADLE_ERR_DEVICE, f,
                            "the loss lives on %s: input, target and loss must live there",
                            ladle_device_name(op->be->device));
    if (x->ndim != 2 || x->shape[0] != v->mb || x->shape[1] != v->vr ||
        !ladle_tensor_is_contiguous(x))
        return ladle__raise(LADLE_ERR_SHAPE, f,
                            "input must be this rank's contiguous %lld x %lld block",
                            (long long)v->mb, (long long)v->vr);
    if (t->ndim != 1 || t->shape[0] != v->mb || !ladle_tensor_is_contiguous(t))
        return ladle__raise(LADLE_ERR_SHAPE, f, "target must hold the block's %lld labels",
                            (long long)v->mb);
    int64_t want = v->reduction == LADLE_REDUCE_NONE ? v->mb : 1;
    if (out->numel != want || !ladle_tensor_is_contiguous(out))
        return ladle__raise(LADLE_ERR_SHAPE, f, "the loss must hold %lld value%s",
                            (long long)want, want == 1 ? "" : "s");
    return LADLE_OK;
}

/* The labels' range (host memory). */
static ladle_status check_labels(const vloss *v, const int64_t *label, const char *f)
{
    for (int64_t m = 0; m < v->mb; m++) {
        int64_t c = label[m];
        if ((c < 0 || c >= v->classes) && !(v->ignore && c == v->ignore_index))
            return ladle__raise(LADLE_ERR_ARG, f,
                                "label %lld of row %lld is outside 0..%lld", (long long)c,
                                (long long)m, (long long)(v->classes - 1));
    }
    return LADLE_OK;
}

/* This rank's part of the row statistics (stats zeroed; valid input). */
static ladle_status local_stats(const ladle_op *op, const void *x, const int64_t *label,
                                double *s)
{
    const vloss *v = op->impl;
    ladle_dtype dt = op->dtype;
    int64_t len = row_len(v);
    double *lse = v->rowbuf->data;
    /* a slice of -inf logits has no mass (-inf); a NaN spoils the row */
    const ladle_backend *cpu = ladle__backend(LADLE_CPU);
    ladle_status st = cpu->fn->lse_rows(cpu, dt, v->mb, v->vr, x, lse);
    if (st != LADLE_OK)
        return st;
    for (int64_t m = 0; m < v->mb; m++) {
        double *r = s + m * len, smooth = 0;
        const int64_t base = m * v->vr;
        r[v->col] = lse[m];
        if (v->smoothing > 0) {
            for (int64_t c = 0; c < v->vr; c++)
                smooth += class_weight(v, v->voff + c) * at(x, dt, base + c);
            r[v->nvoc + S_SMOOTH] = smooth;
        }
        int64_t t = label[m];
        if (!(v->ignore && t == v->ignore_index) && t >= v->voff && t < v->voff + v->vr)
            r[v->nvoc + S_TARGET] = at(x, dt, base + t - v->voff);
        r[v->nvoc + S_LABELS] = (double)t;
    }
    return LADLE_OK;
}

/* The row's log-sum-exp over every class from the gathered slices'. */
static double row_lse(const double *r, int p)
{
    double mx = -INFINITY, sum = 0;
    for (int k = 0; k < p; k++) {
        if (isnan(r[k]))
            return r[k];
        mx = fmax(mx, r[k]);
    }
    if (isinf(mx))
        return mx;
    for (int k = 0; k < p; k++)
        sum += exp(r[k] - mx);
    return mx + log(sum);
}

/* Each row's L (into lse, when not NULL), loss and label weight from the
 * gathered statistics, summed into tot with the non-finite losses. */
static void row_losses(const vloss *v, const int64_t *label, const double *s, double *lse,
                       ladle_tensor *out, double *tot)
{
    int64_t len = row_len(v);
    double e = v->smoothing;
    for (int64_t m = 0; m < v->mb; m++) {
        const double *r = s + m * len;
        double L = row_lse(r, v->nvoc), loss = 0, wt = 0;
        int64_t t = label[m];
        if (lse)
            lse[m] = L;
        if (!(v->ignore && t == v->ignore_index)) {
            wt = class_weight(v, t);
            loss = (1 - e) * wt * (L - r[v->nvoc + S_TARGET]);
            if (e > 0)
                loss += e / (double)v->classes * (v->wtotal * L - r[v->nvoc + S_SMOOTH]);
        }
        if (v->reduction == LADLE_REDUCE_NONE)
            put(out->data, out->dtype, m, loss);
        tot[T_NONFINITE] += !isfinite(loss);
        tot[T_LOSS] += loss;
        tot[T_WEIGHT] += wt;
    }
}

/* A failure on some ranks as every rank reports it: the failing ranks'
 * code when they all failed alike, else LADLE_ERR_REMOTE. */
static ladle_status remote_failure(const double *tot, const char *f)
{
    double code = tot[T_CODES] / tot[T_FAILED];
    ladle_status st = code == floor(code) && code > 0 && code <= LADLE_ERR_CALLBACK
                          ? (ladle_status)code
                          : LADLE_ERR_REMOTE;
    return ladle__raise(st, f,
                        "the loss failed on another rank (%s); see that rank's message",
                        ladle_status_name(st));
}

/* The verdict every rank reaches alike from the totals. */
static ladle_status verdict(const ladle_op *op, const double *tot, double value,
                            const char *f)
{
    const vloss *v = op->impl;
    if (tot[T_BAD_ROWS] > 0)
        return ladle__raise(LADLE_ERR_ARG, f,
                            "the vocabulary ranks of a row block hold different labels "
                            "(%g disagreements found)",
                            tot[T_BAD_ROWS]);
    if (v->reduction != LADLE_REDUCE_NONE && v->label_divisor && tot[T_WEIGHT] == 0)
        return ladle__raise(LADLE_ERR_NUMERIC, f,
                            "the loss of the whole batch is %g: every sample is ignored or "
                            "weighs 0, so its mean is 0/0",
                            value);
    if (tot[T_NONFINITE] > 0 || (v->reduction != LADLE_REDUCE_NONE && !isfinite(value)))
        return ladle__raise(
            LADLE_ERR_NUMERIC, f,
            "the loss is %g (%g rows not finite): an input is not finite or "
            "its terms overflow %s",
            value, tot[T_NONFINITE], ladle_dtype_name(op->dtype));
    return LADLE_OK;
}

static ladle_status vl_forward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *input,
                               const ladle_tensor *target, ladle_tensor *out)
{
    ladle_status st = LADLE_OK, local = LADLE_OK;
    const char *f = "ladle_loss_forward";
    vloss *v = op->impl;
    if (ctx != NULL && ctx->op != op)
        return ladle__raise(LADLE_ERR_ARG, f, "the ctx belongs to another op");
    if (v->row < 0)
        return LADLE_OK; /* outside the partition */
    if (ctx)
        ctx->ready = 0;
    local = check_forward(op, input, target, out, f);
    /* on a device, the host copies stand in for the caller's tensors */
    const ladle_tensor *hin = v->hx ? v->hx : input, *htg = v->hx ? v->ht : target;
    ladle_tensor *hout = v->hx ? v->hval : out;
    if (local == LADLE_OK && v->hx &&
        (local = ladle_tensor_read(input, v->hx->data)) == LADLE_OK)
        local = ladle_tensor_read(target, v->ht->data);
    const int64_t *label = htg->data;
    if (local == LADLE_OK)
        local = check_labels(v, label, f);
    double *s = v->stats->data, *tot = v->totals->data;
    int64_t len = row_len(v), flag = v->mbmax * len;
    memset(s, 0, (size_t)(flag + 2) * sizeof *s);
    if (local == LADLE_OK)
        local = local_stats(op, hin->data, label, s);
    s[flag] = local != LADLE_OK;
    s[flag + 1] = local != LADLE_OK ? (double)local : 0.0;
    LADLE_CALL(ladle_op_forward(v->row_sum, v->stats, v->stats));
    memset(tot, 0, TOTALS * sizeof *tot);
    double *lse = ctx == NULL ? NULL : v->hx ? v->hlse : ctx->buf;
    if (s[flag] == 0)
        row_losses(v, label, s, lse, hout, tot);
    /* the row block's facts are alike on its vocabulary ranks: its first
     * one counts them */
    if (v->col != 0)
        memset(tot, 0, TOTALS * sizeof *tot);
    else {
        tot[T_FAILED] = s[flag];
        tot[T_CODES] = s[flag + 1];
    }
    /* the P ranks of a row block agree on a label when each one's equals
     * their mean (sums of integers below 2^53: exact); a rank whose label
     * differs from the mean finds the disagreement */
    for (int64_t m = 0; s[flag] == 0 && m < v->mb; m++)
        tot[T_BAD_ROWS] += (double)label[m] != s[m * len + v->nvoc + S_LABELS] / v->nvoc;
    LADLE_CALL(ladle_op_forward(v->block_sum, v->totals, v->totals));
    if (local != LADLE_OK)
        return local;
    if (tot[T_FAILED] > 0)
        return remote_failure(tot, f);
    double divisor = v->reduction != LADLE_REDUCE_MEAN ? 1.0
                     : v->label_divisor                ? tot[T_WEIGHT]
                                                       : (double)v->rows;
    double value = tot[T_LOSS] / divisor; /* 0/0 when nothing counts: NaN, as PyTorch */
    if (v->reduction != LADLE_REDUCE_NONE)
        put(hout->data, hout->dtype, 0, value);
    if (v->hx) {
        LADLE_CALL(ladle_tensor_write(out, hout->data));
        if (ctx)
            LADLE_CALL(op->be->fn->to_device(op->be, (size_t)v->mb * sizeof *v->hlse,
                                             v->hlse, ctx->buf));
    }
    if (ctx) {
        ctx->x = input;
        ctx->target = target;
        ctx->divisor = divisor;
        ctx->ready = 1;
    }
    if (v->reduction != LADLE_REDUCE_NONE)
        value = at(hout->data, hout->dtype, 0); /* as stored: an f64 sum may overflow f32 */
    return verdict(op, tot, value, f);
fail:
    return st;
}

/* The second half of the backward: dx (g mass softmax) less g q, the
 * smoothing's share of every class and the label's own entry recomputed
 * whole in double from its logit xt[m]; ignored rows get 0. Local. */
static void less_targets(const vloss *v, ladle_dtype dt, const ladle_ctx *ctx,
                         const int64_t *label, const double *lse, const ladle_tensor *dloss,
                         const double *xt, ladle_tensor *dx)
{
    int none = v->reduction == LADLE_REDUCE_NONE;
    double e = v->smoothing, per = e / (double)v->classes;
    for (int64_t m = 0; m < v->mb; m++) {
        int64_t t = label[m], base = m * v->vr;
        if (v->ignore && t == v->ignore_index) {
            for (int64_t c = 0; c < v->vr; c++)
                put(dx->data, dt, base + c, 0.0);
            continue;
        }
        double g = at(dloss->data, dt, none ? m : 0) / ctx->divisor;
        double wt = class_weight(v, t), mass = (1 - e) * wt + per * v->wtotal;
        if (e > 0)
            for (int64_t c = 0; c < v->vr; c++)
                put(dx->data, dt, base + c,
                    at(dx->data, dt, base + c) - g * per * class_weight(v, v->voff + c));
        if (t >= v->voff && t < v->voff + v->vr) {
            int64_t c = base + t - v->voff;
            double q = (1 - e) * wt + per * class_weight(v, t);
            put(dx->data, dt, c, g * (exp(xt[m] - lse[m]) * mass - q));
        }
    }
}

static ladle_status vl_backward(ladle_op *op, ladle_ctx *ctx, const ladle_tensor *dloss,
                                ladle_tensor *dx)
{
    ladle_status st = LADLE_OK;
    vloss *v = op->impl;
    LADLE_NOT_NULL(ctx);
    LADLE_CHECK(ctx->op == op, LADLE_ERR_ARG, "the ctx belongs to another op");
    if (v->row < 0)
        return LADLE_OK;
    LADLE_CHECK(ctx->ready, LADLE_ERR_STATE, "no forward has run with this ctx");
    LADLE_NOT_NULL(dloss);
    LADLE_NOT_NULL(dx);
    int none = v->reduction == LADLE_REDUCE_NONE;
    LADLE_CHECK(dloss->dtype == op->dtype && dx->dtype == op->dtype, LADLE_ERR_DTYPE,
                "dloss is %s and dinput %s: the loss is %s", ladle_dtype_name(dloss->dtype),
                ladle_dtype_name(dx->dtype), ladle_dtype_name(op->dtype));
    LADLE_CHECK(dloss->device == op->be->device && dx->device == op->be->device,
                LADLE_ERR_DEVICE, "the loss lives on %s: dloss and dinput must live there",
                ladle_device_name(op->be->device));
    LADLE_CHECK(dloss->numel == (none ? v->mb : 1) && ladle_tensor_is_contiguous(dloss),
                LADLE_ERR_SHAPE, "dloss must hold %lld value%s",
                (long long)(none ? v->mb : 1), none && v->mb != 1 ? "s" : "");
    LADLE_CHECK(dx->ndim == 2 && dx->shape[0] == v->mb && dx->shape[1] == v->vr &&
                    ladle_tensor_is_contiguous(dx),
                LADLE_ERR_SHAPE, "dinput must be this rank's contiguous %lld x %lld block",
                (long long)v->mb, (long long)v->vr);
    ladle_dtype dt = op->dtype;
    const ladle_tensor *hdl = dloss;
    ladle_tensor *hdx = dx;
    if (v->hx) { /* the saved tensors and the gradient, to the host again */
        LADLE_CALL(ladle_tensor_read(ctx->x, v->hx->data));
        LADLE_CALL(ladle_tensor_read(ctx->target, v->ht->data));
        LADLE_CALL(ladle_tensor_read(dloss, v->hdl->data));
        LADLE_CALL(op->be->fn->to_host(op->be, (size_t)v->mb * sizeof *v->hlse, ctx->buf,
                                       v->hlse));
        hdl = v->hdl;
        hdx = v->hdx;
    }
    const void *x = v->hx ? v->hx->data : ctx->x->data;
    const int64_t *label = v->hx ? v->ht->data : ctx->target->data;
    const double *lse = v->hx ? v->hlse : ctx->buf;
    double e = v->smoothing, per = e / (double)v->classes, *scale = v->rowbuf->data;
    double *xt = scale + v->mbmax;
    /* dx = g mass softmax first (the backend's exponentials), then less g q:
     * the smoothing's share of every class, and the label's own entry
     * recomputed whole in double, where p mass and q may cancel (from its
     * logit read first: dx may be x) */
    for (int64_t m = 0; m < v->mb; m++) {
        int64_t t = label[m];
        double g = at(hdl->data, dt, none ? m : 0) / ctx->divisor;
        int ign = v->ignore && t == v->ignore_index;
        scale[m] = ign ? 0.0 : g * ((1 - e) * class_weight(v, t) + per * v->wtotal);
        if (!ign && t >= v->voff && t < v->voff + v->vr)
            xt[m] = at(x, dt, m * v->vr + t - v->voff);
    }
    const ladle_backend *cpu = ladle__backend(LADLE_CPU);
    LADLE_CALL(cpu->fn->exp_rows(cpu, dt, v->mb, v->vr, x, lse, scale, hdx->data));
    less_targets(v, dt, ctx, label, lse, hdl, xt, hdx);
    if (v->hx)
        LADLE_CALL(ladle_tensor_write(dx, hdx->data));
fail:
    return st;
}

static void vl_destroy(ladle_op *op) { ladle__parts_free(op->impl, vloss_parts, NULL); }

static const ladle_op_vtable vloss_vt = {
    .kind = LADLE_OP_DIST_VOCAB_LOSS,
    .name = "vocabulary-parallel loss",
    .destroy = vl_destroy,
    .layer_forward = ladle__dist_loss_no_layer,
    .loss_forward = vl_forward,
    .loss_backward = vl_backward,
};

/* The checks every rank makes alike, from global facts only. */
static ladle_status validate(const ladle_loss_desc *d, const ladle_partition *p_x,
                             int64_t rows, int64_t classes, ladle_dtype dtype,
                             ladle_device device, const char *f)
{
    ladle_status st = ladle__loss_check_desc(d, f);
    if (st == LADLE_OK)
        st = ladle__make_check_kind(dtype, d->flags, f);
    if (st != LADLE_OK)
        return st;
    if (d->kind != LADLE_LOSS_CROSS_ENTROPY)
        return ladle__raise(LADLE_ERR_UNSUPPORTED, f,
                            "the vocabulary-parallel loss is cross entropy (kind %d given)",
                            (int)d->kind);
    if (ladle_partition_ndim(p_x) != 2)
        return ladle__raise(
            LADLE_ERR_PARTITION, f,
            "p_x has %d dimensions: it must be D x P (row blocks x vocabulary "
            "slices)",
            ladle_partition_ndim(p_x));
    const int *g = ladle_partition_shape(p_x);
    int64_t numel;
    if (rows < g[0] || classes < g[1])
        return ladle__raise(
            LADLE_ERR_SHAPE, f,
            "%lld rows and %lld classes over a %d x %d grid: every rank needs "
            "at least one row and one class",
            (long long)rows, (long long)classes, g[0], g[1]);
    st = ladle__check_shape(f, 2, (int64_t[]){rows, classes}, &numel);
    if (st == LADLE_OK)
        st = ladle__check_shape(f, 2, (int64_t[]){rows, (int64_t)g[1] + S_ROW}, &numel);
    if (st == LADLE_OK && d->weights != NULL && d->num_weights != classes)
        st = ladle__raise(LADLE_ERR_SHAPE, f, "%lld class weights for %lld classes",
                          (long long)d->num_weights, (long long)classes);
    return st;
}

/* This rank's block, the descriptor's copy and the reductions' buffers.
 * Local. */
static ladle_status plan(ladle__make *m, vloss *v, const ladle_loss_desc *d,
                         const ladle_partition *p_x)
{
    ladle_status st = LADLE_OK;
    const int *g = ladle_partition_shape(p_x), *c = ladle_partition_coords(p_x);
    v->nrow = g[0];
    v->nvoc = g[1];
    v->row = c ? c[0] : -1;
    v->col = c ? c[1] : -1;
    if (c) {
        v->mb = ladle__balanced_size(v->rows, g[0], c[0]);
        v->vr = ladle__balanced_size(v->classes, g[1], c[1]);
        v->voff = ladle__balanced_start(v->classes, g[1], c[1]);
    }
    v->reduction = d->reduction;
    v->smoothing = d->label_smoothing;
    v->ignore = d->ignore_index != LADLE_LOSS_NO_IGNORE;
    v->ignore_index = d->ignore_index;
    v->label_divisor =
        (v->ignore || d->weights != NULL) && d->reduction == LADLE_REDUCE_MEAN;
    v->wtotal = (double)v->classes;
    if (d->weights != NULL) {
        v->weight = ladle__calloc((size_t)d->num_weights, sizeof *v->weight);
        LADLE_CALL(ladle__make_alloc_ok(m, v->weight != NULL));
        memcpy(v->weight, d->weights, (size_t)d->num_weights * sizeof *v->weight);
        v->wtotal = 0;
        for (int64_t k = 0; k < d->num_weights; k++)
            v->wtotal += v->weight[k];
    }
    /* every member reduces the same length: the row blocks differ by a row */
    v->mbmax = ladle__balanced_size(v->rows, g[0], 0);
    int64_t ns = c ? v->mbmax * row_len(v) + 2 : 0, nt = c ? TOTALS : 0;
    LADLE_CALL(ladle__dist_tensor(LADLE_F64, LADLE_CPU, 1, &ns, &v->stats));
    LADLE_CALL(ladle__dist_tensor(LADLE_F64, LADLE_CPU, 1, &nt, &v->totals));
    int64_t nr = c ? 2 * v->mbmax : 0;
    LADLE_CALL(ladle__dist_tensor(LADLE_F64, LADLE_CPU, 1, &nr, &v->rowbuf));
    if (c && m->device != LADLE_CPU) { /* the host copies a device's layer stages through */
        int64_t one = v->reduction == LADLE_REDUCE_NONE ? v->mb : 1;
        int64_t xs[2] = {v->mb, v->vr};
        LADLE_CALL(ladle__dist_tensor(m->dtype, LADLE_CPU, 2, xs, &v->hx));
        LADLE_CALL(ladle__dist_tensor(m->dtype, LADLE_CPU, 2, xs, &v->hdx));
        LADLE_CALL(ladle__dist_tensor(LADLE_I64, LADLE_CPU, 1, &v->mb, &v->ht));
        LADLE_CALL(ladle__dist_tensor(m->dtype, LADLE_CPU, 1, &one, &v->hval));
        LADLE_CALL(ladle__dist_tensor(m->dtype, LADLE_CPU, 1, &one, &v->hdl));
        v->hlse = ladle__calloc((size_t)v->mb + 1, sizeof *v->hlse);
        LADLE_CALL(ladle__make_alloc_ok(m, v->hlse != NULL));
    }
    LADLE_CALL(
        ladle_layout_create_balanced(p_x, 2, (int64_t[]){v->rows, v->classes}, &m->lx));
fail:
    return st;
}

/* The two reductions: the row statistics over the vocabulary ranks (axis
 * 1), the totals over the whole grid (each row block's counted by its first
 * vocabulary rank, the others adding 0). */
static ladle_status plan_sums(ladle__make *m, vloss *v, const ladle_partition *p_x)
{
    ladle_status st = LADLE_OK;
    int64_t ns = ladle_tensor_numel(v->stats), nt = TOTALS;
    int vocab_axis = 1, both[2] = {0, 1};
    ladle_all_sum_reduce_desc rows, blocks;
    ladle_all_sum_reduce_desc_init(&rows, 1, &vocab_axis, 1, &ns);
    ladle_all_sum_reduce_desc_init(&blocks, 2, both, 1, &nt);
    rows.flags = blocks.flags = m->flags;
    LADLE_CALL(ladle__make_step(
        m->comm, ladle_all_sum_reduce_create(&rows, p_x, LADLE_F64, LADLE_CPU, &v->row_sum),
        m->func));
    LADLE_CALL(ladle__make_step(
        m->comm,
        ladle_all_sum_reduce_create(&blocks, p_x, LADLE_F64, LADLE_CPU, &v->block_sum),
        m->func));
fail:
    return st;
}

ladle_status ladle_dist_vocab_loss_create(const ladle_loss_desc *d,
                                          const ladle_partition *p_x,
                                          const int64_t x_shape[2], ladle_dtype dtype,
                                          ladle_device device, ladle_op **out)
{
    const char *f = __func__;
    ladle_status st = LADLE_OK, local;
    ladle__make m = {f, dtype, device, 0, MPI_COMM_NULL, NULL, NULL};
    ladle_op *op = NULL;
    vloss *v = NULL;
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(p_x);
    LADLE_NOT_NULL(x_shape);
    LADLE_NOT_NULL(out);
    const ladle_partition *parts[1] = {p_x};
    int64_t rows = x_shape[0], classes = x_shape[1];
    /* the flags are read only once the descriptor's size is known good */
    local = validate(d, p_x, rows, classes, dtype, device, f);
    unsigned flags = local == LADLE_OK ? d->flags : 0;
    m.flags = flags;
    int64_t args[8] = {d->kind,         d->reduction,   rows,
                       classes,         (int64_t)dtype, (int64_t)flags,
                       d->ignore_index, d->num_weights};
    uint64_t h = ladle__make_hash(LADLE_HASH_INIT, 1, parts, 8, args);
    LADLE_CALL(ladle__make_open(&m, 1, parts, local, ladle__dist_loss_hash(h, d, local)));

    v = ladle__calloc(1, sizeof *v);
    local = ladle__make_alloc_ok(&m, v != NULL);
    if (local == LADLE_OK) {
        v->rows = rows;
        v->classes = classes;
        local = plan(&m, v, d, p_x);
    }
    LADLE_CALL(ladle__make_step(m.comm, local, f));
    LADLE_CALL(plan_sums(&m, v, p_x));
    m.ly = ladle__layout_retain(m.lx);
    local = ladle__make_layer(&m, LADLE_OK, &vloss_vt, v, NULL, &op);
    if (local == LADLE_OK) {
        /* each ctx keeps its rows' log-sum-exps (in the device's memory) */
        op->ctx_bytes = (size_t)v->mb * sizeof(double);
        ladle__dist_hold(op, v->row_sum);
        ladle__dist_hold(op, v->block_sum);
        v = NULL;
    }
    st = ladle__make_end(&m, &op, local, out);
fail:
    ladle_op_destroy(&op);
    ladle__make_close(&m);
    ladle__parts_free(v, vloss_parts, NULL);
    return st;
}
