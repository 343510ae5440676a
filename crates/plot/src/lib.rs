//! PNG line charts for the whole workspace (plotters, bitmap backend), drawn with one font
//! and one palette so every figure looks the same on every machine:
//!
//! * [`font`]: DejaVu Sans embedded in the binary (assets/), registered as `sans-serif`;
//! * [`palette`]: the line colours;
//! * [`chart`]: numeric x/y line charts with axis ranges from the data (the simulator's plans);
//! * [`category`]: lines over categorical x values and rate timelines with marks (the lab
//!   benches);
//! * [`timeseq`]: time-sequence charts of TPDU numbers against time (`aerotp trace`).

pub mod category;
pub mod chart;
pub mod font;
pub mod palette;
pub mod timeseq;

pub use category::{lines, xy};
pub use chart::{draw, draw_rgb, Chart, Series};
pub use font::ensure_font;
pub use palette::PALETTE;
pub use timeseq::{draw_timeseq, Mark, Marks, TimeSeq};
