/* Bad use of the C ABI returns an error code with a message and never
 * crashes: NULL handles and pointers, unknown ids, wrong value kinds, bad
 * settings, finishing twice, recording after finish, a retried finish, a
 * dropped span, a span left open at finish, span attributes with unknown
 * keys and values, and a background thread's recorder finished or freed on
 * its own. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"

static void null_handles(void) {
    uint32_t id;
    uint64_t span;
    looptime_tick tick;
    looptime_counts counts;
    CHECK_ERR(looptime_builder_stage(NULL, "x", &id), LOOPTIME_ERR_NULL, "builder is NULL");
    CHECK_ERR(looptime_cycle_begin(NULL, 0, LOOPTIME_NO_TARGET, false, 0), LOOPTIME_ERR_NULL,
              "recorder is NULL");
    CHECK_ERR(looptime_cycle_end(NULL), LOOPTIME_ERR_NULL, "recorder is NULL");
    CHECK_ERR(looptime_span_begin(NULL, 0, &span), LOOPTIME_ERR_NULL, "recorder is NULL");
    CHECK_ERR(looptime_span_end(NULL, 0), LOOPTIME_ERR_NULL, "recorder is NULL");
    CHECK_ERR(looptime_set_int(NULL, 0, 1), LOOPTIME_ERR_NULL, "recorder is NULL");
    CHECK_ERR(looptime_recorder_counts(NULL, &counts), LOOPTIME_ERR_NULL, "recorder is NULL");
    CHECK_ERR(looptime_recorder_finish(NULL, "/tmp", true), LOOPTIME_ERR_NULL, "recorder is NULL");
    CHECK_ERR(looptime_recorder_new(NULL, NULL), LOOPTIME_ERR_NULL, "builder is NULL");
    CHECK_ERR(looptime_scheduler_wait(NULL, &tick), LOOPTIME_ERR_NULL, "scheduler is NULL");
    CHECK_ERR(looptime_episode_finish(NULL, NULL, NULL, true, 0), LOOPTIME_ERR_NULL, "episode is NULL");
    CHECK(looptime_episode_dir(NULL) == NULL);
    /* Freeing NULL is a no-op. */
    looptime_builder_free(NULL);
    looptime_recorder_free(NULL);
    looptime_scheduler_free(NULL);
    looptime_episode_free(NULL);
}

