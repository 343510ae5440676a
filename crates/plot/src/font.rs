//! The one font of every plot: DejaVu Sans embedded in the binary (assets/, licence beside
//! it), so text renders the same without system fonts.

use std::sync::Once;

use plotters::style::{register_font, FontStyle};

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

/// Registers the embedded DejaVu Sans as plotters' `sans-serif` (once per process); every
/// plot of the workspace calls it, so text renders the same without system fonts.
pub fn ensure_font() {
    REGISTER.call_once(|| {
        // The font is known-good; registration only fails on a corrupt file.
        let _ = register_font("sans-serif", FontStyle::Normal, FONT);
    });
}
