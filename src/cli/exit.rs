//! `bp`'s documented exit codes and the one mapping from a `data.code` to them.
//!
//! Owns the numbers (docs/cli.md lists them) and the reading of `BROWSER_PILOT_LOG`; it never
//! prints.

use crate::protocol::errors::ErrorCode;

pub const OK: i32 = 0;
/// A tool or lifecycle call failed (bad ref, navigation failed, unknown outcome, ...).
pub const TOOL_ERROR: i32 = 1;
/// Bad arguments (clap exits with 2 too).
pub const USAGE: i32 = 2;
/// No Broker runs for this home (`bp status`), or none could be started or reached. A Broker
/// endpoint that is refused as untrusted is a tool error (1): something is wrong, not absent.
pub const NO_BROKER: i32 = 3;
/// Another host holds what was needed: `bp disconnect` while hosts are connected, the tab is
/// controlled by another Lease past the wait, or the person at the live view took it over.
pub const IN_USE: i32 = 4;
/// No browser is ready or connected.
pub const NO_BROWSER: i32 = 5;

/// The exit code for a failed call.
pub fn for_code(code: ErrorCode) -> i32 {
    match code {
        ErrorCode::BrokerUnavailable => NO_BROKER,
        ErrorCode::BrokerInUse
        | ErrorCode::TargetControlledElsewhere
        | ErrorCode::HumanInControl => IN_USE,
        ErrorCode::BrowserNotReady
        | ErrorCode::BrowserDisconnected
        | ErrorCode::AuthorizationDenied
        | ErrorCode::AuthorizationTimeout => NO_BROWSER,
        // Invalid parameters reach the Broker only after clap accepted the arguments, so they
        // are the tool's verdict on this page (a ref out of range, no current tab).
        _ => TOOL_ERROR,
    }
}

/// The diagnostics level `BROWSER_PILOT_LOG` names (`error`, `warn`, `info`, `debug`, `trace`,
/// any case), `default` when it is unset or empty. A value that names no level is an error the
/// caller reports: `bp` and the CLI subcommands exit [`USAGE`]; the bridge, the Broker and the
/// janitor, which no person reads at once, warn once and use `default`.
pub fn log_level(default: tracing::Level) -> Result<tracing::Level, String> {
    match std::env::var("BROWSER_PILOT_LOG") {
        Err(_) => Ok(default),
        Ok(value) if value.trim().is_empty() => Ok(default),
        Ok(value) => value.trim().parse::<tracing::Level>().map_err(|_| {
            format!(
                "BROWSER_PILOT_LOG={value:?} is not a level: use error, warn, info, debug or trace"
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_documented_exits() {
        assert_eq!(for_code(ErrorCode::BrokerInUse), IN_USE);
        assert_eq!(for_code(ErrorCode::BrowserNotReady), NO_BROWSER);
        assert_eq!(for_code(ErrorCode::StaleRef), TOOL_ERROR);
        assert_eq!(for_code(ErrorCode::UnknownOutcome), TOOL_ERROR);
        assert_eq!(for_code(ErrorCode::BrokerUnavailable), NO_BROKER);
    }
}
