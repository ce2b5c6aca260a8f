// looptime.hpp: guards close what they open, errors at set-up throw with
// the library's message, and the scheduler hands out absolute deadlines.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "looptime.hpp"

static int failures = 0;
#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                                     \
        }                                                                                   \
    } while (0)

static std::string slurp(const std::string &path) {
    std::ifstream f(path);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// A Session of two open-ended rollouts on an uncapped scheduler; its
// destructor closes it, which completes it.
static void session_closes_at_scope_exit(const std::string &runs) {
    looptime_scheduler_config cfg = looptime_scheduler_config_default(1'000'000);
    cfg.rtf = 0.0;
    looptime::Scheduler sched(cfg);
    CHECK(sched.clock() == LOOPTIME_CLOCK_SIMULATION);
    looptime_program info{};
    info.program = "raii_guards";
    info.control_timing = true;
    info.timing_max_cycles = 100;
    info.scheduler = &cfg;
    std::string dir;
    {
        looptime::Session session(runs.c_str(), info);
        dir = session.dir();
        for (int k = 0; k < 2; k++) {
            looptime::Episode ep = session.rollout();
            looptime::Builder b;
            uint32_t step = b.stage("step");
            b.ring(LOOPTIME_RING_HEAP).target_clock(sched.clock());
            looptime::Recorder rec(b);
            for (int i = 0; i < 10; i++) {
                looptime_tick t = sched.wait(rec);
                looptime::Cycle c(rec, 0, t);
                looptime::Span s(rec, step);
            }
            rec.finish(ep.dir(), true);
            ep.finish(&rec, &sched, true, 10);
        }
        // Open-ended: running until closed.
        CHECK(slurp(dir + "/session.json").find("\"status\": \"running\"") != std::string::npos);
    }
    std::string s = slurp(dir + "/session.json");
    CHECK(s.find("\"status\": \"complete\"") != std::string::npos);
    CHECK(s.find("rollout-001") != std::string::npos);
    CHECK(slurp(dir + "/rollout-001/manifest.json").find("\"clock\": \"simulation\"") != std::string::npos);
}

int main() {
    char tmp[] = "/tmp/looptime-raii-XXXXXX";
    CHECK(mkdtemp(tmp) != nullptr);

    looptime::Builder b;
    b.max_cycles(100).ring(LOOPTIME_RING_HEAP).nominal_period_ns(2'000'000);
    const uint32_t running = b.phase("running");
    const uint32_t outer = b.stage("outer");
    const uint32_t inner = b.stage("inner");
    const uint32_t mode = b.attr_key("mode");
    const uint32_t worker = b.attr_value(mode, "worker");
    const uint32_t frame = b.int_value("frame");

    // A duplicate name throws with the code and the library's message.
    bool threw = false;
    try {
        b.stage("outer");
    } catch (const looptime::Error &e) {
        threw = e.code() == LOOPTIME_ERR_INVALID && std::strstr(e.what(), "outer") != nullptr;
    }
    CHECK(threw);

    looptime::Recorder rec(b);
    looptime_scheduler_config cfg = looptime_scheduler_config_default(2'000'000);
    looptime::Scheduler sched(cfg);
    uint64_t previous_target = 0, previous_wake = 0;
    bool previous_overdue = false;
    for (int i = 0; i < 5; i++) {
        looptime_tick tick = sched.wait(rec);
        // Absolute deadlines under rebase: each target is one period after
        // the previous target, or, when the previous tick was overdue (a
        // loaded machine can make even an empty cycle late), one period
        // after that tick's wake, where the schedule re-phased. dt is
        // measured.
        if (i > 0) {
            uint64_t from = previous_overdue ? previous_wake : previous_target;
            CHECK(tick.target_ns == from + 2'000'000);
        }
        CHECK(tick.dt_measured_ns > 0);
        previous_target = tick.target_ns;
        previous_wake = tick.wake_ns;
        previous_overdue = tick.overdue;
        looptime::Cycle cycle(rec, running, tick);
        looptime::Span a(rec, outer);
        {
            looptime::Span c(rec, inner);
            CHECK(c.recorded());
            CHECK(c.attr(mode, worker) == LOOPTIME_OK);
            CHECK(c.attr(mode, worker + 1) == LOOPTIME_ERR_UNKNOWN_ID);
        }
        CHECK(rec.set(frame, int64_t{i}) == LOOPTIME_OK);
    }
    {
        // A cycle released by an input: its arrival and counter, no target.
        looptime::Cycle input(rec, running, looptime::Input{12'345, 7});
    }
    {
        looptime::Cycle no_counter(rec, running, looptime::Input{23'456});
    }
    CHECK(rec.counts().total_cycles == 7);
    CHECK(rec.finish(tmp, true) == LOOPTIME_OK);  // every guard closed: no warning

    // Every span closed by its guard, nested under its parent.
    const std::string jsonl = slurp(std::string(tmp) + "/control_timing.jsonl");
    CHECK(jsonl.find("\"closed_by_cycle_end\":true") == std::string::npos);
    CHECK(jsonl.find("\"parent\":0") != std::string::npos);
    CHECK(jsonl.find("\"attrs\":{\"mode\":\"worker\"}") != std::string::npos);
    CHECK(jsonl.find("\"pace\":\"input\",\"arrival_ns\":12345,\"input_seq\":7,") !=
          std::string::npos);
    CHECK(jsonl.find("\"pace\":\"input\",\"arrival_ns\":23456,\"spans_dropped\"") !=
          std::string::npos);

    // Finishing twice throws LOOPTIME_ERR_STATE.
    threw = false;
    try {
        rec.finish(tmp, true);
    } catch (const looptime::Error &e) {
        threw = e.code() == LOOPTIME_ERR_STATE;
    }
    CHECK(threw);

    session_closes_at_scope_exit(std::string(tmp) + "/runs");

    if (failures) {
        std::fprintf(stderr, "raii_guards: %d check(s) failed\n", failures);
        return 1;
    }
    std::printf("raii_guards: all checks passed\n");
    return 0;
}
