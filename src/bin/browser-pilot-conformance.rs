//! The `browser-pilot-conformance` executable: the black-box stdio runner as
//! a standalone command. All logic lives in `browser_pilot::conformance`;
//! this file only forwards the process arguments and exit status.

fn main() {
    std::process::exit(browser_pilot::conformance::run_cli(
        std::env::args_os().collect(),
    ));
}
