/* A session of several rollouts from C, on an uncapped scheduler (rtf 0):
 * the layout (rollout-000, rollout-001, session.json, latest-session), the
 * manifest's clock and label, release points on the nominal schedule, and
 * the refusals (a rollout while one runs, after the plan, after close; a
 * bad rtf; a bad clock). */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"

#define PERIOD_NS 1000000u
#define CYCLES 200u

/* One rollout of CYCLES cycles, recorded into the episode's directory. */
static void one_rollout(looptime_session *session, looptime_scheduler *s, char *dir_out, size_t n) {
    looptime_episode *ep = NULL;
    looptime_episode *second = NULL;
    looptime_builder *b = looptime_builder_new();
    looptime_recorder *r = NULL;
    looptime_tick tick;
    uint32_t stage, phase, clock = 99;
    uint64_t span, first = 0;
    unsigned i;
    int monotone_nominal = 1;
    CHECK(looptime_session_rollout(session, &ep) == LOOPTIME_OK);
    /* One rollout at a time. */
    CHECK_ERR(looptime_session_rollout(session, &second), LOOPTIME_ERR_STATE, "is still running");
    CHECK(looptime_scheduler_clock(s, &clock) == LOOPTIME_OK && clock == LOOPTIME_CLOCK_SIMULATION);
    CHECK(looptime_builder_stage(b, "step", &stage) == LOOPTIME_OK);
    CHECK(looptime_builder_phase(b, "running", &phase) == LOOPTIME_OK);
    CHECK(looptime_builder_ring(b, LOOPTIME_RING_HEAP) == LOOPTIME_OK);
    CHECK(looptime_builder_nominal_period_ns(b, PERIOD_NS) == LOOPTIME_OK);
    CHECK(looptime_builder_target_clock(b, clock) == LOOPTIME_OK);
    CHECK_ERR(looptime_builder_command_stage(b, 99), LOOPTIME_ERR_UNKNOWN_ID, "stage id 99");
    CHECK(looptime_builder_command_stage(b, stage) == LOOPTIME_OK);
    CHECK(looptime_builder_compute_budget_ns(b, 300000) == LOOPTIME_OK);
    CHECK(looptime_builder_deadline_tolerance_ns(b, 100000) == LOOPTIME_OK);
    CHECK(looptime_recorder_new(b, &r) == LOOPTIME_OK);
    for (i = 0; i < CYCLES; i++) {
        looptime_wait_begin(r);
        looptime_scheduler_wait(s, &tick);
        looptime_wait_end(r);
        if (i == 0) {
            first = tick.target_ns;
        } else if (tick.target_ns != first + (uint64_t)i * PERIOD_NS) {
            monotone_nominal = 0;
        }
        looptime_cycle_begin_tick(r, phase, &tick);
        looptime_span_begin(r, stage, &span);
        looptime_span_end(r, span);
        looptime_cycle_end(r);
    }
    /* Uncapped: the i-th release point is i nominal periods after the first. */
    CHECK(monotone_nominal);
    CHECK(looptime_recorder_finish(r, looptime_episode_dir(ep), true) == LOOPTIME_OK);
    CHECK(looptime_episode_finish(ep, r, s, true, CYCLES) == LOOPTIME_OK);
    snprintf(dir_out, n, "%s", looptime_episode_dir(ep));
    looptime_recorder_free(r);
    looptime_builder_free(b);
    looptime_episode_free(ep);
}

