// A 100 Hz control loop shaped like the generated C++ loops looptime is
// for: absolute deadlines from looptime's scheduler (with 1 ns timer
// slack), each stage a span, a camera frame counter as a caller value, and
// the measured dt handed to the controller. Beside the loop, a camera
// reader thread records its `grab` and `decode` spans on its own recorder
// (control_timing.camera_reader.jsonl), so the analyzer reports how long
// each loop stage overlapped its work. It writes an episode in the same
// layout as `looptime serve`, which analyze_control_timing reads.
//
//   build/control_loop --control-timing --duration 5 --runs-dir runs
//   analyze_control_timing --episode runs/latest
//
// SIGINT or SIGTERM ends the loop at the next cycle; the episode is then
// finished as aborted.
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>

#include "looptime.hpp"

namespace {

std::atomic<bool> stop_requested{false};

void on_signal(int) { stop_requested.store(true); }

// CLOCK_MONOTONIC in ns: the clock a host-monotonic source's stamps are on.
uint64_t monotonic_ns() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<uint64_t>(t.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(t.tv_nsec);
}

struct Options {
    bool control_timing = false;
    uint64_t timing_max_cycles = 20000;
    double duration_s = 5.0;
    double rate_hz = 100.0;
    double warmup_s = 0.5;
    std::string runs_dir = "runs";
};

[[noreturn]] void usage(const char *argv0, const char *problem) {
    std::fprintf(stderr,
                 "%s: %s\n"
                 "usage: %s [--control-timing] [--timing-max-cycles N] [--duration S] [--rate HZ]\n"
                 "          [--warmup S] [--runs-dir DIR]\n",
                 argv0, problem, argv0);
    std::exit(2);
}

double number(const char *argv0, const char *flag, const char *text) {
    char *end = nullptr;
    errno = 0;
    double v = std::strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !(v >= 0)) {
        std::string msg = std::string(flag) + " needs a non-negative number, not '" + text + "'";
        usage(argv0, msg.c_str());
    }
    return v;
}

Options parse(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&](const char *flag) -> const char * {
            if (i + 1 >= argc) {
                std::string msg = std::string(flag) + " needs a value";
                usage(argv[0], msg.c_str());
            }
            return argv[++i];
        };
        if (a == "--control-timing") {
            o.control_timing = true;
        } else if (a == "--timing-max-cycles") {
            o.timing_max_cycles = static_cast<uint64_t>(number(argv[0], "--timing-max-cycles", value("--timing-max-cycles")));
        } else if (a == "--duration") {
            o.duration_s = number(argv[0], "--duration", value("--duration"));
        } else if (a == "--rate") {
            o.rate_hz = number(argv[0], "--rate", value("--rate"));
        } else if (a == "--warmup") {
            o.warmup_s = number(argv[0], "--warmup", value("--warmup"));
        } else if (a == "--runs-dir") {
            o.runs_dir = value("--runs-dir");
        } else if (a == "--help" || a == "-h") {
            usage(argv[0], "a 100 Hz control loop recorded by looptime");
        } else {
            std::string msg = "unknown argument '" + a + "'";
            usage(argv[0], msg.c_str());
        }
    }
    if (o.rate_hz <= 0 || o.rate_hz > 10000) {
        usage(argv[0], "--rate must be in (0, 10000] Hz");
    }
    return o;
}

uint64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Stand-in work: spin for `us` microseconds (a stage's compute).
void busy_us(uint64_t us) {
    const uint64_t until = now_ns() + us * 1000;
    while (now_ns() < until) {
    }
}

// A small deterministic generator for the stand-in costs.
struct Rng {
    uint64_t s = 0x9e3779b97f4a7c15ull;
    uint64_t next() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
    }
    uint64_t jitter(uint64_t base, uint64_t spread) { return base + next() % (spread + 1); }
};

