//! The one async entry to the store: `Store::call` (units of work that write, or read and
//! write) and `Store::call_read` (reads). Every async caller in the crate reaches the store
//! through these two methods; they own how a synchronous store call is moved off the tokio
//! workers and how a failure to run it (a panic in the unit of work, a stopped store thread)
//! becomes a `StoreError` instead of a hang or a silent default. No SQL lives here, and nothing
//! here knows a table.

use super::db::Store;
use super::error::StoreError;

impl Store {
    /// Runs `unit` (a closure over the synchronous store API) as one unit of work that may
    /// write, and returns its result. A panic inside `unit` is logged and answered with
    /// `StoreError::Unavailable`; it never unwinds into the caller's task.
    pub async fn call<T, F>(&self, unit: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    {
        self.hop(unit).await
    }

    /// Runs `unit`, which only reads, and returns its result. Same failure rules as `call`.
    pub async fn call_read<T, F>(&self, unit: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    {
        self.hop(unit).await
    }

    async fn hop<T, F>(&self, unit: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    {
        let store = self.clone();
        match tokio::task::spawn_blocking(move || unit(&store)).await {
            Ok(result) => result,
            Err(join) => {
                tracing::error!(error = %join, "store: a unit of work did not complete");
                Err(StoreError::Unavailable)
            }
        }
    }
}
