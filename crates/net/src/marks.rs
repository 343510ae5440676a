//! DSCP marks: the Differentiated Services code point (RFC 2474) each datagram carries in its
//! IP header, chosen by the traffic class of what it carries (`Transmit::class`).
//!
//! A class orders connections inside one endpoint (`EndpointConfig::link_share`); the mark
//! carries the same order to the routers and radios between the two ends, which is where a
//! range network (TmNS, DiffServ-managed links) gives control traffic its queue. The standard
//! plan follows RFC 4594's service classes: control → EF (46, low-delay, low-rate),
//! telemetry → AF41 (34, real-time streaming that should not be dropped first), bulk → DF
//! (0, best effort, the mark every datagram had before marks existed). The ECN bits stay 0
//! (Not-ECT): AeroTP does not react to ECN, so it must not claim to.

use std::fmt;
use std::str::FromStr;

use aerotp_proto::TrafficClass;

/// A DSCP, 0–63 (the upper six bits of the IPv4 TOS / IPv6 traffic-class byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Dscp(u8);

/// DSCP names of RFC 2474 (CS), RFC 2597 (AF), RFC 3246 (EF), RFC 5865 (VA), RFC 8622 (LE).
const NAMES: [(&str, u8); 24] = [
    ("df", 0),
    ("le", 1),
    ("cs1", 8),
    ("af11", 10),
    ("af12", 12),
    ("af13", 14),
    ("cs2", 16),
    ("af21", 18),
    ("af22", 20),
    ("af23", 22),
    ("cs3", 24),
    ("af31", 26),
    ("af32", 28),
    ("af33", 30),
    ("cs4", 32),
    ("af41", 34),
    ("af42", 36),
    ("af43", 38),
    ("cs5", 40),
    ("va", 44),
    ("ef", 46),
    ("cs6", 48),
    ("cs7", 56),
    ("cs0", 0),
];

impl Dscp {
    pub const DF: Dscp = Dscp(0);
    pub const AF41: Dscp = Dscp(34);
    pub const EF: Dscp = Dscp(46);

    /// The code point `v`, if it fits in six bits.
    pub fn new(v: u8) -> Option<Dscp> {
        (v < 64).then_some(Dscp(v))
    }

    pub fn value(self) -> u8 {
        self.0
    }

    /// The IPv4 TOS / IPv6 traffic-class byte that carries it (ECN bits 0).
    pub fn tos(self) -> u8 {
        self.0 << 2
    }
}

impl fmt::Display for Dscp {
    /// The name if it has one (`ef`), else the number.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match NAMES.iter().find(|(_, v)| *v == self.0) {
            Some((name, _)) => f.write_str(name),
            None => write!(f, "{}", self.0),
        }
    }
}

impl FromStr for Dscp {
    type Err = String;
    fn from_str(s: &str) -> Result<Dscp, String> {
        let t = s.trim().to_ascii_lowercase();
        if let Some((_, v)) = NAMES.iter().find(|(n, _)| *n == t) {
            return Ok(Dscp(*v));
        }
        match t.parse::<u8>().ok().and_then(Dscp::new) {
            Some(d) => Ok(d),
            None => Err(format!(
                "'{s}' is not a DSCP: give a number 0-63 or a name (df, ef, af11-af43, \
                 cs0-cs7, va, le)"
            )),
        }
    }
}

/// The DSCP of each class. `Copy`: the driver reads it under the endpoint's lock per batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DscpPlan {
    marks: [Dscp; 3],
}

impl DscpPlan {
    /// RFC 4594's classes: control EF, telemetry AF41, bulk DF (the module's documentation
    /// says why).
    pub const STANDARD: DscpPlan = DscpPlan {
        marks: [Dscp::EF, Dscp::AF41, Dscp::DF],
    };
    /// Every datagram DF (0), as if the classes were not known.
    pub const OFF: DscpPlan = DscpPlan {
        marks: [Dscp::DF; 3],
    };

    /// The mark of `class`.
    pub fn dscp(&self, class: TrafficClass) -> Dscp {
        self.marks[class as usize]
    }

    /// This plan with `class` marked `dscp`.
    pub fn with(mut self, class: TrafficClass, dscp: Dscp) -> DscpPlan {
        self.marks[class as usize] = dscp;
        self
    }

    /// The TOS byte of a datagram of `class`; `None` (the endpoint's own answers, which
    /// belong to no connection) is DF.
    pub fn tos(&self, class: Option<TrafficClass>) -> u8 {
        class.map_or(0, |c| self.dscp(c).tos())
    }
}

impl Default for DscpPlan {
    fn default() -> DscpPlan {
        DscpPlan::STANDARD
    }
}

