//! Every agent-wire type: envelopes, ids, the error-code table, version negotiation, and the
//! method classification both bridge and Broker agree on. No I/O, no store, no CDP.

pub mod envelope;
pub mod errors;
pub mod ids;
pub mod internal;
pub mod methods;
pub mod negotiate;
pub mod redact;
pub mod remediation;
