//! Control bodies: ACK, MACK, NACK, SNACK, RPT and RST (docs/spec.md §4).

use crate::error::WireError;
use crate::header::Flags;

/// Fixed part of a MACK body: everything but its entries and ranges (the two counts included).
pub const MACK_FIXED_LEN: usize = 32;
const ACK_LEN: usize = 20;
const REPORT_LEN: usize = 24;
const MAX_REASON: usize = 256;

/// Cumulative acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ack {
    /// Every TPDU number below `cum` has been received.
    pub cum: u64,
    /// Bytes the receiving application has read.
    pub delivered: u64,
    /// TPDUs beyond `cum` the receiver will buffer.
    pub window: u32,
}

/// Multiple acknowledgement: cumulative part plus many selective entries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mack {
    pub ack: Ack,
    /// Timestamp of the newest data TPDU received.
    pub ts_echo: u32,
    /// Time it was held before this MACK, in 100 µs units.
    pub ack_delay: u16,
    /// The longest the receiver currently holds an acknowledgement (its aggregation delay), in
    /// milliseconds: the sender adds it to its retransmission timeout.
    pub max_delay: u16,
    /// Low 32 bits of TPDU numbers received at or above `cum`.
    pub entries: Vec<u32>,
    /// Blocks `[start, end)` (low 32 bits) of TPDUs received above `cum`, newest first. Unlike
    /// `entries`, which list each arrival once, the ranges re-report the receiver's whole
    /// out-of-order state (as far as it fits), so a lost MACK loses no information.
    pub ranges: Vec<(u32, u32)>,
}

/// TPDUs that arrived corrupted and could not be corrected.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Nack {
    pub seqs: Vec<u32>,
}

/// Ranges `[start, end)` of TPDUs missing at the receiver.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snack {
    pub ranges: Vec<(u32, u32)>,
}

/// Receiver report of the measured channel quality.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Report {
    pub ber_ppb: u32,
    pub tpdus: u32,
    pub lost: u32,
    /// Data TPDUs the receiver knows were sent so far (the highest TPDU number seen, plus one).
    pub seen: u32,
    /// Of those, how many did not arrive intact on the link (missing or uncorrectable),
    /// counted before any erasure decoding or retransmission repaired them.
    pub wire_lost: u32,
    /// Runs of consecutive such losses (`wire_lost / bursts` is the mean burst length).
    pub bursts: u32,
}

/// Every control part a TPDU may carry; which are present follows the header flags.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ControlBody {
    pub ack: Option<Ack>,
    pub mack: Option<Mack>,
    pub nack: Option<Nack>,
    pub snack: Option<Snack>,
    pub report: Option<Report>,
    pub reset: Option<String>,
}

/// A bounds-checked reader: every read says what it was reading when input runs out.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        if self.buf.len() < n {
            return Err(WireError::Truncated {
                what,
                need: n,
                have: self.buf.len(),
            });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }
    fn u16(&mut self, what: &'static str) -> Result<u16, WireError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self, what: &'static str) -> Result<u64, WireError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }
    /// Reads a 16-bit count of `entry_len`-byte entries, refusing counts the input cannot hold
    /// (so no allocation is ever larger than the input).
    fn count(&mut self, entry_len: usize, what: &'static str) -> Result<usize, WireError> {
        let k = usize::from(self.u16(what)?);
        let need = k * entry_len;
        if need > self.buf.len() {
            return Err(WireError::Truncated {
                what,
                need,
                have: self.buf.len(),
            });
        }
        Ok(k)
    }
    fn ack(&mut self) -> Result<Ack, WireError> {
        Ok(Ack {
            cum: self.u64("ack cum")?,
            delivered: self.u64("ack delivered")?,
            window: self.u32("ack window")?,
        })
    }
}

