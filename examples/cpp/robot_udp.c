/* A loop paced by the robot, in C (C99): it blocks on the robot's states
 * over UDP and answers each one (docs/input-paced.md). Start the robot
 * peer first, then this client with the port it printed:
 *
 *   looptime robot-peer --rate 1000 --duration 2 --stall-every-ms 250 --stall-ms 5
 *   build/robot_udp_c --port PORT --runs-dir runs/udp-c [--late-every 50]
 *   analyze_control_timing --episode runs/udp-c/latest
 *
 * Each cycle: the receive between looptime_wait_begin and _end
 * (looptime_recv_stamped: the kernel's receive stamp is the arrival, the
 * time the loop read it kept beside it), looptime_cycle_begin_received
 * with the state's own counter, a `control` span, and the answer inside
 * `robot_send_command`. The loop ends when the states stop for 100 ms. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "looptime.h"

/* The wire format of `looptime robot-peer`, little-endian. */
struct state {
    uint64_t seq;
    uint64_t robot_ns;
    double success_rate;
};


#define CHECK(call)                                                                  \
    do {                                                                             \
        if ((call) < 0) {                                                            \
            fprintf(stderr, "robot_udp_c: %s: %s\n", #call, looptime_last_error()); \
            return 1;                                                                \
        }                                                                            \
    } while (0)

int main(int argc, char **argv) {
    int port = 0, i;
    long late_every = 0, cycle = 0;
    const char *out = NULL;
    looptime_builder *b;
    looptime_recorder *rec = NULL;
    uint32_t running, control, send_stage, success;
    struct sockaddr_in peer;
    struct timeval timeout = {0, 100000};
    int sock;
    uint64_t hello = 0;
    looptime_program info;
    looptime_episode *episode = NULL;
    const char *source = __FILE__;

    for (i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--port") == 0) port = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--runs-dir") == 0) out = argv[i + 1];
        else if (strcmp(argv[i], "--late-every") == 0) late_every = atol(argv[i + 1]);
    }
    if (port <= 0 || port > 65535 || out == NULL || late_every < 0) {
        fprintf(stderr, "usage: robot_udp_c --port PORT --runs-dir DIR [--late-every N]\n");
        return 2;
    }
    /* An episode as every looptime program writes one (session,
     * rollout-000, manifest, <runs>/latest); the robot paces the loop: no
     * scheduler, its nominal period stated as the inputs'. */
    memset(&info, 0, sizeof info);
    info.program = argv[0];
    info.sources = &source;
    info.n_sources = 1;
    info.control_timing = true;
    info.timing_max_cycles = 20000;
    info.input_period_ns = 1000000;
    CHECK(looptime_episode_create(out, &info, &episode));
    b = looptime_builder_new();
    CHECK(looptime_builder_nominal_period_ns(b, 1000000));
    CHECK(looptime_builder_episode_dir(b, looptime_episode_dir(episode)));
    CHECK(looptime_builder_ring(b, LOOPTIME_RING_HEAP));
    CHECK(looptime_builder_phase(b, "running", &running));
    CHECK(looptime_builder_stage(b, "control", &control));
    CHECK(looptime_builder_stage(b, "robot_send_command", &send_stage));
    CHECK(looptime_builder_value(b, "control_command_success_rate", LOOPTIME_VALUE_FLOAT, "ratio", &success));
    CHECK(looptime_recorder_new(b, &rec));
    looptime_builder_free(b);

    sock = socket(AF_INET, SOCK_DGRAM, 0);
    memset(&peer, 0, sizeof peer);
    peer.sin_family = AF_INET;
    peer.sin_port = htons((uint16_t)port);
    peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (sock < 0 || connect(sock, (struct sockaddr *)&peer, sizeof peer) != 0 ||
        setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) != 0) {
        perror("robot_udp_c: socket");
        return 1;
    }
    /* The kernel stamps each state when it reaches the socket. */
    if (looptime_enable_rx_timestamps(sock) != LOOPTIME_OK) {
        fprintf(stderr, "robot_udp_c: %s (arrivals are read times)\n", looptime_last_error());
    }
    (void)send(sock, &hello, sizeof hello, 0); /* the peer answers to this address */
    for (;;) {
        struct state s;
        looptime_received got;
        uint64_t answer_span, work_span;
        int rc;
        looptime_wait_begin(rec);
        rc = looptime_recv_stamped(sock, &s, sizeof s, &got);
        looptime_wait_end(rec);
        if (rc != LOOPTIME_OK) break; /* no state for 100 ms, or the robot is gone */
        if (got.len == 16 && memcmp(&s, "LTEND\0\0\0", 8) == 0) break; /* end of stream */
        if (got.len != sizeof s) continue; /* neither a state nor the end */
        looptime_cycle_begin_received(rec, running, &got, s.seq);
        looptime_span_begin(rec, control, &work_span);
        if (late_every > 0 && cycle % late_every == late_every - 1) {
            struct timespec late = {0, 2000000}; /* an injected late answer */
            nanosleep(&late, NULL);
        }
        looptime_span_end(rec, work_span);
        looptime_span_begin(rec, send_stage, &answer_span);
        (void)send(sock, &s.seq, sizeof s.seq, 0);
        looptime_span_end(rec, answer_span);
        looptime_set_float(rec, success, s.success_rate);
        looptime_cycle_end(rec);
        ++cycle;
    }
    close(sock);
    CHECK(looptime_recorder_finish(rec, looptime_episode_dir(episode), true));
    CHECK(looptime_episode_finish(episode, rec, NULL, true, 0));
    printf("robot_udp_c: %ld cycles into %s\n", cycle, looptime_episode_dir(episode));
    looptime_recorder_free(rec);
    looptime_episode_free(episode);
    return 0;
}
