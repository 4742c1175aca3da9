use super::*;

#[test]
fn scales() {
    match scale_for(&[1.0, 50.0]) {
        Scale::Log { lo, hi } => {
            assert_eq!(lo, 1.0);
            assert_eq!(hi, 100.0);
        }
        s => panic!("{s:?}"),
    }
    match scale_for(&[10.0, 40.0]) {
        Scale::Linear { max, step } => {
            assert!((46.0..=60.0).contains(&max), "{max}");
            assert_eq!(step, 10.0);
        }
        s => panic!("{s:?}"),
    }
    assert_eq!(
        scale_for(&[]),
        Scale::Linear {
            max: 1.0,
            step: 0.2
        }
    );
    assert_eq!(tick_label(1000.0), "1k");
    assert_eq!(tick_label(0.01), "0.01");
    assert_eq!(tick_label(2.5), "2.5");
    let colours: Vec<RGBColor> = crate::bench::opts::MODES
        .iter()
        .map(|m| mode_color(m))
        .collect();
    for (i, c) in colours.iter().enumerate() {
        assert!(!colours[i + 1..].contains(c), "two modes share a colour");
    }
}

#[test]
fn draws_a_png_with_gaps() {
    let dir = crate::unique_run_dir("bench-plot-unit").unwrap();
    let path = dir.join("t.png");
    let b = Bars {
        title: "t".into(),
        subtitle: "s".into(),
        y_label: "us".into(),
        groups: vec!["CM".into(), "CM-R".into()],
        series: vec![
            ("strong".into(), mode_color("strong")),
            ("private".into(), mode_color("private")),
        ],
        values: vec![vec![Some(300.0), Some(310.0)], vec![Some(2.0), None]],
        ..Bars::default()
    };
    draw(&path, &b).unwrap();
    let bytes = fs::read(&path).unwrap();
    assert_eq!(&bytes[1..4], b"PNG");
    fs::remove_dir_all(&dir).unwrap();
}

/// Fig. 10 has 12 series (4 modes x N = 1, 2, 4): every one must be
/// in the legend, which once stopped after the seventh.
#[test]
fn the_legend_shows_every_series() {
    let mut series = Vec::new();
    for (i, m) in ["strong", "relaxed", "private", "net"].iter().enumerate() {
        for (k, n) in [1, 2, 4].iter().enumerate() {
            let c = RGBColor(10 + 60 * i as u8, 20 + 70 * k as u8, 200 - 40 * i as u8);
            series.push((format!("{m} N={n}"), c));
        }
    }
    let b = Bars {
        title: "t".into(),
        groups: vec!["kv".into(), "ann".into()],
        values: vec![vec![None; 12]; 2],
        series: series.clone(),
        markers: vec![Marker {
            group: 1,
            series: Some(4),
            value: 2.8,
        }],
        marker_label: "DPC".into(),
        ..Bars::default()
    };
    let (px, w, h) = draw_rgb(&b).unwrap();
    assert_eq!(px.len(), w as usize * h as usize * 3);
    let has = |c: RGBColor| px.chunks(3).any(|p| p == [c.0, c.1, c.2]);
    for (name, c) in &series {
        assert!(has(*c), "{name} is missing from the legend");
    }
}

#[test]
fn legend_rows_stay_within_the_width() {
    let lay = legend_layout(&[80; 12], 850);
    assert!(lay.iter().all(|(_, x)| x + 22 + 80 + 24 <= 850));
    assert!(lay.last().unwrap().0 >= 1, "12 entries need two rows");
    assert_eq!(lay[0], (0, 0));
    assert_eq!(legend_layout(&[], 850), vec![]);
}

#[test]
fn labels_only_where_they_fit() {
    assert_eq!(value_label(2.5, true), "2.50x");
    assert_eq!(value_label(72.8, true), "72.8x");
    assert_eq!(value_label(1234.0, false), "1234");
    assert_eq!(wrap2("short", 500, 15), vec!["short".to_string()]);
    let two = wrap2("mmap write CH-R latency (baseline: libaio)", 120, 15);
    assert_eq!(two.len(), 2);
}
