//! The `Browser` domain: `Browser.close`, which `browser-pilot browser stop` sends to a browser
//! the Broker owns. Wire shapes only; who may close a browser is `browser/`'s rule.

use serde::Serialize;

use super::command::{Command, Empty};

/// `Browser.close`: closes the browser gracefully.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Close {}

impl Command for Close {
    const METHOD: &'static str = "Browser.close";
    type Reply = Empty;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::command::testing::{params, reply};
    use super::*;

    #[test]
    fn close_has_the_wire_shape() {
        assert_eq!(params(&Close {}), json!({}));
        reply::<Close>(json!({}));
        // What `browser stop` writes on its own socket.
        assert_eq!(
            crate::cdp::request_line(1, &Close {}),
            r#"{"id":1,"method":"Browser.close","params":{}}"#
        );
    }
}