// The controller: integrates a setpoint with the measured dt, never the
// nominal period.
struct Controller {
    double position = 0.0;
    double step(double velocity, double dt_s) {
        position += velocity * dt_s;
        return position;
    }
};

}  // namespace

int main(int argc, char **argv) {
    const Options opt = parse(argc, argv);
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);

    const uint64_t period_ns = static_cast<uint64_t>(1e9 / opt.rate_hz);
    const uint64_t warmup_cycles = static_cast<uint64_t>(opt.warmup_s * opt.rate_hz);
    const uint64_t planned = warmup_cycles + static_cast<uint64_t>(opt.duration_s * opt.rate_hz);
    looptime_scheduler_config sched_cfg = looptime_scheduler_config_default(period_ns);

    try {
        const std::string max_cycles = std::to_string(opt.timing_max_cycles);
        const std::string duration = std::to_string(opt.duration_s);
        const std::string rate = std::to_string(opt.rate_hz);
        const char *source = __FILE__;
        const char *keys[] = {"duration_s", "rate_hz", "warmup_s"};
        const std::string warmup = std::to_string(opt.warmup_s);
        const char *values[] = {duration.c_str(), rate.c_str(), warmup.c_str()};
        looptime_program info{};
        info.program = argv[0];
        info.sources = &source;
        info.n_sources = 1;
        info.control_timing = opt.control_timing;
        info.timing_max_cycles = opt.timing_max_cycles;
        info.scheduler = &sched_cfg;
        info.setting_keys = keys;
        info.setting_values = values;
        info.n_settings = 3;
        looptime::Episode episode(opt.runs_dir.c_str(), info);

        looptime::Builder b;
        b.max_cycles(opt.timing_max_cycles).nominal_period_ns(period_ns).episode_dir(episode.dir());
        b.metadata("program", "examples/cpp/control_loop");
        const uint32_t warmup_phase = b.phase("warmup");
        const uint32_t running = b.phase("running");
        const uint32_t camera = b.stage("camera_read");
        const uint32_t viewer = b.stage("viewer_control");
        const uint32_t policy = b.stage("policy");
        const uint32_t decode = b.stage("adapter_decode");
        const uint32_t executor = b.stage("executor");
        const uint32_t send = b.stage("robot_send_command");
        const uint32_t frame_id = b.int_value("camera_frame", "count");
        const uint32_t dt_us = b.float_value("dt_measured_us", "us");
        // Data age: the loop records which camera frame it used, stamped
        // at capture by the reader thread; older than 100 ms is stale.
        const uint32_t camera_src = b.source("camera", 100'000'000);
        if (!opt.control_timing) {
            b.max_cycles(1).max_spans_per_cycle(1).ring(LOOPTIME_RING_HEAP);
        }
        // The camera reader's own recorder and ring, built with the loop's.
        looptime::Builder cam_b;
        const uint32_t grab = cam_b.stage("grab");
        const uint32_t cam_decode = cam_b.stage("decode");
        const uint32_t cam_src = cam_b.source("camera");
        cam_b.max_cycles(opt.control_timing ? 2000 : 1);
        if (!opt.control_timing) {
            cam_b.ring(LOOPTIME_RING_HEAP);
        }
        b.thread("camera_reader", cam_b);
        looptime::Recorder rec(b);
        looptime::Recorder cam = rec.thread("camera_reader");

        uint64_t slack = 0;
        if (episode.setup_control_thread(&slack) != LOOPTIME_OK) {
            std::fprintf(stderr, "[warn] %s\n", looptime_last_error());
        }
        std::printf("[run] %s: %.0f Hz for %.1f s (+%.1f s warmup), control timing %s, timer slack %llu ns\n",
                    episode.dir(), opt.rate_hz, opt.duration_s, opt.warmup_s, opt.control_timing ? "on" : "off",
                    static_cast<unsigned long long>(slack));

        // A 30 Hz camera: wait for a frame (grab), stamp it, decode it,
        // publish it. The newest frame's (seq, capture stamp) sits in one of
        // four slots, `latest` naming it: the loop reads it without a lock
        // (the reader would have to publish four frames during one read to
        // overwrite it).
        std::atomic<bool> reader_stop{false};
        std::atomic<uint64_t> latest{0};
        uint64_t slots[4][2] = {};
        std::thread reader;
        if (opt.control_timing) {
            reader = std::thread([&cam, &reader_stop, &latest, &slots, grab, cam_decode, cam_src] {
                Rng r;
                uint64_t seq = 0;
                while (!reader_stop.load(std::memory_order_relaxed)) {
                    looptime::Cycle c(cam, 0);
                    uint64_t captured;
                    {
                        looptime::Span s(cam, grab);
                        const timespec frame{0, 33'000'000};
                        nanosleep(&frame, nullptr);
                        captured = monotonic_ns();
                    }
                    {
                        looptime::Span s(cam, cam_decode);
                        busy_us(r.jitter(1500, 1000));
                    }
                    seq++;
                    cam.produced(cam_src, seq, captured);
                    slots[seq % 4][0] = seq;
                    slots[seq % 4][1] = captured;
                    latest.store(seq, std::memory_order_release);
                }
            });
        }

        looptime::Scheduler sched(sched_cfg);
        Controller controller;
        Rng rng;
        int64_t frame = 0;
        uint64_t cycle = 0;
        for (; cycle < planned && !stop_requested.load(std::memory_order_relaxed); cycle++) {
            const looptime_tick tick = opt.control_timing ? sched.wait(rec) : sched.wait();
            if (!opt.control_timing) {
                controller.step(0.1, tick.dt_measured_ns * 1e-9);
                continue;
            }
            looptime::Cycle c(rec, cycle < warmup_cycles ? warmup_phase : running, tick);
            {
                looptime::Span s(rec, camera);
                busy_us(rng.jitter(400, 300));
                frame += (cycle % 3 != 0);  // a 66 Hz camera behind a 100 Hz loop
                const uint64_t newest = latest.load(std::memory_order_acquire);
                if (newest != 0) {
                    rec.sample(camera_src, slots[newest % 4][0], slots[newest % 4][1]);
                }
            }
            {
                looptime::Span s(rec, viewer);
                busy_us(rng.jitter(50, 50));
            }
            {
                looptime::Span s(rec, policy);
                busy_us(rng.jitter(1500, 800));
                looptime::Span d(rec, decode);
                busy_us(rng.jitter(200, 100));
            }
            {
                looptime::Span s(rec, executor);
                controller.step(0.1, tick.dt_measured_ns * 1e-9);
                busy_us(rng.jitter(100, 50));
            }
            {
                looptime::Span s(rec, send);
                busy_us(rng.jitter(150, 100));
            }
            rec.set(frame_id, frame);
            rec.set(dt_us, tick.dt_measured_ns / 1e3);
        }
        const bool complete = cycle == planned;
        reader_stop.store(true);
        if (reader.joinable()) {
            reader.join();  // the finish reads its recorder: it must have stopped
        }
        if (opt.control_timing) {
            if (rec.finish(episode.dir(), complete) != LOOPTIME_OK) {
                std::fprintf(stderr, "[warn] %s\n", looptime_last_error());
            }
        }
        episode.finish(opt.control_timing ? &rec : nullptr, &sched, complete, planned);
        const looptime_counts n = rec.counts();
        std::printf("[run] %s: %llu cycles, %llu recorded, %llu dropped; wrote %s\n",
                    complete ? "complete" : "aborted", static_cast<unsigned long long>(cycle),
                    static_cast<unsigned long long>(n.retained_cycles),
                    static_cast<unsigned long long>(n.dropped_cycles), episode.dir());
        return complete ? 0 : 130;
    } catch (const looptime::Error &e) {
        std::fprintf(stderr, "control_loop: %s (code %d)\n", e.what(), e.code());
        return 1;
    }
}
