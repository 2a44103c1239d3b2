/* Gradient buckets overlapping a backward pass (see train/buckets.h). */
#include <string.h>

#include "layers/distributed/dist.h"
#include "primitives/shard.h"
#include "train/buckets.h"
#include "train/memory_model.h"

typedef struct slot {
    int layer, param;
} slot;

typedef struct bucket {
    int nslots;
    slot *slots;
    int ready;             /* the layer whose backward completes the bucket */
    ladle_op *scatter;     /* reduce-scatter of buf over the bucket's group */
    ladle_op *gather;      /* all-gather of a slice back into buf */
    ladle_tensor *buf;     /* this rank's gradients (or parameters), packed and padded */
    ladle_tensor *gshard;  /* this rank's slice of the summed gradients */
    ladle_tensor *pshard;  /* stages 1 and 2: this rank's slice of the parameters */
    int64_t offset;        /* where the slice sits in buf */
    int phase;             /* 0 idle, 1 scatter in flight, 2 gather in flight */
} bucket;

struct ladle__buckets {
    int nlayers;
    ladle_op *const *layers;
    int n, stage;
    bucket *b;
};

void ladle__buckets_destroy(ladle__buckets **bs)
{
    if (bs == NULL || *bs == NULL)
        return;
    ladle__buckets *s = *bs;
    for (int j = 0; j < s->n; j++) {
        ladle_op_destroy(&s->b[j].scatter);
        ladle_op_destroy(&s->b[j].gather);
        ladle_tensor_destroy(&s->b[j].buf);
        ladle_tensor_destroy(&s->b[j].gshard);
        ladle_tensor_destroy(&s->b[j].pshard);
        ladle__free(s->b[j].slots);
    }
    ladle__free(s->b);
    ladle__free(s);
    *bs = NULL;
}

int ladle__buckets_count(const ladle__buckets *b) { return b ? b->n : 0; }

/* Two parameters can share a bucket when their reductions have the same
 * partition and groups. */
static int same_groups(const ladle__pinfo *a, const ladle__pinfo *b)
{
    if (a->sync_p == NULL || b->sync_p == NULL)
        return 0;
    if (ladle__partition_hash(LADLE_HASH_INIT, a->sync_p) !=
        ladle__partition_hash(LADLE_HASH_INIT, b->sync_p))
        return 0;
    return memcmp(a->sync_gid, b->sync_gid,
                  sizeof(int) * (size_t)ladle_partition_size(a->sync_p)) == 0;
}

/* Plan a bucket's scatter and gather over the groups of info and
 * counts (this rank's slice: its position in its group). */
static ladle_status close_bucket(bucket *b, const ladle__pinfo *info, const int64_t *counts,
                                 ladle_dtype dtype, ladle_device device)
{
    ladle_status st = LADLE_OK;
    const ladle_partition *p = info->sync_p;
    LADLE_CALL(ladle__shard_groups_create(p, info->sync_gid, counts, dtype, device, 1,
                                          &b->scatter));
    LADLE_CALL(ladle__shard_groups_create(p, info->sync_gid, counts, dtype, device, 0,
                                          &b->gather));
    if (p->rank >= 0) {
        int g = 0, pos = 0;
        for (int r = 0; r < p->size; r++)
            if (info->sync_gid[r] == info->sync_gid[p->rank]) {
                pos = r == p->rank ? g : pos;
                g++;
            }
        b->offset = (int64_t)pos * ((counts[p->rank] + g - 1) / g);
    }
fail:
    return st;
}

/* Walk the parameters in backward order and cut them into buckets, each
 * with its planned reduction. */
