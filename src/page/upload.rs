//! `browser.upload` on the page side: choosing the file input (`PickFileInput`, by ref, by
//! index among the document's file inputs, or the only one), and reading back what it holds
//! after the files were set (`UploadReadback`). The element handle for `DOM.setFileInputFiles`
//! comes from `run::picked_file_input`. On a remote browser the bytes travel instead of a path:
//! `UploadChunk` hands them to the isolated world piece by piece and `UploadSetFiles` selects
//! them as a File. File names read in the page are compared there and never returned. The
//! other way, `DownloadOpen` / `DownloadChunk` read a download the page made itself (a `blob:` or
//! `data:` URL) for a remote browser's download capture. No I/O.

use serde::Deserialize;
use serde_json::json;

use super::actions::RefTarget;
use super::error::PageError;
use super::script::{PageScript, Script, ScriptCall, decode};

/// `Runtime.callFunctionOn` declaration run on an element in the isolated world: its index
/// among the document's file inputs, or -1 (`run::file_input_index`).
pub const FILE_INPUT_INDEX: &str = include_str!("js/fileinputindex.js");

/// Which file input to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileInputChoice {
    /// The element of an Observation ref.
    Ref(RefTarget),
    /// The n-th `<input type=file>` of the document (0-based, document order).
    Index(u32),
    /// The document's only file input.
    Only,
}

/// Finds and remembers the file input (`js/upload.js`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PickFileInput(pub FileInputChoice);

/// The chosen input before the files are set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PickedInput {
    pub multiple: bool,
    /// Files it held before.
    pub file_count: u32,
    /// File inputs in the document.
    pub file_inputs: u32,
}

impl PageScript for PickFileInput {
    type Output = PickedInput;

    fn call(&self) -> Result<ScriptCall, PageError> {
        let argument = match &self.0 {
            FileInputChoice::Ref(target) => target.argument()?,
            FileInputChoice::Index(index) => json!({ "index": index }),
            FileInputChoice::Only => json!({}),
        };
        Ok(ScriptCall {
            script: Script::PickFileInput,
            argument,
        })
    }

    fn parse(&self, json: &str) -> Result<PickedInput, PageError> {
        decode(Script::PickFileInput, json)
    }
}

/// Reads back the remembered input: is it still there, and does it hold exactly one file
/// named `expected_name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadReadback {
    pub expected_name: String,
}

/// Where the remembered input is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputState {
    /// Still in the document.
    Connected,
    /// Gone, and another file input with its id (or name in its form) took its place.
    Replaced,
    /// Gone without a replacement.
    Removed,
    /// The document that held it was replaced (a new world without the record).
    Unreadable,
}

/// What the input (or its replacement) holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Readback {
    pub state: InputState,
    #[serde(default)]
    pub file_count: u32,
    /// Exactly one file, with the expected name.
    #[serde(default)]
    pub name_matches: bool,
}

impl PageScript for UploadReadback {
    type Output = Readback;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::UploadReadback,
            argument: json!({ "expectedName": self.expected_name }),
        })
    }

    fn parse(&self, json: &str) -> Result<Readback, PageError> {
        let readback: Readback = decode(Script::UploadReadback, json)?;
        match readback.name_matches && readback.file_count != 1 {
            true => Err(PageError::UnexpectedShape {
                script: Script::UploadReadback.entry(),
                detail: "a name match needs exactly one file".to_owned(),
            }),
            false => Ok(readback),
        }
    }
}

/// One base64 piece of a remote upload's bytes, appended to the isolated world's buffer
/// (`reset`: the first piece, a new buffer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadChunk {
    pub reset: bool,
    pub base64: String,
}

/// How many bytes the world holds after a piece.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct ChunkReceived {
    pub received: u64,
}

impl PageScript for UploadChunk {
    type Output = ChunkReceived;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::UploadChunk,
            argument: json!({ "reset": self.reset, "data": self.base64 }),
        })
    }

    fn parse(&self, json: &str) -> Result<ChunkReceived, PageError> {
        decode(Script::UploadChunk, json)
    }
}

/// Selects the collected bytes (exactly `byte_len` of them) as one File named `name` of type
/// `mime_type` in the picked input, with the `input` and `change` events of a selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadSetFiles {
    pub name: String,
    pub mime_type: String,
    pub byte_len: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct FilesSet {
    pub set: bool,
}

