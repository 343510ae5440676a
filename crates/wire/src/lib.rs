//! AeroTP wire format: TPDU header, control bodies, checks.
