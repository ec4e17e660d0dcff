//! Executable and service versions and the installation identity.
//!
//! The installation identity names one installation: the canonical directory holding the
//! executables (`browser-pilot` and `bp` sit side by side) plus the version, hashed. The Broker
//! can tell "same version, other install" apart, and `bp disconnect` refuses to stop a Broker
//! that another installation started.

/// The version of this executable.
pub const EXECUTABLE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The version of the Broker service (same crate, same number).
pub const SERVICE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Version of the private bridge/CLI <-> Broker link. A Broker with another number is never
/// replaced; the caller gets `protocol_incompatible`.
pub const IPC_VERSION: u32 = 1;

/// A short stable id of the running executable file.
pub fn installation_id() -> String {
    let mut material = String::from(EXECUTABLE_VERSION);
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.canonicalize().ok())
        .and_then(|exe| exe.parent().map(|p| p.to_owned()))
    {
        material.push('|');
        material.push_str(&dir.to_string_lossy());
    }
    crate::hex::sha256(material.as_bytes())[..16].to_owned()
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    let elapsed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
}
