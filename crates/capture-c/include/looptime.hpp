// looptime for C++: RAII over the C ABI in looptime.h.
//
// Set-up calls (Builder, Recorder, Scheduler, Episode constructors and
// finish) throw looptime::Error with the library's code and message. The
// recording path (Cycle, Span, set, wait) is noexcept: it cannot fail with
// ids the builder handed out, and a wrong id is reported through the
// return code and looptime_last_error() instead of an exception.
//
//   looptime::Builder b;
//   auto sense = b.stage("sense");
//   looptime::Recorder rec(b);
//   looptime::Scheduler sched(looptime_scheduler_config_default(10'000'000));
//   for (;;) {
//       looptime_tick tick = sched.wait(rec);      // marks the wait, sleeps, spins
//       looptime::Cycle cycle(rec, running, tick); // ends at scope exit
//       { looptime::Span s(rec, sense); /* ... */ }
//   }
//   rec.finish(dir, /*complete=*/true);
#ifndef LOOPTIME_HPP
#define LOOPTIME_HPP

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "looptime.h"

namespace looptime {

/// A failed looptime call: the code (LOOPTIME_ERR_*) and the message.
class Error : public std::runtime_error {
public:
    Error(int code, const std::string &message) : std::runtime_error(message), code_(code) {}
    int code() const noexcept { return code_; }

private:
    int code_;
};

/// Refuse a library whose version differs from the headers' (an old
/// looptime.h/looptime.hpp meeting a new library, or the other way round):
/// the constructors of Builder, Scheduler and Episode call it.
inline void check_version(const char *header_version = LOOPTIME_VERSION) {
    const std::string lib = looptime_version();
    if (lib != header_version) {
        throw Error(LOOPTIME_ERR_STATE,
                    std::string("looptime.h and looptime.hpp are version ") + header_version +
                        " but the linked looptime library is version " + lib +
                        ": build against the headers installed with that library");
    }
}

/// Throw on a negative code; return a warning code (>= 0) as it is.
inline int check(int code) {
    if (code < 0) {
        throw Error(code, looptime_last_error());
    }
    return code;
}

/// Names and capacities; the recorder is allocated from it.
class Builder {
public:
    Builder() : b_((check_version(), looptime_builder_new())) {
        if (b_ == nullptr) {
            throw Error(LOOPTIME_ERR_PANIC, looptime_last_error());
        }
    }
    ~Builder() { looptime_builder_free(b_); }
    Builder(const Builder &) = delete;
    Builder &operator=(const Builder &) = delete;

