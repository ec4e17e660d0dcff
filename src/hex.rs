//! Lowercase hexadecimal text of bytes: the one encoder behind ids, nonces, file names and
//! SHA-256 digests. Knows nothing of what the bytes mean.

use ring::digest::{SHA256, digest};

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Two lowercase hex digits per byte, most significant nibble first.
pub fn encode(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
}

/// The SHA-256 of `bytes` as 64 lowercase hex digits; a caller wanting a short stable tag
/// takes a prefix.
pub fn sha256(bytes: &[u8]) -> String {
    encode(digest(&SHA256, bytes).as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_every_nibble_lowercase_in_order() {
        assert_eq!(encode(&[]), "");
        assert_eq!(encode(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        let all: Vec<u8> = (0..=255).collect();
        let text = encode(&all);
        assert_eq!(text.len(), 512);
        for (index, byte) in all.iter().enumerate() {
            let pair = &text[index * 2..index * 2 + 2];
            assert_eq!(u8::from_str_radix(pair, 16).ok(), Some(*byte), "{pair}");
        }
    }

    #[test]
    fn sha256_is_the_known_digest() {
        assert_eq!(
            sha256(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
