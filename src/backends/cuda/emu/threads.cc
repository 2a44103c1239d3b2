/*
 * The emulated GPU's threads (see emu.h): a grid's blocks run one after
 * another; a block's threads run in order, as plain calls, or, for a kernel
 * with barriers, as fibers that stop at every __syncthreads() until the
 * block's other threads get there.
 */
#include "src/backends/cuda/emu/emu.h"

#include <ucontext.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace ladle_emu {
thread_local thread_ctx cur;

namespace {

constexpr size_t FIBER_STACK = 128 * 1024;
constexpr unsigned char FRESH_BYTE = 0xFF; /* dynamic shared memory starts as NaN */

thread_local bool in_fiber = false;
thread_local void *dyn_ptr = nullptr;

/*
 * Fibers. On x86-64 a switch saves the callee-saved registers on the
 * fiber's own stack and swaps stack pointers (switch_to below): a few
 * instructions, where swapcontext also makes a system call for the signal
 * mask, which dominated the emulator's time. Elsewhere ucontext serves.
 */
#if defined(__x86_64__)
extern "C" void ladle_emu_switch(void **save_sp, void *load_sp);
asm(R"(
    .text
    .globl ladle_emu_switch
    .type ladle_emu_switch, @function
ladle_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size ladle_emu_switch, .-ladle_emu_switch
    .section .note.GNU-stack, "", @progbits
    .text
)");
#endif

struct fibers {
#if defined(__x86_64__)
    void *sched;
    std::vector<void *> sp;
#else
    ucontext_t sched;
    std::vector<ucontext_t> ctx;
#endif
    std::vector<char *> stacks;
    std::vector<char> done;
    int current = 0;
    const std::function<void()> *body = nullptr;
};
thread_local fibers F;

void fiber_main()
{
    (*F.body)();
    F.done[F.current] = 1;
#if defined(__x86_64__)
    void *dead;
    ladle_emu_switch(&dead, F.sched); /* never resumed */
#endif
}

/* Make fiber i start in fiber_main when it is first switched to. */
void fiber_init(size_t i)
{
#if defined(__x86_64__)
    /* the stack as ladle_emu_switch leaves it: six registers, then the
     * address it returns to; fiber_main starts with the stack 16-aligned
     * minus 8, as after a call */
    uintptr_t top = ((uintptr_t)F.stacks[i] + FIBER_STACK) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = nullptr;                    /* fiber_main's return address: none */
    *--sp = (void *)&fiber_main;
    for (int r = 0; r < 6; r++)
        *--sp = nullptr;                /* rbp rbx r12 r13 r14 r15 */
    F.sp[i] = sp;
#else
    getcontext(&F.ctx[i]);
    F.ctx[i].uc_stack.ss_sp = F.stacks[i];
    F.ctx[i].uc_stack.ss_size = FIBER_STACK;
    F.ctx[i].uc_link = &F.sched;
    makecontext(&F.ctx[i], fiber_main, 0);
#endif
}

void fiber_enter(size_t i)
{
#if defined(__x86_64__)
    ladle_emu_switch(&F.sched, F.sp[i]);
#else
    swapcontext(&F.sched, &F.ctx[i]);
#endif
}

void fiber_leave()
{
#if defined(__x86_64__)
    ladle_emu_switch(&F.sp[F.current], F.sched);
#else
    swapcontext(&F.ctx[F.current], &F.sched);
#endif
}

std::vector<uint3> thread_order(dim3 b, bool reverse)
{
    std::vector<uint3> v;
    for (unsigned z = 0; z < b.z; z++)
        for (unsigned y = 0; y < b.y; y++)
            for (unsigned x = 0; x < b.x; x++)
                v.push_back(uint3{x, y, z});
    if (reverse)
        std::reverse(v.begin(), v.end());
    return v;
}

/* One block whose threads meet at barriers: each runs as a fiber until its
 * next __syncthreads() or its end, then the next one; a round ends when
 * every live thread has reached the barrier. */
void run_block_fibers(const std::vector<uint3> &order, const std::function<void()> &body)
{
    size_t n = order.size();
    while (F.stacks.size() < n) {
        char *st = (char *)malloc(FIBER_STACK);
        if (st == nullptr) {
            fprintf(stderr, "ladle CUDA emulator: no memory for a fiber stack\n");
            abort();
        }
        F.stacks.push_back(st);
    }
#if defined(__x86_64__)
    F.sp.resize(n);
#else
    F.ctx.resize(n);
#endif
    F.done.assign(n, 0);
    F.body = &body;
    for (size_t i = 0; i < n; i++)
        fiber_init(i);
    in_fiber = true;
    for (bool waiting = true; waiting;) {
        waiting = false;
        for (size_t i = 0; i < n; i++) {
            if (F.done[i])
                continue;
            F.current = (int)i;
            cur.tid = order[i];
            fiber_enter(i);
            if (!F.done[i])
                waiting = true;
        }
    }
    in_fiber = false;
}

} // namespace

/* Run a grid now, on this thread (queued work of a stream calls it). */
void run_grid(bool barriers, dim3 grid, dim3 block, size_t shmem,
              const std::function<void()> &body, bool reverse)
{
    thread_ctx saved = cur;
    std::vector<unsigned char> dyn(shmem > 0 ? shmem : 1, FRESH_BYTE);
    void *saved_dyn = dyn_ptr;
    dyn_ptr = dyn.data();
    std::vector<uint3> order = thread_order(block, reverse);
    cur.gdim = grid;
    cur.bdim = block;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                cur.bid = uint3{x, y, z};
                if (barriers) {
                    run_block_fibers(order, body);
                } else {
                    for (const uint3 &t : order) {
                        cur.tid = t;
                        body();
                    }
                }
            }
    dyn_ptr = saved_dyn;
    cur = saved;
}

void syncthreads()
{
    if (!in_fiber) {
        fprintf(stderr, "ladle CUDA emulator: __syncthreads() in a kernel launched with "
                        "LADLE_LAUNCH; a kernel with barriers needs LADLE_LAUNCH_SYNC\n");
        abort();
    }
    fiber_leave();
}

void *dyn_shared() { return dyn_ptr; }

} // namespace ladle_emu
