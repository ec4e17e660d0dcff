//! The `Inspector` domain's two events that end a session: `Inspector.detached` and
//! `Inspector.targetCrashed`. Wire shapes only; the client actor fails the session's calls.

use serde::Deserialize;

use super::event::EventParams;

/// `Inspector.detached`: the session was detached (`reason` says why).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Detached {
    #[serde(default)]
    pub reason: String,
}

impl EventParams for Detached {
    const METHOD: &'static str = "Inspector.detached";
}

/// `Inspector.targetCrashed`: the session's renderer crashed.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TargetCrashed {}

impl EventParams for TargetCrashed {
    const METHOD: &'static str = "Inspector.targetCrashed";
}
