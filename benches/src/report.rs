//! Reading criterion's saved results back, formatting them, publishing the report.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

// ---------------------------------------------------------------------------
// Reading criterion's results back
// ---------------------------------------------------------------------------

/// Cargo's target directory: `$CARGO_TARGET_DIR` if set, otherwise the
/// nearest ancestor of the running bench executable named `target`
/// (benches run from `<target>/<profile>/deps/`).
pub fn target_dir() -> PathBuf {
    if let Some(dir) = env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    let exe = env::current_exe().unwrap_or_default();
    exe.ancestors()
        .find(|dir| dir.file_name().is_some_and(|name| name == "target"))
        .map(Path::to_path_buf)
        // A renamed target dir: `<target>/<profile>/deps/<exe>`.
        .or_else(|| exe.ancestors().nth(3).map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// Where criterion stores its results, resolved the way criterion does:
/// `$CRITERION_HOME`, else `<target>/criterion`.
pub fn criterion_dir() -> PathBuf {
    env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("criterion"))
}

/// Median time per iteration, in nanoseconds, of benchmark `group/function`
/// as saved by criterion, provided it was saved at or after `since`.
///
/// `None` if the benchmark did not run in this process (filtered out, test
/// or list mode, or `--baseline`/`--load-baseline` runs that save nothing):
/// an older file would silently mix stale numbers into a fresh table.
pub fn median_ns(group: &str, function: &str, since: SystemTime) -> Option<f64> {
    let path = criterion_dir()
        .join(group)
        .join(function)
        .join("new")
        .join("estimates.json");
    let modified = fs::metadata(&path).and_then(|meta| meta.modified()).ok()?;
    if modified < since {
        return None;
    }
    let parsed = fs::read(&path)
        .map_err(|err| err.to_string())
        .and_then(|bytes| {
            serde_json::from_slice::<serde_json::Value>(&bytes).map_err(|err| err.to_string())
        });
    let estimate = parsed.as_ref().ok().and_then(|json| {
        json.pointer("/median/point_estimate")
            .and_then(serde_json::Value::as_f64)
    });
    if estimate.is_none() {
        eprintln!(
            "warning: no median.point_estimate in {} ({})",
            path.display(),
            parsed.err().unwrap_or_else(|| "field missing".to_owned()),
        );
    }
    estimate
}

/// Formats a duration given in nanoseconds with a unit that keeps 3-4
/// significant digits: `812 ns`, `12.40 µs`, `3.07 ms`, `1.25 s`.
pub fn format_ns(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// Formats an optional measurement for a table cell (`—` when missing).
pub fn format_cell(ns: Option<f64>) -> String {
    ns.map_or_else(|| "—".to_owned(), format_ns)
}

/// `numerator / denominator` to two decimals, or `—` if either is missing.
pub fn format_ratio(numerator: Option<f64>, denominator: Option<f64>) -> String {
    match (numerator, denominator) {
        (Some(n), Some(d)) if d > 0.0 => format!("{:.2}", n / d),
        _ => "—".to_owned(),
    }
}

/// Prints `markdown` to stdout and writes it to `<target>/<file_name>`.
pub fn publish_report(file_name: &str, markdown: &str) {
    println!("\n{markdown}");
    let path = target_dir().join(file_name);
    match fs::write(&path, markdown) {
        Ok(()) => println!("(written to {})", path.display()),
        Err(err) => eprintln!("warning: could not write {}: {err}", path.display()),
    }
}

/// Formats a rate (or any count) with an SI prefix and 3-4 significant digits: `812`,
/// `12.40 k`, `3.07 M`, `1.25 G`.
pub fn format_si(value: f64) -> String {
    if value < 1e3 {
        format!("{value:.0}")
    } else if value < 1e6 {
        format!("{:.2} k", value / 1e3)
    } else if value < 1e9 {
        format!("{:.2} M", value / 1e6)
    } else {
        format!("{:.2} G", value / 1e9)
    }
}
