//! Where things are in a lab: the addresses, prefix, MTU and interface names of each path,
//! and which end is which.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// Address of the air end of the link (inside the air namespace only).
pub const AIR_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// Address of the ground end of the link (inside the ground namespace only).
pub const GROUND_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
/// Prefix length of the point-to-point subnet 10.77.0.0/30.
pub const PREFIX_LEN: u8 = 30;
/// MTU of both TUN interfaces.
pub const MTU: u32 = 1500;
/// TUN interface name in the air namespace.
pub const AIR_IF: &str = "atp-air";
/// TUN interface name in the ground namespace.
pub const GROUND_IF: &str = "atp-ground";

/// Most paths a lab may have (the third octet of 10.77.i.0/30 numbers them).
pub const MAX_LAB_PATHS: usize = 16;

/// Air and ground addresses of path `i`: 10.77.i.1 and 10.77.i.2 (path 0: [`AIR_ADDR`],
/// [`GROUND_ADDR`]).
pub fn path_addrs(i: usize) -> (Ipv4Addr, Ipv4Addr) {
    let i = u8::try_from(i).unwrap_or(u8::MAX);
    (Ipv4Addr::new(10, 77, i, 1), Ipv4Addr::new(10, 77, i, 2))
}

/// TUN interface names of path `i` (air, ground): `atp-air`/`atp-ground` for path 0,
/// `atp-air<i>`/`atp-ground<i>` after.
pub fn path_ifnames(i: usize) -> (String, String) {
    if i == 0 {
        (AIR_IF.to_owned(), GROUND_IF.to_owned())
    } else {
        (format!("{AIR_IF}{i}"), format!("{GROUND_IF}{i}"))
    }
}

/// Which end of the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The airborne end (sends over the forward link).
    Air,
    /// The ground end (sends over the reverse link).
    Ground,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Air => "air",
            Side::Ground => "ground",
        })
    }
}

impl FromStr for Side {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Side, String> {
        match s {
            "air" => Ok(Side::Air),
            "ground" => Ok(Side::Ground),
            other => Err(format!(
                "unknown side {other:?}: expected `air` or `ground`"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn side_round_trips_through_strings() {
        for side in [Side::Air, Side::Ground] {
            assert_eq!(side.to_string().parse::<Side>(), Ok(side));
        }
        assert!("sky".parse::<Side>().unwrap_err().contains("air"));
    }

    #[test]
    fn paths_get_their_own_subnet_and_interfaces() {
        assert_eq!(path_addrs(0), (AIR_ADDR, GROUND_ADDR));
        assert_eq!(path_ifnames(0), (AIR_IF.to_owned(), GROUND_IF.to_owned()));
        assert_eq!(
            path_addrs(3),
            (Ipv4Addr::new(10, 77, 3, 1), Ipv4Addr::new(10, 77, 3, 2))
        );
        let (a, g) = path_ifnames(MAX_LAB_PATHS - 1);
        assert_eq!((a.as_str(), g.as_str()), ("atp-air15", "atp-ground15"));
        // Linux interface names hold at most 15 bytes.
        assert!(g.len() <= 15);
    }
}
