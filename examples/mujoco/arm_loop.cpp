// The MuJoCo arm under PD control, in C++: the loop of arm_loop.py through
// looptime.hpp and MuJoCo's C API (the library and headers of the installed
// MuJoCo Python packages; see CMakeLists.txt).
//
// Each cycle reads the joint sensors (`sense`), computes PD torques toward a
// moving joint target plus gravity compensation from `qfrc_bias`
// (`control`), steps the physics (`step`: `--substeps` calls of mj_step) and
// records the tracking error and the target's phase (`log`).
//
//   cmake -S examples/mujoco -B build/mujoco && cmake --build build/mujoco
//   build/mujoco/arm_loop --control-timing --rate 500 --duration 2 --runs-dir runs
//   analyze_control_timing --episode runs/latest
//
// `--rtf 0` runs uncapped on the simulation clock: two runs give the same
// cycle count and final state (printed as `final state fnv1a64:...`).
// `--episodes N` records N rollouts in one session; `--integrator rk4`
// changes what one `step` costs and nothing else. SIGINT or SIGTERM ends the
// loop at the next cycle, as aborted, with exit code 130.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <mujoco/mujoco.h>

#include "looptime.hpp"

namespace {

std::atomic<bool> stop_requested{false};
void on_signal(int) { stop_requested.store(true); }

constexpr int kJoints = 5;
constexpr double kKp[kJoints] = {60.0, 120.0, 80.0, 15.0, 10.0};
constexpr double kKd[kJoints] = {4.0, 8.0, 5.0, 0.8, 0.5};
constexpr double kAmplitude[kJoints] = {0.4, 0.25, 0.3, 0.3, 0.5};
constexpr double kPhase[kJoints] = {0.0, 0.5, 1.0, 1.5, 2.0};
constexpr double kFreqHz = 0.5;
constexpr double kTwoPi = 6.283185307179586;

struct Options {
    bool control_timing = false;
    uint64_t timing_max_cycles = 20000;
    double rate_hz = 500.0;
    double rtf = 1.0;
    double duration_s = 2.0;
    double warmup_s = 0.2;
    std::string integrator = "implicitfast";
    int substeps = 2;
    int episodes = 1;
    std::string runs_dir = "runs";
    std::string label;
    std::string model = ARM_MODEL_PATH;
};

[[noreturn]] void usage(const char *argv0, const std::string &problem) {
    std::fprintf(stderr,
                 "%s: %s\n"
                 "usage: %s [--control-timing] [--timing-max-cycles N] [--rate HZ] [--rtf F]\n"
                 "          [--duration S] [--warmup S] [--integrator euler|implicitfast|rk4]\n"
                 "          [--substeps N] [--episodes N] [--runs-dir DIR] [--label NAME] [--model XML]\n",
                 argv0, problem.c_str(), argv0);
    std::exit(2);
}

double number(const char *argv0, const char *flag, const char *text) {
    char *end = nullptr;
    errno = 0;
    double v = std::strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !(v >= 0)) {
        usage(argv0, std::string(flag) + " needs a non-negative number, not '" + text + "'");
    }
    return v;
}

Options parse(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&](const char *flag) -> const char * {
            if (i + 1 >= argc) usage(argv[0], std::string(flag) + " needs a value");
            return argv[++i];
        };
        if (a == "--control-timing") o.control_timing = true;
        else if (a == "--timing-max-cycles") o.timing_max_cycles = (uint64_t)number(argv[0], "--timing-max-cycles", value("--timing-max-cycles"));
        else if (a == "--rate") o.rate_hz = number(argv[0], "--rate", value("--rate"));
        else if (a == "--rtf") o.rtf = number(argv[0], "--rtf", value("--rtf"));
        else if (a == "--duration") o.duration_s = number(argv[0], "--duration", value("--duration"));
        else if (a == "--warmup") o.warmup_s = number(argv[0], "--warmup", value("--warmup"));
        else if (a == "--integrator") o.integrator = value("--integrator");
        else if (a == "--substeps") o.substeps = (int)number(argv[0], "--substeps", value("--substeps"));
        else if (a == "--episodes") o.episodes = (int)number(argv[0], "--episodes", value("--episodes"));
        else if (a == "--runs-dir") o.runs_dir = value("--runs-dir");
        else if (a == "--label") o.label = value("--label");
        else if (a == "--model") o.model = value("--model");
        else usage(argv[0], "unknown argument '" + a + "'");
    }
    if (!(o.rate_hz > 0 && o.rate_hz <= 2000)) usage(argv[0], "--rate must be in (0, 2000] Hz");
    if (o.rtf > 1000) usage(argv[0], "--rtf must be 0 (uncapped) or in (0, 1000]");
    if (o.substeps < 1 || o.substeps > 100) usage(argv[0], "--substeps must be from 1 to 100");
    if (o.episodes < 1) usage(argv[0], "--episodes must be at least 1");
    if (o.timing_max_cycles < 1) usage(argv[0], "--timing-max-cycles must be at least 1");
    if (o.integrator != "euler" && o.integrator != "implicitfast" && o.integrator != "rk4") {
        usage(argv[0], "--integrator must be euler, implicitfast or rk4, not '" + o.integrator + "'");
    }
    return o;
}

