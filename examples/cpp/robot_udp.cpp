// A loop paced by the robot, in C++: it blocks on the robot's states over
// UDP and answers each one (docs/input-paced.md). Start the robot peer
// first, then this client with the port it printed:
//
//   looptime robot-peer --rate 1000 --duration 2 --stall-every-ms 250 --stall-ms 5
//   build/robot_udp --port PORT --runs-dir runs/udp-cpp [--late-every 50]
//   analyze_control_timing --episode runs/udp-cpp/latest
//
// Each cycle: the receive (recorded as the wait), an input-paced release
// (the kernel's receive stamp of the state, from looptime_recv_stamped,
// with the time the loop read it beside it, and the state's own counter), a `control` span, and the answer in `robot_send_command`. With
// --late-every N every N-th answer leaves 2 ms late. The loop ends when the
// states stop for 100 ms.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "looptime.hpp"

namespace {

// The wire format of `looptime robot-peer`: little-endian, as on x86-64
// and arm64.
struct State {
    uint64_t seq;
    uint64_t robot_ns;
    double success_rate;
};
static_assert(sizeof(State) == 24, "24 bytes on the wire");

int usage(const char *why) {
    std::fprintf(stderr, "robot_udp: %s\nusage: robot_udp --port PORT --runs-dir DIR [--rate HZ] [--late-every N]\n", why);
    return 2;
}

}  // namespace

int main(int argc, char **argv) {
    int port = 0;
    double rate = 1000.0;
    long late_every = 0;
    std::string out;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i];
        if (k == "--port") port = std::atoi(argv[i + 1]);
        else if (k == "--rate") rate = std::atof(argv[i + 1]);
        else if (k == "--late-every") late_every = std::atol(argv[i + 1]);
        else if (k == "--runs-dir") out = argv[i + 1];
        else return usage(("unknown flag " + k).c_str());
    }
    if (port <= 0 || port > 65535 || out.empty() || !(rate >= 1.0 && rate <= 10000.0) || late_every < 0) {
        return usage("give --port (1 to 65535) and --runs-dir; --rate is 1 to 10,000 Hz");
    }
    try {
        // An episode as every looptime program writes one (session,
        // rollout-000, manifest, <runs>/latest); the robot paces the loop:
        // no scheduler, its nominal period stated as the inputs'.
        const uint64_t period_ns = uint64_t(1e9 / rate + 0.5);
        const char *source = __FILE__;
        looptime_program info{};
        info.program = argv[0];
        info.sources = &source;
        info.n_sources = 1;
        info.control_timing = true;
        info.timing_max_cycles = 20000;
        info.input_period_ns = period_ns;
        looptime::Episode episode(out.c_str(), info);
        looptime::Builder b;
        b.nominal_period_ns(period_ns).ring(LOOPTIME_RING_HEAP).episode_dir(episode.dir());
        const uint32_t running = b.phase("running");
        const uint32_t control = b.stage("control");
        const uint32_t send = b.stage("robot_send_command");
        const uint32_t success = b.float_value("control_command_success_rate", "ratio");
        looptime::Recorder rec(b);

        int sock = socket(AF_INET, SOCK_DGRAM, 0);
        sockaddr_in peer{};
        peer.sin_family = AF_INET;
        peer.sin_port = htons(uint16_t(port));
        peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        timeval timeout{0, 100'000};
        if (sock < 0 || connect(sock, reinterpret_cast<sockaddr *>(&peer), sizeof peer) != 0 ||
            setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) != 0) {
            std::fprintf(stderr, "robot_udp: socket: %s\n", std::strerror(errno));
            return 1;
        }
        // The kernel stamps each state when it reaches the socket.
        if (looptime_enable_rx_timestamps(sock) != LOOPTIME_OK) {
            std::fprintf(stderr, "robot_udp: %s (arrivals are read times)\n", looptime_last_error());
        }
        uint64_t hello = 0;  // the peer answers to this address
        (void)::send(sock, &hello, sizeof hello, 0);
        long cycle = 0;
        for (;;) {
            State s{};
            looptime_wait_begin(rec.get());
            looptime_received got{};
            const int rc = looptime_recv_stamped(sock, &s, sizeof s, &got);
            looptime_wait_end(rec.get());
            if (rc != LOOPTIME_OK) break;  // no state for 100 ms, or the robot is gone
            if (got.len == 16 && std::memcmp(&s, "LTEND\0\0\0", 8) == 0) break;  // end of stream
            if (got.len != sizeof s) continue;  // neither a state nor the end
            looptime::Cycle c(rec, running, got, s.seq);
            {
                looptime::Span work(rec, control);
                if (late_every > 0 && cycle % late_every == late_every - 1) {
                    timespec late{0, 2'000'000};  // an injected late answer
                    nanosleep(&late, nullptr);
                }
            }
            {
                looptime::Span answer(rec, send);
                (void)::send(sock, &s.seq, sizeof s.seq, 0);
            }
            rec.set(success, s.success_rate);
            ++cycle;
        }
        close(sock);
        rec.finish(episode.dir(), true);
        episode.finish(&rec, nullptr, true, 0);
        std::printf("robot_udp: %ld cycles into %s\n", cycle, episode.dir());
    } catch (const looptime::Error &e) {
        std::fprintf(stderr, "robot_udp: %s\n", e.what());
        return 1;
    }
    return 0;
}