static void bad_settings(void) {
    looptime_builder *b = looptime_builder_new();
    looptime_scheduler_config cfg = looptime_scheduler_config_default(10000000);
    looptime_scheduler *s = NULL;
    uint32_t id;
    CHECK(b != NULL);
    CHECK_ERR(looptime_builder_stage(b, NULL, &id), LOOPTIME_ERR_NULL, "stage name is NULL");
    CHECK_ERR(looptime_builder_stage(b, "sense", NULL), LOOPTIME_ERR_NULL, "id pointer is NULL");
    CHECK_ERR(looptime_builder_phase(b, "go", NULL), LOOPTIME_ERR_NULL, "id pointer is NULL");
    CHECK_ERR(looptime_builder_value(b, "v", LOOPTIME_VALUE_INT, "", NULL), LOOPTIME_ERR_NULL,
              "id pointer is NULL");
    /* A refused call registered nothing: the same names register now. */
    CHECK(looptime_builder_stage(b, "sense", &id) == LOOPTIME_OK && id == 0);
    CHECK(looptime_builder_phase(b, "go", &id) == LOOPTIME_OK && id == 0);
    CHECK(looptime_builder_value(b, "v", LOOPTIME_VALUE_INT, "", &id) == LOOPTIME_OK && id == 0);
    CHECK_ERR(looptime_builder_stage(b, "\xff\xfe", &id), LOOPTIME_ERR_INVALID, "not UTF-8");
    CHECK_ERR(looptime_builder_value(b, "v", 7, "", &id), LOOPTIME_ERR_INVALID, "value kind 7");
    CHECK_ERR(looptime_builder_source(b, NULL, 0, NULL, &id), LOOPTIME_ERR_NULL, "source name is NULL");
    CHECK_ERR(looptime_builder_source(b, "cam", 0, "", &id), LOOPTIME_ERR_INVALID, "named clock");
    CHECK_ERR(looptime_builder_max_samples_per_cycle(b, 0), LOOPTIME_ERR_INVALID, "1 to 256");
    CHECK_ERR(looptime_builder_ring(b, 9), LOOPTIME_ERR_INVALID, "ring storage 9");
    CHECK_ERR(looptime_builder_cpu_mode(b, 7), LOOPTIME_ERR_INVALID, "CPU-time mode 7");
    /* A duplicate stage name is refused by the recorder's builder. */
    CHECK(looptime_builder_stage(b, "dup", &id) == LOOPTIME_OK);
    CHECK(looptime_builder_stage(b, "dup", &id) == LOOPTIME_ERR_INVALID);
    CHECK(strstr(looptime_last_error(), "dup") != NULL);
    /* A zero capacity is refused at the call that sets it. */
    CHECK_ERR(looptime_builder_max_cycles(b, 0), LOOPTIME_ERR_INVALID, "max_cycles is 0");
    CHECK_ERR(looptime_builder_max_spans_per_cycle(b, 0), LOOPTIME_ERR_INVALID,
              "max_spans_per_cycle is 0");
    /* The scheduler's default budget, LOOPTIME_UNDECLARED, passed on as
     * docs/c.md says: undeclared, not a budget of 2^64 - 1 ns (before, a
     * healthy loop then read every cycle over the budget). Above 10 s and
     * not the sentinel: refused by name at the call. */
    CHECK(looptime_builder_compute_budget_ns(b, LOOPTIME_UNDECLARED) == LOOPTIME_OK);
    CHECK(looptime_builder_deadline_tolerance_ns(b, LOOPTIME_UNDECLARED) == LOOPTIME_OK);
    CHECK(looptime_builder_compute_budget_ns(b, 10000000000ULL) == LOOPTIME_OK);
    CHECK_ERR(looptime_builder_compute_budget_ns(b, 10000000001ULL), LOOPTIME_ERR_INVALID,
              "compute_budget_ns is 10000000001 ns");
    CHECK_ERR(looptime_builder_deadline_tolerance_ns(b, 1ULL << 63), LOOPTIME_ERR_INVALID,
              "deadline_tolerance_ns is 9223372036854775808 ns");
    looptime_builder_free(b);

    cfg.spin_margin_ns = 9000000; /* above half the period */
    CHECK_ERR(looptime_scheduler_new(&cfg, &s), LOOPTIME_ERR_INVALID, "spin margin");
    cfg = looptime_scheduler_config_default(0);
    CHECK_ERR(looptime_scheduler_new(&cfg, &s), LOOPTIME_ERR_INVALID, "period must be positive");
    cfg = looptime_scheduler_config_default(10000000);
    cfg.policy = 5;
    CHECK_ERR(looptime_scheduler_new(&cfg, &s), LOOPTIME_ERR_INVALID, "policy 5");
    cfg = looptime_scheduler_config_default(10000000);
    cfg.compute_budget_ns = 10000000001ULL; /* 10 s and 1 ns */
    CHECK_ERR(looptime_scheduler_new(&cfg, &s), LOOPTIME_ERR_INVALID, "compute budget");
    CHECK(s == NULL);
}

/* A declared budget from C: with 1 ns, every judged cycle's work (its wake
 * to the next wait, a few clock reads at least) is over it, so 5 waits
 * judge 4 cycles and count 4 overruns; the tolerance is undeclared
 * (the default), so no miss is counted whatever the wakes. */
