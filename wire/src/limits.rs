//! Field limits and defaults. The operator enforces them; the provider checks
//! them at plan time so mistakes surface before anything is applied.

/// Smallest `memory_mb` a function may ask for.
pub const MEMORY_MB_MIN: u32 = 64;
/// Largest `memory_mb` a function may ask for.
pub const MEMORY_MB_MAX: u32 = 4096;
/// `memory_mb` when none is given.
pub const MEMORY_MB_DEFAULT: u32 = 128;

/// Shortest `timeout_sec` (per invocation).
pub const TIMEOUT_SEC_MIN: u32 = 1;
/// Longest `timeout_sec` (per invocation).
pub const TIMEOUT_SEC_MAX: u32 = 900;
/// `timeout_sec` when none is given.
pub const TIMEOUT_SEC_DEFAULT: u32 = 30;

/// Largest `min_instances` (the local backend keeps at most one process per function).
pub const MIN_INSTANCES_MAX: u32 = 1;
/// `min_instances` of a function when none is given: scale to zero when idle.
pub const MIN_INSTANCES_DEFAULT: u32 = 0;

/// Shortest `idle_timeout_sec`.
pub const IDLE_TIMEOUT_SEC_MIN: u32 = 1;
/// Longest `idle_timeout_sec` (a day).
pub const IDLE_TIMEOUT_SEC_MAX: u32 = 86_400;
/// `idle_timeout_sec` when none is given.
pub const IDLE_TIMEOUT_SEC_DEFAULT: u32 = 300;

/// Longest object name: a DNS-1123 label.
pub const NAME_MAX_LEN: usize = 63;
/// Longest entrypoint string.
pub const ENTRYPOINT_MAX_LEN: usize = 255;

/// Most environment variables on one function.
pub const ENV_VARS_MAX: usize = 256;
/// Longest environment variable name.
pub const ENV_NAME_MAX_LEN: usize = 256;
/// Longest environment variable value, in bytes.
pub const ENV_VALUE_MAX_BYTES: usize = 32 * 1024;
/// Environment variable names starting with this are reserved for the platform.
pub const ENV_RESERVED_PREFIX: &str = "SLESS_";

/// Largest code upload (the zip as sent), in bytes. Larger bodies get 413.
pub const CODE_ZIP_MAX_BYTES: usize = 64 * 1024 * 1024;
/// Largest total unpacked size of one code zip, in bytes (zip-bomb guard).
pub const CODE_UNPACKED_MAX_BYTES: u64 = 512 * 1024 * 1024;
/// Most entries in one code zip (zip-bomb guard).
pub const CODE_ZIP_MAX_ENTRIES: usize = 20_000;

/// Largest request body of a function invocation (the invoke URL and http
/// triggers), in bytes; larger bodies get 413. Services stream without a limit.
pub const INVOKE_BODY_MAX_BYTES: usize = 16 * 1024 * 1024;

/// Largest request body accepted by JSON endpoints, in bytes.
pub const JSON_BODY_MAX_BYTES: usize = 1024 * 1024;
