/*
 * ladle/data.h - datasets in the IDX format of the MNIST family, shuffled
 * by seed and cut into batches, each rank reading only its own part.
 *
 * An IDX file (gzip-compressed or not) holds unsigned bytes: labels (one
 * dimension) or images (three: count, rows, columns). A rank loads only the
 * window of every image its block of the batch covers (its spatial tile;
 * the whole image when the images are not split), since any sample may
 * fall into its batch block in some epoch: the order is one global
 * permutation per epoch, the same on every layout, so a distributed run
 * sees exactly the batches of a sequential one.
 *
 * Pixels become (value / 255 - mean) / std with the mean and std given at
 * load time. Nothing here is collective.
 */
#ifndef LADLE_DATA_H
#define LADLE_DATA_H

#include "core.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ladle_dataset ladle_dataset;

/* Where Debian's dataset-fashion-mnist package puts its files. */
#define LADLE_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

/* What a dataset's headers say, and its labels: the number of samples,
 * the image size, and one more than the largest label (0 when empty). */
typedef struct ladle_dataset_info {
    int64_t size, rows, cols, classes;
} ladle_dataset_info;

/* Check a pair of IDX files without loading the images: both headers (type,
 * dimensions, the same count; sizes that fit and that the file can hold),
 * and every label (read, to find the classes). Local. Returns
 * LADLE_ERR_NULL, LADLE_ERR_IO (a missing, torn or malformed file: the
 * message says which and why), LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_dataset_probe(const char *images, const char *labels,
                                           ladle_dataset_info *info);
/* The same for the standard pair of a dataset directory (see
 * ladle_dataset_load_dir). Local. */
LADLE_API ladle_status ladle_dataset_probe_dir(const char *dir, const char *which,
                                               ladle_dataset_info *info);

/* Which part of every image a rank keeps, and how pixels are normalised:
 * rows [row0, row0 + rows) and columns [col0, col0 + cols) (rows or cols
 * 0: all of them); a pixel becomes (value / 255 - mean) / std. */
typedef struct ladle_dataset_desc {
    size_t size;        /* sizeof(ladle_dataset_desc), set by ladle_dataset_desc_init (checked) */
    int64_t row0, rows; /* 0, 0: every row */
    int64_t col0, cols; /* 0, 0: every column */
    double mean, std;   /* 0 and 1 */
} ladle_dataset_desc;

/* The whole image, mean 0, std 1. Accepts NULL. Local. */
LADLE_API void ladle_dataset_desc_init(ladle_dataset_desc *d);

/* Load images and labels (paths to IDX files, .gz or plain), keeping d's
 * window of every image (d NULL: the defaults of ladle_dataset_desc_init).
 * The headers are checked as ladle_dataset_probe checks them before
 * anything is allocated: a short file that declares a huge size is refused
 * as shorter than its header says, not as out of memory. Local. Returns
 * LADLE_ERR_NULL, LADLE_ERR_IO (a missing, torn or malformed file, or
 * counts that differ: the message says which and why), LADLE_ERR_ARG (a d
 * not set up by ladle_dataset_desc_init, a window outside the images, a
 * non-finite mean or a std that is not positive), LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_dataset_load(const char *images, const char *labels,
                                          const ladle_dataset_desc *d, ladle_dataset **ds);
/* The standard pair of a dataset directory: which = "train" or "t10k"
 * (train-images-idx3-ubyte.gz and train-labels-idx1-ubyte.gz, ...). Local. */
LADLE_API ladle_status ladle_dataset_load_dir(const char *dir, const char *which,
                                              const ladle_dataset_desc *d, ladle_dataset **ds);
/* Free it and set *ds to NULL. Accepts NULL. Local. */
LADLE_API ladle_status ladle_dataset_destroy(ladle_dataset **ds);

/* The number of samples and the full image size. Local. */
LADLE_API int64_t ladle_dataset_size(const ladle_dataset *ds);
LADLE_API int64_t ladle_dataset_rows(const ladle_dataset *ds);
LADLE_API int64_t ladle_dataset_cols(const ladle_dataset *ds);
/* One more than the largest label: the classes a model needs to score every
 * sample (0 for an empty dataset). Local. */
LADLE_API int64_t ladle_dataset_classes(const ladle_dataset *ds);

/* Sample k of epoch `epoch`'s order: a permutation of 0..size-1 drawn from
 * (seed, epoch) with a counter-based generator (seed 0: no shuffle). Local. */
