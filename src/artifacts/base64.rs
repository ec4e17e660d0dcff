//! Standard base64 (RFC 4648, padded), as CDP encodes binary results. Decoding only: the Broker
//! never sends bytes to a host, it stores them.

/// Marks a byte outside the alphabet in [`DECODE`].
const INVALID: u8 = 0xff;

/// Sextet value of each input byte, [`INVALID`] for everything outside the alphabet.
const DECODE: [u8; 256] = {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut table = [INVALID; 256];
    let mut index = 0;
    while index < alphabet.len() {
        table[alphabet[index] as usize] = index as u8;
        index += 1;
    }
    table
};

/// How many bytes `text` decodes to, without decoding it; `None` if its length is not a
/// multiple of four.
pub fn decoded_len(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let padding = bytes.iter().rev().take(2).filter(|b| **b == b'=').count();
    Some(bytes.len() / 4 * 3 - padding)
}

/// Decodes padded standard base64; `None` on any byte outside the alphabet, misplaced padding or
/// a length that is not a multiple of four.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let out_len = decoded_len(text)?;
    let mut out = Vec::with_capacity(out_len);
    let chunks = bytes.chunks_exact(4);
    let last = chunks.len().checked_sub(1);
    for (index, chunk) in chunks.enumerate() {
        let is_last = Some(index) == last;
        let pad = match (is_last, chunk[2], chunk[3]) {
            (true, b'=', b'=') => 2,
            (true, _, b'=') => 1,
            _ => 0,
        };
        let mut quad = [0u8; 4];
        for (slot, byte) in quad.iter_mut().zip(&chunk[..4 - pad]) {
            let value = DECODE[*byte as usize];
            if value == INVALID {
                return None;
            }
            *slot = value;
        }
        let triple = (u32::from(quad[0]) << 18)
            | (u32::from(quad[1]) << 12)
            | (u32::from(quad[2]) << 6)
            | u32::from(quad[3]);
        let [_, a, b, c] = triple.to_be_bytes();
        out.extend_from_slice(&[a, b, c][..3 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expect: Option<&[u8]>) {
        assert_eq!(decode(input).as_deref(), expect, "{input:?}");
        if let Some(expect) = expect {
            assert_eq!(decoded_len(input), Some(expect.len()), "{input:?}");
        }
    }

    #[test]
    fn rfc4648_vectors_and_rejects() {
        check("", Some(b""));
        check("Zg==", Some(b"f"));
        check("Zm8=", Some(b"fo"));
        check("Zm9v", Some(b"foo"));
        check("Zm9vYg==", Some(b"foob"));
        check("Zm9vYmE=", Some(b"fooba"));
        check("Zm9vYmFy", Some(b"foobar"));
        check("iVBORw0KGgo=", Some(b"\x89PNG\r\n\x1a\n"));
        check("+/+/", Some(&[0xfb, 0xff, 0xbf]));
        for bad in [
            "Zg=", "Zg", "Z===", "Zg==Zg==", "Zm9v\n", "Zm-v", "Zm_v", "=Zm9",
        ] {
            check(bad, None);
        }
    }
}
