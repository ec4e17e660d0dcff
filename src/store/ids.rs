//! Typed ids for the functions that take several ids in a row (a Lease is named by its
//! Connection, Workspace and id; a tab by its Workspace and opaque `targetId`): a transposed
//! argument is a compile error, not a Lease or tab that is never found. Each binds as SQL text
//! and reads back from it (`ToSql`/`FromSql`), serializes as its text, and reads as `&str`
//! (`Deref`) wherever a single id is formatted or compared; the text is the caller's prefixed
//! id, unchanged. Owns the types only: minting ids is `protocol::ids`.

use rusqlite::types::{FromSql, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

macro_rules! text_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl From<&$name> for String {
            fn from(id: &$name) -> String {
                id.0.clone()
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<&$name> for String {
            fn eq(&self, other: &&$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> $name {
                $name(id)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> $name {
                $name(id.to_owned())
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                self.0.to_sql()
            }
        }

        impl FromSql for $name {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<$name> {
                String::column_result(value).map($name)
            }
        }
    };
}

text_id!(
    /// A Connection's id (`connection:...`).
    ConnectionId
);
text_id!(
    /// A Workspace's id (`workspace:...`).
    WorkspaceId
);
text_id!(
    /// A Lease's id (`lease:...`).
    LeaseId
);
text_id!(
    /// A Command's id (`command:...`).
    CommandId
);
text_id!(
    /// A tab as one Workspace names it: the opaque `targetId` (`target:...`) the Broker handed
    /// out, never the browser's own target id.
    TargetRef
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_binds_and_reads_back_as_its_text() {
        let db = rusqlite::Connection::open_in_memory().unwrap();
        let id = LeaseId::from("lease:1");
        let back: LeaseId = db.query_row("SELECT ?1", [&id], |row| row.get(0)).unwrap();
        assert_eq!(back, id);
        assert_eq!(back.to_string(), "lease:1");
    }
}