static void a_declared_budget_counts_overruns(void) {
    looptime_scheduler_config cfg = looptime_scheduler_config_default(2000000);
    looptime_scheduler *s = NULL;
    looptime_tick tick;
    uint64_t over = 9, wake = 9, completion = 9;
    int i;
    CHECK(cfg.compute_budget_ns == LOOPTIME_UNDECLARED);
    CHECK(cfg.deadline_tolerance_ns == LOOPTIME_UNDECLARED);
    cfg.compute_budget_ns = 1;
    CHECK(looptime_scheduler_new(&cfg, &s) == LOOPTIME_OK);
    for (i = 0; i < 5; i++) {
        CHECK(looptime_scheduler_wait(s, &tick) == LOOPTIME_OK);
    }
    CHECK(looptime_scheduler_misses(s, &over, &wake, &completion) == LOOPTIME_OK);
    CHECK(over == 4 && wake == 0 && completion == 0);
    CHECK_ERR(looptime_scheduler_misses(s, NULL, &wake, &completion), LOOPTIME_ERR_NULL,
              "budget_overruns");
    looptime_scheduler_free(s);
}

static void unknown_ids_finish_twice_and_open_span(const char *dir) {
    looptime_builder *b = looptime_builder_new();
    looptime_recorder *r = NULL;
    looptime_counts counts;
    uint32_t sense, running, frame, rate;
    uint64_t span = 0, inner = 0;
    CHECK(looptime_builder_ring(b, LOOPTIME_RING_HEAP) == LOOPTIME_OK);
    CHECK(looptime_builder_stage(b, "sense", &sense) == LOOPTIME_OK);
    CHECK(looptime_builder_phase(b, "running", &running) == LOOPTIME_OK);
    CHECK(looptime_builder_value(b, "frame", LOOPTIME_VALUE_INT, "", &frame) == LOOPTIME_OK);
    CHECK(looptime_builder_value(b, "rate", LOOPTIME_VALUE_FLOAT, "Hz", &rate) == LOOPTIME_OK);
    CHECK(looptime_recorder_new(b, &r) == LOOPTIME_OK);
    looptime_builder_free(b); /* the recorder outlives its builder */

    CHECK_ERR(looptime_cycle_begin(r, 3, LOOPTIME_NO_TARGET, false, 0), LOOPTIME_ERR_UNKNOWN_ID,
              "phase id 3");
    CHECK(looptime_cycle_begin(r, running, 1000, false, 0) == LOOPTIME_OK);
    span = 12345; /* a stale id from an earlier call */
    CHECK_ERR(looptime_span_begin(r, 42, &span), LOOPTIME_ERR_UNKNOWN_ID, "stage id 42");
    CHECK(span == LOOPTIME_NO_SPAN);
    CHECK_ERR(looptime_set_int(r, 9, 1), LOOPTIME_ERR_UNKNOWN_ID, "value id 9");
    CHECK_ERR(looptime_set_int(r, rate, 1), LOOPTIME_ERR_INVALID, "float value");
    CHECK_ERR(looptime_set_float(r, frame, 1.0), LOOPTIME_ERR_INVALID, "integer value");
    CHECK(looptime_set_int(r, frame, 7) == LOOPTIME_OK);
    /* Garbage span ids are ignored, not a crash. */
    CHECK(looptime_span_end(r, 0xdeadbeefdeadbeefULL) == LOOPTIME_OK);
    CHECK(looptime_span_end(r, LOOPTIME_NO_SPAN) == LOOPTIME_OK);
    CHECK(looptime_cycle_end(r) == LOOPTIME_OK);

    /* A second cycle with a span left open at finish. */
    CHECK(looptime_cycle_begin(r, running, 2000, false, 0) == LOOPTIME_OK);
    CHECK(looptime_span_begin(r, sense, &span) == LOOPTIME_OK);
    CHECK(looptime_span_begin(r, sense, &inner) == LOOPTIME_OK);
    CHECK(span != LOOPTIME_NO_SPAN && inner != LOOPTIME_NO_SPAN);
    CHECK_ERR(looptime_recorder_finish(r, dir, true), LOOPTIME_WARN_LEFT_OPEN, "2 open span(s)");
    CHECK(file_exists(dir, "control_timing.jsonl"));
    CHECK(file_exists(dir, "control_timing_summary.json"));
    /* Header plus two cycles. */
    CHECK(count_lines(dir, "control_timing.jsonl") == 3);
    CHECK(looptime_recorder_counts(r, &counts) == LOOPTIME_OK);
    CHECK(counts.total_cycles == 2 && counts.retained_cycles == 2 && counts.dropped_cycles == 0);

    CHECK_ERR(looptime_recorder_finish(r, dir, true), LOOPTIME_ERR_STATE, "already finished");
    /* Recording into a finished recorder is an error, never a silent no-op,
     * and writes nothing. */
    CHECK_ERR(looptime_cycle_begin(r, running, 3000, false, 0), LOOPTIME_ERR_STATE,
              "already finished");
    span = 7;
    CHECK_ERR(looptime_span_begin(r, sense, &span), LOOPTIME_ERR_STATE, "already finished");
    CHECK(span == LOOPTIME_NO_SPAN);
    CHECK_ERR(looptime_set_int(r, frame, 1), LOOPTIME_ERR_STATE, "already finished");
    CHECK_ERR(looptime_set_float(r, rate, 1.0), LOOPTIME_ERR_STATE, "already finished");
    CHECK_ERR(looptime_cycle_end(r), LOOPTIME_ERR_STATE, "already finished");
    CHECK(count_lines(dir, "control_timing.jsonl") == 3);
    looptime_recorder_free(r);
}