LADLE_API int64_t ladle_dataset_sample(const ladle_dataset *ds, uint64_t seed, int64_t epoch,
                                       int64_t k);

/* The label of sample s (-1 outside the dataset). Local. */
LADLE_API int64_t ladle_dataset_label(const ladle_dataset *ds, int64_t s);

/*
 * How a rank draws its batches: the order's seed, the global batch size,
 * this rank's block of it (rows offset .. of the batch, and its tile of the
 * loaded window at row_off, col_off), and the augmentation of training
 * images, applied to every sample:
 *
 *   crop_pad p > 0  pad the image with p black pixels (byte 0, normalised
 *                   like any pixel) on every side, then cut out an image of
 *                   the original size at offset (oy, ox), each drawn
 *                   uniformly from 0 .. 2p: out[r][c] = img[r + oy - p][c +
 *                   ox - p], black outside the image (oy = ox = p: the
 *                   image itself)
 *   flip 1          then mirror the columns with probability 1/2:
 *                   out[r][c] = cropped[r][w - 1 - c]
 *
 * The draws are a function of (seed, epoch, dataset sample index) alone (a
 * counter-based generator), and they are applied in the coordinates of the
 * whole image before a rank takes its window: every rank, on every layout,
 * sees exactly the same augmented global sample. A text corpus's batches
 * (ladle_text_batch) use seed, batch and offset.
 */
typedef struct ladle_batch_desc {
    size_t size;      /* sizeof(ladle_batch_desc), set by ladle_batch_desc_init (checked) */
    uint64_t seed;    /* the order of every epoch (0: no shuffle) and the draws */
    int64_t batch;    /* the global batch size, 1 or more */
    int64_t offset;   /* this rank's first row of the batch (0) */
    int64_t row_off;  /* this rank's tile within the loaded window (0, 0) */
    int64_t col_off;
    int64_t crop_pad; /* p: 0 (no crop) to the image's larger side (0) */
    int flip;         /* 0 or 1 (0) */
} ladle_batch_desc;

/* seed, batch, and the rest 0: the whole batch, no tile, no augmentation.
 * Accepts NULL. Local. */
LADLE_API void ladle_batch_desc_init(ladle_batch_desc *d, uint64_t seed, int64_t batch);

/* Fill this rank's block of batch `step` of an epoch: x (f32 or f64, n x 1
 * x h x w, contiguous) gets samples first + d->offset .. first + d->offset
 * + n - 1 of the order (first = step * d->batch), augmented as d says, rows
 * and columns relative to the loaded window (d->row_off, d->col_off within
 * it), and labels (i64, may be NULL) their classes. Samples beyond the
 * dataset's end (a padded last batch) get zeros and label -1. The loaded
 * window must hold every pixel an augmented sample of this block may read:
 * rows row_off - p to row_off + h - 1 + p of the window, clipped to the
 * image, and the same for the columns and, with flip, their mirror image
 * (load the whole image when in doubt). x and labels may live on any
 * device: samples are decoded on the host, into the tensors themselves on
 * the CPU, else into host memory (allocated for the call) written through
 * the device's backend. Local. Returns LADLE_ERR_NULL, LADLE_ERR_SHAPE,
 * LADLE_ERR_DTYPE, LADLE_ERR_ARG (a d not set up by ladle_batch_desc_init,
 * a negative position, a crop_pad below 0 or above the image's larger
 * side, a flip other than 0 or 1, a window that misses pixels the
 * augmentation may read: the message names the value), LADLE_ERR_DEVICE
 * (a device ladle was built without), LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_dataset_batch(const ladle_dataset *ds, const ladle_batch_desc *d,
                                           int64_t epoch, int64_t step, ladle_tensor *x,
                                           ladle_tensor *labels);

/* The draws of dataset sample `sample` in `epoch` under d (its seed,
 * crop_pad and flip): the crop's offsets in the padded image (*oy, *ox in
 * 0 .. 2 crop_pad; crop_pad, crop_pad is the image unmoved) and whether it
 * is mirrored (*flip 0 or 1), as ladle_dataset_batch applies them. Local.
 * Returns LADLE_ERR_NULL, LADLE_ERR_ARG (a bad size, crop_pad below 0 or
 * above 2^30, flip other than 0 or 1, a negative sample or epoch). */
LADLE_API ladle_status ladle_augment_draw(const ladle_batch_desc *d, int64_t epoch,
                                          int64_t sample, int64_t *oy, int64_t *ox, int *flip);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_DATA_H */
