//! Executable and service versions and the installation identity.
//!
//! The installation identity names one installed executable file (its canonical path, size and
//! modification time, hashed), so the Broker can tell "same version, other install" apart and
//! `bp disconnect` can refuse to stop a Broker it did not start from the same install.

use ring::digest::{SHA256, digest};

/// The version of this executable.
pub const EXECUTABLE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The version of the Broker service (same crate, same number).
pub const SERVICE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Version of the private bridge/CLI <-> Broker link. A Broker with another number is never
/// replaced; the caller gets `protocol_incompatible`.
pub const IPC_VERSION: u32 = 1;

/// A short stable id of the running executable file.
pub fn installation_id() -> String {
    let mut material = String::new();
    if let Ok(exe) = std::env::current_exe() {
        let exe = exe.canonicalize().unwrap_or(exe);
        material.push_str(&exe.to_string_lossy());
        if let Ok(meta) = std::fs::metadata(&exe) {
            material.push_str(&format!("|{}", meta.len()));
            if let Ok(modified) = meta.modified().map(|m| m.duration_since(std::time::UNIX_EPOCH).unwrap_or_default()) {
                material.push_str(&format!("|{}", modified.as_nanos()));
            }
        }
    }
    let hash = digest(&SHA256, material.as_bytes());
    hash.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    let elapsed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
}
