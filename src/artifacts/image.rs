//! Pixel dimensions read from PNG and JPEG headers, so a capture reports the size of the image
//! it actually stored rather than the size it asked for.

use super::encoding;

/// PNG files start with these eight bytes.
pub const PNG_SIGNATURE: &[u8; 8] = b"\x89PNG\r\n\x1a\n";

/// Base64 characters decoded when only the header is wanted: JPEG quantisation and Huffman
/// tables come before the frame header, and Chromium's encoder keeps them well under 48 KiB.
const HEADER_PREFIX_CHARS: usize = 64 * 1024;

/// `(width, height)` of a PNG or JPEG, `None` for anything else or a truncated header.
pub fn dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    match bytes {
        [0x89, b'P', b'N', b'G', ..] => png_dimensions(bytes),
        [0xff, 0xd8, ..] => jpeg_dimensions(bytes),
        _ => None,
    }
}

/// [`dimensions`] of base64-encoded image data, decoding only a prefix.
pub fn dimensions_base64(text: &str) -> Option<(u32, u32)> {
    // A cut inside the text holds no padding, so the prefix is valid base64 on its own.
    let cut = text.len().min(HEADER_PREFIX_CHARS) / 4 * 4;
    dimensions(&encoding::decode(text.get(..cut)?)?)
}

fn png_dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    if bytes.get(..8)? != PNG_SIGNATURE || bytes.get(12..16)? != b"IHDR" {
        return None;
    }
    let width = u32::from_be_bytes(bytes.get(16..20)?.try_into().ok()?);
    let height = u32::from_be_bytes(bytes.get(20..24)?.try_into().ok()?);
    Some((width, height))
}

/// Walks the JPEG marker segments to the first start-of-frame.
fn jpeg_dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    let mut at = 2;
    loop {
        while *bytes.get(at)? != 0xff {
            at += 1;
        }
        while *bytes.get(at)? == 0xff {
            at += 1;
        }
        let marker = *bytes.get(at)?;
        at += 1;
        match marker {
            // Markers without a length: TEM and RSTn.
            0x01 | 0xd0..=0xd7 => continue,
            // End of image or start of scan before any frame header.
            0xd9 | 0xda => return None,
            _ => {}
        }
        let length = usize::from(u16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?));
        let is_frame = matches!(marker, 0xc0..=0xcf) && !matches!(marker, 0xc4 | 0xc8 | 0xcc);
        if is_frame {
            let height = u16::from_be_bytes(bytes.get(at + 3..at + 5)?.try_into().ok()?);
            let width = u16::from_be_bytes(bytes.get(at + 5..at + 7)?.try_into().ok()?);
            return Some((u32::from(width), u32::from(height)));
        }
        at += length;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let mut bytes = PNG_SIGNATURE.to_vec();
        bytes.extend_from_slice(&13u32.to_be_bytes());
        bytes.extend_from_slice(b"IHDR");
        bytes.extend_from_slice(&width.to_be_bytes());
        bytes.extend_from_slice(&height.to_be_bytes());
        bytes.extend_from_slice(&[8, 6, 0, 0, 0]);
        bytes
    }

    fn jpeg(width: u16, height: u16) -> Vec<u8> {
        let mut bytes = vec![0xff, 0xd8];
        // APP0 (JFIF), 16 bytes.
        bytes.extend_from_slice(&[0xff, 0xe0, 0x00, 0x10]);
        bytes.extend_from_slice(b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0");
        // DHT, a marker in the C0..CF range that is not a frame.
        bytes.extend_from_slice(&[0xff, 0xc4, 0x00, 0x03, 0x00]);
        // SOF2 (progressive).
        bytes.extend_from_slice(&[0xff, 0xc2, 0x00, 0x11, 0x08]);
        bytes.extend_from_slice(&height.to_be_bytes());
        bytes.extend_from_slice(&width.to_be_bytes());
        bytes.extend_from_slice(&[0x03; 10]);
        bytes
    }

    fn encode(bytes: &[u8]) -> String {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let mut triple = [0u8; 3];
            triple[..chunk.len()].copy_from_slice(chunk);
            let n =
                (u32::from(triple[0]) << 16) | (u32::from(triple[1]) << 8) | u32::from(triple[2]);
            for i in 0..4 {
                match i <= chunk.len() {
                    true => out.push(alphabet[(n >> (18 - 6 * i) & 63) as usize] as char),
                    false => out.push('='),
                }
            }
        }
        out
    }

    #[test]
    fn reads_png_and_jpeg_headers() {
        assert_eq!(dimensions(&png(780, 5000)), Some((780, 5000)));
        assert_eq!(dimensions(&jpeg(1920, 1080)), Some((1920, 1080)));
        assert_eq!(dimensions(&png(1, 1)[..20]), None, "truncated");
        assert_eq!(dimensions(&jpeg(10, 10)[..30]), None, "truncated");
        assert_eq!(dimensions(b"%PDF-1.7"), None);
        assert_eq!(dimensions(&[0xff, 0xd8, 0xff, 0xd9]), None);
    }

    #[test]
    fn reads_dimensions_from_a_base64_prefix() {
        let mut big = png(1600, 900);
        big.extend(std::iter::repeat_n(7u8, 200_000));
        assert_eq!(dimensions_base64(&encode(&big)), Some((1600, 900)));
        assert_eq!(dimensions_base64(&encode(&jpeg(3, 4))), Some((3, 4)));
        assert_eq!(dimensions_base64("not base64!"), None);
    }
}
