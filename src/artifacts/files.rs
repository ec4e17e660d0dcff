//! File-level helpers of protected storage and client paths: the syntax check of a client
//! path, temporary names, a bounded hashing copy, name sanitising and the MIME/extension
//! tables. No policy about which Artifact goes where; `service.rs` decides that.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use ring::digest::{Context, SHA256};
use ring::rand::{SecureRandom, SystemRandom};

use super::error::ArtifactError;

/// Longest path component accepted from a client, in bytes: `NAME_MAX` of every common
/// file system. Longer ones could never be created or opened.
const MAX_CLIENT_COMPONENT_BYTES: usize = 255;

/// Longest client path accepted, in bytes: `PATH_MAX` (4096) without its terminating NUL.
const MAX_CLIENT_PATH_BYTES: usize = 4095;

/// Read buffer of the hashing copy.
const COPY_CHUNK_BYTES: usize = 256 * 1024;

/// Longest file name kept for an imported file, in bytes (common filesystem limit).
const MAX_FILE_NAME_BYTES: usize = 255;

/// Used when an imported file's name has nothing usable left after sanitising.
const FALLBACK_FILE_NAME: &str = "upload.bin";

/// Known MIME types and the extension their files get on disk.
const MIME_EXTENSIONS: &[(&str, &str)] = &[
    ("image/png", "png"),
    ("image/jpeg", "jpg"),
    ("image/webp", "webp"),
    ("image/gif", "gif"),
    ("image/svg+xml", "svg"),
    ("application/pdf", "pdf"),
    ("text/plain", "txt"),
    ("text/csv", "csv"),
    ("text/html", "html"),
    ("application/json", "json"),
    ("application/xml", "xml"),
    ("application/zip", "zip"),
];

/// Extra spellings accepted when guessing a MIME type from an imported file's extension.
const EXTENSION_ALIASES: &[(&str, &str)] = &[("jpeg", "image/jpeg"), ("htm", "text/html")];

/// Longest accepted MIME type (RFC 6838 allows 127 characters per part).
const MAX_MIME_CHARS: usize = 255;

/// The MIME type of unknown binary content.
pub const OCTET_STREAM: &str = "application/octet-stream";

/// The extension stored files of this MIME type get (`bin` when unknown).
pub fn extension_for(mime_type: &str) -> &'static str {
    MIME_EXTENSIONS
        .iter()
        .find(|(mime, _)| *mime == mime_type)
        .map(|(_, extension)| *extension)
        .unwrap_or("bin")
}

/// A MIME type guessed from a file name's extension.
pub fn guess_mime(file_name: &str) -> &'static str {
    let extension = match file_name.rsplit_once('.') {
        Some((_, extension)) => extension.to_ascii_lowercase(),
        None => return OCTET_STREAM,
    };
    MIME_EXTENSIONS
        .iter()
        .map(|(mime, ext)| (*ext, *mime))
        .chain(EXTENSION_ALIASES.iter().copied())
        .find(|(ext, _)| *ext == extension)
        .map(|(_, mime)| mime)
        .unwrap_or(OCTET_STREAM)
}

/// Whether `text` looks like `type/subtype` made of RFC 6838 name characters.
pub fn is_valid_mime(text: &str) -> bool {
    let token = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    text.len() <= MAX_MIME_CHARS
        && matches!(text.split_once('/'), Some((kind, sub)) if token(kind) && token(sub))
}

/// Characters that reorder the text around them (Unicode bidirectional controls): a name such
/// as `invoice\u{202E}fdp.exe` would show as `invoiceexe.pdf` to whoever reads it.
const BIDI_CONTROLS: &[char] = &[
    '\u{061C}', '\u{200E}', '\u{200F}', '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}',
    '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}',
];

/// The last component of `path`, made safe as a file name of its own: no separators, no
/// control characters, no bidirectional controls (dropped), not `.`/`..`, at most
/// [`MAX_FILE_NAME_BYTES`].
pub fn sanitize_file_name(path: &Path) -> String {
    let raw = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut name: String = raw
        .chars()
        .filter(|c| !BIDI_CONTROLS.contains(c))
        .map(|c| match c.is_control() || matches!(c, '/' | '\\' | ':') {
            true => '_',
            false => c,
        })
        .collect();
    while name.len() > MAX_FILE_NAME_BYTES {
        name.pop();
    }
    match name.trim_matches('.').is_empty() {
        true => FALLBACK_FILE_NAME.to_owned(),
        false => name,
    }
}

