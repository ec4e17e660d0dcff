//! Newline-delimited messages over any `AsyncRead`/`AsyncWrite`.
//!
//! Owns the byte-to-line layer of every wire this crate speaks (the host's stdin/stdout, the local
//! socket between bridge and Broker): finding line ends, enforcing a maximum line length before the
//! whole line is buffered, and writing lines either one per `write_all` or, when several are
//! queued, batched into one write (`LineWriter`). It knows nothing of JSON, JSON-RPC, method
//! names or sockets; UTF-8 and envelope checks happen one layer up.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// Bytes of small lines a `LineWriter` collects before it writes them out. A line at least this
/// long is written from the caller's string, never copied into the batch.
pub const BATCH_MAX_BYTES: usize = 64 * 1024;

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
    ///
    /// Cancel-safe: a call dropped midway (a `select!` branch that lost) keeps the part of the
    /// line it had read, and the next call continues it.
    pub async fn next_line(&mut self) -> Result<Option<Vec<u8>>, FramingError> {
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

impl<R: AsyncRead + Unpin> LineReader<BufReader<R>> {
    /// Whether a complete line is already buffered, so the next `next_line` returns without
    /// waiting for input. A writer forwarding lines can keep batching while this holds.
    pub fn has_buffered_line(&self) -> bool {
        memchr_newline(self.inner.buffer()).is_some()
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

/// Writes lines in batches: `queue` collects small lines (writing them out once
/// `BATCH_MAX_BYTES` are collected), `flush` writes what is collected in one `write_all` and
/// flushes. A writer that drains its queue before flushing pays one write per batch instead of
/// one per line, and the reader on the other end still sees whole lines in order.
pub struct LineWriter<W> {
    inner: W,
    batch: Vec<u8>,
}

impl<W: AsyncWrite + Unpin> LineWriter<W> {
    pub fn new(inner: W) -> LineWriter<W> {
        LineWriter {
            inner,
            batch: Vec::new(),
        }
    }

    /// Queues `line` (its newline added). A long line is written at once, after what was
    /// collected before it; its newline starts the next batch.
    pub async fn queue(&mut self, line: &[u8]) -> std::io::Result<()> {
        if self.batch.len() + line.len() + 1 > BATCH_MAX_BYTES && !self.batch.is_empty() {
            self.write_batch().await?;
        }
        match line.len() >= BATCH_MAX_BYTES {
            true => self.inner.write_all(line).await?,
            false => self.batch.extend_from_slice(line),
        }
        self.batch.push(b'\n');
        Ok(())
    }

    /// What `queue` of a line of `line_len` bytes writes before it returns: the lines collected
    /// so far (the batch would overflow), and the line itself (it is long). A caller that must
    /// know which lines reached the writer asks this first.
    pub fn writes_on_queue(&self, line_len: usize) -> (bool, bool) {
        let batch = self.batch.len() + line_len + 1 > BATCH_MAX_BYTES && !self.batch.is_empty();
        (batch, line_len >= BATCH_MAX_BYTES)
    }

    /// Whether lines are queued and not yet written.
    pub fn has_queued(&self) -> bool {
        !self.batch.is_empty()
    }

    /// Writes everything queued and flushes; the caller waits while the reader is slow.
    pub async fn flush(&mut self) -> std::io::Result<()> {
        self.write_batch().await?;
        self.inner.flush().await
    }

    /// Queues `line` and flushes: one line, one write (as `write_line`).
    pub async fn write_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        self.queue(line).await?;
        self.flush().await
    }

    /// The underlying writer (to shut it down); flush first.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    async fn write_batch(&mut self) -> std::io::Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let written = self.inner.write_all(&self.batch).await;
        self.batch.clear();
        // A batch grows to about BATCH_MAX_BYTES plus one line; keep no more between batches.
        self.batch.shrink_to(BATCH_MAX_BYTES);
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncWriteExt, BufReader};

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
    async fn a_cancelled_read_keeps_the_part_it_had_read() {
        let (mut tx, rx) = tokio::io::duplex(64);
        let mut reader = LineReader::new(BufReader::new(rx), 64);
        tx.write_all(b"{\"half\":").await.unwrap();
        let first = tokio::time::timeout(std::time::Duration::from_millis(50), reader.next_line());
        assert!(first.await.is_err(), "no complete line yet");
        tx.write_all(b"1}\n").await.unwrap();
        assert_eq!(
            reader.next_line().await.unwrap(),
            Some(b"{\"half\":1}".to_vec())
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

    /// Records each `poll_write` call, so a test can count the writes a batch took.
    #[derive(Default)]
    struct Recorder {
        writes: Vec<Vec<u8>>,
    }

    impl AsyncWrite for Recorder {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            bytes: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            self.writes.push(bytes.to_vec());
            std::task::Poll::Ready(Ok(bytes.len()))
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn queued_lines_go_out_in_one_write_and_long_lines_are_not_copied() {
        let mut writer = LineWriter::new(Recorder::default());
        for line in ["a", "bb", "ccc"] {
            writer.queue(line.as_bytes()).await.unwrap();
        }
        assert!(writer.has_queued());
        assert!(
            writer.get_mut().writes.is_empty(),
            "nothing written before flush"
        );
        assert_eq!(writer.writes_on_queue(1), (false, false));
        assert_eq!(writer.writes_on_queue(BATCH_MAX_BYTES - 9), (true, false));
        assert_eq!(writer.writes_on_queue(BATCH_MAX_BYTES), (true, true));
        writer.flush().await.unwrap();
        assert!(!writer.has_queued());
        assert_eq!(writer.get_mut().writes, [b"a\nbb\nccc\n".to_vec()]);

        // A long line: the small one before it goes first, the long one from its own buffer,
        // and its newline with what follows.
        let long = vec![b'x'; BATCH_MAX_BYTES];
        writer.get_mut().writes.clear();
        writer.queue(b"small").await.unwrap();
        writer.queue(&long).await.unwrap();
        writer.queue(b"after").await.unwrap();
        writer.flush().await.unwrap();
        let writes = &writer.get_mut().writes;
        assert_eq!(
            writes.len(),
            3,
            "{:?}",
            writes.iter().map(Vec::len).collect::<Vec<_>>()
        );
        assert_eq!(writes[0], b"small\n");
        assert_eq!(writes[1], long);
        assert_eq!(writes[2], b"\nafter\n");

        // Many small lines beyond the batch bound are split into bounded writes, in order.
        writer.get_mut().writes.clear();
        let line = vec![b'y'; 1000];
        for _ in 0..200 {
            writer.queue(&line).await.unwrap();
        }
        writer.flush().await.unwrap();
        let writes = &writer.get_mut().writes;
        assert!(writes.iter().all(|w| w.len() <= BATCH_MAX_BYTES));
        let all: Vec<u8> = writes.concat();
        assert_eq!(all.len(), 200 * 1001);
        assert!(
            all.split(|b| *b == b'\n')
                .take(200)
                .all(|l| l == line.as_slice())
        );
    }

    #[tokio::test]
    async fn a_buffered_line_is_seen_before_reading() {
        let mut reader = LineReader::new(BufReader::new(&b"one\ntwo\nthr"[..]), 64);
        assert!(!reader.has_buffered_line(), "nothing read yet");
        assert_eq!(reader.next_line().await.unwrap(), Some(b"one".to_vec()));
        assert!(reader.has_buffered_line());
        assert_eq!(reader.next_line().await.unwrap(), Some(b"two".to_vec()));
        assert!(
            !reader.has_buffered_line(),
            "a partial line is not complete"
        );
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