static ladle_status plan(ladle__buckets *s, size_t cap, ladle_dtype dtype, ladle_device device)
{
    ladle_status st = LADLE_OK;
    size_t es = ladle_dtype_size(dtype);
    ladle__pinfo cur, info;
    int total = 0;
    int64_t *counts = NULL, bytes = 0;
    for (int i = 0; i < s->nlayers; i++)
        total += ladle_op_num_params(s->layers[i]);
    s->b = ladle__calloc((size_t)total + 1, sizeof(bucket));
    LADLE_CHECK(s->b != NULL, LADLE_ERR_ALLOC, "out of memory");
    memset(&cur, 0, sizeof cur);
    bucket *b = NULL;
    for (int i = s->nlayers - 1; i >= 0; i--) {
        ladle_op *op = s->layers[i];
        for (int k = ladle_op_num_params(op) - 1; k >= 0; k--) {
            ladle__param_info(op, k, &info);
            if (info.sync == NULL || info.sync_p == NULL)
                continue;
            int size = ladle_partition_size(info.sync_p);
            /* the largest count on any rank decides the bucket's size */
            int64_t most = 0;
            for (int r = 0; r < size; r++)
                most = info.sync_counts[r] > most ? info.sync_counts[r] : most;
            if (b == NULL || !same_groups(&cur, &info) || (size_t)(bytes + most) * es > cap) {
                /* close the previous bucket, open a new one */
                if (b != NULL) {
                    LADLE_CALL(close_bucket(b, &cur, counts, dtype, device));
                    ladle__free(counts);
                    counts = NULL;
                }
                b = &s->b[s->n++];
                b->slots = ladle__calloc((size_t)total, sizeof(slot));
                counts = ladle__calloc((size_t)size, sizeof(int64_t));
                LADLE_CHECK(b->slots && counts, LADLE_ERR_ALLOC, "out of memory");
                cur = info;
                bytes = 0;
            }
            for (int r = 0; r < size; r++)
                counts[r] += info.sync_counts[r];
            bytes += most;
            b->slots[b->nslots++] = (slot){i, k};
            b->ready = i;
        }
    }
    if (b != NULL)
        LADLE_CALL(close_bucket(b, &cur, counts, dtype, device));
    for (int j = 0; j < s->n; j++) {
        int nd;
        int64_t shape[LADLE_MAX_NDIM];
        ladle_op_x_shape(s->b[j].scatter, &nd, shape);
        LADLE_CALL(ladle__tensor_create_as(LADLE_MEM_COMM, dtype, device, nd, shape,
                                           &s->b[j].buf));
        ladle_op_y_shape(s->b[j].scatter, &nd, shape);
        LADLE_CALL(ladle__tensor_create_as(LADLE_MEM_GRADS, dtype, device, nd, shape,
                                           &s->b[j].gshard));
        if (s->stage >= 1)
            LADLE_CALL(ladle__tensor_create_as(LADLE_MEM_PARAMS, dtype, device, nd, shape,
                                               &s->b[j].pshard));
    }
fail:
    ladle__free(counts);
    return st;
}

/* Copy a bucket's gradients (or parameters) into its buffer (pack) or
 * back (unpack), on the layers' device. */
static ladle_status move(const ladle__buckets *s, bucket *b, int pack, int params)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *be = s->layers[0]->be;
    size_t es = ladle_dtype_size(b->buf->dtype), at = 0;
    char *buf = b->buf->data;
    for (int k = 0; k < b->nslots; k++) {
        ladle_op *op = s->layers[b->slots[k].layer];
        int i = b->slots[k].param;
        ladle_tensor *g = params ? ladle_op_param(op, i) : ladle_op_grad(op, i);
        if (g->numel == 0)
            continue;
        if (pack)
            LADLE_CALL(be->fn->copy(be, g->dtype, g->numel, g->data, buf + at));
        else
            LADLE_CALL(be->fn->copy(be, g->dtype, g->numel, buf + at, g->data));
        at += (size_t)g->numel * es;
    }
fail:
    return st;
}

/* This rank's slice of a bucket's parameters, from the layers. */
static ladle_status take_params(const ladle__buckets *s, bucket *b)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *be = s->layers[0]->be;
    size_t es = ladle_dtype_size(b->buf->dtype);
    LADLE_CALL(move(s, b, 1, 1));
    if (b->pshard->numel > 0)
        LADLE_CALL(be->fn->copy(be, b->buf->dtype, b->pshard->numel,
                                (char *)b->buf->data + (size_t)b->offset * es, b->pshard->data));
fail:
    return st;
}

ladle_status ladle__buckets_create_stage(int n, ladle_op *const layers[], size_t cap,
                                         ladle_dtype dtype, ladle_device device, int stage,
                                         ladle__buckets **out)
{
    ladle_status st = LADLE_OK;
    ladle__buckets *s = ladle__calloc(1, sizeof *s);
    LADLE_CHECK(s != NULL, LADLE_ERR_ALLOC, "out of memory");
    s->nlayers = n;
    s->layers = layers;
    s->stage = stage;
    LADLE_CALL(plan(s, cap, dtype, device));
    for (int j = 0; stage >= 1 && j < s->n; j++)
        LADLE_CALL(take_params(s, &s->b[j]));
    *out = s;
    return LADLE_OK;
fail:
    ladle__buckets_destroy(&s);
    return st;
}

ladle_status ladle__buckets_create(int n, ladle_op *const layers[], size_t cap,
                                   ladle_dtype dtype, ladle_device device, ladle__buckets **out)
{
    return ladle__buckets_create_stage(n, layers, cap, dtype, device, 0, out);
}

/* The next phase of a bucket's reduction: the scatter into its slice,
 * then (stages 0 and 1) the gather of the summed slices back. */
static ladle_status advance(ladle__buckets *s, bucket *b)
{
    ladle_status st = LADLE_OK;
    if (b->phase == 0) {
        LADLE_CALL(move(s, b, 1, 0));
        LADLE_CALL(ladle__op_start(b->scatter, b->buf, b->gshard));
        b->phase = 1;
    } else if (b->phase == 1 && s->stage < 2) {
        LADLE_CALL(ladle__op_start(b->gather, b->gshard, b->buf));
        b->phase = 2;
    } else {
        if (b->phase == 2)
            LADLE_CALL(move(s, b, 0, 0));
        b->phase = 0;
    }
fail:
    return st;
}