/// Checks the syntax of a client path before anything touches the file system: absolute, no
/// NUL character, no component or total length the OS would refuse. A mistake here is the
/// client's (`BadPath`, mapped to `invalid_params`), never a retryable storage failure.
pub fn check_client_path(path: &Path) -> Result<(), ArtifactError> {
    let text = path.as_os_str().as_encoded_bytes();
    if text.contains(&0) {
        return Err(ArtifactError::BadPath {
            reason: "the path contains a NUL character",
        });
    }
    if !path.is_absolute() {
        return Err(ArtifactError::PathNotAllowed {
            reason: "the path is not absolute",
        });
    }
    if text.len() > MAX_CLIENT_PATH_BYTES {
        return Err(ArtifactError::BadPath {
            reason: "the path is longer than 4095 bytes",
        });
    }
    let overlong = path
        .components()
        .any(|c| c.as_os_str().as_encoded_bytes().len() > MAX_CLIENT_COMPONENT_BYTES);
    match overlong {
        true => Err(ArtifactError::BadPath {
            reason: "a path component is longer than 255 bytes",
        }),
        false => Ok(()),
    }
}

/// A fresh, unpredictable name for the temporary file of an export, short enough for any
/// file system whatever the final name's length. Created with `O_EXCL`, so a name someone
/// planted is never reused; the caller simply draws another.
pub fn export_temp_name() -> OsString {
    let mut bytes = [0u8; 12];
    SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system random source works");
    OsString::from(format!(
        ".browser-pilot-export-{}.tmp",
        crate::hex::encode(&bytes)
    ))
}

/// The temporary sibling a protected file is written to before it is renamed into place.
/// The name part is cut so the temporary name stays within [`MAX_FILE_NAME_BYTES`] even for
/// an imported file whose own name uses all of them.
pub fn temp_path(final_path: &Path) -> PathBuf {
    let mut name = final_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let suffix = format!(".tmp-{}", std::process::id());
    while 1 + name.len() + suffix.len() > MAX_FILE_NAME_BYTES {
        name.pop();
    }
    final_path.with_file_name(format!(".{name}{suffix}"))
}

/// Why a bounded copy stopped.
#[derive(Debug)]
pub enum CopyError {
    /// The source had more than the limit.
    TooLarge,
    Read(std::io::Error),
    Write(std::io::Error),
}

/// Copies `source` into `sink` while hashing (without syncing), refusing more than `limit`
/// bytes (the source may grow after its size was checked), and reports the running total to
/// `on_progress` after every chunk. Returns the byte count and the lowercase hex SHA-256.
pub fn copy_hashing(
    source: &mut impl Read,
    sink: &mut File,
    limit: u64,
    mut on_progress: impl FnMut(u64),
) -> Result<(u64, String), CopyError> {
    let mut context = Context::new(&SHA256);
    let mut buffer = vec![0u8; COPY_CHUNK_BYTES];
    let mut total = 0u64;
    loop {
        let read = match source.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(CopyError::Read(error)),
        };
        total += read as u64;
        if total > limit {
            return Err(CopyError::TooLarge);
        }
        context.update(&buffer[..read]);
        sink.write_all(&buffer[..read]).map_err(CopyError::Write)?;
        on_progress(total);
    }
    Ok((total, crate::hex::encode(context.finish().as_ref())))
}

/// The size and modification time of an open file, to tell whether it changed meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileState {
    pub len: u64,
    pub modified: Option<std::time::SystemTime>,
}

impl FileState {
    pub fn of(metadata: &std::fs::Metadata) -> FileState {
        FileState {
            len: metadata.len(),
            modified: metadata.modified().ok(),
        }
    }
}

/// Whether a copy holds the whole file as it was opened: exactly as many bytes as its size
/// then, and the file unchanged (size, modification time) after the copy. A file truncated,
/// extended or rewritten while it was read fails this, and its copy is not kept.
pub fn copy_is_whole(opened: FileState, copied: u64, after: FileState) -> bool {
    copied == opened.len && after == opened
}

