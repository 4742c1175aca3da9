//! Grouped bar charts (groups = scenarios, bars = modes) in PNG, in the
//! style of DPC Fig. 6-9, drawn with plotters' bitmap backend.
//!
//! Text needs a TrueType font: the first of [`FONT_CANDIDATES`] that
//! exists (or `$ONECOPY_BENCH_FONT`) is loaded at run time through
//! plotters' pure-Rust `ab_glyph` support. Without one, the charts are
//! drawn without any text (bars, axes, grid, legend swatches) and
//! report.md carries the labels.

use std::fs;
use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{register_font, FontStyle};

use super::model::fmt_value;

/// Fonts tried, in order.
pub const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    "/usr/share/fonts/noto/NotoSans-Regular.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
];

/// Loads a font once; true if text can be drawn.
pub fn font_ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        let env = std::env::var("ONECOPY_BENCH_FONT").ok();
        let paths = env
            .iter()
            .map(String::as_str)
            .chain(FONT_CANDIDATES.iter().copied());
        for p in paths {
            if let Ok(bytes) = fs::read(p) {
                let b: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if register_font("sans-serif", FontStyle::Normal, b).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

/// Colour of a mode's bars.
pub fn mode_color(mode: &str) -> RGBColor {
    match mode {
        "strong" => RGBColor(31, 119, 180),
        "relaxed" => RGBColor(255, 127, 14),
        "private" => RGBColor(120, 120, 120),
        "net" => RGBColor(148, 103, 189),
        "daxfs" => RGBColor(214, 39, 40),
        _ => RGBColor(44, 160, 44),
    }
}

/// A published value drawn as a black diamond: on the bar of one series
/// (`series: Some`), or in its own slot right of the group's bars.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// Group (x position).
    pub group: usize,
    /// Series whose bar it sits on; None: its own slot beside the bars.
    pub series: Option<usize>,
    /// The value.
    pub value: f64,
}

/// A grouped bar chart.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Bars {
    /// Title (first line).
    pub title: String,
    /// Second line (parameters, run).
    pub subtitle: String,
    /// Y axis: metric and unit.
    pub y_label: String,
    /// X axis title (what the groups are).
    pub x_label: String,
    /// Group labels (x axis).
    pub groups: Vec<String>,
    /// Series (one bar per group each), with their colours.
    pub series: Vec<(String, RGBColor)>,
    /// `values[group][series]`; None = n/a.
    pub values: Vec<Vec<Option<f64>>>,
    /// Published values drawn as markers (DPC's).
    pub markers: Vec<Marker>,
    /// Legend text of the markers.
    pub marker_label: String,
    /// Labels as ratios (`2.61x`) instead of plain values.
    pub ratio_labels: bool,
    /// Width in pixels (None: 960).
    pub width: Option<u32>,
}

/// Y axis.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scale {
    Linear { max: f64, step: f64 },
    Log { lo: f64, hi: f64 },
}