impl fmt::Display for DscpPlan {
    /// `control=ef,telemetry=af41,bulk=df`: the form [`DscpPlan::from_str`] reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, c) in TrafficClass::ALL.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            write!(f, "{sep}{}={}", c.name(), self.dscp(*c))?;
        }
        Ok(())
    }
}

impl FromStr for DscpPlan {
    type Err = String;
    /// `standard`, `off`, or `CLASS=DSCP[,CLASS=DSCP…]` over the standard plan (e.g.
    /// `control=cs5,bulk=af11`).
    fn from_str(s: &str) -> Result<DscpPlan, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "standard" => return Ok(DscpPlan::STANDARD),
            "off" => return Ok(DscpPlan::OFF),
            _ => {}
        }
        let mut plan = DscpPlan::STANDARD;
        let mut seen = Vec::new();
        for item in s.split(',') {
            let Some((class, dscp)) = item.split_once('=') else {
                return Err(format!(
                    "'{item}': give standard, off, or CLASS=DSCP pairs separated by commas \
                     (e.g. control=ef,telemetry=af41,bulk=df)"
                ));
            };
            let class: TrafficClass = class.trim().to_ascii_lowercase().parse()?;
            if seen.contains(&class) {
                return Err(format!("class {} is given twice", class.name()));
            }
            seen.push(class);
            plan = plan.with(class, dscp.parse()?);
        }
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_parse_to_their_code_points() {
        assert_eq!("ef".parse::<Dscp>().unwrap().value(), 46);
        assert_eq!("AF41".parse::<Dscp>().unwrap().value(), 34);
        assert_eq!("cs6".parse::<Dscp>().unwrap().value(), 48);
        assert_eq!(" 63 ".parse::<Dscp>().unwrap().value(), 63);
        assert_eq!("0".parse::<Dscp>().unwrap(), Dscp::DF);
        for bad in ["64", "-1", "af44", "", "ef1"] {
            let e = bad.parse::<Dscp>().unwrap_err();
            assert!(e.contains("not a DSCP") && e.contains("0-63"), "{bad}: {e}");
        }
    }

    #[test]
    fn every_name_reads_back_as_itself() {
        for (name, v) in NAMES {
            let d: Dscp = name.parse().unwrap();
            assert_eq!(d.value(), v);
            // cs0 is df's other name; the display uses df.
            let shown = d.to_string();
            assert_eq!(shown.parse::<Dscp>().unwrap(), d);
        }
        assert_eq!(Dscp::new(7).unwrap().to_string(), "7");
    }

    #[test]
    fn the_tos_byte_leaves_the_ecn_bits_clear() {
        assert_eq!(Dscp::EF.tos(), 0xb8);
        assert_eq!(Dscp::AF41.tos(), 0x88);
        assert_eq!(Dscp::new(63).unwrap().tos(), 0xfc);
    }

    #[test]
    fn plans_parse_over_the_standard_one() {
        let p: DscpPlan = "control=cs5, bulk=af11".parse().unwrap();
        assert_eq!(p.dscp(TrafficClass::Control).value(), 40);
        assert_eq!(p.dscp(TrafficClass::Telemetry), Dscp::AF41);
        assert_eq!(p.dscp(TrafficClass::Bulk).value(), 10);
        assert_eq!("off".parse::<DscpPlan>().unwrap(), DscpPlan::OFF);
        assert_eq!("Standard".parse::<DscpPlan>().unwrap(), DscpPlan::STANDARD);
        let shown = p.to_string();
        assert_eq!(shown, "control=cs5,telemetry=af41,bulk=af11");
        assert_eq!(shown.parse::<DscpPlan>().unwrap(), p);
    }

    #[test]
    fn bad_plans_say_what_is_wrong() {
        let cases = [
            ("control", "CLASS=DSCP"),
            ("top=ef", "unknown class 'top'"),
            ("control=ef,control=cs5", "given twice"),
            ("bulk=99", "not a DSCP"),
            ("", "CLASS=DSCP"),
        ];
        for (arg, want) in cases {
            let e = arg.parse::<DscpPlan>().unwrap_err();
            assert!(e.contains(want), "{arg}: {e}");
        }
    }

    #[test]
    fn answers_of_no_class_are_df() {
        let p = DscpPlan::STANDARD;
        assert_eq!(p.tos(None), 0);
        assert_eq!(p.tos(Some(TrafficClass::Control)), 0xb8);
        assert_eq!(p.tos(Some(TrafficClass::Bulk)), 0);
        assert_eq!(DscpPlan::OFF.tos(Some(TrafficClass::Control)), 0);
    }
}