/// Whether `path` is `root` or lies below it, comparing canonical forms so symlinks and `..`
/// cannot hide the relationship. A root that cannot be resolved protects nothing.
pub fn is_within(path: &Path, root: &Path) -> bool {
    match (path.canonicalize(), root.canonicalize()) {
        (Ok(path), Ok(root)) => path.starts_with(root),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mime_tables() {
        assert_eq!(extension_for("image/png"), "png");
        assert_eq!(extension_for("image/jpeg"), "jpg");
        assert_eq!(extension_for("application/x-unknown"), "bin");
        assert_eq!(guess_mime("resume.PDF"), "application/pdf");
        assert_eq!(guess_mime("photo.jpeg"), "image/jpeg");
        assert_eq!(guess_mime("noextension"), OCTET_STREAM);
        for good in [
            "application/pdf",
            "image/svg+xml",
            "application/vnd.ms-excel",
        ] {
            assert!(is_valid_mime(good), "{good}");
        }
        for bad in [
            "pdf",
            "/pdf",
            "application/",
            "text/plain; charset=utf-8",
            "a/b/c",
            "",
        ] {
            assert!(!is_valid_mime(bad), "{bad}");
        }
    }

    #[test]
    fn file_names_are_sanitised() {
        let check = |input: &str, expect: &str| {
            assert_eq!(sanitize_file_name(Path::new(input)), expect, "{input:?}");
        };
        check("/home/u/resume.pdf", "resume.pdf");
        check("/tmp/a\nb:c.txt", "a_b_c.txt");
        check("/tmp/..", FALLBACK_FILE_NAME);
        check("/tmp/invoice\u{202E}fdp.exe", "invoicefdp.exe");
        check("/tmp/\u{2067}a\u{2069}\u{200F}.txt", "a.txt");
        check("/tmp/\u{202E}.", FALLBACK_FILE_NAME);
        check("/", FALLBACK_FILE_NAME);
        let long = format!("/tmp/{}.txt", "é".repeat(200));
        assert!(sanitize_file_name(Path::new(&long)).len() <= MAX_FILE_NAME_BYTES);
    }

    #[test]
    fn only_an_unchanged_file_copied_whole_is_whole() {
        let at = |secs: u64| Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs));
        let state = |len: u64, modified| FileState { len, modified };
        let opened = state(100, at(5));
        assert!(copy_is_whole(opened, 100, opened));
        // Truncated while read: fewer bytes, and a new size.
        assert!(!copy_is_whole(opened, 40, state(40, at(6))));
        // Truncated and written back to the same size: a new modification time.
        assert!(!copy_is_whole(opened, 100, state(100, at(6))));
        // Grown while read, or a pseudo-file whose size is not its content.
        assert!(!copy_is_whole(opened, 150, state(150, at(6))));
        assert!(!copy_is_whole(state(0, None), 812, state(0, None)));
    }

    #[test]
    fn bounded_copy_hashes_and_refuses_growth() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = File::create(dir.path().join("out")).unwrap();
        let mut seen = Vec::new();
        let (len, hash) = copy_hashing(&mut &b"abc"[..], &mut sink, 3, |n| seen.push(n)).unwrap();
        assert_eq!(seen, [3]);
        assert_eq!(len, 3);
        assert_eq!(
            hash,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hash, crate::hex::sha256(b"abc"));
        let mut sink = File::create(dir.path().join("out2")).unwrap();
        assert!(matches!(
            copy_hashing(&mut &b"abcd"[..], &mut sink, 3, |_| {}),
            Err(CopyError::TooLarge)
        ));
    }

    #[test]
    fn client_path_syntax() {
        let check = |path: &str, expect: Result<(), &str>| {
            let got = check_client_path(Path::new(path)).map_err(|e| match e {
                ArtifactError::BadPath { reason } | ArtifactError::PathNotAllowed { reason } => {
                    reason
                }
                other => panic!("{other:?}"),
            });
            assert_eq!(got, expect, "{path:?}");
        };
        check("/tmp/report.pdf", Ok(()));
        check("/tmp/a\u{0}b.pdf", Err("the path contains a NUL character"));
        check("relative.pdf", Err("the path is not absolute"));
        check(
            &format!("/tmp/{}", "n".repeat(256)),
            Err("a path component is longer than 255 bytes"),
        );
        check(&format!("/tmp/{}", "n".repeat(255)), Ok(()));
        check(
            &format!("/{}", "d/".repeat(2100)),
            Err("the path is longer than 4095 bytes"),
        );
        assert_ne!(export_temp_name(), export_temp_name());
        let long = PathBuf::from(format!("/s/{}", "é".repeat(127)));
        let temp = temp_path(&long);
        assert!(
            temp.file_name().unwrap().len() <= MAX_FILE_NAME_BYTES,
            "{temp:?}"
        );
        assert_eq!(temp.parent(), long.parent());
        assert!(export_temp_name().len() < 64);
    }

    #[test]
    fn within_uses_canonical_paths() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("home");
        std::fs::create_dir_all(root.join("artifacts")).unwrap();
        assert!(is_within(&root.join("artifacts/../artifacts"), &root));
        assert!(!is_within(dir.path(), &root));
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(root.join("artifacts"), dir.path().join("link")).unwrap();
            assert!(is_within(&dir.path().join("link"), &root));
        }
    }
}