static void a_dropped_span_is_no_span_in_every_cycle(void) {
    /* One span slot a cycle: the second span of each cycle is dropped, and
     * its id is LOOPTIME_NO_SPAN in the first cycle and every later one. */
    looptime_builder *b = looptime_builder_new();
    looptime_recorder *r = NULL;
    looptime_counts counts;
    uint32_t sense;
    CHECK(looptime_builder_ring(b, LOOPTIME_RING_HEAP) == LOOPTIME_OK);
    CHECK(looptime_builder_max_spans_per_cycle(b, 1) == LOOPTIME_OK);
    CHECK(looptime_builder_stage(b, "sense", &sense) == LOOPTIME_OK);
    CHECK(looptime_recorder_new(b, &r) == LOOPTIME_OK);
    looptime_builder_free(b);
    for (int c = 0; c < 5; c++) {
        uint64_t kept = 0, dropped = 0;
        CHECK(looptime_cycle_begin(r, 0, LOOPTIME_NO_TARGET, false, 0) == LOOPTIME_OK);
        CHECK(looptime_span_begin(r, sense, &kept) == LOOPTIME_OK);
        CHECK(looptime_span_begin(r, sense, &dropped) == LOOPTIME_OK);
        CHECK(kept != LOOPTIME_NO_SPAN);
        CHECK(dropped == LOOPTIME_NO_SPAN);
        CHECK(looptime_span_end(r, dropped) == LOOPTIME_OK);
        CHECK(looptime_span_end(r, kept) == LOOPTIME_OK);
        CHECK(looptime_cycle_end(r) == LOOPTIME_OK);
    }
    CHECK(looptime_recorder_counts(r, &counts) == LOOPTIME_OK);
    CHECK(counts.spans_dropped == 5);
    looptime_recorder_free(r);
}

static void a_retried_finish_still_warns_of_open_spans(const char *dir) {
    /* The first finish fails (no such directory) after ending the open
     * cycle; the retry writes the same evidence and still warns. */
    looptime_builder *b = looptime_builder_new();
    looptime_recorder *r = NULL;
    uint32_t sense;
    uint64_t span = 0;
    char missing[4096];
    CHECK(looptime_builder_ring(b, LOOPTIME_RING_HEAP) == LOOPTIME_OK);
    CHECK(looptime_builder_stage(b, "sense", &sense) == LOOPTIME_OK);
    CHECK(looptime_recorder_new(b, &r) == LOOPTIME_OK);
    looptime_builder_free(b);
    CHECK(looptime_cycle_begin(r, 0, LOOPTIME_NO_TARGET, false, 0) == LOOPTIME_OK);
    CHECK(looptime_span_begin(r, sense, &span) == LOOPTIME_OK);
    snprintf(missing, sizeof missing, "%s/no/such/dir", dir);
    CHECK_ERR(looptime_recorder_finish(r, missing, true), LOOPTIME_ERR_IO, "no/such/dir");
    CHECK_ERR(looptime_recorder_finish(r, dir, true), LOOPTIME_WARN_LEFT_OPEN, "1 open span(s)");
    CHECK(count_lines(dir, "control_timing.jsonl") == 2);
    looptime_recorder_free(r);
}

