//! `--class` and `--dscp`, shared by `send`, `recv` and `gw`: what a connection carries, and
//! the DiffServ mark (DSCP) each class's datagrams carry on the IP header, so that routers and
//! radios between the two ends queue them by class (docs/runtime.md, "DSCP marks").

use aerotp_net::{DscpPlan, Endpoint};
use aerotp_proto::TrafficClass;

/// Parses a class name (`--class`), trimmed and in any case.
pub fn class_arg(s: &str) -> Result<TrafficClass, String> {
    s.trim().to_ascii_lowercase().parse()
}

fn plan_arg(s: &str) -> Result<DscpPlan, String> {
    s.parse()
}

#[derive(Debug, Clone, clap::Args)]
pub struct DscpFlags {
    /// DSCP each traffic class's datagrams carry: standard (control ef, telemetry af41, bulk
    /// df: RFC 4594's classes), off (every datagram df), or CLASS=DSCP pairs over the standard
    /// plan, e.g. control=cs5,bulk=af11 to follow a range's own plan. A DSCP is 0-63 or a name
    /// (df, ef, af11-af43, cs0-cs7, va, le). Set per datagram on Linux; elsewhere unmarked.
    #[arg(long, value_name = "PLAN", default_value = "standard", value_parser = plan_arg)]
    pub dscp: DscpPlan,
}

impl DscpFlags {
    /// Puts the plan in force on `ep`.
    pub fn apply(&self, ep: &Endpoint) {
        ep.set_dscp_plan(self.dscp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: DscpFlags,
        #[arg(long, value_parser = class_arg, default_value = "bulk")]
        class: TrafficClass,
    }

    #[test]
    fn defaults_are_the_standard_plan_and_bulk() {
        let c = Cli::try_parse_from(["x"]).unwrap();
        assert_eq!(c.flags.dscp, DscpPlan::STANDARD);
        assert_eq!(c.class, TrafficClass::Bulk);
    }

    #[test]
    fn plans_and_classes_parse_and_bad_ones_say_why() {
        let c = Cli::try_parse_from(["x", "--dscp", "control=cs5", "--class", " Control"]).unwrap();
        assert_eq!(c.flags.dscp.dscp(TrafficClass::Control).value(), 40);
        assert_eq!(c.class, TrafficClass::Control);
        let e = Cli::try_parse_from(["x", "--dscp", "control=64"])
            .err()
            .unwrap();
        assert!(e.to_string().contains("not a DSCP"), "{e}");
        let e = Cli::try_parse_from(["x", "--class", "urgent"])
            .err()
            .unwrap();
        assert!(e.to_string().contains("unknown class 'urgent'"), "{e}");
    }
}
