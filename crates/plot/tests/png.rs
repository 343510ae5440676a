//! The numeric chart writes a PNG of the documented size, for data, for no data at all, and
//! fails (with an error, no panic) where it cannot write.

use std::path::{Path, PathBuf};

use aerotp_plot::{draw, draw_rgb, Chart, Series};

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

/// Pixels of `rgb`'s colour in an RGB buffer.
fn count(buf: &[u8], rgb: (u8, u8, u8)) -> usize {
    buf.chunks_exact(3)
        .filter(|p| (p[0], p[1], p[2]) == rgb)
        .count()
}

fn rgb(i: usize) -> (u8, u8, u8) {
    let c = aerotp_plot::PALETTE[i];
    (c.0, c.1, c.2)
}

/// Two series with the same points (the loss plan's reliable and hybrid-nack-mack) must both
/// show: the later one used to be drawn exactly over the earlier, which vanished but for its
/// legend entry. Each keeps at least a third of the pixels it has when drawn without the other.
#[test]
fn a_series_drawn_over_an_identical_one_leaves_it_visible() {
    let pts = vec![
        (0.0, 4.8),
        (1.0, 4.7),
        (2.0, 4.5),
        (5.0, 4.2),
        (10.0, 3.7),
        (30.0, 3.1),
    ];
    let far: Vec<(f64, f64)> = pts.iter().map(|&(x, y)| (x, y - 3.0)).collect();
    let s = |name: &str, points: &Vec<(f64, f64)>| Series {
        name: name.into(),
        points: points.clone(),
        peer: false,
    };
    // Apart (the same axis ranges as together, thanks to a third, far-off series).
    let apart = draw_rgb(&chart(vec![s("reliable", &pts), s("x", &far)])).unwrap();
    let alone_first = count(&apart, rgb(0));
    let apart = draw_rgb(&chart(vec![s("x", &far), s("hybrid-nack-mack", &pts)])).unwrap();
    let alone_second = count(&apart, rgb(1));
    assert!(
        alone_first > 500 && alone_second > 500,
        "{alone_first} {alone_second}"
    );
    let together = draw_rgb(&chart(vec![
        s("reliable", &pts),
        s("hybrid-nack-mack", &pts),
        s("x", &far),
    ]))
    .unwrap();
    let (first, second) = (count(&together, rgb(0)), count(&together, rgb(1)));
    assert!(
        first * 3 >= alone_first,
        "the first series is hidden: {first} of its {alone_first} pixels show"
    );
    assert!(
        second * 3 >= alone_second,
        "the second series is hidden: {second} of its {alone_second} pixels show"
    );
}

#[test]
fn draw_rgb_gives_the_pixels_draw_writes() {
    let series = vec![Series {
        name: "a".into(),
        points: vec![(0.0, 1.0), (1.0, 2.0)],
        peer: false,
    }];
    let buf = draw_rgb(&chart(series)).unwrap();
    assert_eq!(buf.len(), 1000 * 620 * 3);
    assert!(count(&buf, rgb(0)) > 100);
}
