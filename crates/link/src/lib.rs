//! Link impairment model shared by the simulator and the emulators.
