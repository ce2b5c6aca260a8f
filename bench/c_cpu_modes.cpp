// The recorder's cost per cycle of 10 spans in each CPU-time mode, through
// the C ABI from C++, against a clock-read baseline, in one run
// (docs/performance.md, CPU-time modes).
//
// A cycle: looptime_cycle_begin, 5 top-level spans each with one nested
// span (10 spans), looptime_cycle_end. The baseline does what a minimal
// hand-made logger does for the same cycle: 22 clock_gettime
// (CLOCK_MONOTONIC, the vDSO) reads stored into a preallocated array.
// Each round times one chunk of 200 cycles of every case, the order
// rotating by round; the figures are medians over rounds. Also timed: one
// CLOCK_THREAD_CPUTIME_ID read.
//
// Built and run by bench/cpu_modes.sh.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "looptime.hpp"
#include "timing.hpp"

namespace {

constexpr int kCycles = 200;
constexpr int kSpans = 10;

using bench::median;
using bench::now_ns;

struct Rec {
    const char *name;
    looptime::Recorder *rec;
    uint32_t outer, inner;
};

}  // namespace

int main(int argc, char **argv) {
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 301;
    const uint32_t modes[] = {LOOPTIME_CPU_SPANS, LOOPTIME_CPU_CYCLE, LOOPTIME_CPU_OFF};
    const char *names[] = {"spans", "cycle", "off"};
    std::vector<Rec> recs;
    for (int m = 0; m < 3; m++) {
        looptime::Builder b;
        b.max_cycles(kCycles).max_spans_per_cycle(kSpans).ring(LOOPTIME_RING_HEAP).cpu_mode(modes[m]);
        const uint32_t outer = b.stage("outer");
        const uint32_t inner = b.stage("inner");
        recs.push_back({names[m], new looptime::Recorder(b), outer, inner});
    }
    std::vector<uint64_t> buf(2 * (kSpans + 1));
    const int n_cases = 5;
    std::vector<std::vector<double>> per(n_cases);
    for (int round = 0; round < rounds; round++) {
        for (int k = 0; k < n_cases; k++) {
            const int which = (k + round) % n_cases;
            const uint64_t t0 = now_ns();
            if (which == 0) {
                for (int c = 0; c < kCycles; c++) {
                    for (auto &slot : buf) {
                        timespec ts{};
                        clock_gettime(CLOCK_MONOTONIC, &ts);
                        slot = static_cast<uint64_t>(ts.tv_nsec);
                    }
                    asm volatile("" : : "r"(buf.data()) : "memory");
                }
            } else if (which <= 3) {
                Rec &r = recs[which - 1];
                looptime_recorder *p = r.rec->get();
                for (int c = 0; c < kCycles; c++) {
                    looptime_cycle_begin(p, 0, LOOPTIME_NO_TARGET, false, 0);
                    for (int s = 0; s < kSpans / 2; s++) {
                        uint64_t o, i;
                        looptime_span_begin(p, r.outer, &o);
                        looptime_span_begin(p, r.inner, &i);
                        looptime_span_end(p, i);
                        looptime_span_end(p, o);
                    }
                    looptime_cycle_end(p);
                }
            } else {
                for (int c = 0; c < kCycles; c++) {
                    timespec ts{};
                    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
                    asm volatile("" : : "r"(&ts) : "memory");
                }
            }
            per[which].push_back(static_cast<double>(now_ns() - t0) / kCycles);
        }
    }
    for (auto &r : recs) {
        if (r.rec->counts().spans_dropped != 0) {
            std::fprintf(stderr, "c_cpu_modes: spans were dropped; the bench must not hit the drop path\n");
            return 1;
        }
    }
    const double base = median(per[0]);
    std::printf("| case (C ABI from C++) | ns per cycle of 10 spans | ratio to the baseline | %% of a 1 kHz period |\n");
    std::printf("|---|---|---|---|\n");
    std::printf("| baseline: 22 clock_gettime(CLOCK_MONOTONIC) stored | %.1f | 1 | %.3f |\n", base, base / 1e4);
    for (int m = 0; m < 3; m++) {
        const double v = median(per[m + 1]);
        std::printf("| recorder, `%s` mode | %.1f | %.2f | %.3f |\n", recs[m].name, v, v / base, v / 1e4);
    }
    std::printf("| one CPU-clock read (CLOCK_THREAD_CPUTIME_ID) | %.1f | | |\n", median(per[4]));
    std::printf("(medians over %d rotating rounds of %d cycles)\n", rounds, kCycles);
    for (auto &r : recs) delete r.rec;
    return 0;
}
