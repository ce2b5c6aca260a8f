/* The recording path through the C ABI makes no heap allocation: this
 * program interposes counting malloc/calloc/realloc/free/posix_memalign/
 * aligned_alloc/memalign (forwarding to glibc's __libc_* entry points), and
 * counts across 100,000 cycles of the recording path: wait marks, cycle
 * begin/end, nested spans, caller values; then across 2,000
 * looptime_scheduler_wait calls. The ring is small
 * (1,000 cycles) so it wraps 100 times, and one span per cycle overflows
 * its slots, so the drop path is covered too.
 *
 * A control check first shows the counter sees allocations made inside the
 * Rust library (building a recorder allocates), so a zero is meaningful. */
#include <stddef.h>
#include <stdint.h>

#include "common.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static volatile int counting = 0;
static volatile unsigned long allocs = 0, frees = 0;

void *malloc(size_t n) {
    if (counting) allocs++;
    return __libc_malloc(n);
}
void *calloc(size_t k, size_t n) {
    if (counting) allocs++;
    return __libc_calloc(k, n);
}
void *realloc(void *p, size_t n) {
    if (counting) allocs++;
    return __libc_realloc(p, n);
}
void free(void *p) {
    if (counting && p != NULL) frees++;
    __libc_free(p);
}
void *memalign(size_t a, size_t n) {
    if (counting) allocs++;
    return __libc_memalign(a, n);
}
void *aligned_alloc(size_t a, size_t n) {
    if (counting) allocs++;
    return __libc_memalign(a, n);
}
int posix_memalign(void **out, size_t a, size_t n) {
    void *p;
    if (counting) allocs++;
    p = __libc_memalign(a, n);
    if (p == NULL) return 12; /* ENOMEM */
    *out = p;
    return 0;
}

#define CYCLES 100000

