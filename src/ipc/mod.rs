//! The local socket between bridge, CLI and Broker (interprocess: Unix sockets, Windows named
//! pipes): endpoint naming, owner-only permissions, the same-user check on accept and, on the
//! client side, the same-user check of the endpoint file and of the listening peer before
//! anything is sent. It moves bytes; message semantics live in `framing` and `protocol`.

mod socket;

pub use socket::{ConnectError, IpcListener, IpcReader, IpcWriter, Untrusted, connect, listen};
