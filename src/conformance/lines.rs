//! Bytes to bounded lines: reads newline-delimited frames from the child's
//! stdout without ever buffering more than a fixed number of bytes per line.
//!
//! It knows nothing about JSON or JSON-RPC; an oversized line is reported and
//! skipped so one bad frame cannot exhaust the runner's memory.

use std::io::{self, BufRead};

/// Largest stdout line the runner accepts. The runner asks for a 4 MiB
/// result limit, so a conforming response line is at most that plus the
/// envelope; twice the limit leaves room without letting a peer grow us.
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// One frame read from the stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A complete line without its trailing `\n` (and `\r`, if any).
    Line(Vec<u8>),
    /// A line longer than the bound; its bytes were discarded up to the newline.
    Oversized,
    /// The stream ended. A partial last line without `\n` is returned as a
    /// `Line` first.
    Eof,
}

/// Reads the next frame, keeping at most `max_bytes` of any one line.
pub fn read_frame(reader: &mut impl BufRead, max_bytes: usize) -> io::Result<Frame> {
    let mut line = Vec::new();
    let mut oversized = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        if available.is_empty() {
            return Ok(match (oversized, line.is_empty()) {
                (true, _) => Frame::Oversized,
                (false, true) => Frame::Eof,
                (false, false) => Frame::Line(line),
            });
        }
        let (chunk, found_newline) = match available.iter().position(|&byte| byte == b'\n') {
            Some(index) => (&available[..index], true),
            None => (available, false),
        };
        if !oversized {
            match line.len() + chunk.len() > max_bytes {
                true => {
                    oversized = true;
                    line = Vec::new();
                }
                false => line.extend_from_slice(chunk),
            }
        }
        let consumed = chunk.len() + usize::from(found_newline);
        reader.consume(consumed);
        if found_newline {
            if oversized {
                return Ok(Frame::Oversized);
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(Frame::Line(line));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Frame, read_frame};
    use std::io::BufReader;

    fn frames(input: &[u8], max_bytes: usize, buffer: usize) -> Vec<Frame> {
        let mut reader = BufReader::with_capacity(buffer, input);
        let mut out = Vec::new();
        loop {
            let frame = read_frame(&mut reader, max_bytes).expect("in-memory read");
            let done = frame == Frame::Eof;
            out.push(frame);
            if done {
                return out;
            }
        }
    }

    fn line(text: &str) -> Frame {
        Frame::Line(text.as_bytes().to_vec())
    }

    #[test]
    fn splits_lines_across_small_buffers() {
        assert_eq!(
            frames(b"{\"a\":1}\n{\"b\":2}\r\n", 64, 3),
            vec![line("{\"a\":1}"), line("{\"b\":2}"), Frame::Eof]
        );
    }

    #[test]
    fn returns_partial_last_line_then_eof() {
        assert_eq!(frames(b"abc", 64, 2), vec![line("abc"), Frame::Eof]);
    }

    #[test]
    fn skips_oversized_line_and_continues() {
        assert_eq!(
            frames(b"0123456789\nok\n", 5, 4),
            vec![Frame::Oversized, line("ok"), Frame::Eof]
        );
    }

    #[test]
    fn line_exactly_at_bound_is_kept() {
        assert_eq!(frames(b"12345\n", 5, 2), vec![line("12345"), Frame::Eof]);
    }
}
