/* IDX datasets (see ladle/data.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "src/core/backend.h"

struct ladle_dataset {
    int64_t n, rows, cols;       /* samples and the full image size */
    int64_t row0, wr, col0, wc;  /* the window kept */
    uint8_t *pixels;             /* n x wr x wc */
    uint8_t *labels;             /* n */
    double mean, std;
    int64_t *perm;               /* the order of the epoch cached in perm_epoch */
    int64_t perm_epoch;
    uint64_t perm_seed;
    /* Host memory a batch for a device without host access is decoded into
     * (the device's pinned memory where it has it), kept from batch to
     * batch so that a training step touches no fresh pages: a cache, like
     * perm, grown when a larger batch or another device asks. */
    void *stage;
    size_t stage_bytes;
    const ladle_backend *stage_be;
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

/* Deflate expands at most about 1032 to 1: a compressed file of c bytes
 * holds at most this many bytes (plus a little for the gzip header). */
#define GZ_MAX_RATIO 1032
#define GZ_SLACK 65536

/* An open IDX file: its header's dimensions and the bytes they declare. */
typedef struct idx_file {
    gzFile f;
    int ndim;
    int64_t dims[3];
    int64_t body; /* bytes after the header: the product of dims */
} idx_file;

/* Open an IDX file of unsigned bytes (type 0x08) with ndim dimensions and
 * check its header against the file: the product of the dimensions must
 * fit, and the file must be able to hold it (exactly, for a plain file; by
 * deflate's largest ratio for a compressed one, so a short file with a huge
 * header is refused before anything is allocated; the reads catch the
 * rest). */