    uint32_t stage(const char *name) { uint32_t id = 0; check(looptime_builder_stage(b_, name, &id)); return id; }
    uint32_t phase(const char *name) { uint32_t id = 0; check(looptime_builder_phase(b_, name, &id)); return id; }
    /// A span attribute key; its values come from `attr_value`.
    uint32_t attr_key(const char *name) { uint32_t id = 0; check(looptime_builder_attr_key(b_, name, &id)); return id; }
    uint32_t attr_value(uint32_t key, const char *name) {
        uint32_t id = 0;
        check(looptime_builder_attr_value(b_, key, name, &id));
        return id;
    }
    uint32_t int_value(const char *name, const char *unit = "") {
        uint32_t id = 0;
        check(looptime_builder_value(b_, name, LOOPTIME_VALUE_INT, unit, &id));
        return id;
    }
    uint32_t float_value(const char *name, const char *unit = "") {
        uint32_t id = 0;
        check(looptime_builder_value(b_, name, LOOPTIME_VALUE_FLOAT, unit, &id));
        return id;
    }
    Builder &max_cycles(uint64_t n) { check(looptime_builder_max_cycles(b_, n)); return *this; }
    Builder &max_spans_per_cycle(uint32_t n) { check(looptime_builder_max_spans_per_cycle(b_, n)); return *this; }
    Builder &max_samples_per_cycle(uint32_t n) { check(looptime_builder_max_samples_per_cycle(b_, n)); return *this; }
    /// Declare a data source (data age): stale beyond `max_age_ns` (0: no
    /// limit), stamps on `clock` (nullptr: this host's CLOCK_MONOTONIC).
    uint32_t source(const char *name, uint64_t max_age_ns = 0, const char *clock = nullptr) {
        uint32_t id = 0;
        check(looptime_builder_source(b_, name, max_age_ns, clock, &id));
        return id;
    }
    Builder &thread_cpu(bool on) { check(looptime_builder_thread_cpu(b_, on)); return *this; }
    /// LOOPTIME_CPU_CYCLE (default), LOOPTIME_CPU_SPANS or LOOPTIME_CPU_OFF.
    Builder &cpu_mode(uint32_t mode) { check(looptime_builder_cpu_mode(b_, mode)); return *this; }
    Builder &nominal_period_ns(uint64_t ns) { check(looptime_builder_nominal_period_ns(b_, ns)); return *this; }
    Builder &ring(uint32_t storage) { check(looptime_builder_ring(b_, storage)); return *this; }
    Builder &episode_dir(const char *dir) { check(looptime_builder_episode_dir(b_, dir)); return *this; }
    /// The stage whose spans send the loop's commands (the header's command_stage).
    Builder &command_stage(uint32_t stage) { check(looptime_builder_command_stage(b_, stage)); return *this; }
    /// The declared compute budget and deadline tolerance, ns.
    Builder &compute_budget_ns(uint64_t ns) { check(looptime_builder_compute_budget_ns(b_, ns)); return *this; }
    Builder &deadline_tolerance_ns(uint64_t ns) { check(looptime_builder_deadline_tolerance_ns(b_, ns)); return *this; }
    /// LOOPTIME_CLOCK_HOST_MONOTONIC (default) or LOOPTIME_CLOCK_SIMULATION:
    /// pass the scheduler's `clock()`.
    Builder &target_clock(uint32_t clock) { check(looptime_builder_target_clock(b_, clock)); return *this; }
    Builder &metadata(const char *key, const char *value) { check(looptime_builder_metadata(b_, key, value)); return *this; }
    /// Declare background thread `name`, recorded with `thread`'s settings
    /// so far (see looptime_builder_thread).
    Builder &thread(const char *name, const Builder &thread) {
        check(looptime_builder_thread(b_, name, thread.get()));
        return *this;
    }

    const looptime_builder *get() const noexcept { return b_; }

private:
    looptime_builder *b_;
};

/// The preallocated recorder of one thread. Move-only.
class Recorder {
public:
    explicit Recorder(const Builder &b) { check(looptime_recorder_new(b.get(), &r_)); }
    ~Recorder() {
        if (owned_) looptime_recorder_free(r_);
    }
    Recorder(Recorder &&o) noexcept : r_(std::exchange(o.r_, nullptr)), owned_(o.owned_) {}
    Recorder &operator=(Recorder &&o) noexcept {
        std::swap(r_, o.r_);
        std::swap(owned_, o.owned_);
        return *this;
    }

    /// The recorder of background thread `name` (declared with
    /// `Builder::thread`). It belongs to this recorder: use it from that
    /// thread only, while this one lives; this recorder's finish writes it,
    /// once the thread has stopped recording.
    Recorder thread(const char *name) {
        looptime_recorder *t = nullptr;
        check(looptime_recorder_thread(r_, name, &t));
        return Recorder(t);
    }
    Recorder(const Recorder &) = delete;
    Recorder &operator=(const Recorder &) = delete;

    int set(uint32_t value, int64_t v) noexcept { return looptime_set_int(r_, value, v); }
    int set(uint32_t value, double v) noexcept { return looptime_set_float(r_, value, v); }
    /// The open cycle used sample `seq` of `source`, stamped `stamp_ns`.
    int sample(uint32_t source, uint64_t seq, uint64_t stamp_ns) noexcept {
        return looptime_sample(r_, source, seq, stamp_ns);
    }
    /// This thread published sample `seq` of `source`, stamped `stamp_ns`.
    int produced(uint32_t source, uint64_t seq, uint64_t stamp_ns) noexcept {
        return looptime_produced(r_, source, seq, stamp_ns);
    }

