//! The local socket between bridge, CLI and Broker (interprocess: Unix sockets, Windows named
//! pipes): endpoint naming, owner-only permissions, the same-user check on accept and, on the
//! client side, the same-user check of the endpoint file and of the listening peer before
//! anything is sent; and the client side of the private handshake (`handshake`), shared by the
//! bridge and `bp`. It moves bytes; message semantics live in `framing` and `protocol`.

mod handshake;
mod socket;

pub use handshake::{HandshakeError, Linked, Patience, connect_patiently, handshake, hello};

pub use socket::{
    ConnectError, IpcListener, IpcReader, IpcWriter, Resource, Untrusted, connect,
    exhausted_resource, listen,
};
