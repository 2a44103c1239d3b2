/*
 * ladle - Linear-Algebraic Distributed LEarning.
 *
 * The one header a user includes. See README.md and docs/ for the guide;
 * every prototype below says what it computes, whether it is collective,
 * who owns what, and which status codes it returns.
 */
#ifndef LADLE_H
#define LADLE_H

#include "ladle/check.h"
#include "ladle/checkpoint.h"
#include "ladle/layers.h"
#include "ladle/optim.h"
#include "ladle/core.h"
#include "ladle/data.h"
#include "ladle/distributed.h"
#include "ladle/layout.h"
#include "ladle/models.h"
#include "ladle/network.h"
#include "ladle/op.h"
#include "ladle/partition.h"
#include "ladle/pipeline.h"
#include "ladle/primitives.h"
#include "ladle/tensor.h"

#endif /* LADLE_H */
