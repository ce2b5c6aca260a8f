//! The arrival that counts, from Python: `enable_rx_timestamps(sock)` and
//! `recv_stamped(sock)`, the kernel's receive stamp of a datagram on the
//! evidence's clock beside the time the loop read it
//! (`looptime_capture::net`, docs/input-paced.md). The receive blocks with
//! the GIL released, honouring the socket's timeout.

use std::io;
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyTimeoutError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt};

/// When a datagram arrived: the kernel's receive stamp on the host
/// monotonic clock (`arrival_ns`), when the receive returned (`read_ns`)
/// and the conversion's bound (`bound_ns`; `None` without a kernel stamp,
/// and then `arrival_ns` is `read_ns`). Give it as the arrival of
/// `rec.begin_cycle(phase, input=(arrival, seq))`.
#[pyclass(module = "looptime._looptime", frozen, eq)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// The arrival that counts (host monotonic ns).
    #[pyo3(get)]
    pub arrival_ns: u64,
    /// When the receive returned (host monotonic ns).
    #[pyo3(get)]
    pub read_ns: u64,
    /// The conversion's bound (ns), with a kernel stamp.
    #[pyo3(get)]
    pub bound_ns: Option<u64>,
}

#[pymethods]
impl Arrival {
    /// Whether the kernel stamped it (`SO_TIMESTAMPNS` on).
    #[getter]
    fn kernel(&self) -> bool {
        self.bound_ns.is_some()
    }
    /// `read_ns − arrival_ns`: how long it waited in the socket.
    #[getter]
    fn waited_ns(&self) -> i64 {
        self.read_ns as i64 - self.arrival_ns as i64
    }
    fn __repr__(&self) -> String {
        format!(
            "Arrival(arrival_ns={}, read_ns={}, bound_ns={})",
            self.arrival_ns,
            self.read_ns,
            self.bound_ns.map_or("None".into(), |b| b.to_string())
        )
    }
}

impl Arrival {
    /// The input release of the cycle it starts.
    pub(crate) fn release(&self, seq: Option<u64>) -> looptime_capture::Release {
        let r = looptime_capture::Release::input(self.arrival_ns, seq);
        match self.bound_ns {
            Some(b) => r.with_read(self.read_ns, Some(b)),
            None => r,
        }
    }
}

/// The descriptor of `sock`: an int, or what its `fileno()` returns.
fn fd_of(sock: &Bound<'_, PyAny>) -> PyResult<i32> {
    if sock.is_instance_of::<PyInt>() {
        return sock.extract();
    }
    sock.call_method0("fileno")
        .and_then(|f| f.extract())
        .map_err(|_| {
            PyTypeError::new_err(
                "sock must be a socket (an object with fileno()) or a file descriptor (int)",
            )
        })
}

/// The socket's timeout (`gettimeout()`): `None` blocks.
fn timeout_of(sock: &Bound<'_, PyAny>) -> PyResult<Option<Duration>> {
    if !sock.hasattr("gettimeout")? {
        return Ok(None);
    }
    let t: Option<f64> = sock.call_method0("gettimeout")?.extract()?;
    Ok(t.map(|s| Duration::from_secs_f64(s.max(0.0))))
}

/// Ask the kernel to stamp each datagram `sock` receives.
#[pyfunction]
pub fn enable_rx_timestamps(sock: &Bound<'_, PyAny>) -> PyResult<()> {
    let fd = fd_of(sock)?;
    looptime_capture::net::enable_rx_timestamps_fd(fd)
        .map_err(|e| PyOSError::new_err(format!("SO_TIMESTAMPNS on descriptor {fd} refused: {e}")))
}

/// Receive one datagram of at most `bufsize` bytes: `(data, Arrival)`.
/// Blocks (with the GIL released) as the socket's timeout says; none in
/// time raises `TimeoutError`, and a receive error its `OSError` subclass
/// (`ConnectionRefusedError`, ...), as `socket.recv` does.
#[pyfunction]
#[pyo3(signature = (sock, bufsize = 65536))]
pub fn recv_stamped(
    py: Python<'_>,
    sock: &Bound<'_, PyAny>,
    bufsize: usize,
) -> PyResult<(Py<PyBytes>, Arrival)> {
    if bufsize == 0 || bufsize > 1 << 20 {
        return Err(PyValueError::new_err(format!(
            "bufsize must be 1 to 1048576 bytes, not {bufsize}"
        )));
    }
    let fd = fd_of(sock)?;
    let timeout = timeout_of(sock)?;
    let mut buf = vec![0u8; bufsize];
    let got = loop {
        match py.detach(|| looptime_capture::net::recv_stamped_fd(fd, &mut buf, timeout)) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => py.check_signals()?,
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                return Err(PyTimeoutError::new_err("timed out"))
            }
            // As socket.recv raises it: ConnectionRefusedError and the like.
            Err(e) => return Err(e.into()),
            Ok(got) => break got,
        }
    };
    let arrival = Arrival {
        arrival_ns: got.arrival_ns(),
        read_ns: got.read_ns,
        bound_ns: got.arrival.map(|a| a.bound_ns),
    };
    Ok((PyBytes::new(py, &buf[..got.len]).unbind(), arrival))
}
