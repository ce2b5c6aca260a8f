// A span through the C ABI, called from C++, against the Rust span, on the
// same recorder in the same process, in alternating chunks so that drift
// of the machine cancels out.
//
// Each round times one chunk of 1,024 spans through looptime_span_begin /
// looptime_span_end (case "c_abi"), and one chunk of 1,024 Rust spans run
// by looptime_bench_rust_spans (case "rust"), the order alternating by
// round; each chunk has a cycle of its own, so no span is dropped. The
// figures are the medians over rounds of the per-span cost, and their
// ratio. Also: a C ABI span with one attribute (looptime_span_attr), the
// C++ RAII guard (looptime::Span), and both with thread
// CPU time.
//
// Built and run by bench/c_span.sh.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "looptime.hpp"
#include "timing.hpp"

namespace {

constexpr uint64_t kChunk = 1024;
int kRounds = 4001;  // argv[1] sets it (a small run: 41)

using bench::median;
using bench::now_ns;

struct Result {
    double c_abi, guard, rust, attr;
};

Result run(bool cpu) {
    looptime::Builder b;
    b.max_cycles(64).max_spans_per_cycle(kChunk).ring(LOOPTIME_RING_HEAP).thread_cpu(cpu);
    const uint32_t stage = b.stage("work");
    const uint32_t camera = b.attr_key("camera");
    const uint32_t right = b.attr_value(camera, "right");
    looptime::Recorder rec(b);
    looptime_recorder *r = rec.get();
    std::vector<double> c_abi, guard, rust, attr;
    for (int round = 0; round < kRounds; round++) {
        for (int k = 0; k < 4; k++) {
            const int which = (k + round) % 4;
            looptime_cycle_begin(r, 0, LOOPTIME_NO_TARGET, false, 0);
            if (which == 0) {
                const uint64_t t0 = now_ns();
                for (uint64_t i = 0; i < kChunk; i++) {
                    uint64_t id;
                    looptime_span_begin(r, stage, &id);
                    looptime_span_end(r, id);
                }
                c_abi.push_back(static_cast<double>(now_ns() - t0) / kChunk);
            } else if (which == 1) {
                const uint64_t t0 = now_ns();
                for (uint64_t i = 0; i < kChunk; i++) {
                    looptime::Span s(rec, stage);
                }
                guard.push_back(static_cast<double>(now_ns() - t0) / kChunk);
            } else if (which == 2) {
                uint64_t elapsed = 0;
                looptime_bench_rust_spans(r, stage, kChunk, &elapsed);
                rust.push_back(static_cast<double>(elapsed) / kChunk);
            } else {
                const uint64_t t0 = now_ns();
                for (uint64_t i = 0; i < kChunk; i++) {
                    uint64_t id;
                    looptime_span_begin(r, stage, &id);
                    looptime_span_attr(r, id, camera, right);
                    looptime_span_end(r, id);
                }
                attr.push_back(static_cast<double>(now_ns() - t0) / kChunk);
            }
            looptime_cycle_end(r);
        }
    }
    if (rec.counts().spans_dropped != 0) {
        std::fprintf(stderr, "c_span: spans were dropped; the bench must not hit the drop path\n");
        std::exit(1);
    }
    return {median(c_abi), median(guard), median(rust), median(attr)};
}

}  // namespace

int main(int argc, char **argv) {
    if (argc > 1) kRounds = std::atoi(argv[1]) | 1;
    const Result wall = run(false);
    const Result cpu = run(true);
    std::printf("| case | C ABI from C++ (ns) | looptime::Span guard (ns) | Rust span (ns) | C ABI / Rust | guard / Rust |\n");
    std::printf("|---|---|---|---|---|---|\n");
    std::printf("| span, wall only | %.1f | %.1f | %.1f | %.3f | %.3f |\n", wall.c_abi, wall.guard, wall.rust,
                wall.c_abi / wall.rust, wall.guard / wall.rust);
    std::printf("| span with thread CPU time | %.1f | %.1f | %.1f | %.3f | %.3f |\n", cpu.c_abi, cpu.guard, cpu.rust,
                cpu.c_abi / cpu.rust, cpu.guard / cpu.rust);
    std::printf("| C ABI span with one attribute (looptime_span_attr), wall only | %.1f | | | %.3f of the plain C ABI span | |\n",
                wall.attr, wall.attr / wall.c_abi);
    std::printf("(medians over %d alternating rounds of %llu spans; target: C ABI / Rust <= 1.2)\n", kRounds,
                static_cast<unsigned long long>(kChunk));
    return 0;
}