fn nice_step(range: f64, ticks: f64) -> f64 {
    let raw = range / ticks;
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    let nice = if n <= 1.0 {
        1.0
    } else if n <= 2.0 {
        2.0
    } else if n <= 2.5 {
        2.5
    } else if n <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn scale_for(values: &[f64]) -> Scale {
    let pos: Vec<f64> = values
        .iter()
        .copied()
        .filter(|v| *v > 0.0 && v.is_finite())
        .collect();
    if pos.is_empty() {
        return Scale::Linear {
            max: 1.0,
            step: 0.2,
        };
    }
    let max = pos.iter().copied().fold(f64::MIN, f64::max);
    let min = pos.iter().copied().fold(f64::MAX, f64::min);
    if max / min > 30.0 {
        Scale::Log {
            lo: 10f64.powf(min.log10().floor()),
            hi: 10f64.powf((max * 1.8).log10().ceil()),
        }
    } else {
        let step = nice_step(max * 1.15, 5.0);
        Scale::Linear {
            max: (max * 1.15 / step).ceil() * step,
            step,
        }
    }
}

impl Scale {
    /// Fraction 0..1 of the axis height for a value.
    fn frac(self, v: f64) -> f64 {
        match self {
            Scale::Linear { max, .. } => (v / max).clamp(0.0, 1.0),
            Scale::Log { lo, hi } => {
                if v <= lo {
                    0.0
                } else {
                    ((v.log10() - lo.log10()) / (hi.log10() - lo.log10())).clamp(0.0, 1.0)
                }
            }
        }
    }
    fn ticks(self) -> Vec<f64> {
        match self {
            Scale::Linear { max, step } => {
                let n = (max / step).round() as usize;
                (0..=n).map(|i| i as f64 * step).collect()
            }
            Scale::Log { lo, hi } => {
                let (a, b) = (lo.log10().round() as i32, hi.log10().round() as i32);
                (a..=b).map(|e| 10f64.powi(e)).collect()
            }
        }
    }
}

fn tick_label(v: f64) -> String {
    if v >= 1e6 && (v / 1e6).fract() == 0.0 {
        format!("{}M", v / 1e6)
    } else if v >= 1e3 && (v / 1e3).fract() == 0.0 {
        format!("{}k", v / 1e3)
    } else if v >= 1.0 || v == 0.0 {
        format!("{v}")
    } else {
        format!("{v:.3}").trim_end_matches('0').to_string()
    }
}

type DrawResult = Result<(), String>;

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

/// Text of a bar's value label.
fn value_label(v: f64, ratio: bool) -> String {
    if ratio {
        if v >= 10.0 {
            format!("{v:.1}x")
        } else {
            format!("{v:.2}x")
        }
    } else {
        fmt_value(v)
    }
}

/// Width and height in pixels of `s` at `size` (an estimate without a font).
fn text_size(s: &str, size: i32) -> (i32, i32) {
    let style = TextStyle::from(("sans-serif", size).into_font());
    if font_ready() {
        if let Ok((w, h)) = style.font.box_size(s) {
            return (w as i32, h as i32);
        }
    }
    (
        (s.chars().count() as f64 * f64::from(size) * 0.6).ceil() as i32,
        size,
    )
}

/// `s` in at most two lines of at most `width` pixels at `size` when a
/// break at a space makes it fit (else one line).
fn wrap2(s: &str, width: i32, size: i32) -> Vec<String> {
    if text_size(s, size).0 <= width {
        return vec![s.to_string()];
    }
    let mid = s.len() / 2;
    let best = s
        .char_indices()
        .filter(|(_, c)| *c == ' ')
        .map(|(i, _)| i)
        .min_by_key(|i| i.abs_diff(mid));
    match best {
        Some(i) => vec![s[..i].to_string(), s[i + 1..].to_string()],
        None => vec![s.to_string()],
    }
}

/// Legend entries laid out in rows within `width` pixels: (row, x offset)
/// of each entry of the given text widths.
pub fn legend_layout(text_widths: &[i32], width: i32) -> Vec<(usize, i32)> {
    let mut out = Vec::new();
    let (mut row, mut x) = (0usize, 0i32);
    for &tw in text_widths {
        let w = 22 + tw + 24;
        if x > 0 && x + w > width {
            row += 1;
            x = 0;
        }
        out.push((row, x));
        x += w;
    }
    out
}

/// Draws `b` into a PNG at `path`. Value labels are drawn only where they
/// fit the bar's width, so they never overlap; when some do not fit the
/// chart says that the values are in the report's tables. The legend
/// wraps onto as many rows as it needs.
pub fn draw(path: &Path, b: &Bars) -> DrawResult {
    let (w, h) = Frame::of(b).size();
    paint(BitMapBackend::new(path, (w, h)), b)
}

/// Draws `b` into an RGB buffer: (pixels, width, height).
pub fn draw_rgb(b: &Bars) -> Result<(Vec<u8>, u32, u32), String> {
    let (w, h) = Frame::of(b).size();
    let mut buf = vec![0u8; w as usize * h as usize * 3];
    paint(BitMapBackend::with_buffer(&mut buf, (w, h)), b)?;
    Ok((buf, w, h))
}

/// Where everything goes: the plot area, the legend's layout.
struct Frame {
    w_px: i32,
    x0: i32,
    x1: i32,
    y0: i32,
    y1: i32,
    legend: Vec<(String, Option<RGBColor>)>,
    lay: Vec<(usize, i32)>,
    xt_y: i32,
    ly0: i32,
    h_px: i32,
}

impl Frame {
    fn of(b: &Bars) -> Frame {
        let w_px = b.width.unwrap_or(960).clamp(400, 4000) as i32;
        let (x0, x1, y0) = (90, w_px - 20, 78);
        let y1 = y0 + 400;
        // Legend entries: the series, then the marker.
        let mut legend: Vec<(String, Option<RGBColor>)> = b
            .series
            .iter()
            .map(|(n, c)| (n.clone(), Some(*c)))
            .collect();
        if !b.markers.is_empty() {
            legend.push((b.marker_label.clone(), None));
        }
        let widths: Vec<i32> = legend.iter().map(|(n, _)| text_size(n, 14).0).collect();
        let lay = legend_layout(&widths, x1 - x0);
        let rows = lay.last().map_or(0, |l| l.0 + 1) as i32;
        // Group labels take up to two lines.
        let xt_y = y1 + 8 + 40;
        let ly0 = xt_y + 24;
        Frame {
            w_px,
            x0,
            x1,
            y0,
            y1,
            legend,
            lay,
            xt_y,
            ly0,
            h_px: ly0 + rows * 24 + 10,
        }
    }

    fn size(&self) -> (u32, u32) {
        (self.w_px as u32, self.h_px as u32)
    }
}

fn paint(backend: BitMapBackend, b: &Bars) -> DrawResult {
    let frame = Frame::of(b);
    let root = backend.into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut all: Vec<f64> = b.values.iter().flatten().filter_map(|v| *v).collect();
    all.extend(b.markers.iter().map(|m| m.value));
    let mut p = Painter {
        root,
        text: font_ready(),
        scale: scale_for(&all),
        f: frame,
        bw: 1,
        omitted: false,
    };
    p.axes(b)?;
    // Bars: one slot per series, plus one for the markers that have no
    // series of their own.
    let ng = b.groups.len().max(1) as i32;
    let own_slot = b.markers.iter().any(|m| m.series.is_none());
    let ns = b.series.len().max(1) as i32 + i32::from(own_slot);
    let gw = (p.f.x1 - p.f.x0) / ng;
    p.bw = ((gw * 8 / 10) / ns).max(1);
    for gi in 0..b.groups.len() {
        p.group(b, gi, gw)?;
    }
    if p.omitted {
        let (x1, y0) = (p.f.x1, p.f.y0);
        p.put(
            "values too narrow to label: see the report's tables",
            (x1, y0 - 8),
            12,
            (HPos::Right, VPos::Bottom),
            &DARK,
        )?;
    }
    p.legend()?;
    p.root.present().map_err(err)?;
    Ok(())
}

const GREY: RGBColor = RGBColor(220, 220, 220);
const DARK: RGBColor = RGBColor(40, 40, 40);

/// One chart being drawn: the area, the frame, the y scale, the width of
/// a bar's slot, and whether a value label was left out for lack of room.
struct Painter<'a> {
    root: DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>,
    text: bool,
    scale: Scale,
    f: Frame,
    bw: i32,
    omitted: bool,
}

