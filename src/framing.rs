//! Newline-delimited messages over any `AsyncRead`/`AsyncWrite`.
//!
//! Owns the byte-to-line layer of every wire this crate speaks (the host's stdin/stdout, the local
//! socket between bridge and Broker): finding line ends, enforcing a maximum line length before the
//! whole line is buffered, and writing one message per `write_all`. It knows nothing of JSON,
//! JSON-RPC, method names or sockets; UTF-8 and envelope checks happen one layer up.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

/// Why a line could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FramingError {
    #[error("line exceeds the {limit}-byte limit")]
    TooLong { limit: usize },
    #[error("read failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads lines of at most `max_line_bytes` bytes (the newline excluded). A line longer than the
/// limit is reported as soon as the limit is passed, without buffering the rest of it.
pub struct LineReader<R> {
    inner: R,
    max_line_bytes: usize,
    buf: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    pub fn new(inner: R, max_line_bytes: usize) -> LineReader<R> {
        LineReader {
            inner,
            max_line_bytes,
            buf: Vec::new(),
        }
    }

    /// Applies to the next line read; a line already returned is unaffected.
    pub fn set_max_line_bytes(&mut self, max_line_bytes: usize) {
        self.max_line_bytes = max_line_bytes;
    }

    pub fn max_line_bytes(&self) -> usize {
        self.max_line_bytes
    }

    /// The next line without its `\n` (a trailing `\r` is kept: JSON treats it as white space).
    /// `Ok(None)` at end of input; a final line without a newline is still returned.
    pub async fn next_line(&mut self) -> Result<Option<Vec<u8>>, FramingError> {
        self.buf.clear();
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                return match self.buf.is_empty() {
                    true => Ok(None),
                    false => Ok(Some(std::mem::take(&mut self.buf))),
                };
            }
            let (chunk, found_newline) = match memchr_newline(available) {
                Some(at) => (&available[..at], true),
                None => (available, false),
            };
            if self.buf.len() + chunk.len() > self.max_line_bytes {
                let limit = self.max_line_bytes;
                self.buf.clear();
                return Err(FramingError::TooLong { limit });
            }
            self.buf.extend_from_slice(chunk);
            let consumed = chunk.len() + usize::from(found_newline);
            self.inner.consume(consumed);
            if found_newline {
                return Ok(Some(std::mem::take(&mut self.buf)));
            }
        }
    }
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// Discards input up to and including the next `\n` (the rest of a line `next_line`
    /// refused as too long), without buffering it. `Ok(false)` when input ended first.
    pub async fn skip_line(&mut self) -> Result<bool, FramingError> {
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                return Ok(false);
            }
            match memchr_newline(available) {
                Some(at) => {
                    self.inner.consume(at + 1);
                    return Ok(true);
                }
                None => {
                    let all = available.len();
                    self.inner.consume(all);
                }
            }
        }
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

/// Writes one message per call, newline-terminated, in a single `write_all`, then flushes, so the
/// caller waits whenever the reader on the other end is slow (backpressure).
pub async fn write_line<W: AsyncWrite + Unpin>(writer: &mut W, line: &str) -> std::io::Result<()> {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    writer.write_all(&bytes).await?;
    writer.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    async fn lines(input: &[u8], max: usize) -> Vec<Result<Vec<u8>, String>> {
        let mut reader = LineReader::new(BufReader::with_capacity(7, input), max);
        let mut out = Vec::new();
        loop {
            match reader.next_line().await {
                Ok(Some(line)) => out.push(Ok(line)),
                Ok(None) => return out,
                Err(e) => {
                    out.push(Err(e.to_string()));
                    return out;
                }
            }
        }
    }

    #[tokio::test]
    async fn splits_lines_across_small_buffers() {
        let got = lines(b"{\"a\":1}\n{\"bb\":22}\r\nlast", 64).await;
        let want: Vec<Result<Vec<u8>, String>> = vec![
            Ok(b"{\"a\":1}".to_vec()),
            Ok(b"{\"bb\":22}\r".to_vec()),
            Ok(b"last".to_vec()),
        ];
        assert_eq!(got, want);
    }

    #[tokio::test]
    async fn limit_is_inclusive_and_excludes_newline() {
        let exact = [b'x'; 10];
        let mut input = exact.to_vec();
        input.push(b'\n');
        assert_eq!(lines(&input, 10).await, vec![Ok(exact.to_vec())]);
        let mut over = [b'x'; 11].to_vec();
        over.push(b'\n');
        assert_eq!(
            lines(&over, 10).await,
            vec![Err("line exceeds the 10-byte limit".into())]
        );
    }

    #[tokio::test]
    async fn empty_input_is_eof() {
        assert!(lines(b"", 10).await.is_empty());
    }

    #[tokio::test]
    async fn the_rest_of_a_refused_line_can_be_skipped() {
        let input = b"short\nthis line is far too long\nnext\ntail-without-newline";
        let mut reader = LineReader::new(BufReader::with_capacity(4, &input[..]), 8);
        assert_eq!(reader.next_line().await.unwrap(), Some(b"short".to_vec()));
        assert!(matches!(
            reader.next_line().await,
            Err(FramingError::TooLong { limit: 8 })
        ));
        assert!(reader.skip_line().await.unwrap());
        assert_eq!(reader.next_line().await.unwrap(), Some(b"next".to_vec()));
        assert!(!reader.skip_line().await.unwrap());
        assert_eq!(reader.next_line().await.unwrap(), None);
    }

    #[tokio::test]
    async fn limit_change_applies_to_next_line() {
        let mut reader = LineReader::new(BufReader::new(&b"12345\n123456789\n"[..]), 5);
        assert_eq!(reader.next_line().await.unwrap(), Some(b"12345".to_vec()));
        reader.set_max_line_bytes(9);
        assert_eq!(
            reader.next_line().await.unwrap(),
            Some(b"123456789".to_vec())
        );
    }
}
