//! Deterministic discrete-event simulator and paper experiments.
