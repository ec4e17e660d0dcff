//! Standard base64 (RFC 4648, padded), as CDP encodes binary results, decoded with the `base64`
//! crate. Decoding only: the Broker never sends bytes to a host, it stores them.

use base64::Engine as _;
use base64::alphabet::STANDARD;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

/// Standard alphabet, padding required, trailing bits of the last sextet allowed.
const ENGINE: GeneralPurpose = GeneralPurpose::new(
    &STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical)
        .with_decode_allow_trailing_bits(true),
);

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
/// a length that is not a multiple of four. Unused low bits of the last sextet are ignored (the
/// browser never sets them; rejecting them would change nothing but the failure mode).
pub fn decode(text: &str) -> Option<Vec<u8>> {
    ENGINE.decode(text).ok()
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
        // Unused trailing bits are ignored.
        check("Zh==", Some(b"f"));
        check("Zm9=", Some(b"fo"));
        for bad in [
            "Zg=", "Zg", "Z===", "Zg==Zg==", "Zm9v\n", "Zm-v", "Zm_v", "=Zm9", "Zm9v=", "Zm=v",
            " Zm9", "Zg==\0", "Zm9v====",
        ] {
            check(bad, None);
        }
    }
}