    looptime_counts counts() const {
        looptime_counts c{};
        check(looptime_recorder_counts(r_, &c));
        return c;
    }

    /// Write the evidence into `dir`. Returns LOOPTIME_WARN_LEFT_OPEN when a
    /// cycle or span was still open (closed and written), else LOOPTIME_OK.
    int finish(const char *dir, bool complete) { return check(looptime_recorder_finish(r_, dir, complete)); }

    looptime_recorder *get() const noexcept { return r_; }

private:
    explicit Recorder(looptime_recorder *borrowed) noexcept : r_(borrowed), owned_(false) {}
    looptime_recorder *r_ = nullptr;
    bool owned_ = true;
};

/// What released an input-paced cycle (docs/input-paced.md): when the
/// input arrived (CLOCK_MONOTONIC ns, read right after the receive
/// returned) and its own counter (`LOOPTIME_NO_SEQ` when it has none).
struct Input {
    uint64_t arrival_ns;
    uint64_t seq = LOOPTIME_NO_SEQ;
};

/// One cycle: begins on construction, ends at scope exit.
class Cycle {
public:
    /// A cycle released by an input, not by a deadline of the loop's own.
    Cycle(Recorder &rec, uint32_t phase, const Input &input) noexcept : r_(rec.get()) {
        looptime_cycle_begin_input(r_, phase, input.arrival_ns, input.seq);
    }
    /// A cycle released by a datagram from `looptime_recv_stamped`: its
    /// kernel arrival, and the read time and bound beside it.
    Cycle(Recorder &rec, uint32_t phase, const looptime_received &got, uint64_t seq) noexcept
        : r_(rec.get()) {
        looptime_cycle_begin_received(r_, phase, &got, seq);
    }
    Cycle(Recorder &rec, uint32_t phase, const looptime_tick &tick) noexcept : r_(rec.get()) {
        looptime_cycle_begin_tick(r_, phase, &tick);
    }
    Cycle(Recorder &rec, uint32_t phase) noexcept : r_(rec.get()) {
        looptime_cycle_begin(r_, phase, LOOPTIME_NO_TARGET, false, 0);
    }
    ~Cycle() { looptime_cycle_end(r_); }
    Cycle(const Cycle &) = delete;
    Cycle &operator=(const Cycle &) = delete;

private:
    looptime_recorder *r_;
};

/// One span: opens on construction, closes at scope exit. Nest by scope.
class Span {
public:
    Span(Recorder &rec, uint32_t stage) noexcept : r_(rec.get()) {
        if (looptime_span_begin(r_, stage, &id_) != LOOPTIME_OK) {
            id_ = LOOPTIME_NO_SPAN;
        }
    }
    ~Span() { looptime_span_end(r_, id_); }
    Span(const Span &) = delete;
    Span &operator=(const Span &) = delete;

    bool recorded() const noexcept { return id_ != LOOPTIME_NO_SPAN; }

    /// Set attribute `key` to `value` (ids from `Builder::attr_key` and
    /// `Builder::attr_value`) on this span. Returns the C call's code:
    /// `LOOPTIME_ERR_UNKNOWN_ID` for an id that was not registered; a span
    /// that was not recorded is ignored (`LOOPTIME_OK`).
    int attr(uint32_t key, uint32_t value) noexcept { return looptime_span_attr(r_, id_, key, value); }

private:
    looptime_recorder *r_;
    uint64_t id_ = LOOPTIME_NO_SPAN;
};

/// The absolute-deadline scheduler: on the host's monotonic clock, or
/// uncapped on the simulation clock when the config's `rtf` is 0.
class Scheduler {
public:
    explicit Scheduler(const looptime_scheduler_config &cfg) {
        check_version();
        check(looptime_scheduler_new(&cfg, &s_));
    }
    ~Scheduler() { looptime_scheduler_free(s_); }
    Scheduler(const Scheduler &) = delete;
    Scheduler &operator=(const Scheduler &) = delete;

