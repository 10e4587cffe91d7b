//! Safe handling of uploaded code zips (owned by the local-backend work; stub
//! until it lands).

/// Why a code zip was refused.
#[derive(Debug, thiserror::Error)]
pub enum ZipError {
    /// The bytes are not a readable zip archive.
    #[error("not a zip archive: {0}")]
    NotAZip(String),
}
