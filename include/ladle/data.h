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
 * and every label (read, to find the classes). Not collective. Returns
 * LADLE_ERR_NULL, LADLE_ERR_IO (a missing, torn or malformed file: the
 * message says which and why), LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_dataset_probe(const char *images, const char *labels,
                                           ladle_dataset_info *info);
/* The same for the standard pair of a dataset directory (see
 * ladle_dataset_load_dir). */
LADLE_API ladle_status ladle_dataset_probe_dir(const char *dir, const char *which,
                                               ladle_dataset_info *info);

/* Load images and labels (paths to IDX files, .gz or plain), keeping rows
 * [row0, row0 + rows) and columns [col0, col0 + cols) of every image (rows
 * or cols 0: all of them). The headers are checked as ladle_dataset_probe
 * checks them before anything is allocated: a short file that declares a
 * huge size is refused as shorter than its header says, not as out of
 * memory. Not collective. Returns LADLE_ERR_NULL, LADLE_ERR_IO (a missing,
 * torn or malformed file, or counts that differ: the message says which and
 * why), LADLE_ERR_ARG (a window outside the images, a non-finite mean or a
 * std that is not positive), LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_dataset_load(const char *images, const char *labels, int64_t row0,
                                          int64_t rows, int64_t col0, int64_t cols,
                                          double mean, double std, ladle_dataset **ds);
/* The standard pair of a dataset directory: which = "train" or "t10k"
 * (train-images-idx3-ubyte.gz and train-labels-idx1-ubyte.gz, ...). */
LADLE_API ladle_status ladle_dataset_load_dir(const char *dir, const char *which, int64_t row0,
                                              int64_t rows, int64_t col0, int64_t cols,
                                              double mean, double std, ladle_dataset **ds);
/* Free it and set *ds to NULL. Accepts NULL. */
LADLE_API ladle_status ladle_dataset_destroy(ladle_dataset **ds);

/* The number of samples and the full image size. */
LADLE_API int64_t ladle_dataset_size(const ladle_dataset *ds);
LADLE_API int64_t ladle_dataset_rows(const ladle_dataset *ds);
LADLE_API int64_t ladle_dataset_cols(const ladle_dataset *ds);
/* One more than the largest label: the classes a model needs to score every
 * sample (0 for an empty dataset). */
LADLE_API int64_t ladle_dataset_classes(const ladle_dataset *ds);

/* Sample k of epoch `epoch`'s order: a permutation of 0..size-1 drawn from
 * (seed, epoch) with a counter-based generator (seed 0: no shuffle). */
LADLE_API int64_t ladle_dataset_sample(const ladle_dataset *ds, uint64_t seed, int64_t epoch,
                                       int64_t k);

/* The label of sample s (-1 outside the dataset). */
LADLE_API int64_t ladle_dataset_label(const ladle_dataset *ds, int64_t s);

/* Fill this rank's block of batch `step` of an epoch (global batch size
 * `batch`): x (f32 or f64, n x 1 x h x w, contiguous) gets samples
 * first + offset .. first + offset + n - 1 of the order (first = step *
 * batch), rows and columns relative to the loaded window (row_off, col_off
 * within it), and labels (i64, may be NULL) their classes. Samples beyond
 * the dataset's end (a padded last batch) get zeros and label -1. x and
 * labels may live on any device: samples are decoded on the host, into
 * the tensors themselves on the CPU, else into host memory (allocated for
 * the call) written through the device's backend. Local. Returns
 * LADLE_ERR_NULL, LADLE_ERR_SHAPE, LADLE_ERR_DTYPE, LADLE_ERR_ARG,
 * LADLE_ERR_DEVICE (a device ladle was built without), LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_dataset_batch(const ladle_dataset *ds, uint64_t seed, int64_t epoch,
                                           int64_t step, int64_t batch, int64_t offset,
                                           int64_t row_off, int64_t col_off, ladle_tensor *x,
                                           ladle_tensor *labels);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_DATA_H */
