//! The local socket between bridge, CLI and Broker (interprocess: Unix sockets, Windows named
//! pipes): endpoint naming, owner-only permissions and the same-user check on accept. It moves
//! bytes; message semantics live in `framing` and `protocol`.

mod socket;

pub use socket::{IpcListener, IpcReader, IpcWriter, connect, listen};