impl ControlBody {
    /// Parses the control parts announced by `flags` from `body`.
    pub fn parse(flags: Flags, body: &[u8]) -> Result<ControlBody, WireError> {
        if flags.contains(Flags::REPAIR) || flags.is_challenge() || flags.is_echo() {
            // Never read a repair TPDU as a report followed by a reset reason, nor a
            // CHALLENGE as a reset or an ECHO as a report (docs/spec.md §7, §9). No control
            // TPDU combines a reset with a report, with or without ASYN/AFIN beside them
            // (found by fuzzing: such a body parsed but could not be written back).
            return Err(WireError::NotControl);
        }
        let mut r = Reader { buf: body };
        let mut out = ControlBody::default();
        if flags.contains(Flags::MACK) {
            let ack = r.ack()?;
            let ts_echo = r.u32("mack ts_echo")?;
            let ack_delay = r.u16("mack ack_delay")?;
            let max_delay = r.u16("mack max_delay")?;
            let k = r.count(4, "mack entries")?;
            let mut entries = Vec::with_capacity(k);
            for _ in 0..k {
                entries.push(r.u32("mack entry")?);
            }
            let k = r.count(8, "mack ranges")?;
            let mut ranges = Vec::with_capacity(k);
            for _ in 0..k {
                ranges.push((r.u32("mack range start")?, r.u32("mack range end")?));
            }
            out.mack = Some(Mack {
                ack,
                ts_echo,
                ack_delay,
                max_delay,
                entries,
                ranges,
            });
        } else if flags.contains(Flags::ACK) {
            out.ack = Some(r.ack()?);
        }
        if flags.contains(Flags::NACK) {
            let k = r.count(4, "nack entries")?;
            let mut seqs = Vec::with_capacity(k);
            for _ in 0..k {
                seqs.push(r.u32("nack entry")?);
            }
            out.nack = Some(Nack { seqs });
        }
        if flags.contains(Flags::SNACK) {
            let k = r.count(8, "snack ranges")?;
            let mut ranges = Vec::with_capacity(k);
            for _ in 0..k {
                ranges.push((r.u32("snack start")?, r.u32("snack end")?));
            }
            out.snack = Some(Snack { ranges });
        }
        if flags.contains(Flags::RPT) {
            out.report = Some(Report {
                ber_ppb: r.u32("report ber")?,
                tpdus: r.u32("report tpdus")?,
                lost: r.u32("report lost")?,
                seen: r.u32("report seen")?,
                wire_lost: r.u32("report wire_lost")?,
                bursts: r.u32("report bursts")?,
            });
        }
        if flags.contains(Flags::RST) {
            let rest = r.take(r.buf.len(), "rst reason")?;
            if rest.len() > MAX_REASON {
                return Err(WireError::BadReason);
            }
            let s = std::str::from_utf8(rest).map_err(|_| WireError::BadReason)?;
            out.reset = Some(s.to_owned());
        }
        if !r.buf.is_empty() {
            return Err(WireError::Trailing(r.buf.len()));
        }
        Ok(out)
    }

    /// The flags announcing the parts present.
    pub fn flags(&self) -> Flags {
        let mut f = Flags::empty();
        if self.mack.is_some() {
            f.insert(Flags::MACK);
        } else if self.ack.is_some() {
            f.insert(Flags::ACK);
        }
        if self.nack.is_some() {
            f.insert(Flags::NACK);
        }
        if self.snack.is_some() {
            f.insert(Flags::SNACK);
        }
        if self.report.is_some() {
            f.insert(Flags::RPT);
        }
        if self.reset.is_some() {
            f.insert(Flags::RST);
        }
        f
    }

    /// Bytes `emit` will append.
    pub fn len(&self) -> usize {
        let mut n = 0;
        if let Some(m) = &self.mack {
            n += MACK_FIXED_LEN + 4 * m.entries.len() + 8 * m.ranges.len();
        } else if self.ack.is_some() {
            n += ACK_LEN;
        }
        if let Some(x) = &self.nack {
            n += 2 + 4 * x.seqs.len();
        }
        if let Some(x) = &self.snack {
            n += 2 + 8 * x.ranges.len();
        }
        if self.report.is_some() {
            n += REPORT_LEN;
        }
        if let Some(r) = &self.reset {
            n += r.len().min(MAX_REASON);
        }
        n
    }

    pub fn is_empty(&self) -> bool {
        self.flags() == Flags::empty()
    }

