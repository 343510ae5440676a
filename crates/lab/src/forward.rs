//! The forwarding loop of one direction: packets read from the source TUN go through the
//! link model, and the ones the model delivers are written to the destination TUN when
//! their arrival time comes.
//!
//! One OS thread per direction waits in `ppoll` on the source TUN and on a shared stop
//! eventfd, with a timeout equal to the model's next arrival, so the delivery time error is
//! the kernel's timer slack (tens of µs), not a polling period.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aerotp_tun::Tun;

/// What the forwarder needs from a link model. Implemented for `aerotp_link::Link`; kept as a
/// trait so the forwarding loop can be tested with a trivial model.
pub(crate) trait Channel: Send {
    /// A packet entered the link at `now`.
    fn offer(&mut self, now: Duration, packet: Vec<u8>);
    /// The next packet whose arrival time is `<= now`, if any.
    fn take(&mut self, now: Duration) -> Option<Vec<u8>>;
    /// Arrival time of the next packet in flight.
    fn next_arrival(&self) -> Option<Duration>;
}

/// Largest packet read from a TUN: the IPv4/IPv6 maximum (the MTU is 1500, but a read must
/// never truncate whatever the kernel hands over).
const READ_BUF: usize = 65_536;
/// Packets read from the source per wake-up before deliveries are served again.
const READ_BATCH: usize = 64;
/// Longest single wait; the stop eventfd wakes the loop at once, this only bounds a wait.
const MAX_WAIT: Duration = Duration::from_millis(250);

/// A level-triggered stop flag both forwarding threads can `ppoll` on (an eventfd).
#[derive(Debug)]
pub(crate) struct StopSignal {
    fd: OwnedFd,
}

impl StopSignal {
    pub(crate) fn new() -> io::Result<StopSignal> {
        // SAFETY: eventfd has no memory-safety preconditions.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a freshly created descriptor that nothing else owns.
        Ok(StopSignal {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Wake every waiter; the eventfd stays readable from then on.
    pub(crate) fn raise(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to an eventfd we own.
        unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }
}

/// Counters of one direction kept by the forwarder itself (the link model keeps its own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TunCounters {
    /// Packets read from the source TUN and offered to the link.
    pub read: u64,
    /// Packets delivered by the link and written to the destination TUN.
    pub written: u64,
    /// Writes the destination TUN refused (e.g. a corrupted packet too short to be IP).
    pub write_errors: u64,
}

/// Forward `src` → `chan` → `dst` until `stop` is raised. Time is `epoch.elapsed()`.
/// Returns on stop, or with the error that made reading `src` impossible.
pub(crate) fn run<C: Channel>(
    src: &Tun,
    dst: &Tun,
    chan: &Mutex<C>,
    counters: &Mutex<TunCounters>,
    epoch: Instant,
    stop: &StopSignal,
) -> io::Result<()> {
    let mut f = Forwarder {
        src,
        dst,
        chan,
        counters,
        epoch,
        buf: vec![0u8; READ_BUF],
        due: Vec::new(),
        warned: false,
    };
    loop {
        // 1. Deliver everything whose arrival time has come.
        let next = f.deliver_due();
        // 2. Wait for a packet to read, the next arrival, or stop.
        match f.wait(next, stop)? {
            Woken::Stop => return Ok(()),
            Woken::Other => continue,
            // 3. Read a bounded batch and offer it to the link.
            Woken::Readable => f.read_batch()?,
        }
    }
}

/// One direction's forwarding loop: its TUNs, link model and counters, and the packets
/// due for delivery.
struct Forwarder<'a, C> {
    src: &'a Tun,
    dst: &'a Tun,
    chan: &'a Mutex<C>,
    counters: &'a Mutex<TunCounters>,
    epoch: Instant,
    buf: Vec<u8>,
    due: Vec<Vec<u8>>,
    /// A refused TUN write was logged (once is enough).
    warned: bool,
}

/// Why the wait ended.
enum Woken {
    /// A packet can be read from the source TUN.
    Readable,
    Stop,
    /// The timeout (the next arrival is due), or a signal.
    Other,
}

impl<C: Channel> Forwarder<'_, C> {
    /// Writes every packet whose arrival time has come to the destination TUN; when the
    /// next arrives.
    fn deliver_due(&mut self) -> Option<Duration> {
        let now = self.epoch.elapsed();
        let next = {
            let mut c = self.chan.lock().expect("link model lock poisoned");
            while let Some(p) = c.take(now) {
                self.due.push(p);
            }
            c.next_arrival()
        };
        let (mut written, mut failed) = (0, 0);
        for p in self.due.drain(..) {
            match self.dst.send(&p) {
                Ok(_) => written += 1,
                Err(e) => {
                    failed += 1;
                    if !self.warned {
                        self.warned = true;
                        tracing::debug!(
                            tun = self.dst.name(),
                            len = p.len(),
                            "TUN write refused: {e}"
                        );
                    }
                }
            }
        }
        if written + failed > 0 {
            let mut k = self.counters.lock().expect("counters lock poisoned");
            k.written += written;
            k.write_errors += failed;
        }
        next
    }

    /// Waits for a packet to read, the `next` arrival (`MAX_WAIT` at most) or `stop`.
    fn wait(&self, next: Option<Duration>, stop: &StopSignal) -> io::Result<Woken> {
        let wait = match next {
            Some(t) => t.saturating_sub(self.epoch.elapsed()).min(MAX_WAIT),
            None => MAX_WAIT,
        };
        let mut fds = [
            libc::pollfd {
                fd: self.src.fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stop.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ts = libc::timespec {
            tv_sec: wait.as_secs() as libc::time_t,
            tv_nsec: wait.subsec_nanos() as libc::c_long,
        };
        // SAFETY: fds is a valid array of 2 pollfd; ts is a valid timespec; no signal mask.
        let rc = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(Woken::Other);
            }
            return Err(e);
        }
        if fds[1].revents != 0 {
            return Ok(Woken::Stop);
        }
        if fds[0].revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
            return Err(io::Error::other(format!(
                "TUN {} reported poll events {:#x}",
                self.src.name(),
                fds[0].revents
            )));
        }
        if fds[0].revents & libc::POLLIN == 0 {
            return Ok(Woken::Other);
        }
        Ok(Woken::Readable)
    }

    /// Reads a bounded batch from the source TUN and offers it to the link, each packet
    /// stamped with its read time.
    fn read_batch(&mut self) -> io::Result<()> {
        let mut batch: Vec<(Duration, Vec<u8>)> = Vec::new();
        while batch.len() < READ_BATCH {
            match self.src.recv(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => batch.push((self.epoch.elapsed(), self.buf[..n].to_vec())),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if !batch.is_empty() {
            self.counters.lock().expect("counters lock poisoned").read += batch.len() as u64;
            let mut c = self.chan.lock().expect("link model lock poisoned");
            for (t, p) in batch {
                c.offer(t, p);
            }
        }
        Ok(())
    }
}
