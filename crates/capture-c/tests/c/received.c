/* The arrival that counts, from C: a state that waits 20 ms in a loopback
 * socket comes back from looptime_recv_stamped with the kernel's stamp at
 * least 20 ms (less the conversion's bound) before the read, and
 * looptime_cycle_begin_received records both; a socket without
 * timestamps gives the read as the arrival; nothing within the socket's
 * timeout is LOOPTIME_WARN_TIMEOUT. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static int bound_socket(struct sockaddr_in *addr) {
    socklen_t len = sizeof *addr;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)addr, sizeof *addr) == 0);
    CHECK(getsockname(fd, (struct sockaddr *)addr, &len) == 0);
    return fd;
}

int main(void) {
    char dir[] = "/tmp/looptime-recv-XXXXXX";
    struct sockaddr_in rx_addr, tx_addr, plain_addr;
    int rx = bound_socket(&rx_addr), tx = bound_socket(&tx_addr);
    int plain = bound_socket(&plain_addr);
    struct timespec wait = {0, 20000000};
    struct timeval short_wait = {0, 50000};
    char buf[64];
    looptime_received got;
    looptime_builder *b = looptime_builder_new();
    looptime_recorder *r = NULL;
    uint32_t running = 0;
    char needle[64];

    CHECK(mkdtemp(dir) != NULL);
    CHECK(looptime_enable_rx_timestamps(rx) == LOOPTIME_OK);
    CHECK(sendto(tx, "state", 5, 0, (struct sockaddr *)&rx_addr, sizeof rx_addr) == 5);
    nanosleep(&wait, NULL);
    CHECK(looptime_recv_stamped(rx, buf, sizeof buf, &got) == LOOPTIME_OK);
    CHECK(got.len == 5 && memcmp(buf, "state", 5) == 0 && got.kernel);
    CHECK(got.read_ns - got.arrival_ns + got.bound_ns >= 20000000u);

    CHECK(looptime_builder_phase(b, "running", &running) == LOOPTIME_OK);
    CHECK(looptime_builder_ring(b, LOOPTIME_RING_HEAP) == LOOPTIME_OK);
    CHECK(looptime_recorder_new(b, &r) == LOOPTIME_OK);
    looptime_builder_free(b);
    CHECK(looptime_cycle_begin_received(r, running, &got, 7) == LOOPTIME_OK);
    CHECK(looptime_cycle_end(r) == LOOPTIME_OK);
    CHECK_ERR(looptime_cycle_begin_received(r, running, NULL, 7), LOOPTIME_ERR_NULL, "got is NULL");
    CHECK(looptime_recorder_finish(r, dir, true) == LOOPTIME_OK);
    snprintf(needle, sizeof needle, "\"read_ns\":%llu", (unsigned long long)got.read_ns);
    CHECK(file_contains(dir, "control_timing.jsonl", needle));
    snprintf(needle, sizeof needle, "\"arrival_ns\":%llu", (unsigned long long)got.arrival_ns);
    CHECK(file_contains(dir, "control_timing.jsonl", needle));
    looptime_recorder_free(r);

    /* No timestamps asked for: the arrival is the read. */
    CHECK(sendto(tx, "s", 1, 0, (struct sockaddr *)&plain_addr, sizeof plain_addr) == 1);
    CHECK(looptime_recv_stamped(plain, buf, sizeof buf, &got) == LOOPTIME_OK);
    CHECK(!got.kernel && got.arrival_ns == got.read_ns && got.bound_ns == 0);

    /* Nothing within the socket's 50 ms timeout. */
    CHECK(setsockopt(rx, SOL_SOCKET, SO_RCVTIMEO, &short_wait, sizeof short_wait) == 0);
    CHECK(looptime_recv_stamped(rx, buf, sizeof buf, &got) == LOOPTIME_WARN_TIMEOUT);
    CHECK(got.len == 0);
    CHECK_ERR(looptime_recv_stamped(rx, NULL, 0, &got), LOOPTIME_ERR_NULL, "NULL");
    CHECK_ERR(looptime_enable_rx_timestamps(-1), LOOPTIME_ERR_IO, "SO_TIMESTAMPNS");
    close(rx);
    close(tx);
    close(plain);

    /* An episode of a loop its inputs pace: no scheduler, the robot's 1 ms
     * period; finish counts the recorder's 5 cycles even when handed a
     * scheduler that never waited; a scheduler and a period together are
     * refused. */
    {
        char runs[] = "/tmp/looptime-recv-runs-XXXXXX";
        looptime_program info;
        looptime_episode *ep = NULL;
        looptime_scheduler *idle = NULL;
        looptime_scheduler_config cfg = looptime_scheduler_config_default(1000000);
        uint64_t i;
        CHECK(mkdtemp(runs) != NULL);
        memset(&info, 0, sizeof info);
        info.program = "received_test";
        info.control_timing = true;
        info.timing_max_cycles = 100;
        info.scheduler = &cfg;
        info.input_period_ns = 1000000;
        CHECK_ERR(looptime_episode_create(runs, &info, &ep), LOOPTIME_ERR_INVALID, "not both");
        info.scheduler = NULL;
        CHECK(looptime_episode_create(runs, &info, &ep) == LOOPTIME_OK);
        b = looptime_builder_new();
        CHECK(looptime_builder_phase(b, "running", &running) == LOOPTIME_OK);
        CHECK(looptime_builder_ring(b, LOOPTIME_RING_HEAP) == LOOPTIME_OK);
        CHECK(looptime_recorder_new(b, &r) == LOOPTIME_OK);
        looptime_builder_free(b);
        for (i = 0; i < 5; i++) {
            CHECK(looptime_cycle_begin_input(r, running, 1000000 * (i + 1), i + 1) == LOOPTIME_OK);
            CHECK(looptime_cycle_end(r) == LOOPTIME_OK);
        }
        CHECK(looptime_recorder_finish(r, looptime_episode_dir(ep), true) == LOOPTIME_OK);
        CHECK(looptime_scheduler_new(&cfg, &idle) == LOOPTIME_OK);
        CHECK(looptime_episode_finish(ep, r, idle, true, 5) == LOOPTIME_OK);
        CHECK(file_contains(looptime_episode_dir(ep), "manifest.json", "\"cycles\": 5"));
        CHECK(file_contains(looptime_episode_dir(ep), "manifest.json", "\"planned_cycles\": 5"));
        CHECK(file_contains(looptime_episode_dir(ep), "manifest.json", "\"overrun_policy\": \"none\""));
        CHECK(file_contains(looptime_episode_dir(ep), "manifest.json", "\"nominal_period_ns\": 1000000"));
        looptime_scheduler_free(idle);
        looptime_recorder_free(r);
        looptime_episode_free(ep);
    }
    return finish_tests("received");
}
