//! Values and text built from a row's metrics: `goodput_bps/1e6`, `{setup_delay_s*1e3:.3} ms`.
//!
//! A plan names what to show as data, never as code: an *expression* is a metric name (any
//! numeric key of a summary, `x`, or `set.KEY` for a swept setting) optionally scaled by one
//! `*N` or `/N`; a *template* is text with `{EXPR[:FORMAT]}` placeholders. Formats: none
//! (Rust's shortest exact form, as the CSVs use), `.N` (N decimals), `e` (Rust's `{:e}`,
//! `0e0` for zero) and `sci` (like `e` but zero is `0`). A missing value (a run that never
//! set up has no set-up delay) shows as `-` in templates and as an empty CSV cell.

use std::fmt;

/// What a value is looked up in.
pub trait Lookup {
    /// The number named `name`, if the row has one.
    fn number(&self, name: &str) -> Option<f64>;
    /// Text named `name` (e.g. `series`), if any.
    fn text(&self, _name: &str) -> Option<String> {
        None
    }
}

/// A metric with an optional scale: `NAME`, `NAME*F` or `NAME/F`.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub name: String,
    scale: Scale,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Scale {
    None,
    Mul(f64),
    Div(f64),
}

impl Expr {
    /// Parses `NAME`, `NAME*F` or `NAME/F`; the error says what is accepted.
    pub fn parse(s: &str) -> Result<Expr, String> {
        let s = s.trim();
        let bad = |why: &str| {
            format!("{s:?} {why}: give a metric name, optionally `*NUMBER` or `/NUMBER` (e.g. goodput_bps/1e6)")
        };
        let (name, scale) = match s.find(['*', '/']) {
            Some(i) => {
                let f: f64 = s[i + 1..]
                    .trim()
                    .parse()
                    .map_err(|_| bad("has no number after the operator"))?;
                if !f.is_finite() || f == 0.0 {
                    return Err(bad("scales by zero or a non-finite number"));
                }
                let scale = if &s[i..=i] == "*" {
                    Scale::Mul(f)
                } else {
                    Scale::Div(f)
                };
                (s[..i].trim(), scale)
            }
            None => (s, Scale::None),
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.[]-".contains(c))
        {
            return Err(bad("is not a metric name"));
        }
        Ok(Expr {
            name: name.to_owned(),
            scale,
        })
    }

    /// The value for `row`, scaled; None if the row has no such number.
    pub fn eval(&self, row: &dyn Lookup) -> Option<f64> {
        let v = row.number(&self.name)?;
        Some(match self.scale {
            Scale::None => v,
            Scale::Mul(f) => v * f,
            Scale::Div(f) => v / f,
        })
    }
}

/// How a number is written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Format {
    /// Rust's `{}`: the shortest text that reads back exactly.
    Plain,
    Decimals(usize),
    /// Rust's `{:e}`.
    Exp,
    /// `{:e}`, but zero is `0`.
    Sci,
}

impl Format {
    pub fn parse(s: &str) -> Result<Format, String> {
        match s {
            "" => Ok(Format::Plain),
            "e" => Ok(Format::Exp),
            "sci" => Ok(Format::Sci),
            _ => s
                .strip_prefix('.')
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|&n| n <= 12)
                .map(Format::Decimals)
                .ok_or_else(|| {
                    format!("format {s:?} is not known: give .N (0-12 decimals), e or sci")
                }),
        }
    }

    pub fn write(self, v: f64) -> String {
        match self {
            Format::Plain => format!("{v}"),
            Format::Decimals(n) => format!("{v:.n$}"),
            Format::Exp => format!("{v:e}"),
            Format::Sci if v == 0.0 => "0".into(),
            Format::Sci => format!("{v:e}"),
        }
    }
}

/// `EXPR[:FORMAT]`: one value, formatted.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub expr: Expr,
    pub format: Format,
}

impl Field {
    pub fn parse(s: &str) -> Result<Field, String> {
        let (e, f) = s.split_once(':').unwrap_or((s, ""));
        Ok(Field {
            expr: Expr::parse(e)?,
            format: Format::parse(f.trim())?,
        })
    }

