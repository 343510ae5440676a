//! Network-namespace lab joined by a TUN link driven by the link model.