impl Painter<'_> {
    /// The pixel row of value `v`.
    fn ypix(&self, v: f64) -> i32 {
        self.f.y1 - ((self.f.y1 - self.f.y0) as f64 * self.scale.frac(v)).round() as i32
    }

    /// Text at `at`, anchored at `pos` (nothing without a font).
    fn put(
        &self,
        s: &str,
        at: (i32, i32),
        size: i32,
        pos: (HPos, VPos),
        c: &RGBColor,
    ) -> DrawResult {
        if !self.text || s.is_empty() {
            return Ok(());
        }
        let font = ("sans-serif", size).into_font();
        let style = TextStyle::from(font).color(c).pos(Pos::new(pos.0, pos.1));
        self.root
            .draw(&Text::new(s.to_string(), at, style))
            .map_err(err)
    }

    /// A label fits its slot: it can then overlap no other label.
    fn fits(&self, s: &str) -> bool {
        text_size(s, 12).0 + 2 <= self.bw
    }

    /// Grid, y ticks, axes, titles.
    fn axes(&self, b: &Bars) -> DrawResult {
        let Frame {
            w_px,
            x0,
            x1,
            y0,
            y1,
            xt_y,
            ..
        } = self.f;
        for t in self.scale.ticks() {
            let y = self.ypix(t);
            self.root
                .draw(&PathElement::new(vec![(x0, y), (x1, y)], GREY))
                .map_err(err)?;
            self.put(
                &tick_label(t),
                (x0 - 6, y),
                13,
                (HPos::Right, VPos::Center),
                &DARK,
            )?;
        }
        self.root
            .draw(&PathElement::new(vec![(x0, y0), (x0, y1), (x1, y1)], DARK))
            .map_err(err)?;
        self.put(
            &b.title,
            (w_px / 2, 8),
            20,
            (HPos::Center, VPos::Top),
            &BLACK,
        )?;
        self.put(
            &b.subtitle,
            (w_px / 2, 34),
            13,
            (HPos::Center, VPos::Top),
            &DARK,
        )?;
        let ylab = match self.scale {
            Scale::Log { .. } => format!("{} - log scale", b.y_label),
            Scale::Linear { .. } => b.y_label.clone(),
        };
        self.put(&ylab, (x0, y0 - 8), 13, (HPos::Left, VPos::Bottom), &DARK)?;
        self.put(
            &b.x_label,
            ((x0 + x1) / 2, xt_y),
            13,
            (HPos::Center, VPos::Top),
            &DARK,
        )
    }

    /// Group `gi` (its slot `gw` pixels wide): its label, its bars and its
    /// markers.
    fn group(&mut self, b: &Bars, gi: usize, gw: i32) -> DrawResult {
        let (x0, y1) = (self.f.x0, self.f.y1);
        let gx = x0 + gi as i32 * gw + gw / 10;
        for (li, line) in wrap2(&b.groups[gi], gw - 4, 15).iter().enumerate() {
            let at = (x0 + gi as i32 * gw + gw / 2, y1 + 8 + li as i32 * 18);
            self.put(line, at, 15, (HPos::Center, VPos::Top), &BLACK)?;
        }
        for (si, (_, color)) in b.series.iter().enumerate() {
            let on_marker = b
                .markers
                .iter()
                .any(|m| m.group == gi && m.series == Some(si));
            let v = b.values.get(gi).and_then(|r| r.get(si)).copied().flatten();
            self.bar(
                gx + si as i32 * self.bw,
                v,
                color,
                on_marker,
                b.ratio_labels,
            )?;
        }
        for m in b.markers.iter().filter(|m| m.group == gi) {
            let slot = m.series.map_or(b.series.len() as i32, |s| s as i32);
            self.marker(gx + slot * self.bw + self.bw / 2, m.value, b.ratio_labels)?;
        }
        Ok(())
    }

    /// One bar at `bx` with its value label (unless a marker sits on it);
    /// n/a is an outline only, and the word where it fits.
    fn bar(
        &mut self,
        bx: i32,
        v: Option<f64>,
        color: &RGBColor,
        on_marker: bool,
        ratio: bool,
    ) -> DrawResult {
        let (bw, y1) = (self.bw, self.f.y1);
        let (x_a, x_b) = (bx + 1.min(bw / 4) + 1, (bx + bw - 2).max(bx + 2));
        let Some(v) = v else {
            self.root
                .draw(&Rectangle::new(
                    [(x_a, y1 - 6), (x_b, y1)],
                    ShapeStyle::from(&GREY).stroke_width(1),
                ))
                .map_err(err)?;
            if !self.fits("n/a") {
                self.omitted = true;
                return Ok(());
            }
            return self.put(
                "n/a",
                (bx + bw / 2, y1 - 8),
                12,
                (HPos::Center, VPos::Bottom),
                &RED,
            );
        };
        let top = if v > 0.0 {
            self.ypix(v).min(y1 - 1)
        } else {
            y1
        };
        if v > 0.0 {
            self.root
                .draw(&Rectangle::new([(x_a, top), (x_b, y1)], color.filled()))
                .map_err(err)?;
        }
        let l = value_label(v, ratio);
        if !self.fits(&l) || on_marker {
            self.omitted = true;
            return Ok(());
        }
        self.put(
            &l,
            (bx + bw / 2, top - 3),
            12,
            (HPos::Center, VPos::Bottom),
            &DARK,
        )
    }

    /// A published value: a line across the slot centred at `cx` and a
    /// diamond, with its label where it fits.
    fn marker(&mut self, cx: i32, value: f64, ratio: bool) -> DrawResult {
        let bw = self.bw;
        let cy = self.ypix(value);
        let r = (bw / 2 - 1).clamp(3, 7);
        self.root
            .draw(&PathElement::new(
                vec![(cx - bw / 2 + 1, cy), (cx + bw / 2 - 1, cy)],
                BLACK.stroke_width(2),
            ))
            .map_err(err)?;
        self.root
            .draw(&Polygon::new(
                vec![(cx, cy - r), (cx + r, cy), (cx, cy + r), (cx - r, cy)],
                BLACK.filled(),
            ))
            .map_err(err)?;
        let l = value_label(value, ratio);
        if !self.fits(&l) {
            self.omitted = true;
            return Ok(());
        }
        self.put(
            &l,
            (cx, cy - r - 2),
            12,
            (HPos::Center, VPos::Bottom),
            &BLACK,
        )
    }

    /// The legend, wrapped: a swatch per series, a diamond for markers.
    fn legend(&self) -> DrawResult {
        for ((name, color), (row, dx)) in self.f.legend.iter().zip(&self.f.lay) {
            let lx = self.f.x0 + dx;
            let ly = self.f.ly0 + *row as i32 * 24;
            match color {
                Some(c) => {
                    self.root
                        .draw(&Rectangle::new([(lx, ly), (lx + 16, ly + 16)], c.filled()))
                        .map_err(err)?;
                }
                None => {
                    self.root
                        .draw(&Polygon::new(
                            vec![
                                (lx + 8, ly + 1),
                                (lx + 15, ly + 8),
                                (lx + 8, ly + 15),
                                (lx + 1, ly + 8),
                            ],
                            BLACK.filled(),
                        ))
                        .map_err(err)?;
                }
            }
            self.put(
                name,
                (lx + 22, ly + 8),
                14,
                (HPos::Left, VPos::Center),
                &BLACK,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
