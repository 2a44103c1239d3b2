/* Tables that grow as they are filled (see grow.h). */
#include <limits.h>
#include <string.h>

#include "src/core/internal.h"
#include "train/grow.h"

void *ladle__grow(void *table, size_t n, size_t need, size_t *cap, size_t elem,
                  size_t first)
{
    if (need <= *cap)
        return table;
    size_t c = *cap ? *cap : first;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem)
            return NULL;
        c *= 2;
    }
    void *t = ladle__calloc(c, elem);
    if (t == NULL)
        return NULL;
    if (n > 0)
        memcpy(t, table, elem * n);
    ladle__free(table);
    *cap = c;
    return t;
}

void *ladle__grow_int(void *table, int n, int need, int *cap, size_t elem, int first)
{
    if (need <= *cap)
        return table;
    if (need > INT_MAX / 2) /* so that the doubled capacity stays an int */
        return NULL;
    size_t c = (size_t)*cap;
    void *t = ladle__grow(table, (size_t)n, (size_t)need, &c, elem, (size_t)first);
    if (t != NULL)
        *cap = (int)c;
    return t;
}

int ladle__bytes_put(ladle__bytes *b, const void *p, size_t n)
{
    if (n == 0)
        return 1;
    char *d = ladle__grow(b->data, b->size, b->size + n, &b->cap, 1, 4096);
    if (d == NULL)
        return 0;
    b->data = d;
    memcpy(b->data + b->size, p, n);
    b->size += n;
    return 1;
}
