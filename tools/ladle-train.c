/*
 * ladle-train: train LeNet-5 (with or without batch norm) or a ResNet on
 * Fashion-MNIST (or any IDX dataset of square 1-channel images) over a
 * data-parallel, spatial, channel and weight-grid layout, printing progress as it goes and the test
 * accuracy after each epoch.
 *
 *   mpiexec -n 4 bin/ladle-train --data-ways 2 --spatial 2x1 --epochs 3
 *   mpiexec -n 2 bin/ladle-train --model resnet20 --data-ways 2 --augment
 *   mpiexec -n 4 bin/ladle-train --pipeline zbh1 --microbatches 8
 *
 * Exit status 0 only when every asked-for epoch was trained and scored; 1
 * for a failure while working, 2 for a request that cannot be done. See
 * --help and docs/training.md.
 */
#include "train.h"
#include "train_pipe.h"

static void usage(void)
{
    printf("usage: mpiexec -n N ladle-train [options]\n"
           "Train LeNet-5 or a ResNet on Fashion-MNIST (or any IDX dataset of square\n"
           "1-channel images) over a layout of the N ranks.\n\n"
           "layout (D x Ph x Pw ranks train, or C x C x Ph x Pw with channel ways):\n"
           "  --data-ways D        split the batch D ways (1)\n"
           "  --spatial PhxPw      split each image into Ph x Pw tiles (1x1)\n"
           "  --fc-ways F          LeNet-5: split the first two linear layers F <= Ph Pw ways\n"
           "  --channel-ways C     a ResNet: split the channels C ways (not with D > 1)\n"
           "model and training:\n"
           "  --model M            lenet | resnet20 | resnet18 | resnet8 (lenet); the\n"
           "                       ResNets always have batch norm (docs/training.md)\n"
           "  --bn                 LeNet-5: batch norm after each convolution\n"
           "  --bn-sync MODE       with --bn: global | local | group (global)\n"
           "  --bn-group G         with --bn-sync group: ranks per group (2)\n"
           "  --epochs E           1 to %d (3)      --batch B   global batch (64)\n"
           "  --lr R               > 0 (0.03)       --momentum M  SGD, 0 <= M < 1 (0.9)\n"
           "  --adam               Adam instead of SGD (use --lr 0.001)\n"
           "  --constant-lr        no cosine decay of the rate over the run\n"
           "  --weight-decay W     >= 0 (0)\n"
           "  --seed S             weights and data order, 0 to 2^64-1 (1; 0: no shuffle)\n"
           "  --dtype f32|f64      (f32)\n"
           "  --device cpu|cuda|guarded  where the layers and tensors live (cpu); cuda: each\n"
           "                       rank on a GPU (LADLE_CUDA_DEVICE, else node-local rank)\n"
           "  --steps K            at most K steps per epoch (all)\n"
           "  --augment            augment the training images: --crop-pad %d --flip\n"
           "  --crop-pad N         pad N black pixels, crop back at a random offset (0-%d)\n"
           "  --flip               mirror half the training images left to right\n"
           "data, output, state:\n"
           "  --data DIR           the IDX files (%s)\n"
           "  --test-limit N       score on the first N test images only (all)\n"
           "  --progress K         a progress line every K steps (about 10 per epoch)\n"
           "  --quiet              no progress lines\n"
           "  --checkpoint PATH    save the training state after each epoch; PATH a\n"
           "                       directory (or ending in /): a file an epoch in it\n"
           "  --keep K             with --checkpoint DIR: keep the newest K files (2)\n"
           "  --resume [FILE]      start from --checkpoint's file, or from FILE; with\n"
           "                       'latest': DIR's newest complete file (none: start)\n"
           "  --stop-after E       leave after epoch E < --epochs, as if interrupted\n"
           "  --summary FILE       append one line of results to FILE\n"
           "pipeline (instead of the layout above; see docs/pipeline.md):\n"
           "  --pipeline S         gpipe | 1f1b | zbh1 | interleaved | hybrid | zbv\n"
           "  --stages N           stages (one per rank; hybrid: at least 2, planner's choice)\n"
           "  --chunks V           interleaved: stages per rank, 1 to 8 (2)\n"
           "  --replicas R0,R1,..  hybrid: replicas per stage (default: the planner's)\n"
           "  --microbatches M     microbatches per batch, dividing it (4)\n"
           "  --timeline FILE      SVG of the last step's measured timeline\n"
           "  --help, --version\n\n"
           "Every output path is checked before training starts. Training stops when the\n"
           "loss is not finite or exceeds 100 times max(its first value, ln classes).\n"
           "Exit status: 0 trained as asked; 1 a failure while working (I/O, divergence);\n"
           "2 a request that cannot be done (options, data, checkpoint).\n",
           EPOCHS_MAX, CROP_PAD_DEFAULT, CROP_PAD_MAX, LADLE_FASHION_MNIST_DIR);
}

int main(int argc, char **argv)
{
    opts o;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int rc = parse(argc, argv, &o, M_LAYOUT, "ladle-train", usage);
    if (rc < 0) /* --help or --version */
        rc = 0;
    else if (rc == 0) {
        run_result res = {0, 0, 0};
        ladle_set_num_threads(1);
        ladle_memory_tracker *mem = tool_memory_start();
        rc = o.pipe_style >= 0 ? pipe_run(&o) : train_run(&o, &res, NULL);
        tool_memory_line(mem, rc != 0 || me != 0);
        tool_memory_end(&mem);
    }
    return tool_exit(rc);
}