static ladle_status open_idx(const char *path, int ndim, idx_file *x, const char *func)
{
    ladle_status st = LADLE_OK;
    uint8_t head[4], d[12];
    struct stat sb;
    memset(x, 0, sizeof *x);
    x->ndim = ndim;
    if (stat(path, &sb) != 0)
        return ladle__raise(LADLE_ERR_IO, func, "cannot open %s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return ladle__raise(LADLE_ERR_IO, func, "%s is not a regular file", path);
    errno = 0;
    x->f = gzopen(path, "rb");
    if (x->f == NULL)
        return ladle__raise(LADLE_ERR_IO, func, "cannot open %s: %s", path,
                            errno ? strerror(errno) : "out of memory");
    if (!(read_all(x->f, head, 4) && head[0] == 0 && head[1] == 0 && head[2] == 0x08 &&
          head[3] == ndim && read_all(x->f, d, (size_t)(4 * ndim)))) {
        st = ladle__raise(LADLE_ERR_IO, func,
                          "%s is not an IDX file of unsigned bytes with %d dimension%s", path,
                          ndim, ndim > 1 ? "s" : "");
        goto fail;
    }
    for (int i = 0; i < ndim; i++)
        x->dims[i] = be32(d + 4 * i);
    x->body = ladle__volume_within(ndim, x->dims, INT64_MAX);
    char shape[96];
    ladle__fmt_shape64(shape, sizeof shape, ndim, x->dims);
    int64_t after = (int64_t)sb.st_size - 4 - 4 * ndim;
    if (x->body < 0)
        st = ladle__raise(LADLE_ERR_IO, func, "%s: its header declares %s bytes, too many to hold",
                          path, shape);
    else if (gzdirect(x->f) && after != x->body)
        st = ladle__raise(LADLE_ERR_IO, func,
                          "%s holds %lld bytes after its header, which declares %s = %lld%s", path,
                          (long long)after, shape, (long long)x->body,
                          after < x->body ? " (the file is shorter than its header says)"
                                          : " (trailing bytes)");
    else if (!gzdirect(x->f) && x->body / GZ_MAX_RATIO > (int64_t)sb.st_size + GZ_SLACK)
        st = ladle__raise(LADLE_ERR_IO, func,
                          "%s: the file is shorter than its header says (%lld compressed bytes "
                          "cannot hold the %s = %lld bytes it declares)",
                          path, (long long)sb.st_size, shape, (long long)x->body);
    if (st == LADLE_OK)
        return LADLE_OK;
fail:
    gzclose(x->f);
    x->f = NULL;
    return st;
}

/* Close what open_pair opened (either may be closed already). */
static void close_pair(idx_file *fi, idx_file *fl)
{
    if (fi->f)
        gzclose(fi->f);
    if (fl->f)
        gzclose(fl->f);
    fi->f = fl->f = NULL;
}

/* The images and labels files of a dataset, headers checked against each
 * other: three dimensions and one, the same count. */
static ladle_status open_pair(const char *images, const char *labels, idx_file *fi,
                              idx_file *fl, const char *func)
{
    ladle_status st = LADLE_OK;
    LADLE_CALL(open_idx(images, 3, fi, func));
    LADLE_CALL(open_idx(labels, 1, fl, func));
    if (fi->dims[0] != fl->dims[0]) {
        st = ladle__raise(LADLE_ERR_IO, func, "%s holds %lld images, %s %lld labels", images,
                          (long long)fi->dims[0], labels, (long long)fl->dims[0]);
        goto fail;
    }
    return LADLE_OK;
fail:
    close_pair(fi, fl);
    return st;
}

ladle_status ladle_dataset_probe(const char *images, const char *labels,
                                 ladle_dataset_info *info)
{
    ladle_status st = LADLE_OK;
    idx_file fi = {0}, fl = {0};
    uint8_t *l = NULL;
    LADLE_NOT_NULL(images);
    LADLE_NOT_NULL(labels);
    LADLE_NOT_NULL(info);
    LADLE_CALL(open_pair(images, labels, &fi, &fl, __func__));
    l = ladle__calloc((size_t)fl.body + 1, 1);
    LADLE_CHECK(l != NULL, LADLE_ERR_ALLOC, "out of memory for %lld labels",
                (long long)fl.body);
    LADLE_CHECK(read_all(fl.f, l, (size_t)fl.body), LADLE_ERR_IO,
                "%s ends before its %lld labels (a torn file?)", labels, (long long)fl.body);
    int top = -1;
    for (int64_t s = 0; s < fl.body; s++)
        top = l[s] > top ? l[s] : top;
    info->size = fi.dims[0];
    info->rows = fi.dims[1];
    info->cols = fi.dims[2];
    info->classes = top + 1;
fail:
    close_pair(&fi, &fl);
    ladle__free(l);
    return st;
}

void ladle_dataset_desc_init(ladle_dataset_desc *d)
{
    if (!LADLE_DESC_START(d))
        return;
    d->std = 1.0;
}

/* A dataset of fi's images under d's normalization, its window not yet
 * sized nor its buffers made; NULL without memory. */
static ladle_dataset *dataset_new(const idx_file *fi, const ladle_dataset_desc *d)
{
    ladle_dataset *ds = ladle__calloc(1, sizeof *ds);
    if (ds == NULL)
        return NULL;
    ds->n = fi->dims[0];
    ds->rows = fi->dims[1];
    ds->cols = fi->dims[2];
    ds->row0 = d->row0;
    ds->col0 = d->col0;
    ds->mean = d->mean;
    ds->std = d->std;
    ds->perm_epoch = -1;
    return ds;
}

/* Stream every image of f through line (one whole image), keeping ds's
 * window of each. Returns how many images it read: ds->n, or fewer where
 * the file ends early. */
static int64_t read_windows(ladle_dataset *ds, gzFile f, uint8_t *line)
{
    for (int64_t s = 0; s < ds->n; s++) {
        if (!read_all(f, line, (size_t)(ds->rows * ds->cols)))
            return s;
        uint8_t *dst = ds->pixels + s * ds->wr * ds->wc;
        for (int64_t r = 0; r < ds->wr; r++)
            memcpy(dst + r * ds->wc, line + (ds->row0 + r) * ds->cols + ds->col0,
                   (size_t)ds->wc);
    }
    return ds->n;
}

ladle_status ladle_dataset_load(const char *images, const char *labels,
                                const ladle_dataset_desc *d, ladle_dataset **out)
{
    ladle_status st = LADLE_OK;
    ladle_dataset *ds = NULL;
    uint8_t *line = NULL;
    idx_file fi = {0}, fl = {0};
    LADLE_NOT_NULL(images);
    LADLE_NOT_NULL(labels);
    LADLE_NOT_NULL(out);
    ladle_dataset_desc def;
    if (d == NULL) {
        ladle_dataset_desc_init(&def);
        d = &def;
    }
    LADLE_CHECK_SIZE(d);
    int64_t row0 = d->row0, rows = d->rows, col0 = d->col0, cols = d->cols;
    double mean = d->mean, std = d->std;
    LADLE_CHECK(std > 0 && isfinite(std) && isfinite(mean), LADLE_ERR_ARG,
                "the mean %g and std %g must be finite, the std positive", mean, std);
    LADLE_CALL(open_pair(images, labels, &fi, &fl, __func__));
    ds = dataset_new(&fi, d);
    LADLE_CHECK(ds != NULL, LADLE_ERR_ALLOC, "out of memory");
    LADLE_CHECK(row0 >= 0 && col0 >= 0 && rows >= 0 && cols >= 0 && row0 <= ds->rows &&
                    col0 <= ds->cols && rows <= ds->rows - row0 && cols <= ds->cols - col0,
                LADLE_ERR_ARG, "the window rows %lld+%lld, columns %lld+%lld is outside "
                "%lldx%lld images",
                (long long)row0, (long long)rows, (long long)col0, (long long)cols,
                (long long)ds->rows, (long long)ds->cols);
    ds->wr = rows ? rows : ds->rows - row0;
    ds->wc = cols ? cols : ds->cols - col0;
    /* the header's sizes were checked against the file: these products fit */
    int64_t kept = ds->n * ds->wr * ds->wc;
    ds->pixels = ladle__calloc((size_t)kept + 1, 1);
    ds->labels = ladle__calloc((size_t)ds->n + 1, 1);
    ds->perm = ladle__calloc((size_t)ds->n + 1, sizeof(int64_t));
    line = ladle__calloc((size_t)(ds->rows * ds->cols) + 1, 1);
    LADLE_CHECK(ds->pixels && ds->labels && ds->perm && line, LADLE_ERR_ALLOC,
                "out of memory for %lld images of %lldx%lld", (long long)ds->n,
                (long long)ds->wr, (long long)ds->wc);
    int64_t read = read_windows(ds, fi.f, line);
    LADLE_CHECK(read == ds->n, LADLE_ERR_IO, "%s ends after %lld of %lld images (a torn file?)",
                images, (long long)read, (long long)ds->n);
    LADLE_CHECK(read_all(fl.f, ds->labels, (size_t)ds->n), LADLE_ERR_IO,
                "%s ends before its %lld labels (a torn file?)", labels, (long long)ds->n);
    *out = ds;
    ds = NULL;
fail:
    close_pair(&fi, &fl);
    ladle__free(line);
    ladle_dataset_destroy(&ds);
    return st;
}

/* The paths of a directory's pair (which = "train" or "t10k"): the
 * compressed files, or plain ones where no compressed file exists. */
static ladle_status dir_paths(const char *dir, const char *which, char *img, char *lab,
                              size_t cap, const char *func)
{
    char *out[2] = {img, lab};
    const char *kind[2] = {"images-idx3", "labels-idx1"};
    struct stat sb;
    if (dir == NULL || which == NULL)
        return ladle__raise(LADLE_ERR_NULL, func, "%s is NULL", dir ? "which" : "dir");
    if (stat(dir, &sb) != 0)
        return ladle__raise(LADLE_ERR_IO, func, "the dataset directory %s: %s", dir,
                            strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return ladle__raise(LADLE_ERR_IO, func, "the dataset directory %s is not a directory",
                            dir);
    for (int k = 0; k < 2; k++) {
        int n = snprintf(out[k], cap, "%s/%s-%s-ubyte.gz", dir, which, kind[k]);
        if (n < 0 || (size_t)n >= cap)
            return ladle__raise(LADLE_ERR_ARG, func, "the path %s/%s-... is too long", dir,
                                which);
        if (stat(out[k], &sb) != 0)
            out[k][n - 3] = '\0'; /* no .gz: the plain file (or the error names it) */
        if (stat(out[k], &sb) != 0)
            out[k][n - 3] = '.';
    }
    return LADLE_OK;
}

ladle_status ladle_dataset_load_dir(const char *dir, const char *which,
                                    const ladle_dataset_desc *d, ladle_dataset **ds)
{
    char img[4096], lab[4096];
    ladle_status st = dir_paths(dir, which, img, lab, sizeof img, __func__);
    return st ? st : ladle_dataset_load(img, lab, d, ds);
}

ladle_status ladle_dataset_probe_dir(const char *dir, const char *which,
                                     ladle_dataset_info *info)
{
    char img[4096], lab[4096];
    ladle_status st = dir_paths(dir, which, img, lab, sizeof img, __func__);
    return st ? st : ladle_dataset_probe(img, lab, info);
}

ladle_status ladle_dataset_destroy(ladle_dataset **ds)
{
    if (ds == NULL || *ds == NULL)
        return LADLE_OK;
    ladle__free((*ds)->pixels);
    ladle__free((*ds)->labels);
    ladle__free((*ds)->perm);
    if ((*ds)->stage != NULL)
        ladle__be_host_free((*ds)->stage_be, (*ds)->stage);
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

/* At least bytes of the dataset's staging, host memory of be (the cache
 * described in struct ladle_dataset). */
static ladle_status staging(ladle_dataset *ds, const ladle_backend *be, size_t bytes,
                            void **out)
{
    ladle_status st = LADLE_OK;
    if (ds->stage == NULL || ds->stage_bytes < bytes || ds->stage_be != be) {
        if (ds->stage != NULL)
            LADLE_CALL(ladle__be_host_free(ds->stage_be, ds->stage));
        ds->stage = NULL;
        ds->stage_bytes = 0;
        LADLE_CALL(ladle__be_host_alloc(be, bytes, &ds->stage));
        ds->stage_bytes = bytes;
        ds->stage_be = be;
    }
    *out = ds->stage;
fail:
    return st;
}

/* One sample's augmentation: the crop's offsets in the padded image (p,
 * p when there is no crop) and whether it is mirrored. */
typedef struct aug_draw {
    int64_t p, oy, ox;
    int flip;
} aug_draw;

/* Far from the streams of the shuffle (epoch + 1000), so that no epoch's
 * augmentation reuses another epoch's order. */
#define AUG_STREAM ((uint64_t)1 << 62)

/* The draws of dataset sample s in an epoch: three uniforms of a
 * counter-based generator keyed by (seed, epoch, s), nothing else; none
 * at all when d asks for no augmentation. */
static void aug_draw_of(const ladle_batch_desc *d, int64_t epoch, int64_t s, aug_draw *a)
{
    memset(a, 0, sizeof *a);
    if (d->crop_pad == 0 && !d->flip)
        return;
    uint64_t stream = AUG_STREAM + (uint64_t)epoch, c = 3 * (uint64_t)s;
    double n = (double)(2 * d->crop_pad + 1);
    a->p = d->crop_pad;
    a->oy = (int64_t)(0.5 * (ladle__random_uniform(d->seed, stream, c) + 1.0) * n);
    a->ox = (int64_t)(0.5 * (ladle__random_uniform(d->seed, stream, c + 1) + 1.0) * n);
    a->oy = a->oy > 2 * a->p ? 2 * a->p : a->oy; /* u < 1, but rounding */
    a->ox = a->ox > 2 * a->p ? 2 * a->p : a->ox;
    a->flip = d->flip && ladle__random_uniform(d->seed, stream, c + 2) < 0.0;
}

void ladle_batch_desc_init(ladle_batch_desc *d, uint64_t seed, int64_t batch)
{
    if (!LADLE_DESC_START(d))
        return;
    d->seed = seed;
    d->batch = batch;
}

ladle_status ladle_augment_draw(const ladle_batch_desc *d, int64_t epoch, int64_t sample,
                                int64_t *oy, int64_t *ox, int *flip)
{
    ladle_status st = LADLE_OK;
    aug_draw a;
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(oy);
    LADLE_NOT_NULL(ox);
    LADLE_NOT_NULL(flip);
    LADLE_CHECK_SIZE(d);
    LADLE_CHECK(d->crop_pad >= 0 && d->crop_pad <= (int64_t)1 << 30, LADLE_ERR_ARG,
                "crop_pad %lld is outside 0 .. 2^30", (long long)d->crop_pad);
    LADLE_CHECK(d->flip == 0 || d->flip == 1, LADLE_ERR_ARG, "flip %d is not 0 or 1",
                d->flip);
    LADLE_CHECK(sample >= 0 && epoch >= 0, LADLE_ERR_ARG, "sample %lld of epoch %lld",
                (long long)sample, (long long)epoch);
    aug_draw_of(d, epoch, sample, &a);
    *oy = a.oy;
    *ox = a.ox;
    *flip = a.flip;
fail:
    return st;
}

/* The options against the dataset, and the loaded window against every
 * pixel a sample of the block (rows g0.., columns c0.., global) may read. */
static ladle_status aug_check(const ladle_dataset *ds, const ladle_batch_desc *a,
                              int64_t g0, int64_t h, int64_t c0, int64_t w, const char *f)
{
    ladle_status st = LADLE_OK;
    if (h == 0 || w == 0)
        return LADLE_OK;
    int64_t side = ds->rows > ds->cols ? ds->rows : ds->cols, p = a->crop_pad;
    LADLE_CHECK(p >= 0 && p <= side, LADLE_ERR_ARG,
                "crop_pad %lld is outside 0 .. %lld (the image's larger side)", (long long)p,
                (long long)side);
    LADLE_CHECK(a->flip == 0 || a->flip == 1, LADLE_ERR_ARG, "flip %d is not 0 or 1", a->flip);
    int64_t r_lo = g0 - p < 0 ? 0 : g0 - p, r_hi = g0 + h - 1 + p;
    r_hi = r_hi >= ds->rows ? ds->rows - 1 : r_hi;
    LADLE_CHECK(r_lo >= ds->row0 && r_hi < ds->row0 + ds->wr, LADLE_ERR_ARG,
                "the augmentation reads rows %lld to %lld; rows %lld to %lld are loaded",
                (long long)r_lo, (long long)r_hi, (long long)ds->row0,
                (long long)(ds->row0 + ds->wr - 1));
    for (int m = 0; m <= a->flip; m++) {
        int64_t lo = (m ? ds->cols - c0 - w : c0) - p, hi = (m ? ds->cols - 1 - c0 : c0 + w - 1) + p;
        lo = lo < 0 ? 0 : lo;
        hi = hi >= ds->cols ? ds->cols - 1 : hi;
        LADLE_CHECK(lo >= ds->col0 && hi < ds->col0 + ds->wc, LADLE_ERR_ARG,
                    "the augmentation reads columns %lld to %lld; columns %lld to %lld are "
                    "loaded",
                    (long long)lo, (long long)hi, (long long)ds->col0,
                    (long long)(ds->col0 + ds->wc - 1));
    }
fail:
    return st;
}

/* Sample s (or zeros for -1) augmented by d, rows g0.. and columns c0.. of
 * the whole image (h x w of them), normalised into out at element base. */
static void fill_sample(const ladle_dataset *ds, int64_t s, const aug_draw *d, int64_t g0,
                        int64_t c0, int64_t h, int64_t w, ladle_dtype dtype, void *out,
                        int64_t base)
{
    double scale = 1.0 / (255.0 * ds->std), shift = ds->mean / ds->std;
    int64_t sc0 = c0 + d->ox - d->p; /* unmirrored: the first column's source */
    for (int64_t r = 0; r < h; r++) {
        int64_t sr = g0 + r + d->oy - d->p; /* the source row in the image */
        int inside = s >= 0 && sr >= 0 && sr < ds->rows;
        const uint8_t *src = inside ? ds->pixels + (s * ds->wr + sr - ds->row0) * ds->wc : NULL;
        if (src != NULL && !d->flip && sc0 >= 0 && sc0 + w <= ds->cols) {
            /* a row wholly inside the image, not mirrored: the same values
             * in a loop the compiler vectorises (the general one below was
             * 2.6% of a LeNet-5 step) */
            const uint8_t *p = src + sc0 - ds->col0;
            if (dtype == LADLE_F32)
                for (int64_t c = 0; c < w; c++)
                    ((float *)out)[base + r * w + c] = (float)(p[c] * scale - shift);
            else
                for (int64_t c = 0; c < w; c++)
                    ((double *)out)[base + r * w + c] = p[c] * scale - shift;
            continue;
        }
        for (int64_t c = 0; c < w; c++) {
            int64_t cc = d->flip ? ds->cols - 1 - (c0 + c) : c0 + c;
            int64_t sc = cc + d->ox - d->p;
            double v = s < 0 ? 0.0 : -shift; /* a black pixel of the padding */
            if (src != NULL && sc >= 0 && sc < ds->cols)
                v = src[sc - ds->col0] * scale - shift;
            if (dtype == LADLE_F32)
                ((float *)out)[base + r * w + c] = (float)v;
            else
                ((double *)out)[base + r * w + c] = v;
        }
    }
}

/* The n samples of batch step of epoch (window rows g0 + h, columns c0 + w)
 * into xs, their labels into ls where not NULL; past the end of the data,
 * zero samples labelled -1. */
static void decode_batch(const ladle_dataset *ds, const ladle_batch_desc *d, int64_t epoch,
                         int64_t step, int64_t n, int64_t g0, int64_t c0, int64_t h,
                         int64_t w, ladle_dtype dtype, char *xs, int64_t *ls)
{
    order((ladle_dataset *)ds, d->seed, epoch);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = step * d->batch + d->offset + i;
        int64_t s = k < ds->n ? ds->perm[k] : -1;
        aug_draw a;
        aug_draw_of(d, epoch, s, &a);
        if (ls)
            ls[i] = s >= 0 ? ds->labels[s] : -1;
        fill_sample(ds, s, &a, g0, c0, h, w, dtype, xs, i * h * w);
    }
}

ladle_status ladle_dataset_batch(const ladle_dataset *ds, const ladle_batch_desc *d,
                                 int64_t epoch, int64_t step, ladle_tensor *x,
                                 ladle_tensor *labels)
{
    ladle_status st = LADLE_OK;
    const ladle_backend *bx = NULL, *bl = NULL;
    char *xs = NULL;
    int64_t *ls = NULL;
    LADLE_NOT_NULL(ds);
    LADLE_NOT_NULL(d);
    LADLE_NOT_NULL(x);
    LADLE_CHECK_SIZE(d);
    int64_t batch = d->batch, offset = d->offset, row_off = d->row_off,
            col_off = d->col_off;
    LADLE_CHECK(x->dtype == LADLE_F32 || x->dtype == LADLE_F64, LADLE_ERR_DTYPE,
                "x is %s", ladle_dtype_name(x->dtype));
    LADLE_CHECK(x->ndim == 4 && x->shape[1] == 1 && ladle_tensor_is_contiguous(x),
                LADLE_ERR_SHAPE, "x must be a contiguous n x 1 x h x w tensor");
    int64_t n = x->shape[0], h = x->shape[2], w = x->shape[3];
    LADLE_CHECK(row_off >= 0 && col_off >= 0 && row_off <= ds->wr - h &&
                    col_off <= ds->wc - w,
                LADLE_ERR_ARG, "rows %lld+%lld and columns %lld+%lld leave the loaded window",
                (long long)row_off, (long long)h, (long long)col_off, (long long)w);
    LADLE_CHECK(labels == NULL || (labels->dtype == LADLE_I64 && labels->numel == n),
                LADLE_ERR_SHAPE, "labels must be %lld i64 values", (long long)n);
    LADLE_CHECK(step >= 0 && batch >= 1 && offset >= 0, LADLE_ERR_ARG, "a negative position");
    LADLE_CHECK(step <= (INT64_MAX - offset - n) / batch, LADLE_ERR_ARG,
                "step %lld of batches of %lld is past any dataset", (long long)step,
                (long long)batch);
    int64_t g0 = ds->row0 + row_off, c0 = ds->col0 + col_off;
    LADLE_CALL(aug_check(ds, d, g0, h, c0, w, __func__));
    /* the samples are decoded on the host: straight into tensors the host
     * may touch, else into host memory written through the backend */
    LADLE_CALL(ladle__backend_get(x->device, __func__, &bx));
    if (labels)
        LADLE_CALL(ladle__backend_get(labels->device, __func__, &bl));
    size_t es = ladle_dtype_size(x->dtype), xbytes = (size_t)x->numel * es;
    size_t xpart = bx->host_access ? 0 : (xbytes + 63) / 64 * 64;
    size_t lpart = labels == NULL || bl->host_access ? 0 : (size_t)n * sizeof(int64_t);
    char *stage = NULL;
    if (xpart + lpart > 0) /* one staging for both (a device without host access) */
        LADLE_CALL(staging((ladle_dataset *)ds, bx->host_access ? bl : bx, xpart + lpart,
                           (void **)&stage));
    xs = bx->host_access ? x->data : stage;
    ls = labels == NULL ? NULL : bl->host_access ? labels->data : (int64_t *)(stage + xpart);
    decode_batch(ds, d, epoch, step, n, g0, c0, h, w, x->dtype, xs, ls);
    /* written through the devices, which wait for the copies: the staging
     * is free again on return */
    if (!bx->host_access)
        LADLE_CALL(ladle_tensor_write(x, xs));
    if (labels && !bl->host_access)
        LADLE_CALL(ladle_tensor_write(labels, ls));
fail:
    return st;
}

/* ---- the names of 0.1 (include/ladle/deprecated.h) ------------------------ */

void ladle_augment_options_init(ladle_augment_options *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
}

ladle_status ladle_dataset_batch_ex(const ladle_dataset *ds, uint64_t seed, int64_t epoch,
                                    int64_t step, int64_t batch, int64_t offset,
                                    int64_t row_off, int64_t col_off, ladle_tensor *x,
                                    ladle_tensor *labels, const ladle_augment_options *aug)
{
    ladle_status st = LADLE_OK;
    ladle_batch_desc d;
    ladle_batch_desc_init(&d, seed, batch);
    d.offset = offset;
    d.row_off = row_off;
    d.col_off = col_off;
    if (aug != NULL) {
        LADLE_CHECK_SIZE(aug);
        d.crop_pad = aug->crop_pad;
        d.flip = aug->flip;
    }
    st = ladle_dataset_batch(ds, &d, epoch, step, x, labels);
fail:
    return st;
}