int integrator_of(const std::string &name) {
    if (name == "euler") return mjINT_EULER;
    if (name == "rk4") return mjINT_RK4;
    return mjINT_IMPLICITFAST;
}

// The arm: model, data, and the start pose of keyframe 0.
class Arm {
public:
    Arm(const Options &o) : substeps_(o.substeps) {
        char error[1000] = "";
        m_ = mj_loadXML(o.model.c_str(), nullptr, error, sizeof error);
        if (!m_) {
            std::fprintf(stderr, "cannot load the model %s: %s\n", o.model.c_str(), error);
            std::exit(1);
        }
        if (m_->nu != kJoints || m_->nsensordata != 2 * kJoints || m_->nkey < 1) {
            std::fprintf(stderr, "the model %s is not the example arm (%ld actuators, %ld sensor values, %ld keys)\n",
                         o.model.c_str(), (long)m_->nu, (long)m_->nsensordata, (long)m_->nkey);
            std::exit(1);
        }
        m_->opt.timestep = 1.0 / (o.rate_hz * o.substeps);
        m_->opt.integrator = integrator_of(o.integrator);
        d_ = mj_makeData(m_);
    }
    ~Arm() {
        mj_deleteData(d_);
        mj_deleteModel(m_);
    }
    Arm(const Arm &) = delete;
    Arm &operator=(const Arm &) = delete;

    void reset() {
        mj_resetDataKeyframe(m_, d_, 0);
        mj_forward(m_, d_);
    }
    void sense() {
        for (int j = 0; j < kJoints; j++) {
            q_[j] = d_->sensordata[j];
            qd_[j] = d_->sensordata[kJoints + j];
        }
    }
    // PD toward the moving target plus qfrc_bias; returns the target's phase.
    double control() {
        const double w = kTwoPi * kFreqHz;
        const double phase = w * d_->time;
        for (int j = 0; j < kJoints; j++) {
            target_[j] = m_->key_qpos[j] + kAmplitude[j] * std::sin(phase + kPhase[j]);
            const double target_d = kAmplitude[j] * w * std::cos(phase + kPhase[j]);
            const double tau = kKp[j] * (target_[j] - q_[j]) + kKd[j] * (target_d - qd_[j]) + d_->qfrc_bias[j];
            d_->ctrl[j] = std::clamp(tau, m_->actuator_ctrlrange[2 * j], m_->actuator_ctrlrange[2 * j + 1]);
        }
        return std::fmod(phase, kTwoPi);
    }
    void step() {
        for (int k = 0; k < substeps_; k++) mj_step(m_, d_);
    }
    double tracking_error() const {
        double e = 0;
        for (int j = 0; j < kJoints; j++) e = std::max(e, std::fabs(target_[j] - q_[j]));
        return e;
    }
    // FNV-1a over the bytes of qpos, qvel and time: equal only if bit-identical.
    uint64_t state_hash() const {
        uint64_t h = 1469598103934665603ull;
        auto mix = [&h](const void *p, size_t n) {
            const unsigned char *b = static_cast<const unsigned char *>(p);
            for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
        };
        mix(d_->qpos, sizeof(mjtNum) * m_->nq);
        mix(d_->qvel, sizeof(mjtNum) * m_->nv);
        mix(&d_->time, sizeof d_->time);
        return h;
    }

private:
    mjModel *m_ = nullptr;
    mjData *d_ = nullptr;
    int substeps_;
    double q_[kJoints] = {}, qd_[kJoints] = {}, target_[kJoints] = {};
};