static void finish_into_a_missing_directory_can_be_retried(const char *dir) {
    looptime_builder *b = looptime_builder_new();
    looptime_recorder *r = NULL;
    char missing[4096];
    CHECK(looptime_builder_ring(b, LOOPTIME_RING_HEAP) == LOOPTIME_OK);
    CHECK(looptime_recorder_new(b, &r) == LOOPTIME_OK);
    looptime_builder_free(b);
    CHECK(looptime_cycle_begin(r, 0, LOOPTIME_NO_TARGET, false, 0) == LOOPTIME_OK);
    CHECK(looptime_cycle_end(r) == LOOPTIME_OK);
    snprintf(missing, sizeof missing, "%s/no/such/dir", dir);
    CHECK_ERR(looptime_recorder_finish(r, missing, false), LOOPTIME_ERR_IO, "no/such/dir");
    /* Nothing was lost: the same recorder finishes into a real directory. */
    CHECK(looptime_recorder_finish(r, dir, false) == LOOPTIME_OK);
    CHECK(count_lines(dir, "control_timing.jsonl") == 2);
    looptime_recorder_free(r);
}

static void attributes_reach_the_evidence_and_unknown_ids_are_refused(const char *dir) {
    looptime_builder *b = looptime_builder_new();
    looptime_recorder *r = NULL;
    uint32_t act, mode, inline_, worker, camera, left, id;
    uint64_t span = 0;
    CHECK(looptime_builder_ring(b, LOOPTIME_RING_HEAP) == LOOPTIME_OK);
    CHECK(looptime_builder_stage(b, "act", &act) == LOOPTIME_OK);
    CHECK(looptime_builder_attr_key(b, "mode", &mode) == LOOPTIME_OK && mode == 0);
    CHECK(looptime_builder_attr_value(b, mode, "inline", &inline_) == LOOPTIME_OK && inline_ == 0);
    CHECK(looptime_builder_attr_value(b, mode, "worker", &worker) == LOOPTIME_OK && worker == 1);
    CHECK(looptime_builder_attr_key(b, "camera", &camera) == LOOPTIME_OK && camera == 1);
    /* Value ids count per key. */
    CHECK(looptime_builder_attr_value(b, camera, "left", &left) == LOOPTIME_OK && left == 0);
    CHECK_ERR(looptime_builder_attr_value(b, 5, "x", &id), LOOPTIME_ERR_UNKNOWN_ID,
              "attribute key id 5");
    CHECK_ERR(looptime_builder_attr_key(b, "mode", &id), LOOPTIME_ERR_INVALID, "mode");
    CHECK_ERR(looptime_builder_attr_key(b, "k", NULL), LOOPTIME_ERR_NULL, "key pointer is NULL");
    CHECK(looptime_recorder_new(b, &r) == LOOPTIME_OK);
    looptime_builder_free(b);

    CHECK(looptime_cycle_begin(r, 0, LOOPTIME_NO_TARGET, false, 0) == LOOPTIME_OK);
    CHECK(looptime_span_begin(r, act, &span) == LOOPTIME_OK);
    CHECK(looptime_span_attr(r, span, mode, inline_) == LOOPTIME_OK);
    CHECK(looptime_span_attr(r, span, mode, worker) == LOOPTIME_OK); /* replaces inline */
    CHECK(looptime_span_attr(r, span, camera, left) == LOOPTIME_OK);
    CHECK_ERR(looptime_span_attr(r, span, 7, 0), LOOPTIME_ERR_UNKNOWN_ID, "attribute key id 7");
    CHECK_ERR(looptime_span_attr(r, span, camera, 3), LOOPTIME_ERR_UNKNOWN_ID,
              "value id 3 of attribute key 1");
    /* No span, or a garbage id: ignored, as by looptime_span_end. */
    CHECK(looptime_span_attr(r, LOOPTIME_NO_SPAN, mode, worker) == LOOPTIME_OK);
    CHECK(looptime_span_attr(r, 0xdeadbeefdeadbeefULL, mode, worker) == LOOPTIME_OK);
    CHECK(looptime_span_end(r, span) == LOOPTIME_OK);
    CHECK(looptime_cycle_end(r) == LOOPTIME_OK);
    CHECK(looptime_recorder_finish(r, dir, true) == LOOPTIME_OK);
    CHECK_ERR(looptime_span_attr(r, span, mode, worker), LOOPTIME_ERR_STATE, "already finished");
    /* The span carries both keys, `mode` with its replaced value; the
     * refused calls wrote nothing. */
    CHECK(file_contains(dir, "control_timing.jsonl", "\"attrs\":{\"camera\":\"left\",\"mode\":\"worker\"}"));
    CHECK(!file_contains(dir, "control_timing.jsonl", "inline\"}"));
    looptime_recorder_free(r);
}

