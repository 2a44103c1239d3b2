/* Gradient buckets overlapping a backward pass (see train/buckets.h). */
#include <string.h>

#include "layers/distributed/dist.h"
#include "train/buckets.h"
#include "train/memory_model.h"

typedef struct slot {
    int layer, param;
} slot;

typedef struct bucket {
    int nslots;
    slot *slots;
    int ready;         /* the layer whose backward completes the bucket */
    ladle_op *reduce;  /* all-sum-reduce over the bucket's groups */
    ladle_tensor *buf; /* this rank's gradients, packed */
    int in_flight;
} bucket;

struct ladle__buckets {
    int nlayers;
    ladle_op *const *layers;
    int n;
    bucket *b;
};

void ladle__buckets_destroy(ladle__buckets **bs)
{
    if (bs == NULL || *bs == NULL)
        return;
    ladle__buckets *s = *bs;
    for (int j = 0; j < s->n; j++) {
        ladle_op_destroy(&s->b[j].reduce);
        ladle_tensor_destroy(&s->b[j].buf);
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
                    LADLE_CALL(ladle__all_sum_reduce_groups(cur.sync_p, cur.sync_gid, counts, dtype,
                                                            device, 0, &b->reduce));
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
        LADLE_CALL(ladle__all_sum_reduce_groups(cur.sync_p, cur.sync_gid, counts, dtype, device, 0,
                                                &b->reduce));
    for (int j = 0; j < s->n; j++) {
        int nd;
        int64_t shape[LADLE_MAX_NDIM];
        ladle_op_x_shape(s->b[j].reduce, &nd, shape);
        LADLE_CALL(ladle__tensor_create_as(LADLE_MEM_COMM, dtype, device, nd, shape,
                                           &s->b[j].buf));
    }
fail:
    ladle__free(counts);
    return st;
}

ladle_status ladle__buckets_create(int n, ladle_op *const layers[], size_t cap,
                                   ladle_dtype dtype, ladle_device device, ladle__buckets **out)
{
    ladle_status st = LADLE_OK;
    ladle__buckets *s = ladle__calloc(1, sizeof *s);
    LADLE_CHECK(s != NULL, LADLE_ERR_ALLOC, "out of memory");
    s->nlayers = n;
    s->layers = layers;
    LADLE_CALL(plan(s, cap, dtype, device));
    *out = s;
    return LADLE_OK;
fail:
    ladle__buckets_destroy(&s);
    return st;
}

/* Copy a bucket's gradients into its buffer (pack) or back (unpack), on
 * the layers' device. */
static ladle_status move(const ladle__buckets *s, bucket *b, int pack)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *be = s->layers[0]->be;
    size_t es = ladle_dtype_size(b->buf->dtype), at = 0;
    char *buf = b->buf->data;
    for (int k = 0; k < b->nslots; k++) {
        ladle_tensor *g = ladle_op_grad(s->layers[b->slots[k].layer], b->slots[k].param);
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

ladle_status ladle__buckets_after(ladle__buckets *s, int i)
{
    ladle_status st = LADLE_OK;
    for (int j = 0; j < s->n; j++)
        if (s->b[j].in_flight) {
            int done;
            LADLE_CALL(ladle__op_progress(s->b[j].reduce, &done));
        }
    for (int j = 0; j < s->n; j++) {
        bucket *b = &s->b[j];
        if (b->ready != i)
            continue;
        LADLE_CALL(move(s, b, 1));
        LADLE_CALL(ladle__op_start(b->reduce, b->buf, b->buf));
        b->in_flight = 1;
    }
fail:
    return st;
}

ladle_status ladle__buckets_finish(ladle__buckets *s, double *wait)
{
    ladle_status st = LADLE_OK;
    double t0 = MPI_Wtime();
    for (int j = 0; j < s->n; j++) {
        bucket *b = &s->b[j];
        if (!b->in_flight)
            continue;
        b->in_flight = 0;
        LADLE_CALL(ladle__op_wait(b->reduce));
        LADLE_CALL(move(s, b, 0));
    }
    *wait = MPI_Wtime() - t0;
fail:
    return st;
}

size_t ladle__buckets_bytes(const ladle__buckets *bs)
{
    size_t n = 0;
    for (int j = 0; bs != NULL && j < bs->n; j++) {
        const ladle_tensor *buf = bs->b[j].buf;
        if (buf != NULL)
            n += (size_t)buf->numel * ladle_dtype_size(buf->dtype);
        n += ladle_op_workspace_bytes(bs->b[j].reduce);
    }
    return n;
}