    /// The formatted value, or None when the row lacks it.
    pub fn render(&self, row: &dyn Lookup) -> Option<String> {
        if let Some(t) = row.text(&self.expr.name) {
            return Some(t);
        }
        self.expr.eval(row).map(|v| self.format.write(v))
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Field(Field),
}

/// Text with `{EXPR[:FORMAT]}` placeholders; `{{` and `}}` are literal braces.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pieces: Vec<Piece>,
}

impl Template {
    pub fn parse(s: &str) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut chars = s.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '{' if chars.peek().map(|p| p.1) == Some('{') => {
                    chars.next();
                    text.push('{');
                }
                '}' if chars.peek().map(|p| p.1) == Some('}') => {
                    chars.next();
                    text.push('}');
                }
                '{' => {
                    let rest = &s[i + 1..];
                    let end = rest
                        .find('}')
                        .ok_or_else(|| format!("{s:?} has a `{{` without its `}}`"))?;
                    let field = Field::parse(&rest[..end]).map_err(|e| format!("in {s:?}: {e}"))?;
                    if !text.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut text)));
                    }
                    pieces.push(Piece::Field(field));
                    for _ in 0..rest[..=end].chars().count() {
                        chars.next();
                    }
                }
                '}' => return Err(format!("{s:?} has a `}}` without its `{{` (write `}}}}`)")),
                _ => text.push(c),
            }
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(Template { pieces })
    }

    /// The text for `row`; a missing value is `-`.
    pub fn render(&self, row: &dyn Lookup) -> String {
        let mut s = String::new();
        for p in &self.pieces {
            match p {
                Piece::Text(t) => s += t,
                Piece::Field(f) => s += &f.render(row).unwrap_or_else(|| "-".into()),
            }
        }
        s
    }

    /// Every metric the template reads.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Field(f) => Some(f.expr.name.as_str()),
            Piece::Text(_) => None,
        })
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.scale {
            Scale::None => write!(f, "{}", self.name),
            Scale::Mul(k) => write!(f, "{}*{k}", self.name),
            Scale::Div(k) => write!(f, "{}/{k}", self.name),
        }
    }
}

/// A lookup over a list of (name, value) pairs and named texts; for facets and headers.
#[derive(Debug, Default)]
pub struct Vars {
    pub numbers: Vec<(String, f64)>,
    pub texts: Vec<(String, String)>,
}

impl Lookup for Vars {
    fn number(&self, name: &str) -> Option<f64> {
        self.numbers.iter().find(|(n, _)| n == name).map(|p| p.1)
    }
    fn text(&self, name: &str) -> Option<String> {
        self.texts
            .iter()
            .find(|(n, _)| n == name)
            .map(|p| p.1.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars {
        Vars {
            numbers: vec![
                ("goodput_bps".into(), 4_529_123.0),
                ("x".into(), 0.0),
                ("ber".into(), 1e-4),
                ("runs".into(), 20.0),
            ],
            texts: vec![("series".into(), "reliable".into())],
        }
    }

    #[test]
    fn templates_render_scaled_formatted_and_missing_values() {
        let t = Template::parse(
            "{series}: {goodput_bps/1e6:.3} Mb/s, {setup_delay_s*1e3:.1} ms, {{n}} {runs}",
        )
        .unwrap();
        assert_eq!(t.render(&vars()), "reliable: 4.529 Mb/s, - ms, {n} 20");
        let t = Template::parse("{x:sci} {x:e} {ber:sci} {ber:e} {ber}").unwrap();
        assert_eq!(t.render(&vars()), "0 0e0 1e-4 1e-4 0.0001");
        assert_eq!(
            Template::parse("{x*100:.0} %").unwrap().render(&vars()),
            "0 %"
        );
    }

    #[test]
    fn bad_templates_say_what_is_accepted() {
        for (bad, says) in [
            ("{goodput", "without its `}`"),
            ("a } b", "without its `{`"),
            ("{goodput:.x}", "give .N"),
            ("{goodput/0}", "zero"),
            ("{goodput*abc}", "no number"),
            ("{good put}", "not a metric name"),
            ("{}", "not a metric name"),
        ] {
            let e = Template::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
