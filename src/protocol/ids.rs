//! Opaque, prefixed identifiers and cursors.
//!
//! Owns how ids are minted (`workspace:` + 128 random bits in hex) and how `cursor:N` is written
//! and read. Knows nothing of what the ids point at.

use ring::rand::{SecureRandom, SystemRandom};

/// The id kinds of the wire. The prefix is part of the public contract (DESIGN.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    Workspace,
    ManagedTabSet,
    Lease,
    Target,
    Command,
    Observation,
    Artifact,
    Event,
    Dialog,
    Frame,
    Download,
    Connection,
    Broker,
    Request,
    Rule,
    Handoff,
}

impl IdKind {
    pub fn prefix(self) -> &'static str {
        match self {
            IdKind::Workspace => "workspace:",
            IdKind::ManagedTabSet => "tabset:",
            IdKind::Lease => "lease:",
            IdKind::Target => "target:",
            IdKind::Command => "command:",
            IdKind::Observation => "observation:",
            IdKind::Artifact => "artifact:",
            IdKind::Event => "event:",
            IdKind::Dialog => "dialog:",
            IdKind::Frame => "frame:",
            IdKind::Download => "download:",
            IdKind::Connection => "connection:",
            IdKind::Broker => "broker:",
            IdKind::Request => "request:",
            IdKind::Rule => "rule:",
            IdKind::Handoff => "handoff:",
        }
    }
}

/// A fresh unguessable id of the given kind: prefix + 32 hex digits.
pub fn new_id(kind: IdKind) -> String {
    let mut bytes = [0u8; 16];
    SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system random source is available");
    format!("{}{}", kind.prefix(), crate::hex::encode(&bytes))
}

/// `cursor:N`, where N is the sequence of the last event the holder has processed.
pub fn format_cursor(sequence: u64) -> String {
    format!("cursor:{sequence}")
}

/// The inverse of [`format_cursor`]; `None` for anything else.
pub fn parse_cursor(cursor: &str) -> Option<u64> {
    let digits = cursor.strip_prefix("cursor:")?;
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_and_distinct() {
        let a = new_id(IdKind::Workspace);
        let b = new_id(IdKind::Workspace);
        assert!(a.starts_with("workspace:") && a.len() == "workspace:".len() + 32);
        let hex = &a["workspace:".len()..];
        assert!(
            hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
            "{a}"
        );
        assert_ne!(a, b);
    }

    #[test]
    fn cursor_round_trip_and_rejects() {
        assert_eq!(parse_cursor(&format_cursor(0)), Some(0));
        assert_eq!(parse_cursor("cursor:42"), Some(42));
        for bad in [
            "cursor:",
            "cursor:-1",
            "cursor:01",
            "cursor:1a",
            "42",
            "cursor: 1",
            "cursor:99999999999999999999",
        ] {
            assert_eq!(parse_cursor(bad), None, "{bad}");
        }
    }
}