impl PageScript for UploadSetFiles {
    type Output = FilesSet;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::UploadSetFiles,
            argument: json!({ "name": self.name, "type": self.mime_type, "byteLength": self.byte_len }),
        })
    }

    fn parse(&self, json: &str) -> Result<FilesSet, PageError> {
        decode(Script::UploadSetFiles, json)
    }
}

/// Opens a page-made download (`blob:` or `data:` URL) in the isolated world, refusing one
/// larger than `max_bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownloadOpen {
    pub url: String,
    pub max_bytes: u64,
}

/// The opened download's size (`too_large`: past the bound, not kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenedDownload {
    pub size: u64,
    pub too_large: bool,
}

impl PageScript for DownloadOpen {
    type Output = OpenedDownload;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::DownloadOpen,
            argument: json!({ "url": self.url, "maxBytes": self.max_bytes }),
        })
    }

    fn parse(&self, json: &str) -> Result<OpenedDownload, PageError> {
        decode(Script::DownloadOpen, json)
    }
}

/// One base64 piece of the opened download.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownloadChunk {
    pub offset: u64,
    pub length: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DownloadPiece {
    pub data: String,
}

impl PageScript for DownloadChunk {
    type Output = DownloadPiece;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::DownloadChunk,
            argument: json!({ "offset": self.offset, "length": self.length }),
        })
    }

    fn parse(&self, json: &str) -> Result<DownloadPiece, PageError> {
        decode(Script::DownloadChunk, json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_become_arguments() {
        let by_ref = PickFileInput(FileInputChoice::Ref(RefTarget::new("observation:ab", 3)));
        assert_eq!(
            by_ref.call().unwrap().argument,
            json!({"observationKey": "observation:ab", "ref": 3})
        );
        let by_index = PickFileInput(FileInputChoice::Index(2)).call().unwrap();
        assert_eq!(by_index.argument, json!({"index": 2}));
        assert_eq!(by_index.script, Script::PickFileInput);
        assert_eq!(
            PickFileInput(FileInputChoice::Only)
                .call()
                .unwrap()
                .argument,
            json!({})
        );
    }

    #[test]
    fn remote_upload_calls_carry_bytes_not_paths() {
        let chunk = UploadChunk {
            reset: true,
            base64: "aGk=".to_owned(),
        };
        let call = chunk.call().unwrap();
        assert_eq!(call.script, Script::UploadChunk);
        assert_eq!(call.argument, json!({"reset": true, "data": "aGk="}));
        assert_eq!(chunk.parse(r#"{"received":2}"#).unwrap().received, 2);
        let set = UploadSetFiles {
            name: "a.txt".to_owned(),
            mime_type: "text/plain".to_owned(),
            byte_len: 2,
        };
        let call = set.call().unwrap();
        assert!(call.script.writes_page() && !Script::UploadChunk.writes_page());
        assert_eq!(
            call.argument,
            json!({"name": "a.txt", "type": "text/plain", "byteLength": 2})
        );
        assert!(set.parse(r#"{"set":true}"#).unwrap().set);
    }

    #[test]
    fn page_made_downloads_are_read_in_pieces() {
        let open = DownloadOpen {
            url: "blob:http://127.0.0.1/x".to_owned(),
            max_bytes: 10,
        };
        let call = open.call().unwrap();
        assert!(call.script.awaits() && !call.script.writes_page());
        assert_eq!(
            call.argument,
            json!({"url": "blob:http://127.0.0.1/x", "maxBytes": 10})
        );
        let opened = open.parse(r#"{"size":12,"tooLarge":true}"#).unwrap();
        assert!(opened.too_large && opened.size == 12);
        let chunk = DownloadChunk {
            offset: 4,
            length: 8,
        };
        assert_eq!(
            chunk.call().unwrap().argument,
            json!({"offset": 4, "length": 8})
        );
        assert_eq!(chunk.parse(r#"{"data":"aGk="}"#).unwrap().data, "aGk=");
    }

    #[test]
    fn readbacks_decode() {
        let script = UploadReadback {
            expected_name: "a.txt".to_owned(),
        };
        let held = script
            .parse(r#"{"state":"connected","fileCount":1,"nameMatches":true}"#)
            .unwrap();
        assert_eq!(held.state, InputState::Connected);
        assert!(held.name_matches);
        assert_eq!(
            script.parse(r#"{"state":"removed"}"#).unwrap().state,
            InputState::Removed
        );
        assert!(
            script
                .parse(r#"{"state":"connected","fileCount":2,"nameMatches":true}"#)
                .is_err()
        );
    }
}