ladle_status ladle__buckets_after(ladle__buckets *s, int i)
{
    ladle_status st = LADLE_OK;
    for (int j = 0; j < s->n; j++) {
        bucket *b = &s->b[j];
        int done = 0;
        if (b->phase == 1) {
            LADLE_CALL(ladle__op_progress(b->scatter, &done));
            /* the gather starts as soon as the slices are summed */
            if (done) {
                LADLE_CALL(ladle__op_wait(b->scatter));
                LADLE_CALL(advance(s, b));
            }
        } else if (b->phase == 2) {
            LADLE_CALL(ladle__op_progress(b->gather, &done));
        }
    }
    for (int j = 0; j < s->n; j++)
        if (s->b[j].ready == i && s->b[j].phase == 0)
            LADLE_CALL(advance(s, &s->b[j]));
fail:
    return st;
}

ladle_status ladle__buckets_finish(ladle__buckets *s, double *wait)
{
    ladle_status st = LADLE_OK;
    double t0 = MPI_Wtime();
    for (int j = 0; j < s->n; j++) {
        bucket *b = &s->b[j];
        if (b->phase == 1) {
            LADLE_CALL(ladle__op_wait(b->scatter));
            LADLE_CALL(advance(s, b));
        }
        if (b->phase == 2) {
            LADLE_CALL(ladle__op_wait(b->gather));
            LADLE_CALL(advance(s, b));
        }
        b->phase = 0;
    }
    *wait = MPI_Wtime() - t0;
fail:
    return st;
}

ladle_status ladle__buckets_gather_params(ladle__buckets *s)
{
    ladle_status st = LADLE_OK;
    for (int j = 0; s->stage >= 1 && j < s->n; j++)
        LADLE_CALL(ladle__op_start(s->b[j].gather, s->b[j].pshard, s->b[j].buf));
    for (int j = 0; s->stage >= 1 && j < s->n; j++) {
        LADLE_CALL(ladle__op_wait(s->b[j].gather));
        LADLE_CALL(move(s, &s->b[j], 0, 1));
    }
fail:
    return st;
}

ladle_status ladle__buckets_take_params(ladle__buckets *s)
{
    ladle_status st = LADLE_OK;
    for (int j = 0; s->stage >= 1 && j < s->n; j++)
        LADLE_CALL(take_params(s, &s->b[j]));
fail:
    return st;
}

int ladle__buckets_holds(const ladle__buckets *s, int layer, int param)
{
    for (int j = 0; s != NULL && j < s->n; j++)
        for (int k = 0; k < s->b[j].nslots; k++)
            if (s->b[j].slots[k].layer == layer && s->b[j].slots[k].param == param)
                return 1;
    return 0;
}

ladle_status ladle__buckets_add_shards(const ladle__buckets *s, ladle_optimizer *opt)
{
    ladle_status st = LADLE_OK;
    for (int j = 0; j < s->n; j++)
        LADLE_CALL(ladle_optimizer_add_param(opt, s->b[j].pshard, s->b[j].gshard));
fail:
    return st;
}

ladle_status ladle__buckets_sumsq(const ladle__buckets *s, double *sum)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *be = s->nlayers ? s->layers[0]->be : NULL;
    for (int j = 0; j < s->n; j++) {
        const ladle_tensor *g = s->b[j].gshard;
        double d[2] = {0, 0};
        if (g->numel > 0)
            LADLE_CALL(be->fn->dot2(be, g->dtype, g->numel, g->data, g->data, d));
        *sum += d[0] + d[1];
    }
fail:
    return st;
}

ladle_status ladle__buckets_scale(ladle__buckets *s, double alpha)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *be = s->nlayers ? s->layers[0]->be : NULL;
    for (int j = 0; j < s->n; j++) {
        ladle_tensor *g = s->b[j].gshard;
        if (g->numel > 0)
            LADLE_CALL(be->fn->scal(be, g->dtype, g->numel, alpha, g->data));
    }
fail:
    return st;
}

static size_t nbytes(const ladle_tensor *t)
{
    return t ? (size_t)t->numel * ladle_dtype_size(t->dtype) : 0;
}

void ladle__buckets_bytes(const ladle__buckets *s, size_t *params, size_t *grads, size_t *comm)
{
    for (int j = 0; s != NULL && j < s->n; j++) {
        const bucket *b = &s->b[j];
        *params += nbytes(b->pshard);
        *grads += nbytes(b->gshard);
        *comm += nbytes(b->buf) + ladle_op_workspace_bytes(b->scatter) +
                 ladle_op_workspace_bytes(b->gather);
    }
}
