//! Chart pieces the pages share, as inline SVG: round axes and their gridlines, and rows of
//! horizontal bars on one scale (each bar one or more stacked parts).

use std::fmt::Write as _;

use super::{Tips, esc, tip};

/// An axis for values up to `v`: (top, tick), the tick a round number giving 3 to 6
/// gridlines, the top a multiple of it.
pub fn axis(v: f64) -> (f64, f64) {
    let v = if v > 0.0 { v } else { 1.0 };
    let mag = 10f64.powf((v / 4.0).log10().floor());
    let tick = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|t| v / t <= 5.0)
        .unwrap_or(10.0 * mag);
    let round = |x: f64| (x * 1e9).round() / 1e9;
    (round((v / tick).ceil().max(1.0) * tick), round(tick))
}

/// Horizontal gridlines at each tick from 0 to `top`, labelled at the left of `x0`.
pub fn gridlines(
    o: &mut String,
    (top, tick): (f64, f64),
    (x0, x1): (f64, f64),
    (mt, ph): (f64, f64),
    unit: &str,
) {
    let ticks = (top / tick).round() as usize;
    for k in 0..=ticks {
        let v = tick * k as f64;
        let y = mt + ph - ph * v / top;
        let _ = write!(
            o,
            "<line x1=\"{x0}\" y1=\"{y:.1}\" x2=\"{x1:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{v:.2}{unit}</text>",
            x0 - 5.0,
            y + 4.0
        );
    }
}

/// One part of a horizontal bar.
#[derive(Debug, Clone)]
pub struct Part {
    pub value: f64,
    pub color: String,
    /// Said under the pointer.
    pub tip: String,
    /// The part's class (`hidden`, `exposed`), or empty.
    pub class: &'static str,
}

/// One row: its label at the left, its parts stacked from the left, a note after them.
#[derive(Debug, Clone, Default)]
pub struct Bar {
    pub label: String,
    pub parts: Vec<Part>,
    pub note: String,
    /// Attributes of the row's group, written as they are (` data-stage="..."`, escaped by the
    /// caller).
    pub attrs: String,
}

/// Rows of horizontal bars on one scale: `scale` is the value drawn `plot` pixels wide.
#[derive(Debug, Clone)]
pub struct HBars<'a> {
    /// The `<svg>`'s class and what it shows (its `aria-label`).
    pub class: &'a str,
    pub aria: &'a str,
    /// Pixels left of the bars, for the labels (right-aligned).
    pub label_width: f64,
    /// Pixels of the whole scale; the note's room after it is `note_width`.
    pub plot: f64,
    pub note_width: f64,
    /// Row pitch and bar height.
    pub row: f64,
    pub bar: f64,
    pub scale: f64,
    /// The narrowest a part is drawn (a change too small to see stays visible).
    pub min_width: f64,
    pub tips: Tips,
}

impl HBars<'_> {
    /// The chart of `bars`, one row each.
    pub fn draw(&self, o: &mut String, bars: &[Bar]) {
        let w = self.label_width + self.plot + self.note_width;
        let h = bars.len() as f64 * self.row + (self.row - self.bar);
        let _ = write!(
            o,
            "<svg class=\"{}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
            self.class,
            esc(self.aria)
        );
        let scale = if self.scale > 0.0 { self.scale } else { 1.0 };
        for (k, b) in bars.iter().enumerate() {
            let y = (self.row - self.bar) / 2.0 + k as f64 * self.row;
            let text_y = y + self.bar * 0.75;
            let _ = write!(
                o,
                "<g class=\"bar\"{}><text x=\"{:.1}\" y=\"{text_y:.1}\" text-anchor=\"end\">{}</text>",
                b.attrs,
                self.label_width - 8.0,
                esc(&b.label)
            );
            let mut x = self.label_width;
            for p in &b.parts {
                let pw = (p.value.max(0.0) / scale * self.plot).max(self.min_width);
                let class = if p.class.is_empty() {
                    String::new()
                } else {
                    format!("class=\"{}\" ", p.class)
                };
                let (attr, title) = tip(self.tips, &p.tip);
                let _ = write!(
                    o,
                    "<rect {class}x=\"{x:.1}\" y=\"{y:.1}\" width=\"{pw:.1}\" height=\"{}\" fill=\"{}\"{attr}>{title}</rect>",
                    self.bar, p.color
                );
                x += pw;
            }
            if !b.note.is_empty() {
                let _ = write!(
                    o,
                    "<text x=\"{:.1}\" y=\"{text_y:.1}\">{}</text>",
                    x + 6.0,
                    esc(&b.note)
                );
            }
            o.push_str("</g>");
        }
        o.push_str("</svg>\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_have_round_ticks() {
        assert_eq!(axis(0.14), (0.15, 0.05));
        assert_eq!(axis(12.0), (12.5, 2.5));
        assert_eq!(axis(0.0), (1.0, 0.2));
        let (top, tick) = axis(73.0);
        assert!(top >= 73.0 && (top / tick).round() <= 6.0, "{top} {tick}");
    }

    #[test]
    fn bars_share_one_scale_and_stack_their_parts() {
        let part = |value, class| Part {
            value,
            color: "#000".into(),
            tip: format!("{value} <x>"),
            class,
        };
        let chart = HBars {
            class: "c",
            aria: "a & b",
            label_width: 50.0,
            plot: 100.0,
            note_width: 40.0,
            row: 20.0,
            bar: 16.0,
            scale: 10.0,
            min_width: 0.0,
            tips: Tips::Title,
        };
        let mut o = String::new();
        chart.draw(
            &mut o,
            &[
                Bar {
                    label: "one".into(),
                    parts: vec![part(2.0, "hidden"), part(3.0, "exposed")],
                    note: "5".into(),
                    attrs: " data-stage=\"s1\"".into(),
                },
                Bar {
                    label: "two".into(),
                    parts: vec![part(10.0, "")],
                    ..Bar::default()
                },
            ],
        );
        assert_eq!(
            o,
            "<svg class=\"c\" width=\"190\" height=\"44\" viewBox=\"0 0 190 44\" role=\"img\" aria-label=\"a &amp; b\">\
<g class=\"bar\" data-stage=\"s1\"><text x=\"42.0\" y=\"14.0\" text-anchor=\"end\">one</text>\
<rect class=\"hidden\" x=\"50.0\" y=\"2.0\" width=\"20.0\" height=\"16\" fill=\"#000\"><title>2 &lt;x&gt;</title></rect>\
<rect class=\"exposed\" x=\"70.0\" y=\"2.0\" width=\"30.0\" height=\"16\" fill=\"#000\"><title>3 &lt;x&gt;</title></rect>\
<text x=\"106.0\" y=\"14.0\">5</text></g>\
<g class=\"bar\"><text x=\"42.0\" y=\"34.0\" text-anchor=\"end\">two</text>\
<rect x=\"50.0\" y=\"22.0\" width=\"100.0\" height=\"16\" fill=\"#000\"><title>10 &lt;x&gt;</title></rect></g></svg>\n"
        );
    }
}