    /// Appends the body to `out`. Lists longer than a 16-bit count are refused.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<(), WireError> {
        fn count(n: usize, what: &'static str) -> Result<u16, WireError> {
            u16::try_from(n).map_err(|_| WireError::TooMany {
                what,
                count: n,
                limit: 65535,
            })
        }
        if self.flags().is_repair() {
            // A report with a reset would be read back as a repair TPDU.
            return Err(WireError::NotControl);
        }
        fn put_ack(out: &mut Vec<u8>, a: &Ack) {
            out.extend_from_slice(&a.cum.to_be_bytes());
            out.extend_from_slice(&a.delivered.to_be_bytes());
            out.extend_from_slice(&a.window.to_be_bytes());
        }
        if let Some(m) = &self.mack {
            put_ack(out, &m.ack);
            out.extend_from_slice(&m.ts_echo.to_be_bytes());
            out.extend_from_slice(&m.ack_delay.to_be_bytes());
            out.extend_from_slice(&m.max_delay.to_be_bytes());
            out.extend_from_slice(&count(m.entries.len(), "mack entries")?.to_be_bytes());
            for e in &m.entries {
                out.extend_from_slice(&e.to_be_bytes());
            }
            out.extend_from_slice(&count(m.ranges.len(), "mack ranges")?.to_be_bytes());
            for (a, b) in &m.ranges {
                out.extend_from_slice(&a.to_be_bytes());
                out.extend_from_slice(&b.to_be_bytes());
            }
        } else if let Some(a) = &self.ack {
            put_ack(out, a);
        }
        if let Some(n) = &self.nack {
            out.extend_from_slice(&count(n.seqs.len(), "nack entries")?.to_be_bytes());
            for e in &n.seqs {
                out.extend_from_slice(&e.to_be_bytes());
            }
        }
        if let Some(s) = &self.snack {
            out.extend_from_slice(&count(s.ranges.len(), "snack ranges")?.to_be_bytes());
            for (a, b) in &s.ranges {
                out.extend_from_slice(&a.to_be_bytes());
                out.extend_from_slice(&b.to_be_bytes());
            }
        }
        if let Some(r) = &self.report {
            out.extend_from_slice(&r.ber_ppb.to_be_bytes());
            out.extend_from_slice(&r.tpdus.to_be_bytes());
            out.extend_from_slice(&r.lost.to_be_bytes());
            out.extend_from_slice(&r.seen.to_be_bytes());
            out.extend_from_slice(&r.wire_lost.to_be_bytes());
            out.extend_from_slice(&r.bursts.to_be_bytes());
        }
        if let Some(reason) = &self.reset {
            // Cut at a character boundary so the reason stays valid UTF-8.
            let mut end = reason.len().min(MAX_REASON);
            while !reason.is_char_boundary(end) {
                end -= 1;
            }
            out.extend_from_slice(&reason.as_bytes()[..end]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> ControlBody {
        ControlBody {
            ack: None,
            mack: Some(Mack {
                ack: Ack {
                    cum: 1 << 40,
                    delivered: 99,
                    window: 4096,
                },
                ts_echo: 7,
                ack_delay: 3,
                max_delay: 40,
                entries: vec![1, 2, 0xFFFF_FFFF],
                ranges: vec![(40, 45), (0xFFFF_FFF0, 3)],
            }),
            nack: Some(Nack { seqs: vec![5, 6] }),
            snack: Some(Snack {
                ranges: vec![(10, 20), (30, 31)],
            }),
            report: Some(Report {
                ber_ppb: 100_000,
                tpdus: 1000,
                lost: 2,
                seen: 1200,
                wire_lost: 30,
                bursts: 7,
            }),
            reset: None,
        }
    }

    #[test]
    fn round_trip_all_parts() {
        let c = full();
        let mut out = Vec::new();
        c.emit(&mut out).unwrap();
        assert_eq!(out.len(), c.len());
        assert_eq!(ControlBody::parse(c.flags(), &out).unwrap(), c);
    }

    #[test]
    fn ack_and_reset_round_trip() {
        let c = ControlBody {
            ack: Some(Ack {
                cum: 3,
                delivered: 4,
                window: 5,
            }),
            reset: Some("peer gone".into()),
            ..Default::default()
        };
        let mut out = Vec::new();
        c.emit(&mut out).unwrap();
        assert_eq!(ControlBody::parse(c.flags(), &out).unwrap(), c);
    }

    #[test]
    fn every_truncation_is_an_error() {
        let c = full();
        let mut out = Vec::new();
        c.emit(&mut out).unwrap();
        for cut in 0..out.len() {
            assert!(
                ControlBody::parse(c.flags(), &out[..cut]).is_err(),
                "cut {cut}"
            );
        }
        out.push(0);
        assert_eq!(
            ControlBody::parse(c.flags(), &out),
            Err(WireError::Trailing(1))
        );
    }

    #[test]
    fn a_repair_tpdu_is_never_parsed_as_report_and_reset() {
        let c = ControlBody {
            report: Some(Report::default()),
            reset: Some("x".into()),
            ..Default::default()
        };
        assert!(c.flags().is_repair());
        let mut out = Vec::new();
        assert_eq!(c.emit(&mut out), Err(WireError::NotControl));
        out = vec![0; REPORT_LEN + 1];
        assert_eq!(
            ControlBody::parse(Flags::REPAIR, &out),
            Err(WireError::NotControl)
        );
        // RST and RPT together never make a control body, whatever else is set.
        for extra in [0x01, 0x02, 0x03] {
            assert_eq!(
                ControlBody::parse(Flags(0xC0 | extra), &out),
                Err(WireError::NotControl),
                "{extra:#x}"
            );
        }
    }

    #[test]
    fn huge_count_does_not_allocate() {
        // MACK with count 65535 but no entries: refused before allocating.
        let mut b = vec![0u8; MACK_FIXED_LEN];
        b[28] = 0xFF;
        b[29] = 0xFF;
        assert!(matches!(
            ControlBody::parse(Flags::MACK, &b),
            Err(WireError::Truncated {
                what: "mack entries",
                ..
            })
        ));
    }
}