static void a_background_thread_is_written_by_the_control_finish(const char *dir) {
    looptime_builder *b = looptime_builder_new();
    looptime_builder *cam = looptime_builder_new();
    looptime_recorder *r = NULL, *c = NULL, *none = NULL;
    looptime_counts counts;
    uint32_t act, grab, id;
    uint64_t span = 0;
    CHECK(looptime_builder_ring(b, LOOPTIME_RING_HEAP) == LOOPTIME_OK);
    CHECK(looptime_builder_stage(b, "act", &act) == LOOPTIME_OK);
    CHECK(looptime_builder_ring(cam, LOOPTIME_RING_HEAP) == LOOPTIME_OK);
    CHECK(looptime_builder_stage(cam, "grab", &grab) == LOOPTIME_OK);
    CHECK_ERR(looptime_builder_thread(b, "bad name", cam), LOOPTIME_ERR_INVALID, "bad name");
    CHECK_ERR(looptime_builder_thread(b, "control", cam), LOOPTIME_ERR_INVALID, "control");
    CHECK_ERR(looptime_builder_thread(b, "camera", NULL), LOOPTIME_ERR_NULL, "thread builder is NULL");
    CHECK_ERR(looptime_builder_thread(b, "camera", b), LOOPTIME_ERR_INVALID, "its own");
    CHECK(looptime_builder_thread(b, "camera", cam) == LOOPTIME_OK);
    CHECK_ERR(looptime_builder_thread(b, "camera", cam), LOOPTIME_ERR_INVALID, "already declared");
    /* A registration on `cam` after the declaration does not reach the
     * thread: its settings were taken at the call. */
    CHECK(looptime_builder_stage(cam, "late", &id) == LOOPTIME_OK);
    looptime_builder_free(cam);
    CHECK(looptime_recorder_new(b, &r) == LOOPTIME_OK);
    looptime_builder_free(b);
    CHECK_ERR(looptime_recorder_thread(r, "lidar", &none), LOOPTIME_ERR_INVALID, "declared: camera");
    CHECK(looptime_recorder_thread(r, "camera", &c) == LOOPTIME_OK && c != NULL);
    CHECK_ERR(looptime_span_begin(c, 1, &span), LOOPTIME_ERR_UNKNOWN_ID, "stage id 1");

    /* The thread records its cycles, the control thread its own. */
    CHECK(looptime_cycle_begin(c, 0, LOOPTIME_NO_TARGET, false, 0) == LOOPTIME_OK);
    CHECK(looptime_span_begin(c, grab, &span) == LOOPTIME_OK);
    CHECK(looptime_span_end(c, span) == LOOPTIME_OK);
    CHECK(looptime_cycle_end(c) == LOOPTIME_OK);
    CHECK(looptime_cycle_begin(c, 0, LOOPTIME_NO_TARGET, false, 0) == LOOPTIME_OK); /* left open */
    CHECK(looptime_cycle_begin(r, 0, LOOPTIME_NO_TARGET, false, 0) == LOOPTIME_OK);
    CHECK(looptime_span_begin(r, act, &span) == LOOPTIME_OK);
    CHECK(looptime_span_end(r, span) == LOOPTIME_OK);
    CHECK(looptime_cycle_end(r) == LOOPTIME_OK);
    /* Only the control recorder finishes, and frees, the thread's. */
    CHECK_ERR(looptime_recorder_finish(c, dir, true), LOOPTIME_ERR_STATE, "control recorder's finish");
    looptime_recorder_free(c);
    CHECK(strstr(looptime_last_error(), "freed with its control recorder") != NULL);
    CHECK(looptime_recorder_finish(r, dir, true) == LOOPTIME_OK);
    CHECK(file_exists(dir, "control_timing.camera.jsonl"));
    CHECK(file_exists(dir, "control_timing_summary.camera.json"));
    CHECK(count_lines(dir, "control_timing.camera.jsonl") == 3); /* header, 2 cycles */
    CHECK(file_contains(dir, "control_timing.jsonl", "\"threads\":[\"camera\"]"));
    CHECK(file_contains(dir, "control_timing_summary.json", "control_timing.camera.jsonl"));
    CHECK(!file_contains(dir, "control_timing.camera.jsonl", "late"));
    /* Both are finished now. */
    CHECK_ERR(looptime_cycle_begin(c, 0, LOOPTIME_NO_TARGET, false, 0), LOOPTIME_ERR_STATE,
              "already finished");
    CHECK_ERR(looptime_recorder_finish(r, dir, true), LOOPTIME_ERR_STATE, "already finished");
    CHECK(looptime_recorder_counts(c, &counts) == LOOPTIME_OK && counts.total_cycles == 2);
    looptime_recorder_free(r); /* frees the thread's too */
}

