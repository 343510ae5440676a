//! AeroTP forward error correction: Reed-Solomon over the TPDU, auto strength.
