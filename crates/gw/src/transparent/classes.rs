//! A class per intercepted TCP destination (docs/gateway.md §Transparent interception):
//! rules `CLASS=PREFIX[:PORTS]` (`--transparent-tcp-class`, `[transparent] tcp_classes`),
//! tried in order, the first that matches an intercepted connection's original destination
//! giving its flow's class; none matching, the intercepted flows' class (`class`). So a
//! control port outranks the bulk uploads that share the interception.

use std::net::SocketAddr;

use super::policy::DestRule;
use crate::frame::Class;

/// One `CLASS=PREFIX[:PORTS]` rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClassRule {
    pub class: Class,
    pub dest: DestRule,
}

const FORMAT: &str = "give CLASS=PREFIX[:PORT[-PORT]] with CLASS control, telemetry or bulk, \
     e.g. control=*:7100, telemetry=10.77.0.0/16:7500-7599 or bulk=[2001:db8::]/32";

impl ClassRule {
    /// Parses one rule; the error names `key` (the flag or config key), the value, what is
    /// wrong in it and the accepted form.
    pub fn parse(key: &str, s: &str) -> Result<ClassRule, String> {
        let bad = |why: String| format!("{key} '{s}': {why}; {FORMAT}");
        let (class, dest) = s
            .split_once('=')
            .ok_or_else(|| bad("no '=' between the class and the destination".into()))?;
        let class = class.trim().parse::<Class>().map_err(bad)?;
        let dest = DestRule::parse_entry(dest.trim())
            .map_err(|why| bad(format!("destination '{}': {why}", dest.trim())))?;
        Ok(ClassRule { class, dest })
    }
}

/// The class rules of intercepted TCP and the class of flows no rule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TcpClasses {
    pub rules: Vec<ClassRule>,
    pub default: Class,
}

impl TcpClasses {
    /// Parses every rule (errors name `key`); `default` is the class when none matches.
    pub fn parse(key: &str, rules: &[String], default: Class) -> Result<TcpClasses, String> {
        let rules = rules
            .iter()
            .map(|s| ClassRule::parse(key, s))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TcpClasses { rules, default })
    }

    /// The class of a flow to `dest`: the first rule that matches it, else the default.
    pub(crate) fn class_for(&self, dest: SocketAddr) -> Class {
        self.rules
            .iter()
            .find(|r| r.dest.matches(dest))
            .map_or(self.default, |r| r.class)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_first_matching_rule_gives_the_class_else_the_default() {
        let rules: Vec<String> = [
            "control=10.77.0.2:7100",
            "telemetry=10.77.0.0/16:7000-7199",
            "control=*:22",
            "bulk=[fd77::]/16",
            "telemetry = [fd77::2]:443",
        ]
        .map(String::from)
        .to_vec();
        let c = TcpClasses::parse("k", &rules, Class::Bulk).unwrap();
        assert_eq!(c.class_for(sa("10.77.0.2:7100")), Class::Control);
        assert_eq!(
            c.class_for(sa("10.77.0.3:7100")),
            Class::Telemetry,
            "another host: the second rule"
        );
        assert_eq!(c.class_for(sa("10.77.0.2:7200")), Class::Bulk, "no rule");
        assert_eq!(c.class_for(sa("10.78.0.2:7100")), Class::Bulk, "no rule");
        assert_eq!(c.class_for(sa("1.2.3.4:22")), Class::Control);
        assert_eq!(
            c.class_for(sa("[::1]:22")),
            Class::Control,
            "* is both families"
        );
        assert_eq!(
            c.class_for(sa("[fd77::2]:443")),
            Class::Bulk,
            "the first match wins over a later, narrower one"
        );
        let telemetry = TcpClasses::parse("k", &[], Class::Telemetry).unwrap();
        assert_eq!(telemetry.class_for(sa("10.77.0.2:7100")), Class::Telemetry);
    }

    #[test]
    fn bad_rules_name_the_key_the_value_and_what_is_wrong() {
        for (bad, why) in [
            ("urgent=*:7100", "unknown class 'urgent'"),
            ("*:7100", "no '='"),
            ("control", "no '='"),
            ("control=", "empty"),
            ("control=10.0.0.0/33", "prefix length '33'"),
            ("control=10.0.0.300", "not an IPv4 address"),
            ("control=fd77::/16", "an IPv6 address goes in []"),
            ("control=*:7200-7100", "port range 7200-7100 is empty"),
            ("control=*:70000", "port '70000'"),
            ("control=*:", "port ''"),
            ("=*:22", "unknown class ''"),
        ] {
            let e = ClassRule::parse("--transparent-tcp-class", bad).unwrap_err();
            assert!(
                e.contains("--transparent-tcp-class")
                    && e.contains(&format!("'{bad}'"))
                    && e.contains(why)
                    && e.contains("CLASS=PREFIX"),
                "{bad}: {e}"
            );
        }
    }
}
