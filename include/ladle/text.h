/*
 * ladle/text.h - a character-level text corpus for language models: plain
 * files read whole, cut into records, every k-th record held out for
 * validation, bytes mapped to token ids, and batches of windows drawn by
 * seed.
 *
 * Records. A file whose lines include one that is exactly "%" is in the
 * fortune format (Debian's fortunes packages): its records are the texts
 * between those lines. Any other file is one record per paragraph (text
 * between blank lines). Files are read in the byte order of their names;
 * record r of the whole corpus (counting from 0) goes to validation when
 * r % val_every == val_every - 1, to training otherwise, so both splits
 * draw on every file and topic. A split's text is its records in order,
 * each followed by the separator it had ("%\n" in the fortune format, a
 * blank line otherwise), so a model learns where records end.
 *
 * Tokens are bytes: the vocabulary is the distinct byte values of the whole
 * corpus (both splits, so validation has no unknown token), sorted, token
 * id k the k-th smallest. A corpus is text: a NUL byte is refused as a sign
 * of a binary file.
 *
 * Nothing here is collective; every rank that loads the same corpus gets
 * the same splits, vocabulary and batches.
 */
#ifndef LADLE_TEXT_H
#define LADLE_TEXT_H

#include "core.h"
#include "data.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ladle_text ladle_text;

/* Where Debian's fortunes package puts its English fortune files. */
#define LADLE_FORTUNES_DIR "/usr/share/games/fortunes"
/* The largest corpus ladle_text_load reads (bytes, all files together). */
#define LADLE_TEXT_MAX_BYTES ((int64_t)1 << 30)

typedef enum ladle_text_split { LADLE_TEXT_TRAIN = 0, LADLE_TEXT_VAL = 1 } ladle_text_split;

typedef struct ladle_text_desc {
    size_t size;       /* sizeof(ladle_text_desc), set by ladle_text_desc_init (checked) */
    int64_t val_every; /* hold out every k-th record (default 10: 10%); 0: none */
} ladle_text_desc;

/* val_every 10, size set. Accepts NULL. Local. */
LADLE_API void ladle_text_desc_init(ladle_text_desc *d);

/* Load a corpus: path is a file, or a directory whose regular files are
 * read (not symbolic links, hidden files or names ending in .dat or .u8:
 * the fortune tools' indexes and links). d NULL: the defaults. Local.
 * Returns LADLE_ERR_NULL, LADLE_ERR_ARG (a bad descriptor size, val_every
 * below 0 or above 2^20), LADLE_ERR_IO (a missing or unreadable path, a
 * directory with no corpus file, a NUL byte (naming the file and offset),
 * a corpus above LADLE_TEXT_MAX_BYTES, no record at all, no training
 * record, or no validation record when val_every > 0), LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_text_load(const char *path, const ladle_text_desc *d,
                                       ladle_text **t);
/* Free it and set *t to NULL. Accepts NULL. Local. */
LADLE_API ladle_status ladle_text_destroy(ladle_text **t);

/* The vocabulary's size V (token ids 0 .. V-1); 0 for NULL. Local. */
LADLE_API int64_t ladle_text_vocab(const ladle_text *t);
/* The byte of token id (-1 outside the vocabulary), the id of byte b (-1
 * when the corpus lacks it). Local. */
LADLE_API int ladle_text_byte(const ladle_text *t, int64_t id);
LADLE_API int64_t ladle_text_id(const ladle_text *t, int b);
/* A split's length in tokens and its records; 0 for NULL or another split.
 * Local. */
LADLE_API int64_t ladle_text_length(const ladle_text *t, ladle_text_split s);
LADLE_API int64_t ladle_text_records(const ladle_text *t, ladle_text_split s);
/* The files read, and the token ids of a split (length tokens; NULL for
 * NULL or another split). Local. */
LADLE_API int ladle_text_files(const ladle_text *t);
LADLE_API const int64_t *ladle_text_tokens(const ladle_text *t, ladle_text_split s);

/* Fill rows d->offset .. d->offset + n - 1 of random batch `step` (global
 * batch d->batch) of split s: x and y are i64 tensors n x T on any device;
 * row k of the global batch is the window that starts at position
 * floor(u (length - T)) of the split, u the uniform [0, 1) of the
 * counter-based generator at (d->seed, step, k); x gets its T tokens and y
 * the T that follow each (x shifted by one). The same global batch on every
 * rank and layout. d's image fields (row_off, col_off, crop_pad, flip) must
 * be 0. Local. Returns LADLE_ERR_NULL, LADLE_ERR_DTYPE (not i64),
 * LADLE_ERR_SHAPE (x and y not both n x T, contiguous), LADLE_ERR_ARG (a d
 * not set up by ladle_batch_desc_init or with an image field set, a
 * negative step or offset, batch below 1, rows past the batch, a split
 * shorter than T + 1 tokens, an unknown split), LADLE_ERR_ALLOC, and what
 * ladle_tensor_write returns. */
LADLE_API ladle_status ladle_text_batch(ladle_text *t, ladle_text_split s,
                                        const ladle_batch_desc *d, int64_t step,
                                        ladle_tensor *x, ladle_tensor *y);

/* The evaluation windows of split s at context T: window w covers
 * positions w T .. w T + T - 1 and predicts w T + 1 .. w T + T, for w <
 * floor((length - 1) / T), so a pass scores every token that has a
 * predecessor once, up to the last partial window (0 when T < 1). Local. */
LADLE_API int64_t ladle_text_windows(const ladle_text *t, ladle_text_split s, int64_t T);
/* Fill x and y (i64, n x T) with windows first .. first + n - 1; rows past
 * the last window get x 0 and y -1 (a label the loss ignores when its
 * ignore_index is -1). Local. Returns the codes of ladle_text_batch. */
LADLE_API ladle_status ladle_text_eval_batch(ladle_text *t, ladle_text_split s,
                                             int64_t first, ladle_tensor *x,
                                             ladle_tensor *y);

/* The bigram baseline: the probability of token b after token a estimated
 * from the training split's pair counts with add-alpha smoothing,
 * (count(a, b) + alpha) / (count(a) + alpha V), count(a) the pairs that
 * start with a. *train_nll and *val_nll (either may be NULL): the mean
 * negative log-likelihood in nats per token over every token of the split
 * that has a predecessor. Local. Returns LADLE_ERR_NULL, LADLE_ERR_ARG
 * (alpha not positive and finite), LADLE_ERR_ALLOC. */
LADLE_API ladle_status ladle_text_bigram(const ladle_text *t, double alpha,
                                         double *train_nll, double *val_nll);

#ifdef __cplusplus
}
#endif

#endif /* LADLE_TEXT_H */
