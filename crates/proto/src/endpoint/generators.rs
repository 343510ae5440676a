//! The endpoint's seeded random generators. Each draw that the seed decides has its own
//! generator, so that a new kind of draw changes nothing the others give: the same seed and
//! the same inputs give the same tags, ports, connection identifiers and clock offsets.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// The three generators an endpoint draws from after it is made (the cookie secret and the
/// tables' hash seeds are drawn once, in `Endpoint::new`, from generators of their own).
#[derive(Debug)]
pub(super) struct Generators {
    /// Tags, the first ephemeral port and datagram routes' tags and code keys.
    tags: Pcg64Mcg,
    /// Connection identifiers: their own generator, so they change nothing else the seed
    /// decides (tags, ports).
    cids: Pcg64Mcg,
    /// Each connection's clock offset (`connection::reset`): its own generator too.
    clock_offsets: Pcg64Mcg,
}

impl Generators {
    pub(super) fn new(seed: u64) -> Generators {
        Generators {
            tags: Pcg64Mcg::seed_from_u64(seed),
            cids: Pcg64Mcg::seed_from_u64(seed ^ 0x6369_645f_7365_6564),
            clock_offsets: Pcg64Mcg::seed_from_u64(seed ^ 0x636c_6f63_6b5f_6f66),
        }
    }

    /// Where the search for a free ephemeral port starts (drawn once, first).
    pub(super) fn first_port(&mut self) -> u16 {
        self.tags.gen_range(49152..65000)
    }

    /// A connection's or a datagram route's tag: never 0.
    pub(super) fn tag(&mut self) -> u8 {
        self.tags.gen_range(1..=255u8)
    }

    /// A datagram route's erasure code key (drawn right after its tag).
    pub(super) fn code_key(&mut self) -> u64 {
        self.tags.gen()
    }

    /// A connection identifier for a new connection: random, never 0 (0 means "none").
    pub(super) fn cid(&mut self) -> u64 {
        loop {
            let cid: u64 = self.cids.gen();
            if cid != 0 {
                return cid;
            }
        }
    }

    /// A new connection's clock offset.
    pub(super) fn clock_offset(&mut self) -> u32 {
        self.clock_offsets.gen()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_draw_follows_only_the_seed_and_its_own_earlier_draws() {
        let mut a = Generators::new(7);
        let mut b = Generators::new(7);
        // `b` draws identifiers and offsets in between: `a`'s tags must not notice.
        let tags_a: Vec<u8> = (0..16).map(|_| a.tag()).collect();
        let tags_b: Vec<u8> = (0..16)
            .map(|_| {
                b.cid();
                b.clock_offset();
                b.tag()
            })
            .collect();
        assert_eq!(tags_a, tags_b);
        assert!(tags_a.iter().all(|&t| t != 0));
        let mut c = Generators::new(8);
        let tags_c: Vec<u8> = (0..16).map(|_| c.tag()).collect();
        assert_ne!(tags_a, tags_c, "another seed, other tags");
    }

    #[test]
    fn the_first_port_is_ephemeral_and_drawn_from_the_tag_generator() {
        let mut g = Generators::new(3);
        let port = g.first_port();
        assert!((49152..65000).contains(&port));
        let mut reference = Pcg64Mcg::seed_from_u64(3);
        assert_eq!(port, reference.gen_range(49152..65000));
        assert_eq!(g.tag(), reference.gen_range(1..=255u8));
    }
}