int main(void) {
    looptime_builder *b;
    looptime_recorder *r = NULL;
    looptime_counts counts;
    uint32_t sense, decode, act, running, frame, rate, mode, inline_, grab, camera, cam_src;
    looptime_builder *cam_b;
    looptime_recorder *cam = NULL;
    uint64_t i;
    char dir[] = "/tmp/looptime-noalloc-XXXXXX";
    unsigned long control_allocs;

    /* Control: the counter sees the library's own allocations. */
    counting = 1;
    b = looptime_builder_new();
    counting = 0;
    control_allocs = allocs;
    CHECK(control_allocs > 0);

    CHECK(looptime_builder_max_cycles(b, 1000) == LOOPTIME_OK);
    CHECK(looptime_builder_max_spans_per_cycle(b, 3) == LOOPTIME_OK);
    CHECK(looptime_builder_stage(b, "sense", &sense) == LOOPTIME_OK);
    CHECK(looptime_builder_stage(b, "decode", &decode) == LOOPTIME_OK);
    CHECK(looptime_builder_stage(b, "act", &act) == LOOPTIME_OK);
    CHECK(looptime_builder_phase(b, "running", &running) == LOOPTIME_OK);
    CHECK(looptime_builder_value(b, "frame", LOOPTIME_VALUE_INT, "", &frame) == LOOPTIME_OK);
    CHECK(looptime_builder_value(b, "rate", LOOPTIME_VALUE_FLOAT, "Hz", &rate) == LOOPTIME_OK);
    CHECK(looptime_builder_attr_key(b, "mode", &mode) == LOOPTIME_OK);
    CHECK(looptime_builder_attr_value(b, mode, "inline", &inline_) == LOOPTIME_OK);
    /* Data age: 2 sample slots a cycle; the loop records 3 (one dropped). */
    CHECK(looptime_builder_source(b, "camera", 50000000, NULL, &camera) == LOOPTIME_OK);
    CHECK(looptime_builder_max_samples_per_cycle(b, 2) == LOOPTIME_OK);
    /* A background thread's recorder, recorded in the same loop (as its
     * thread would): it allocates nothing after the build either. */
    cam_b = looptime_builder_new();
    CHECK(looptime_builder_max_cycles(cam_b, 1000) == LOOPTIME_OK);
    /* The control recorder in the default cycle mode (two CPU-clock reads a
     * cycle), the thread's per span: both allocate nothing. */
    CHECK(looptime_builder_cpu_mode(cam_b, LOOPTIME_CPU_SPANS) == LOOPTIME_OK);
    CHECK(looptime_builder_stage(cam_b, "grab", &grab) == LOOPTIME_OK);
    CHECK(looptime_builder_source(cam_b, "camera", 0, "host_monotonic", &cam_src) == LOOPTIME_OK);
    CHECK(looptime_builder_thread(b, "camera", cam_b) == LOOPTIME_OK);
    CHECK(looptime_recorder_new(b, &r) == LOOPTIME_OK);
    CHECK(looptime_recorder_thread(r, "camera", &cam) == LOOPTIME_OK);

    allocs = 0;
    frees = 0;
    counting = 1;
    for (i = 0; i < CYCLES; i++) {
        uint64_t s1, s2, s3, s4, s5;
        looptime_wait_begin(r);
        looptime_wait_end(r);
        /* Odd cycles are released by an input (its arrival and counter). */
        if (i % 2) {
            looptime_cycle_begin_input(r, running, 1000 + i * 10000000, i);
        } else {
            looptime_cycle_begin(r, running, 1000 + i * 10000000, false, 0);
        }
        looptime_span_begin(r, sense, &s1);
        looptime_span_begin(r, decode, &s2);
        looptime_span_attr(r, s2, mode, inline_);
        looptime_span_end(r, s2);
        looptime_span_end(r, s1);
        looptime_span_begin(r, act, &s3);
        looptime_span_end(r, s3);
        looptime_span_begin(r, act, &s4); /* the fourth span: dropped, counted */
        looptime_span_end(r, s4);
        looptime_set_int(r, frame, (int64_t)i);
        looptime_set_float(r, rate, 100.0);
        looptime_sample(r, camera, i, 1000 + i);
        looptime_sample(r, camera, i, 1000 + i);
        looptime_sample(r, camera, i, 1000 + i); /* the third: dropped, counted */
        looptime_cycle_end(r);
        looptime_cycle_begin(cam, 0, LOOPTIME_NO_TARGET, false, 0);
        looptime_span_begin(cam, grab, &s5);
        looptime_span_end(cam, s5);
        looptime_produced(cam, cam_src, i, 1000 + i);
        looptime_cycle_end(cam);
    }
    counting = 0;
    printf("no_alloc: %lu allocation(s), %lu free(s) across %d cycles (control: %lu)\n", allocs,
           frees, CYCLES, control_allocs);
    CHECK(allocs == 0);
    CHECK(frees == 0);

    CHECK(looptime_recorder_counts(r, &counts) == LOOPTIME_OK);
    CHECK(counts.total_cycles == CYCLES);
    CHECK(counts.retained_cycles == 1000);
    CHECK(counts.dropped_cycles == CYCLES - 1000);
    CHECK(counts.spans_dropped == CYCLES);
    CHECK(looptime_recorder_counts(cam, &counts) == LOOPTIME_OK);
    CHECK(counts.total_cycles == CYCLES && counts.retained_cycles == 1000);

    CHECK(mkdtemp(dir) != NULL);
    CHECK(looptime_recorder_finish(r, dir, true) == LOOPTIME_OK);
    CHECK(count_lines(dir, "control_timing.jsonl") == 1001);
    CHECK(count_lines(dir, "control_timing.camera.jsonl") == 1001);
    CHECK(file_contains(dir, "control_timing.jsonl", "\"samples_dropped\":1"));
    CHECK(file_contains(dir, "control_timing.jsonl", "\"pace\":\"input\",\"arrival_ns\":"));
    CHECK(file_contains(dir, "control_timing.camera.jsonl", "\"produced\":true"));
    looptime_recorder_free(r);
    looptime_builder_free(cam_b);

    /* The scheduler's wait (sleep, spin, tick) allocates nothing either:
     * 2,000 ticks at a 50 µs period (about 0.1 s), the scheduler built
     * before counting. Late ticks under load are fine: the overrun path is
     * counted too. */
    {
        looptime_scheduler_config cfg = looptime_scheduler_config_default(50000);
        looptime_scheduler *s = NULL;
        looptime_tick tick;
        CHECK(looptime_scheduler_new(&cfg, &s) == LOOPTIME_OK);
        allocs = 0;
        frees = 0;
        counting = 1;
        for (i = 0; i < 2000; i++) {
            looptime_scheduler_wait(s, &tick);
        }
        counting = 0;
        printf("no_alloc: %lu allocation(s), %lu free(s) across 2000 scheduler waits\n", allocs,
               frees);
        CHECK(allocs == 0);
        CHECK(frees == 0);
        CHECK(tick.cycle == 1999);
        looptime_scheduler_free(s);
    }
    looptime_builder_free(b);
    return finish_tests("no_alloc");
}
