//! Typed raw CDP identifiers. They are crate-internal: the agent protocol
//! speaks its own opaque `target:` ids, so these types deliberately implement
//! `Deserialize` (to read CDP replies) but not `Serialize`, which keeps them
//! from being put into a protocol response by accident. This file owns
//! nothing else.

use std::fmt;

use serde::Deserialize;

/// A flattened CDP session id (`sessionId` on the top-level message).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(transparent)]
pub struct SessionId(String);

/// A CDP target id (`targetId` in `TargetInfo`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(transparent)]
pub struct TargetId(String);

/// A browser context id (`browserContextId`): a context made by `Target.createBrowserContext`
/// (its own cookies, storage and cache) or the profile's default one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(transparent)]
pub struct BrowserContextId(String);

impl BrowserContextId {
    /// Wraps a raw browser context id read from CDP.
    pub fn new(raw: impl Into<String>) -> BrowserContextId {
        BrowserContextId(raw.into())
    }

    /// The raw id, for building CDP messages only.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for BrowserContextId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl SessionId {
    /// Wraps a raw session id read from CDP.
    pub fn new(raw: impl Into<String>) -> SessionId {
        SessionId(raw.into())
    }

    /// The raw id, for building CDP messages only.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TargetId {
    /// Wraps a raw target id read from CDP.
    pub fn new(raw: impl Into<String>) -> TargetId {
        TargetId(raw.into())
    }

    /// The raw id, for building CDP messages only.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for TargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
