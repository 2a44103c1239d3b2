/* IDX datasets (see ladle/data.h). */
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "internal.h"

struct ladle_dataset {
    int64_t n, rows, cols;       /* samples and the full image size */
    int64_t row0, wr, col0, wc;  /* the window kept */
    uint8_t *pixels;             /* n x wr x wc */
    uint8_t *labels;             /* n */
    double mean, std;
    int64_t *perm;               /* the order of the epoch cached in perm_epoch */
    int64_t perm_epoch;
    uint64_t perm_seed;
};

/* Read exactly n bytes; 0 at a short read. */
static int read_all(gzFile f, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        unsigned chunk = n > (1u << 30) ? (1u << 30) : (unsigned)n;
        int got = gzread(f, p, chunk);
        if (got <= 0)
            return 0;
        p += got;
        n -= (size_t)got;
    }
    return 1;
}

static uint32_t be32(const uint8_t *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Open an IDX file and read its header: type byte 0x08 (unsigned bytes)
 * and ndim dimensions. */
static ladle_status open_idx(const char *path, int ndim, uint32_t *dims, gzFile *out,
                             const char *func)
{
    uint8_t head[4], d[12];
    gzFile f = gzopen(path, "rb");
    if (f == NULL)
        return ladle__raise(LADLE_ERR_IO, func, "cannot open %s", path);
    if (!read_all(f, head, 4) || head[0] != 0 || head[1] != 0 || head[2] != 0x08 ||
        head[3] != ndim || !read_all(f, d, (size_t)(4 * ndim))) {
        gzclose(f);
        return ladle__raise(LADLE_ERR_IO, func,
                            "%s is not an IDX file of unsigned bytes with %d dimensions", path,
                            ndim);
    }
    for (int i = 0; i < ndim; i++)
        dims[i] = be32(d + 4 * i);
    *out = f;
    return LADLE_OK;
}

ladle_status ladle_dataset_load(const char *images, const char *labels, int64_t row0,
                                int64_t rows, int64_t col0, int64_t cols, double mean,
                                double std, ladle_dataset **out)
{
    ladle_status st = LADLE_OK;
    ladle_dataset *ds = NULL;
    gzFile fi = NULL, fl = NULL;
    uint8_t *line = NULL;
    uint32_t di[3] = {0, 0, 0}, dl[1] = {0};
    LADLE_NOT_NULL(images);
    LADLE_NOT_NULL(labels);
    LADLE_NOT_NULL(out);
    LADLE_CHECK(std > 0, LADLE_ERR_ARG, "std %g must be positive", std);
    LADLE_CALL(open_idx(images, 3, di, &fi, __func__));
    LADLE_CALL(open_idx(labels, 1, dl, &fl, __func__));
    LADLE_CHECK(di[0] == dl[0], LADLE_ERR_ARG, "%s holds %u images, %s %u labels", images,
                di[0], labels, dl[0]);
    ds = ladle__calloc(1, sizeof *ds);
    LADLE_CHECK(ds != NULL, LADLE_ERR_ALLOC, "out of memory");
    ds->n = di[0];
    ds->rows = di[1];
    ds->cols = di[2];
    ds->row0 = row0;
    ds->wr = rows ? rows : ds->rows - row0;
    ds->col0 = col0;
    ds->wc = cols ? cols : ds->cols - col0;
    ds->mean = mean;
    ds->std = std;
    ds->perm_epoch = -1;
    LADLE_CHECK(row0 >= 0 && col0 >= 0 && ds->wr >= 0 && ds->wc >= 0 &&
                    row0 + ds->wr <= ds->rows && col0 + ds->wc <= ds->cols,
                LADLE_ERR_ARG, "the window rows %lld+%lld, columns %lld+%lld is outside "
                "%lldx%lld images",
                (long long)row0, (long long)ds->wr, (long long)col0, (long long)ds->wc,
                (long long)ds->rows, (long long)ds->cols);
    ds->pixels = ladle__calloc((size_t)(ds->n * ds->wr * ds->wc) + 1, 1);
    ds->labels = ladle__calloc((size_t)ds->n + 1, 1);
    ds->perm = ladle__calloc((size_t)ds->n + 1, sizeof(int64_t));
    line = ladle__calloc((size_t)(ds->rows * ds->cols) + 1, 1);
    LADLE_CHECK(ds->pixels && ds->labels && ds->perm && line, LADLE_ERR_ALLOC, "out of memory");
    /* stream every image, keep the window */
    for (int64_t s = 0; s < ds->n; s++) {
        LADLE_CHECK(read_all(fi, line, (size_t)(ds->rows * ds->cols)), LADLE_ERR_IO,
                    "%s ends after %lld of %lld images (a torn file?)", images, (long long)s,
                    (long long)ds->n);
        uint8_t *dst = ds->pixels + s * ds->wr * ds->wc;
        for (int64_t r = 0; r < ds->wr; r++)
            memcpy(dst + r * ds->wc, line + (row0 + r) * ds->cols + col0, (size_t)ds->wc);
    }
    LADLE_CHECK(read_all(fl, ds->labels, (size_t)ds->n), LADLE_ERR_IO,
                "%s ends before its %lld labels (a torn file?)", labels, (long long)ds->n);
    *out = ds;
    ds = NULL;
fail:
    if (fi)
        gzclose(fi);
    if (fl)
        gzclose(fl);
    ladle__free(line);
    ladle_dataset_destroy(&ds);
    return st;
}

ladle_status ladle_dataset_load_dir(const char *dir, const char *which, int64_t row0,
                                    int64_t rows, int64_t col0, int64_t cols, double mean,
                                    double std, ladle_dataset **ds)
{
    char img[4096], lab[4096];
    if (dir == NULL || which == NULL)
        return ladle__raise(LADLE_ERR_NULL, __func__, "%s is NULL", dir ? "which" : "dir");
    snprintf(img, sizeof img, "%s/%s-images-idx3-ubyte.gz", dir, which);
    snprintf(lab, sizeof lab, "%s/%s-labels-idx1-ubyte.gz", dir, which);
    return ladle_dataset_load(img, lab, row0, rows, col0, cols, mean, std, ds);
}

ladle_status ladle_dataset_destroy(ladle_dataset **ds)
{
    if (ds == NULL || *ds == NULL)
        return LADLE_OK;
    ladle__free((*ds)->pixels);
    ladle__free((*ds)->labels);
    ladle__free((*ds)->perm);
    ladle__free(*ds);
    *ds = NULL;
    return LADLE_OK;
}

int64_t ladle_dataset_size(const ladle_dataset *ds) { return ds ? ds->n : 0; }
int64_t ladle_dataset_rows(const ladle_dataset *ds) { return ds ? ds->rows : 0; }
int64_t ladle_dataset_cols(const ladle_dataset *ds) { return ds ? ds->cols : 0; }

int64_t ladle_dataset_classes(const ladle_dataset *ds)
{
    int64_t top = -1;
    if (ds == NULL)
        return 0;
    for (int64_t s = 0; s < ds->n; s++)
        if (ds->labels[s] > top)
            top = ds->labels[s];
    return top + 1;
}

/* Fisher-Yates with a counter-based generator keyed by (seed, epoch). */
static void order(ladle_dataset *ds, uint64_t seed, int64_t epoch)
{
    if (ds->perm_epoch == epoch && ds->perm_seed == seed)
        return;
    for (int64_t i = 0; i < ds->n; i++)
        ds->perm[i] = i;
    for (int64_t i = ds->n - 1; seed != 0 && i > 0; i--) {
        double u = 0.5 * (ladle__random_uniform(seed, (uint64_t)epoch + 1000, (uint64_t)i) + 1.0);
        int64_t j = (int64_t)(u * (double)(i + 1));
        if (j > i)
            j = i;
        int64_t t = ds->perm[i];
        ds->perm[i] = ds->perm[j];
        ds->perm[j] = t;
    }
    ds->perm_epoch = epoch;
    ds->perm_seed = seed;
}

int64_t ladle_dataset_label(const ladle_dataset *ds, int64_t s)
{
    return ds && s >= 0 && s < ds->n ? ds->labels[s] : -1;
}

int64_t ladle_dataset_sample(const ladle_dataset *ds, uint64_t seed, int64_t epoch, int64_t k)
{
    if (ds == NULL || k < 0 || k >= ds->n)
        return -1;
    order((ladle_dataset *)ds, seed, epoch); /* a cache: the answer is the same */
    return ds->perm[k];
}

ladle_status ladle_dataset_batch(const ladle_dataset *ds, uint64_t seed, int64_t epoch,
                                 int64_t step, int64_t batch, int64_t offset, int64_t row_off,
                                 int64_t col_off, ladle_tensor *x, ladle_tensor *labels)
{
    ladle_status st = LADLE_OK;
    LADLE_NOT_NULL(ds);
    LADLE_NOT_NULL(x);
    LADLE_CHECK(x->dtype == LADLE_F32 || x->dtype == LADLE_F64, LADLE_ERR_DTYPE,
                "x is %s", ladle_dtype_name(x->dtype));
    LADLE_CHECK(x->ndim == 4 && x->shape[1] == 1 && ladle_tensor_is_contiguous(x),
                LADLE_ERR_SHAPE, "x must be a contiguous n x 1 x h x w tensor");
    int64_t n = x->shape[0], h = x->shape[2], w = x->shape[3];
    LADLE_CHECK(row_off >= 0 && col_off >= 0 && row_off + h <= ds->wr && col_off + w <= ds->wc,
                LADLE_ERR_ARG, "rows %lld+%lld and columns %lld+%lld leave the loaded window",
                (long long)row_off, (long long)h, (long long)col_off, (long long)w);
    LADLE_CHECK(labels == NULL || (labels->dtype == LADLE_I64 && labels->numel == n),
                LADLE_ERR_SHAPE, "labels must be %lld i64 values", (long long)n);
    LADLE_CHECK(step >= 0 && batch >= 1 && offset >= 0, LADLE_ERR_ARG, "a negative position");
    order((ladle_dataset *)ds, seed, epoch);
    double scale = 1.0 / (255.0 * ds->std), shift = ds->mean / ds->std;
    for (int64_t i = 0; i < n; i++) {
        int64_t k = step * batch + offset + i;
        int64_t s = k < ds->n ? ds->perm[k] : -1;
        if (labels)
            ((int64_t *)labels->data)[i] = s >= 0 ? ds->labels[s] : -1;
        for (int64_t r = 0; r < h; r++) {
            const uint8_t *src = s >= 0 ? ds->pixels + (s * ds->wr + row_off + r) * ds->wc + col_off
                                        : NULL;
            int64_t base = (i * h + r) * w;
            for (int64_t c = 0; c < w; c++) {
                double v = src ? src[c] * scale - shift : 0.0;
                if (x->dtype == LADLE_F32)
                    ((float *)x->data)[base + c] = (float)v;
                else
                    ((double *)x->data)[base + c] = v;
            }
        }
    }
fail:
    return st;
}
