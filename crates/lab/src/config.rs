//! What to build: the links and seeds of a one-path lab or of each path of a bigger one.

use aerotp_link::LinkConfig;

/// The reverse link's seed is derived from [`LabConfig::seed`] so both directions draw
/// independent impairments from one seed.
pub(crate) const REVERSE_SEED_MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// What to build.
#[derive(Debug, Clone, Default)]
pub struct LabConfig {
    /// Air → ground link.
    pub forward: LinkConfig,
    /// Ground → air link (often slower).
    pub reverse: LinkConfig,
    /// Seed of the forward link; the reverse link uses `seed ^ 0x9E3779B97F4A7C15`.
    pub seed: u64,
    /// Tag of the namespace names (`aerotp-air-<pid>-<name>`); by default a per-process
    /// counter. Letters, digits, `_` and `.`, at most 32 characters.
    pub name: Option<String>,
}

/// One path of a multi-path lab: its two links and their seeds.
#[derive(Debug, Clone, Default)]
pub struct LabPath {
    /// Air → ground link.
    pub forward: LinkConfig,
    /// Ground → air link.
    pub reverse: LinkConfig,
    /// Seed of the forward link.
    pub forward_seed: u64,
    /// Seed of the reverse link.
    pub reverse_seed: u64,
}

/// What to build for a lab of several paths ([`Lab::start_paths`]).
#[derive(Debug, Clone, Default)]
pub struct LabPathsConfig {
    /// The paths, 1 to [`MAX_LAB_PATHS`]; path i gets 10.77.i.0/30.
    pub paths: Vec<LabPath>,
    /// As [`LabConfig::name`].
    pub name: Option<String>,
}

impl From<LabConfig> for LabPathsConfig {
    fn from(c: LabConfig) -> LabPathsConfig {
        LabPathsConfig {
            paths: vec![LabPath {
                forward: c.forward,
                reverse: c.reverse,
                forward_seed: c.seed,
                reverse_seed: c.seed ^ REVERSE_SEED_MIX,
            }],
            name: c.name,
        }
    }
}
