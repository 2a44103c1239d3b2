/*
 * Memory on the CPU: planned blocks, and the copies between "host" and
 * "device", which here are the same memory.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "src/backends/cpu/cpu.h"

/*
 * Planned buffers and tensors come straight from mmap: glibc's malloc moves
 * its mmap threshold up after large frees and then serves big blocks from
 * the heap, where transfers and copies ran up to 3x slower here; asking the
 * kernel directly keeps every planned buffer alike however the process
 * allocated before.
 *
 * Page-aligned blocks all share their offset within a 4 KiB page, and a
 * copy or add whose source and destination share their low 12 address bits
 * runs much slower on x86 (loads falsely match pending stores: "4K
 * aliasing"). Each block is therefore shifted by a multiple of 64 bytes
 * taken from its own address. A header before the block records the mapping.
 */
#define STAGGER_SLOTS 62

/*
 * Neither AddressSanitizer nor memcheck sees into an mmap'd block, so for
 * them the blocks are made visible: under ASan (make asan) they come from
 * the heap, with its redzones, use-after-free and leak reports; under
 * valgrind (where memcheck.h is at hand at build time) each block is
 * announced as a heap block and the rest of its mapping marked off limits,
 * so a read or write past a tensor's end, a use after free and a buffer
 * never freed are reported. Outside valgrind the requests cost a few
 * instructions at plan time only.
 */
#if defined(__SANITIZE_ADDRESS__)
#define LADLE_HEAP_BLOCKS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LADLE_HEAP_BLOCKS 1
#endif
#endif
#if !defined(LADLE_HEAP_BLOCKS) && defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define LADLE_MEMCHECK 1
#endif
#endif

typedef struct block_header {
    void *map;
    size_t len;
} block_header;

#ifdef LADLE_HEAP_BLOCKS
static void *block_alloc(size_t bytes)
{
    /* the redzone starts right at the end; before the block, its header
     * (len 1: a heap block, not the caller allocator's) */
    char *base = NULL;
    if (posix_memalign((void **)&base, 64, bytes + 64) != 0)
        return NULL;
    memset(base, 0, bytes + 64);
    block_header *h = (block_header *)(base + 64) - 1;
    h->map = base;
    h->len = 1;
    return base + 64;
}

static void block_free(void *p)
{
    if (p != NULL)
        free(((block_header *)p - 1)->map);
}
#else
static void *block_alloc(size_t bytes)
{
    size_t len = bytes + 64 * (STAGGER_SLOTS + 2);
    len = (len + 4095) & ~(size_t)4095;
    char *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        return NULL;
    uintptr_t slot = (((uintptr_t)map >> 12) ^ ((uintptr_t)map >> 21)) % STAGGER_SLOTS;
    char *p = map + 64 * (slot + 1);
    block_header *h = (block_header *)p - 1;
    h->map = map;
    h->len = len;
    /* zeroing touches every page now, at plan time, not in the first call */
    memset(p, 0, bytes);
#ifdef LADLE_MEMCHECK
    VALGRIND_MAKE_MEM_NOACCESS(map, len);
    VALGRIND_MALLOCLIKE_BLOCK(p, bytes, 0, 1);
    VALGRIND_MAKE_MEM_DEFINED(p, bytes);
#endif
    return p;
}

static void block_free(void *p)
{
    if (p != NULL) {
        block_header *h = (block_header *)p - 1;
#ifdef LADLE_MEMCHECK
        VALGRIND_MAKE_MEM_DEFINED(h, sizeof *h);
#endif
        void *map = h->map;
        size_t len = h->len;
#ifdef LADLE_MEMCHECK
        VALGRIND_FREELIKE_BLOCK(p, 0);
#endif
        munmap(map, len);
    }
}
#endif


/* A block from the caller's allocator (ladle_allocator_set): 64 bytes
 * before it say how to free it, and their last 16 read as a block_header
 * of len 0, which no mapping and no heap block has. */
typedef struct hooked_header {
    void (*free)(void *user, void *ptr, size_t bytes, ladle_device device);
    void *user;
    void *base;
    size_t bytes;
    ladle__mem_acct acct; /* where every block keeps it: see acct_of */
    block_header tail;    /* map NULL, len 0 */
} hooked_header;

static void *hooked_alloc(const ladle_allocator *a, size_t bytes)
{
    char *base = a->alloc(a->user, bytes + sizeof(hooked_header), 64, LADLE_CPU);
    if (base == NULL)
        return NULL;
    memset(base, 0, bytes + sizeof(hooked_header)); /* touched now, at plan time */
    hooked_header *h = (hooked_header *)base;
    h->free = a->free;
    h->user = a->user;
    h->base = base;
    h->bytes = bytes + sizeof(hooked_header);
    return h + 1;
}

static int hooked_free(void *p)
{
    block_header *t = (block_header *)p - 1;
#ifdef LADLE_MEMCHECK
    VALGRIND_MAKE_MEM_DEFINED(t, sizeof *t);
#endif
    if (t->len != 0)
        return 0;
    hooked_header *h = (hooked_header *)p - 1;
    h->free(h->user, h->base, h->bytes, LADLE_CPU);
    return 1;
}

/* Every block, mapped, heap or hooked, has at least 64 bytes before it:
 * its block_header last, and before that the tracker's record of it
 * (ladle_memory_track). */
static ladle__mem_acct *acct_of(void *p)
{
    ladle__mem_acct *a = (ladle__mem_acct *)((block_header *)p - 1) - 1;
#ifdef LADLE_MEMCHECK
    VALGRIND_MAKE_MEM_DEFINED(a, sizeof *a);
#endif
    return a;
}

static void acct_done(ladle__mem_acct *a, int hooked)
{
#ifdef LADLE_MEMCHECK
    if (!hooked)
        VALGRIND_MAKE_MEM_NOACCESS(a, sizeof *a);
#else
    (void)a;
    (void)hooked;
#endif
}

ladle_status ladle__cpu_alloc(const ladle_backend *be, size_t bytes, void **out)
{
    *out = NULL;
    if (bytes == 0)
        return LADLE_OK;
    const ladle_allocator *a = ladle__allocator();
    *out = a ? hooked_alloc(a, bytes) : block_alloc(bytes);
    if (*out == NULL)
        return ladle__raise(LADLE_ERR_ALLOC, "alloc", "cannot allocate %zu bytes", bytes);
    ladle__mem_acct *acct = acct_of(*out);
    ladle__mem_count(acct, bytes, 0);
    acct_done(acct, a != NULL);
    return LADLE_OK;
}

ladle_status ladle__cpu_free(const ladle_backend *be, void *ptr)
{
    if (ptr == NULL)
        return LADLE_OK;
    ladle__mem_uncount(acct_of(ptr));
    if (!hooked_free(ptr))
        block_free(ptr);
    return LADLE_OK;
}

ladle_status ladle__cpu_to_device(const ladle_backend *be, size_t bytes, const void *host,
                                  void *dst)
{
    if (bytes > 0 && host != dst)
        memcpy(dst, host, bytes);
    return LADLE_OK;
}

ladle_status ladle__cpu_to_host(const ladle_backend *be, size_t bytes, const void *src,
                                void *host)
{
    if (bytes > 0 && host != src)
        memcpy(host, src, bytes);
    return LADLE_OK;
}

ladle_status ladle__cpu_synchronize(const ladle_backend *be) { return LADLE_OK; }
