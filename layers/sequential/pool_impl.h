/*
 * Pooling's private plan (layers/sequential/pool.c), in a header so that the tests can
 * reach the backend's workspace. Never installed.
 */
#ifndef LADLE_POOL_IMPL_H
#define LADLE_POOL_IMPL_H

#include <stdint.h>

#include "src/core/backend.h"
#include "src/op/op_impl.h"

typedef struct pool {
    ladle_pool_geom g;
    int64_t channels;
    int64_t planes; /* N x C of the largest batch */
    int64_t pin;
    void *ws;           /* the backend's plan and scratch (pool_plan, pool_setup) */
    size_t saved_bytes; /* per plane: a max forward's winners */
} pool;

#endif /* LADLE_POOL_IMPL_H */
