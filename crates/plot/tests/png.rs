//! The numeric chart writes a PNG of the documented size, for data, for no data at all, and
//! fails (with an error, no panic) where it cannot write.

use std::path::{Path, PathBuf};

use aerotp_plot::{draw, Chart, Series};

fn png_size(path: &Path) -> (u32, u32) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let w = u32::from_be_bytes(b[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(b[20..24].try_into().unwrap());
    (w, h)
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("aerotp-plot-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn chart(series: Vec<Series>) -> Chart<'static> {
    Chart {
        title: "goodput",
        x_label: "BER",
        y_label: "Mb/s",
        series,
        y_from_zero: true,
        x_sci: true,
        legend_low: false,
    }
}

#[test]
fn draw_writes_a_1000_by_620_png_with_and_without_data() {
    let d = dir("chart");
    let series = vec![
        Series {
            name: "reliable".into(),
            points: vec![(0.0, 4.7), (1e-5, 4.6), (1e-4, 4.3)],
            peer: false,
        },
        Series {
            name: "ns-3 tcp".into(),
            points: vec![(0.0, 4.7), (1e-5, 1.1)],
            peer: true,
        },
    ];
    let p = d.join("lines.png");
    draw(&p, &chart(series)).unwrap();
    assert_eq!(png_size(&p), (1000, 620));
    // No points: the axes fall back to the unit square instead of infinite ranges.
    let p = d.join("empty.png");
    draw(&p, &chart(Vec::new())).unwrap();
    assert_eq!(png_size(&p), (1000, 620));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn draw_into_a_missing_directory_is_an_error() {
    let d = dir("missing");
    std::fs::remove_dir_all(&d).unwrap();
    let series = vec![Series {
        name: "a".into(),
        points: vec![(0.0, 1.0), (1.0, 2.0)],
        peer: false,
    }];
    assert!(draw(&d.join("x.png"), &chart(series)).is_err());
}
