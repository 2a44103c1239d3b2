/*
 * What the memory model (train/memory_model.c) reads of a chain network
 * and of the gradient buckets. Never installed.
 */
#ifndef LADLE_MEMORY_MODEL_H
#define LADLE_MEMORY_MODEL_H

#include "train/buckets.h"

/* The chain's context of layer i (i == its size: the loss's), and its
 * buckets (train/network.c). */
const ladle_ctx *ladle__network_ctx(const ladle_network *net, int i);
const ladle__buckets *ladle__network_buckets(const ladle_network *net);

#endif /* LADLE_MEMORY_MODEL_H */
