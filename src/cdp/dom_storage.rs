//! The `DOMStorage` domain: one origin's `localStorage` or `sessionStorage` read and written on a
//! page session (`DOMStorage.getDOMStorageItems`, `DOMStorage.setDOMStorageItem`). Chromium
//! answers only for an origin that a frame of that page shows ("Frame not found for the given
//! storage id" otherwise; docs/cdp.md, "browser contexts"). Wire shapes only: which origins a
//! tool reads or writes is `tools::storage`'.

use serde::{Deserialize, Serialize};

use super::command::{Command, Empty};

/// Which storage area: an origin's `localStorage`, or its `sessionStorage` in this page.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageId {
    pub security_origin: String,
    pub is_local_storage: bool,
}

/// `DOMStorage.getDOMStorageItems`: every `[key, value]` pair of the area.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GetDomStorageItems {
    pub storage_id: StorageId,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DomStorageItems {
    #[serde(default)]
    pub entries: Vec<(String, String)>,
}

impl Command for GetDomStorageItems {
    const METHOD: &'static str = "DOMStorage.getDOMStorageItems";
    type Reply = DomStorageItems;
}

/// `DOMStorage.setDOMStorageItem`: one key of the area (the page sees a `storage` event in its
/// other documents of that origin, as for any write).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetDomStorageItem {
    pub storage_id: StorageId,
    pub key: String,
    pub value: String,
}

impl Command for SetDomStorageItem {
    const METHOD: &'static str = "DOMStorage.setDOMStorageItem";
    type Reply = Empty;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::command::testing::{params, reply};
    use super::*;

    /// Shapes and a reply recorded from Chromium 156.
    #[test]
    fn dom_storage_calls_have_the_wire_shape() {
        let id = StorageId {
            security_origin: "http://127.0.0.1:44949".into(),
            is_local_storage: true,
        };
        assert_eq!(
            params(&GetDomStorageItems {
                storage_id: id.clone()
            }),
            json!({"storageId": {"securityOrigin": "http://127.0.0.1:44949", "isLocalStorage": true}})
        );
        assert_eq!(
            params(&SetDomStorageItem {
                storage_id: id,
                key: "k".into(),
                value: "v".into()
            }),
            json!({"storageId": {"securityOrigin": "http://127.0.0.1:44949", "isLocalStorage": true}, "key": "k", "value": "v"})
        );
        let items = reply::<GetDomStorageItems>(json!({"entries": [["k", "v-44949"]]}));
        assert_eq!(items.entries, vec![("k".to_owned(), "v-44949".to_owned())]);
    }
}