int main(void) {
    char runs[] = "/tmp/looptime-session-XXXXXX";
    char first[4096], second[4096], link[4096];
    const char *keys[] = {"integrator"};
    const char *values[] = {"euler"};
    looptime_scheduler_config cfg = looptime_scheduler_config_default(PERIOD_NS);
    looptime_scheduler *s = NULL;
    looptime_session *session = NULL;
    looptime_episode *extra = NULL;
    looptime_program info;
    ssize_t len;
    memset(&info, 0, sizeof info);
    CHECK(mkdtemp(runs) != NULL);

    cfg.rtf = -1.0;
    CHECK_ERR(looptime_scheduler_new(&cfg, &s), LOOPTIME_ERR_INVALID, "rtf -1");
    cfg.rtf = 0.0;
    CHECK(looptime_scheduler_new(&cfg, &s) == LOOPTIME_OK);

    info.program = "session_test";
    info.control_timing = true;
    info.timing_max_cycles = 20000;
    info.scheduler = &cfg;
    info.setting_keys = keys;
    info.setting_values = values;
    info.n_settings = 1;
    info.label = "bad\nlabel";
    CHECK_ERR(looptime_session_create(runs, &info, 2, &session), LOOPTIME_ERR_INVALID, "label");
    info.label = "euler";
    CHECK(looptime_session_create(runs, &info, 2, &session) == LOOPTIME_OK);
    CHECK(file_contains(looptime_session_dir(session), "session.json", "\"status\": \"running\""));

    one_rollout(session, s, first, sizeof first);
    one_rollout(session, s, second, sizeof second);
    CHECK(strstr(first, "/rollout-000") != NULL);
    CHECK(strstr(second, "/rollout-001") != NULL);
    CHECK(count_lines(second, "control_timing.jsonl") == (int)CYCLES + 1);
    CHECK(file_contains(second, "manifest.json", "\"clock\": \"simulation\""));
    CHECK(file_contains(second, "manifest.json", "\"label\": \"euler\""));
    CHECK(file_contains(second, "manifest.json", "\"rtf\": 0.0"));
    CHECK(file_contains(second, "control_timing.jsonl", "\"target_ns\":\"simulation\""));
    CHECK(file_contains(second, "control_timing.jsonl", "\"command_stage\":\"step\""));
    CHECK(file_contains(second, "control_timing.jsonl", "\"compute_budget_ns\":300000"));
    CHECK(file_contains(second, "control_timing.jsonl", "\"deadline_tolerance_ns\":100000"));
    /* Both planned rollouts completed: the session is complete. */
    CHECK(file_contains(looptime_session_dir(session), "session.json", "\"status\": \"complete\""));
    CHECK_ERR(looptime_session_rollout(session, &extra), LOOPTIME_ERR_STATE, "all 2 planned rollouts");

    snprintf(link, sizeof link, "%s/latest-session", runs);
    len = readlink(link, first, sizeof first - 1);
    CHECK(len > 0);
    if (len > 0) {
        first[len] = '\0';
        CHECK(strstr(looptime_session_dir(session), first) != NULL);
    }
    CHECK(looptime_session_close(session, NULL) == LOOPTIME_OK);
    CHECK_ERR(looptime_session_rollout(session, &extra), LOOPTIME_ERR_STATE, "closed");
    CHECK_ERR(looptime_builder_target_clock(NULL, 0), LOOPTIME_ERR_NULL, "builder is NULL");
    {
        looptime_builder *b = looptime_builder_new();
        CHECK_ERR(looptime_builder_target_clock(b, 7), LOOPTIME_ERR_INVALID, "clock 7");
        looptime_builder_free(b);
    }
    CHECK(looptime_session_dir(NULL) == NULL);
    {
        /* A rollout's own settings: its seed is the run's (config.run.seed,
         * the text "3" written as the number 3), another key the program's. */
        const char *rk[] = {"seed", "gain"};
        const char *rv[] = {"3", "0.5"};
        char runs2[] = "/tmp/looptime-session-XXXXXX";
        looptime_session *one = NULL;
        looptime_episode *ep = NULL;
        CHECK(mkdtemp(runs2) != NULL);
        CHECK(looptime_session_create(runs2, &info, 1, &one) == LOOPTIME_OK);
        CHECK_ERR(looptime_session_rollout_with(one, rk, rv, 2, NULL), LOOPTIME_ERR_NULL, "out pointer");
        CHECK(looptime_session_rollout_with(one, rk, rv, 2, &ep) == LOOPTIME_OK);
        CHECK(file_contains(looptime_episode_dir(ep), "manifest.json", "\"seed\": 3"));
        CHECK(file_contains(looptime_episode_dir(ep), "manifest.json", "\"gain\": \"0.5\""));
        CHECK(looptime_episode_finish(ep, NULL, NULL, true, 0) == LOOPTIME_OK);
        looptime_episode_free(ep);
        looptime_session_free(one);
    }
    looptime_session_free(session);
    looptime_session_free(NULL);
    looptime_scheduler_free(s);
    if (failures == 0) {
        printf("session: 2 rollouts uncapped in %s, layout and refusals as documented\n", runs);
    }
    return failures != 0;
}
