//! Unit tests of `config`.

use super::*;

fn mode(value: &str) -> Result<CpuTimeMode, String> {
    Config::from_toml(
        &format!("[run]\ntiming_thread_cpu = {value}\n"),
        Path::new("t.toml"),
    )
    .map(|c| c.run.timing_thread_cpu)
    .map_err(|e| e.to_string())
}

#[test]
fn timing_thread_cpu_takes_mode_names_and_the_old_booleans() {
    assert_eq!(mode("\"cycle\""), Ok(CpuTimeMode::Cycle));
    assert_eq!(mode("\"spans\""), Ok(CpuTimeMode::Spans));
    assert_eq!(mode("\"off\""), Ok(CpuTimeMode::Off));
    assert_eq!(mode("true"), Ok(CpuTimeMode::Spans));
    assert_eq!(mode("false"), Ok(CpuTimeMode::Off));
    // Absent: the default, per cycle.
    let c = Config::from_toml("[run]\n", Path::new("t.toml")).unwrap();
    assert_eq!(c.run.timing_thread_cpu, CpuTimeMode::Cycle);
    // The resolved config writes the name.
    let text = toml::to_string(&c).unwrap();
    assert!(text.contains("timing_thread_cpu = \"cycle\""), "{text}");
}

#[test]
fn a_config_without_a_toml_form_is_refused_not_hashed_as_empty() {
    // A seed above i64::MAX (possible from code, never from a TOML
    // file) has no TOML form: the config's text and hash would have
    // been "" and sha256(""), silently.
    let mut c = Config::default();
    assert!(c.to_toml().unwrap().contains("seed = "));
    c.run.seed = u64::MAX;
    let err = c.to_toml().unwrap_err().to_string();
    assert!(err.contains("cannot be written as TOML"), "{err}");
    assert!(matches!(c.validate(), Err(ConfigError::Unwritable { .. })));
}

#[test]
fn spin_margin_takes_microseconds_or_auto() {
    let c = Config::from_toml(
        "[scheduler]\nspin_margin_us = \"auto\"\n",
        Path::new("t.toml"),
    )
    .unwrap();
    assert_eq!(c.scheduler.spin_margin_us, SpinMargin::Auto);
    let sc = c.scheduler_config();
    // The first wait's margin is the default; then it adapts.
    assert!(sc.auto_margin);
    assert_eq!(sc.spin_margin_ns, DEFAULT_SPIN_MARGIN_NS);
    assert!(toml::to_string(&c)
        .unwrap()
        .contains("spin_margin_us = \"auto\""));
    let c = Config::from_toml("[scheduler]\nspin_margin_us = 350\n", Path::new("t.toml")).unwrap();
    let sc = c.scheduler_config();
    assert_eq!((sc.spin_margin_ns, sc.auto_margin), (350_000, false));
    let e = Config::from_toml(
        "[scheduler]\nspin_margin_us = \"fast\"\n",
        Path::new("t.toml"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("`fast` is not a spin margin"), "{e}");
    // A fixed margin above the ceiling is still refused.
    let e = Config::from_toml("[scheduler]\nspin_margin_us = 9000\n", Path::new("t.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("or \"auto\""), "{e}");
}

#[test]
fn a_bad_mode_names_the_file_and_the_choices() {
    let e = mode("\"per-span\"").unwrap_err();
    assert!(e.contains("t.toml"), "{e}");
    assert!(e.contains("`per-span` is not a CPU-time mode"), "{e}");
    assert!(e.contains("\"cycle\""), "{e}");
    let e = mode("3").unwrap_err();
    assert!(e.contains("\"spans\" or \"off\""), "{e}");
}

#[test]
fn the_default_spin_margin_follows_the_rate_a_file_sets() {
    // 5 kHz: a period of 200 µs, so the ceiling (half of it) is 100 µs and
    // the 200 µs default would be refused; unwritten, it is 100 µs.
    let c = Config::from_toml("[run]\nrate_hz = 5000\n", Path::new("t.toml")).unwrap();
    assert_eq!(c.scheduler.spin_margin_us, SpinMargin::Us(100.0));
    assert_eq!(c.scheduler_config().spin_margin_ns, 100_000);
    // At 100 Hz the default stays 200 µs.
    let c = Config::from_toml("[run]\n", Path::new("t.toml")).unwrap();
    assert_eq!(c.scheduler.spin_margin_us, SpinMargin::Us(200.0));
    // Written, it is checked as written, the ceiling rule in the message.
    let e = Config::from_toml(
        "[run]\nrate_hz = 5000\n[scheduler]\nspin_margin_us = 200\n",
        Path::new("t.toml"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("0 to 100 µs (half the period"), "{e}");
}
