//! Tests of `robot`: the wire format, the success window, stalls, the
//! client's hello, and the link between a loop and its peer.

use super::*;

#[test]
fn a_state_round_trips_and_a_short_packet_is_none_and_the_end_is_known() {
    let mut end = [0u8; 16];
    end[..8].copy_from_slice(&END_OF_STREAM);
    end[8..].copy_from_slice(&42u64.to_le_bytes());
    assert_eq!(Received::decode(&end), Received::End { last_seq: 42 });
    assert_eq!(Received::decode(&[1, 2, 3]), Received::Bad(3));
    assert_eq!(Received::decode(&end[..15]), Received::Bad(15));
    let s = State {
        seq: 7,
        robot_ns: 6_000_000,
        success_rate: 0.97,
    };
    assert_eq!(State::decode(&s.encode()), Some(s));
    assert_eq!(State::decode(&[0u8; 8]), None);
}

#[test]
fn only_an_8_byte_datagram_is_a_hello_and_the_real_client_gets_the_states() {
    // A stray empty datagram and a 100-byte one come first, from
    // another socket; before, the first of them became the client and
    // the real one got 0 of the states. Then the client's 8 bytes.
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    let stray = UdpSocket::bind("127.0.0.1:0").unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = peer.local_addr().unwrap();
    stray.send_to(&[], to).unwrap();
    stray.send_to(&[7u8; 100], to).unwrap();
    client.send_to(&0u64.to_le_bytes(), to).unwrap();
    let got = await_hello(&peer, Duration::from_secs(5)).unwrap();
    assert_eq!(got, client.local_addr().unwrap());
    // No hello at all: it gives up after the wait, saying what it
    // waited for.
    let lonely = UdpSocket::bind("127.0.0.1:0").unwrap();
    stray
        .send_to(&[1, 2, 3], lonely.local_addr().unwrap())
        .unwrap();
    let e = await_hello(&lonely, Duration::from_millis(200)).unwrap_err();
    assert!(e.to_string().contains("8-byte hello"), "{e}");
}

#[test]
fn the_window_is_the_share_of_the_last_100_answered() {
    let mut w = Window {
        last: VecDeque::new(),
        in_time: 0,
    };
    assert_eq!(w.rate(), 0.0);
    // 150 states, every 10th missed: the last 100 hold 10 misses.
    for k in 0..150 {
        w.push(k % 10 != 0);
    }
    assert_eq!(w.rate(), 0.9);
    assert_eq!(w.in_time, 135);
}

#[test]
fn a_stall_is_the_last_stall_ns_of_each_interval() {
    let spec = PeerSpec {
        period_ns: 1_000_000,
        states: 0,
        stall_every_ns: 100_000_000,
        stall_ns: 5_000_000,
    };
    // Stalled from 95 ms to 100 ms of every 100 ms.
    let at = |ms: u64| stalled(&spec, ms * 1_000_000);
    assert_eq!(
        (at(94), at(95), at(99), at(100), at(195)),
        (false, true, true, false, true)
    );
}

#[test]
fn a_peer_on_loopback_sends_its_states_and_holds_a_stall_for_a_burst() {
    // 40 states at 1 ms, stalled 5 ms of every 20: states held, then
    // sent together; every state arrives, in order.
    let spec = PeerSpec {
        period_ns: 1_000_000,
        states: 40,
        stall_every_ns: 20_000_000,
        stall_ns: 5_000_000,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (link, peer) = start(spec, Duration::from_millis(500), stop, None).unwrap();
    let mut seqs = Vec::new();
    while let (Received::State(s), _) = link.receive().unwrap() {
        link.answer(s.seq);
        seqs.push(s.seq);
        if s.seq == 40 {
            break;
        }
    }
    // In-process, the peer says it finished without a wire message.
    let (finished_before, (report, _)) = (peer.finished(), peer.join());
    assert!(finished_before || report.sent == 40);
    assert_eq!(seqs, (1..=40).collect::<Vec<_>>());
    assert_eq!(report.sent, 40);
    // Stalled at 15..19 ms and 35..39 ms: 10 states held.
    assert_eq!(report.held, 10);
}

mod link {
    use super::*;

    #[test]
    fn the_link_tells_a_state_a_bad_datagram_the_end_and_silence_apart() {
        // A socket pair on loopback, as `start` connects them: the robot
        // side sends a malformed datagram, a state, the end of stream.
        let robot = UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        robot.connect(client.local_addr().unwrap()).unwrap();
        client.connect(robot.local_addr().unwrap()).unwrap();
        client
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        net::enable_rx_timestamps(&client).unwrap();
        let link = Link {
            sock: client,
            stamped: true,
        };
        let state = State {
            seq: 9,
            robot_ns: 8_000_000,
            success_rate: 1.0,
        };
        let mut end = [0u8; 16];
        end[..8].copy_from_slice(&END_OF_STREAM);
        end[8..].copy_from_slice(&9u64.to_le_bytes());
        robot.send(b"garbage!!").unwrap();
        robot.send(&state.encode()).unwrap();
        robot.send(&end).unwrap();
        let kinds = |r: (Received, Option<net::Received>)| {
            // A datagram comes with its kernel arrival, at or before its
            // read (within the conversion's bound); silence with none.
            if let Some(got) = r.1 {
                let k = got.arrival.expect("a kernel stamp on loopback");
                assert!(k.arrival_ns <= got.read_ns + k.bound_ns, "{got:?}");
            }
            (r.0, r.1.is_some())
        };
        assert_eq!(kinds(link.receive().unwrap()), (Received::Bad(9), true));
        assert_eq!(
            kinds(link.receive().unwrap()),
            (Received::State(state), true)
        );
        assert_eq!(
            kinds(link.receive().unwrap()),
            (Received::End { last_seq: 9 }, true)
        );
        assert_eq!(kinds(link.receive().unwrap()), (Received::Nothing, false));
    }

    #[test]
    fn a_client_peer_ends_its_stream_with_the_end_datagram() {
        // `looptime robot-peer`'s side: 3 states at 1 kHz, then the end of
        // stream naming the last counter.
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(peer.local_addr().unwrap()).unwrap();
        client
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        client.send(&0u64.to_le_bytes()).unwrap();
        let spec = PeerSpec {
            period_ns: 1_000_000,
            states: 3,
            stall_every_ns: 0,
            stall_ns: 0,
        };
        let stop = AtomicBool::new(false);
        let report = serve_client(&peer, spec, Duration::from_secs(1), &stop).unwrap();
        assert_eq!(report.sent, 3);
        net::enable_rx_timestamps(&client).unwrap();
        let link = Link {
            sock: client,
            stamped: true,
        };
        let got: Vec<Received> = (0..4).map(|_| link.receive().unwrap().0).collect();
        assert!(
            matches!(got[2], Received::State(State { seq: 3, .. })),
            "{got:?}"
        );
        assert_eq!(got[3], Received::End { last_seq: 3 });
    }
}
