// looptime.hpp in two translation units linked together (see
// two_units_b.cpp), the ABI's layout asserted from the header by a C++
// compiler (the same numbers `abi_layout!` asserts beside each Rust type,
// crates/capture-c/src), and the header/library version check.
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "looptime.hpp"

#if UINTPTR_MAX == 0xffffffffffffffffu
static_assert(sizeof(looptime_counts) == 40, "looptime_counts size");
static_assert(offsetof(looptime_counts, total_cycles) == 0, "");
static_assert(offsetof(looptime_counts, retained_cycles) == 8, "");
static_assert(offsetof(looptime_counts, dropped_cycles) == 16, "");
static_assert(offsetof(looptime_counts, spans_dropped) == 24, "");
static_assert(offsetof(looptime_counts, spans_outside_cycle) == 32, "");

static_assert(sizeof(looptime_scheduler_config) == 64, "looptime_scheduler_config size");
static_assert(offsetof(looptime_scheduler_config, period_ns) == 0, "");
static_assert(offsetof(looptime_scheduler_config, spin_margin_ns) == 8, "");
static_assert(offsetof(looptime_scheduler_config, policy) == 16, "");
static_assert(offsetof(looptime_scheduler_config, max_dt_ns) == 24, "");
static_assert(offsetof(looptime_scheduler_config, auto_margin) == 32, "");
static_assert(offsetof(looptime_scheduler_config, rtf) == 40, "");
static_assert(offsetof(looptime_scheduler_config, compute_budget_ns) == 48, "");
static_assert(offsetof(looptime_scheduler_config, deadline_tolerance_ns) == 56, "");

static_assert(sizeof(looptime_tick) == 72, "looptime_tick size");
static_assert(offsetof(looptime_tick, cycle) == 0, "");
static_assert(offsetof(looptime_tick, target_ns) == 8, "");
static_assert(offsetof(looptime_tick, wait_start_ns) == 16, "");
static_assert(offsetof(looptime_tick, sleep_return_ns) == 24, "");
static_assert(offsetof(looptime_tick, wake_ns) == 32, "");
static_assert(offsetof(looptime_tick, spin_ns) == 40, "");
static_assert(offsetof(looptime_tick, dt_measured_ns) == 48, "");
static_assert(offsetof(looptime_tick, skipped) == 56, "");
static_assert(offsetof(looptime_tick, overdue) == 60, "");
static_assert(offsetof(looptime_tick, dt_clamped) == 61, "");
static_assert(offsetof(looptime_tick, spin_margin_ns) == 64, "");

static_assert(sizeof(looptime_program) == 88, "looptime_program size");
static_assert(offsetof(looptime_program, program) == 0, "");
static_assert(offsetof(looptime_program, sources) == 8, "");
static_assert(offsetof(looptime_program, n_sources) == 16, "");
static_assert(offsetof(looptime_program, control_timing) == 24, "");
static_assert(offsetof(looptime_program, timing_max_cycles) == 32, "");
static_assert(offsetof(looptime_program, scheduler) == 40, "");
static_assert(offsetof(looptime_program, setting_keys) == 48, "");
static_assert(offsetof(looptime_program, setting_values) == 56, "");
static_assert(offsetof(looptime_program, n_settings) == 64, "");
static_assert(offsetof(looptime_program, label) == 72, "");
static_assert(offsetof(looptime_program, input_period_ns) == 80, "");
#endif

uint32_t second_unit_stage_count();

static int failures = 0;

static void expect(bool ok, const char *what) {
    if (!ok) {
        std::fprintf(stderr, "FAIL: %s\n", what);
        failures++;
    }
}

int main() {
    expect(second_unit_stage_count() == 2, "the second unit's builder");
    // The header's version is the library's.
    expect(std::strcmp(LOOPTIME_VERSION, looptime_version()) == 0, "LOOPTIME_VERSION == looptime_version()");
    bool threw = false;
    try {
        looptime::check_version();
    } catch (const looptime::Error &) {
        threw = true;
    }
    expect(!threw, "matching versions pass");
    // An older header meeting this library: refused, both versions named.
    try {
        looptime::check_version("0.0.1-old");
        expect(false, "a mismatched header version is refused");
    } catch (const looptime::Error &e) {
        const std::string m = e.what();
        expect(e.code() == LOOPTIME_ERR_STATE, "the refusal's code");
        expect(m.find("version 0.0.1-old") != std::string::npos, "the header's version named");
        expect(m.find(std::string("library is version ") + looptime_version()) != std::string::npos,
               "the library's version named");
    }
    if (failures == 0) {
        std::printf("two units, layout, version: ok\n");
    }
    return failures == 0 ? 0 : 1;
}
