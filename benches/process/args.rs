//! What the command line (criterion's arguments) tells the code outside criterion: `--quick`,
//! and which of the extra measurements (`latency`, `growth`) a filter selects.

/// `true` for `cargo bench -- --quick`.
pub(crate) fn quick_mode() -> bool {
    std::env::args().any(|arg| arg == "--quick")
}

/// Whether the measurement outside criterion named `name` (`latency`, `growth`) runs: not in
/// criterion's test or list modes, and, when a filter is given, only if `name` contains it.
///
/// The filter is the one positional argument criterion takes; values of criterion's options
/// that take one are skipped.
pub(crate) fn extra_selected(name: &str) -> bool {
    const WITH_VALUE: [&str; 13] = [
        "--sample-size",
        "--warm-up-time",
        "--measurement-time",
        "--nresamples",
        "--noise-threshold",
        "--confidence-level",
        "--significance-level",
        "--save-baseline",
        "--baseline",
        "--baseline-lenient",
        "--load-baseline",
        "--profile-time",
        "--format",
    ];
    let mut args = std::env::args().skip(1);
    let mut filter = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--test" | "--list" => return false,
            "--exact" | "--ignored" | "--bench" => {}
            flag if WITH_VALUE.contains(&flag) => {
                args.next();
            }
            flag if flag.starts_with('-') => {}
            positional => filter = Some(positional.to_owned()),
        }
    }
    filter.is_none_or(|filter| name.contains(&filter))
}
