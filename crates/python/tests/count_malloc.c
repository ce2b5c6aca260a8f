/* Counting allocator for test_allocations.py: preloaded (LD_PRELOAD) into a
 * Python started with PYTHONMALLOC=malloc, so that every allocation, by the
 * interpreter or by the Rust library, goes through malloc and is counted,
 * including those freed at once (tracemalloc sees only what is still
 * alive). lt_alloc_count() returns the count. */
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static volatile unsigned long allocations = 0;

unsigned long lt_alloc_count(void) { return allocations; }

void *malloc(size_t n) { allocations++; return __libc_malloc(n); }
void *calloc(size_t k, size_t n) { allocations++; return __libc_calloc(k, n); }
void *realloc(void *p, size_t n) { allocations++; return __libc_realloc(p, n); }
void *memalign(size_t a, size_t n) { allocations++; return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { allocations++; return __libc_memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n) {
    void *p;
    allocations++;
    p = __libc_memalign(a, n);
    if (p == NULL) return 12;
    *out = p;
    return 0;
}