    /// Wait for the next release point.
    looptime_tick wait() noexcept {
        looptime_tick t{};
        looptime_scheduler_wait(s_, &t);
        return t;
    }
    /// Wait, with the recorder marking the wait's start and end.
    looptime_tick wait(Recorder &rec) noexcept {
        looptime_wait_begin(rec.get());
        looptime_tick t = wait();
        looptime_wait_end(rec.get());
        return t;
    }
    void rephase() noexcept { looptime_scheduler_rephase(s_); }
    /// LOOPTIME_CLOCK_SIMULATION when uncapped, else
    /// LOOPTIME_CLOCK_HOST_MONOTONIC; give it to `Builder::target_clock`.
    uint32_t clock() const {
        uint32_t c = LOOPTIME_CLOCK_HOST_MONOTONIC;
        check(looptime_scheduler_clock(s_, &c));
        return c;
    }

    const looptime_scheduler *get() const noexcept { return s_; }

private:
    looptime_scheduler *s_ = nullptr;
};

class Session;

/// The episode directory of a program: session, rollout-000, manifest,
/// session.json and `latest`, as `looptime serve` writes them; or one
/// rollout of a `Session` (`Session::rollout`). Move-only.
class Episode {
public:
    Episode(const char *runs_dir, const looptime_program &info) {
        check_version();
        check(looptime_episode_create(runs_dir, &info, &e_));
    }
    ~Episode() { looptime_episode_free(e_); }
    Episode(const Episode &) = delete;
    Episode &operator=(const Episode &) = delete;
    Episode(Episode &&o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
    Episode &operator=(Episode &&o) noexcept {
        std::swap(e_, o.e_);
        return *this;
    }

    const char *dir() const noexcept { return looptime_episode_dir(e_); }

    /// Timer slack 1 ns on the calling thread, recorded in the manifest.
    /// Returns LOOPTIME_WARN_DEGRADED when the kernel refused.
    int setup_control_thread(uint64_t *timer_slack_ns = nullptr) {
        return check(looptime_control_thread_setup(e_, timer_slack_ns));
    }

    void finish(const Recorder *rec, const Scheduler *sched, bool complete, uint64_t planned_cycles) {
        check(looptime_episode_finish(e_, rec ? rec->get() : nullptr, sched ? sched->get() : nullptr, complete,
                                      planned_cycles));
    }

private:
    friend class Session;
    Episode() = default;
    looptime_episode *e_ = nullptr;
};

/// A session of several rollouts, as `serve --episodes N` writes them:
/// `rollout()` starts the next one; `close()` (or the destructor) marks
/// the session complete, or aborted with a reason. Move-only.
class Session {
public:
    /// `planned_rollouts` 0: as many as the program starts.
    Session(const char *runs_dir, const looptime_program &info, uint32_t planned_rollouts = 0) {
        check_version();
        check(looptime_session_create(runs_dir, &info, planned_rollouts, &s_));
    }
    ~Session() {
        if (s_) {
            looptime_session_close(s_, nullptr);
            looptime_session_free(s_);
        }
    }
    Session(const Session &) = delete;
    Session &operator=(const Session &) = delete;
    Session(Session &&o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    Session &operator=(Session &&o) noexcept {
        std::swap(s_, o.s_);
        return *this;
    }

    const char *dir() const noexcept { return looptime_session_dir(s_); }

    /// Start the next rollout; throws (LOOPTIME_ERR_STATE) while the
    /// previous one is not finished, or once the session is closed or every
    /// planned rollout has started.
    Episode rollout() {
        Episode e;
        check(looptime_session_rollout(s_, &e.e_));
        return e;
    }

    /// Start the next rollout with `n` settings of its own (text), recorded
    /// over the session's; a `seed` is the run's seed (`config.run.seed`).
    Episode rollout(const char *const *keys, const char *const *values, size_t n) {
        Episode e;
        check(looptime_session_rollout_with(s_, keys, values, n, &e.e_));
        return e;
    }

    /// Close: `why` (may be NULL) says why the session stopped early.
    void close(const char *why = nullptr) { check(looptime_session_close(s_, why)); }

private:
    looptime_session *s_ = nullptr;
};

}  // namespace looptime

#endif  // LOOPTIME_HPP