// One rollout from the start pose; returns whether it completed.
bool run_rollout(const Options &o, looptime::Session &session, const looptime_scheduler_config &cfg, Arm &arm) {
    const uint64_t period_ns = cfg.period_ns;
    const uint64_t warmup_cycles = (uint64_t)std::llround(o.warmup_s * o.rate_hz);
    const uint64_t planned = warmup_cycles + (uint64_t)std::llround(o.duration_s * o.rate_hz);
    looptime::Scheduler sched(cfg);
    looptime::Episode episode = session.rollout();
    const bool record = o.control_timing;

    looptime::Builder b;
    uint32_t sense = b.stage("sense"), control = b.stage("control"), step = b.stage("step"), log = b.stage("log");
    uint32_t warmup = b.phase("warmup"), running = b.phase("running");
    uint32_t err_id = b.float_value("tracking_error", "rad"), phase_id = b.float_value("target_phase", "rad");
    b.max_cycles(record ? o.timing_max_cycles : 1)
        .max_spans_per_cycle(record ? 4 : 1)
        .nominal_period_ns(period_ns)
        .ring(record ? LOOPTIME_RING_AUTO : LOOPTIME_RING_HEAP)
        .episode_dir(episode.dir())
        .metadata("program", "examples/mujoco/arm_loop.cpp")
        .metadata("mujoco", mj_versionString())
        .target_clock(sched.clock());
    looptime::Recorder rec(b);
    if (episode.setup_control_thread() == LOOPTIME_WARN_DEGRADED) {
        std::fprintf(stderr, "[warn] %s\n", looptime_last_error());
    }
    arm.reset();
    uint64_t cycle = 0;
    while (cycle < planned && !stop_requested.load()) {
        looptime_tick tick = record ? sched.wait(rec) : sched.wait();
        if (stop_requested.load()) break;
        if (!record) {
            arm.sense();
            arm.control();
            arm.step();
            cycle++;
            continue;
        }
        looptime::Cycle c(rec, cycle < warmup_cycles ? warmup : running, tick);
        { looptime::Span s(rec, sense); arm.sense(); }
        double phase;
        { looptime::Span s(rec, control); phase = arm.control(); }
        { looptime::Span s(rec, step); arm.step(); }
        {
            looptime::Span s(rec, log);
            rec.set(err_id, arm.tracking_error());
            rec.set(phase_id, phase);
        }
        cycle++;
    }
    const bool complete = cycle == planned && !stop_requested.load();
    if (record) {
        rec.finish(episode.dir(), complete);
        std::printf("[run] %s: %s, %llu cycles\n", episode.dir(), complete ? "complete" : "aborted",
                    (unsigned long long)cycle);
    }
    episode.finish(record ? &rec : nullptr, &sched, complete, planned);
    std::printf("[run] final state fnv1a64:%016llx after %llu cycles, max tracking error %.4f rad\n",
                (unsigned long long)arm.state_hash(), (unsigned long long)cycle, arm.tracking_error());
    std::fflush(stdout);
    return complete;
}

}  // namespace

int main(int argc, char **argv) {
    Options o = parse(argc, argv);
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    try {
        Arm arm(o);
        looptime_scheduler_config cfg = looptime_scheduler_config_default((uint64_t)std::llround(1e9 / o.rate_hz));
        cfg.rtf = o.rtf;
        const std::string rate = std::to_string(o.rate_hz), rtf = std::to_string(o.rtf);
        const std::string substeps = std::to_string(o.substeps), episodes = std::to_string(o.episodes);
        const std::string duration = std::to_string(o.duration_s), warmup = std::to_string(o.warmup_s);
        const char *keys[] = {"rate_hz", "rtf", "duration_s", "warmup_s", "integrator", "substeps", "episodes", "mujoco"};
        const char *values[] = {rate.c_str(), rtf.c_str(), duration.c_str(), warmup.c_str(), o.integrator.c_str(),
                                substeps.c_str(), episodes.c_str(), mj_versionString()};
        const char *sources[] = {ARM_SOURCE_PATH, o.model.c_str()};
        looptime_program info{};
        info.program = argv[0];
        info.sources = sources;
        info.n_sources = 2;
        info.control_timing = o.control_timing;
        info.timing_max_cycles = o.timing_max_cycles;
        info.scheduler = &cfg;
        info.setting_keys = keys;
        info.setting_values = values;
        info.n_settings = 8;
        info.label = o.label.empty() ? nullptr : o.label.c_str();
        std::printf("[run] %g Hz, rtf %g, %d rollout(s) of %g s (+%g s warmup), integrator %s, %d substeps, "
                    "control timing %s, MuJoCo %s\n",
                    o.rate_hz, o.rtf, o.episodes, o.duration_s, o.warmup_s, o.integrator.c_str(), o.substeps,
                    o.control_timing ? "on" : "off", mj_versionString());
        looptime::Session session(o.runs_dir.c_str(), info, (uint32_t)o.episodes);
        for (int k = 0; k < o.episodes; k++) {
            if (!run_rollout(o, session, cfg, arm)) {
                session.close("interrupted by a signal");
                break;
            }
        }
        std::printf("[run] wrote session %s\n", session.dir());
    } catch (const looptime::Error &e) {
        std::fprintf(stderr, "looptime: %s (code %d)\n", e.what(), e.code());
        return 1;
    }
    return stop_requested.load() ? 130 : 0;
}