/* Whether the first cycle of `dir`'s JSONL carries its own "cpu_ns"
 * (written right after its "end_ns"). */
static int cycle_has_cpu(const char *dir) {
    char path[4096], buf[1 << 14];
    const char *p;
    size_t n;
    FILE *f;
    snprintf(path, sizeof path, "%s/control_timing.jsonl", dir);
    f = fopen(path, "r");
    if (f == NULL) return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    p = strchr(buf, '\n'); /* past the header, whose clocks name "end_ns" too */
    p = p == NULL ? NULL : strstr(p, "\"end_ns\":");
    if (p == NULL) return 0;
    p += strlen("\"end_ns\":");
    while (*p >= '0' && *p <= '9') p++;
    return strncmp(p, ",\"cpu_ns\":", strlen(",\"cpu_ns\":")) == 0;
}

/* Each CPU-time mode reaches the header, and the cycle's CPU time is in
 * the cycle record only in cycle mode (the default). */
static void cpu_time_modes_reach_the_evidence(void) {
    const uint32_t modes[] = {LOOPTIME_CPU_CYCLE, LOOPTIME_CPU_SPANS, LOOPTIME_CPU_OFF};
    const char *names[] = {"\"thread_cpu_mode\":\"cycle\"", "\"thread_cpu_mode\":\"spans\"",
                           "\"thread_cpu_mode\":\"off\""};
    int m;
    for (m = 0; m < 4; m++) {
        char dir[] = "/tmp/looptime-abi-XXXXXX";
        looptime_builder *b = looptime_builder_new();
        looptime_recorder *r = NULL;
        uint32_t sense;
        uint64_t span;
        CHECK(mkdtemp(dir) != NULL);
        CHECK(looptime_builder_ring(b, LOOPTIME_RING_HEAP) == LOOPTIME_OK);
        CHECK(looptime_builder_stage(b, "sense", &sense) == LOOPTIME_OK);
        /* m == 3: no call, the default. */
        if (m < 3) CHECK(looptime_builder_cpu_mode(b, modes[m]) == LOOPTIME_OK);
        CHECK(looptime_recorder_new(b, &r) == LOOPTIME_OK);
        looptime_builder_free(b);
        CHECK(looptime_cycle_begin(r, 0, LOOPTIME_NO_TARGET, false, 0) == LOOPTIME_OK);
        CHECK(looptime_span_begin(r, sense, &span) == LOOPTIME_OK);
        CHECK(looptime_span_end(r, span) == LOOPTIME_OK);
        CHECK(looptime_cycle_end(r) == LOOPTIME_OK);
        CHECK(looptime_recorder_finish(r, dir, true) == LOOPTIME_OK);
        CHECK(file_contains(dir, "control_timing.jsonl", names[m % 3]));
        CHECK(cycle_has_cpu(dir) == (m % 3 == 0));
        /* A span's CPU time only per span. */
        CHECK(file_contains(dir, "control_timing.jsonl", "\"cpu_ns\":null") == (m % 3 != 1));
        looptime_recorder_free(r);
    }
}

