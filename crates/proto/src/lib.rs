//! AeroTP sans-IO protocol engine.
