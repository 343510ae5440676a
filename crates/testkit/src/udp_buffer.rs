//! A test destination's UDP receive buffer large enough for the bursts a gateway releases.
//!
//! A receiver that holds datagrams behind a hole (erasure repair waits up to the delay bound)
//! hands them over at once when the hole closes or is given up; a default-sized receive
//! buffer (about 200 datagrams on Linux) then overflows in the kernel, which counts it in
//! `/proc/net/snmp` `RcvbufErrors` and tells no one else. Test destinations stand in for
//! applications sized for their stream, so they get a buffer of `bytes`.

use std::os::fd::AsRawFd;

/// Sets the socket's receive buffer to `bytes`: `SO_RCVBUFFORCE` (root: past
/// `net.core.rmem_max`), else `SO_RCVBUF`. Returns the size the kernel reports afterwards
/// (twice the request, for its bookkeeping), or the error of the last attempt.
pub fn grow_udp_rcvbuf(sock: &impl AsRawFd, bytes: usize) -> std::io::Result<usize> {
    let fd = sock.as_raw_fd();
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    let set = |opt| {
        // SAFETY: fd is an open socket for the borrow's lifetime; the option value is a c_int
        // passed with its size.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        }
    };
    if set(libc::SO_RCVBUFFORCE) != 0 && set(libc::SO_RCVBUF) != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut got: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: as above; `got` and `len` are valid for writes of their sizes.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&mut got as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(usize::try_from(got).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_buffer_grows_at_least_to_what_rmem_max_allows() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let before = grow_udp_rcvbuf(&s, 4096).unwrap();
        let after = grow_udp_rcvbuf(&s, 1 << 20).unwrap();
        assert!(after > before, "{before} -> {after}");
    }
}