/* An adaptive margin from C: the ticks' margins stay in their bounds, and
 * looptime_cycle_begin_tick writes each wait's margin and spin with the
 * cycle; a NULL tick is refused. */
static void an_adaptive_margin_reaches_the_evidence(void) {
    char dir[] = "/tmp/looptime-abi-XXXXXX";
    looptime_scheduler_config cfg = looptime_scheduler_config_default(2000000);
    looptime_scheduler *s = NULL;
    looptime_builder *b = looptime_builder_new();
    looptime_recorder *r = NULL;
    looptime_tick tick;
    int i;
    CHECK(mkdtemp(dir) != NULL);
    CHECK(cfg.auto_margin == false);
    cfg.auto_margin = true;
    CHECK(looptime_scheduler_new(&cfg, &s) == LOOPTIME_OK);
    CHECK(looptime_builder_ring(b, LOOPTIME_RING_HEAP) == LOOPTIME_OK);
    CHECK(looptime_recorder_new(b, &r) == LOOPTIME_OK);
    looptime_builder_free(b);
    CHECK_ERR(looptime_cycle_begin_tick(r, 0, NULL), LOOPTIME_ERR_NULL, "tick is NULL");
    for (i = 0; i < 20; i++) {
        CHECK(looptime_scheduler_wait(s, &tick) == LOOPTIME_OK);
        /* Between the 50 µs floor and half the 2 ms period. */
        CHECK(tick.spin_margin_ns >= 50000 && tick.spin_margin_ns <= 1000000);
        CHECK(looptime_cycle_begin_tick(r, 0, &tick) == LOOPTIME_OK);
        CHECK(looptime_cycle_end(r) == LOOPTIME_OK);
    }
    CHECK(looptime_recorder_finish(r, dir, true) == LOOPTIME_OK);
    CHECK(file_contains(dir, "control_timing.jsonl", "\"spin_margin_ns\":"));
    CHECK(file_contains(dir, "control_timing.jsonl", "\"spin_ns\":"));
    looptime_recorder_free(r);
    looptime_scheduler_free(s);
}

int main(void) {
    char a[] = "/tmp/looptime-abi-XXXXXX";
    char b[] = "/tmp/looptime-abi-XXXXXX";
    char c[] = "/tmp/looptime-abi-XXXXXX";
    char d[] = "/tmp/looptime-abi-XXXXXX";
    char e[] = "/tmp/looptime-abi-XXXXXX";
    CHECK(mkdtemp(a) != NULL && mkdtemp(b) != NULL && mkdtemp(c) != NULL && mkdtemp(d) != NULL &&
          mkdtemp(e) != NULL);
    CHECK(strcmp(looptime_version(), "0.1.0") == 0);
    null_handles();
    bad_settings();
    cpu_time_modes_reach_the_evidence();
    an_adaptive_margin_reaches_the_evidence();
    a_declared_budget_counts_overruns();
    unknown_ids_finish_twice_and_open_span(a);
    finish_into_a_missing_directory_can_be_retried(b);
    a_retried_finish_still_warns_of_open_spans(c);
    a_dropped_span_is_no_span_in_every_cycle();
    attributes_reach_the_evidence_and_unknown_ids_are_refused(d);
    a_background_thread_is_written_by_the_control_finish(e);
    return finish_tests("abi_misuse");
}
