/*
 * Tables that grow as they are filled, for the builders and readers of
 * train/ and pipeline/ (at creation and load, never inside a step): one
 * doubling rule and one byte buffer. Never installed.
 */
#ifndef LADLE_TRAIN_GROW_H
#define LADLE_TRAIN_GROW_H

#include <stddef.h>

/* Room for need elements of elem bytes in a table of *cap holding n: the
 * table itself when it has the room, else a zeroed one of `first` elements
 * or twice *cap, doubled until need fits, holding the n elements, with *cap
 * updated and the old table freed. NULL when out of memory (the table and
 * *cap kept). Local. */
void *ladle__grow(void *table, size_t n, size_t need, size_t *cap, size_t elem,
                  size_t first);

/* ladle__grow for a table counted in int; NULL also when need passes
 * INT_MAX / 2, so that the capacity stays an int. */
void *ladle__grow_int(void *table, int n, int need, int *cap, size_t elem, int first);

/* A growing byte buffer; {0} is empty. */
typedef struct ladle__bytes {
    char *data;
    size_t size, cap;
} ladle__bytes;

/* Append n bytes of p to b: 1, or 0 when out of memory (b kept). Local. */
int ladle__bytes_put(ladle__bytes *b, const void *p, size_t n);

#endif /* LADLE_TRAIN_GROW_H */
