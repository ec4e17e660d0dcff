//! The CDP pipe's framing: each message is one JSON text followed by a NUL byte, both ways
//! (fd 3 into the browser, fd 4 out of it). Reading is bounded: a message longer than the limit
//! is skipped up to its NUL, never buffered whole. Knows nothing of CDP.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Why the next message could not be read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Frame {
    /// One message (without its NUL).
    Message(Vec<u8>),
    /// A message longer than the limit was skipped.
    Skipped,
    /// End of input.
    End,
}

/// Reads the next NUL-terminated message of at most `max` bytes. A final message without its
/// NUL at end of input is dropped (the writer died mid-message).
pub(super) async fn next_frame<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Frame> {
    buf.clear();
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(Frame::End);
        }
        let (chunk, found) = match available.iter().position(|&b| b == 0) {
            Some(end) => (&available[..end], Some(end + 1)),
            None => (available, None),
        };
        if too_long || buf.len() + chunk.len() > max {
            too_long = true;
            buf.clear();
        } else {
            buf.extend_from_slice(chunk);
        }
        let consumed = found.unwrap_or(available.len());
        reader.consume(consumed);
        if found.is_some() {
            return Ok(match too_long {
                true => Frame::Skipped,
                false => Frame::Message(std::mem::take(buf)),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn messages_split_on_nul_and_long_ones_are_skipped() {
        let input: &[u8] = b"{\"id\":1}\0{\"id\":2,\"x\":\"0123456789\"}\0{\"id\":3}\0{\"cut";
        let mut reader = tokio::io::BufReader::with_capacity(4, input);
        let mut buf = Vec::new();
        let mut got = Vec::new();
        loop {
            match next_frame(&mut reader, &mut buf, 12).await.unwrap() {
                Frame::End => break,
                frame => got.push(frame),
            }
        }
        assert_eq!(
            got,
            [
                Frame::Message(b"{\"id\":1}".to_vec()),
                Frame::Skipped,
                Frame::Message(b"{\"id\":3}".to_vec()),
            ]
        );
    }
}
