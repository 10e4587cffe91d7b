//! The invocation log: one record per proxied function call, in a small
//! SQLite file of the data dir (`<data-dir>/invocations.db`), for both
//! backends (the invoke proxy always runs in the operator).
//!
//! Recording never waits: [`InvocationLog::record`] puts the record on a
//! bounded queue (a full queue drops the record and counts it) and one writer
//! thread inserts what gathered in 20 ms in one transaction. It keeps the newest
//! `keep` records per namespace: a namespace is pruned each time it got
//! `keep / 64` more records, so it may briefly hold that many extra. Queries
//! go through the same queue, so a query sees every record queued before it.
//!
//! The process's log is installed once by `serve` ([`install`]) and found by
//! the proxy and the API with [`installed`]; without one nothing is recorded.

use sless_wire::{Invocation, InvocationSource};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use tokio::sync::{mpsc, oneshot};

/// File name of the log in the data dir.
pub const FILE: &str = "invocations.db";
/// Records kept per namespace by default.
pub const KEEP_PER_NAMESPACE: usize = 10_000;
/// Records waiting for the writer; more are dropped (and counted).
const QUEUE: usize = 16_384;
/// Most records written in one transaction.
const BATCH: usize = 1024;
/// How long the writer lets records gather after the first one of a batch.
const LINGER: std::time::Duration = std::time::Duration::from_millis(20);
/// Longest path kept in a record, in characters.
const PATH_MAX_CHARS: usize = 1024;
/// Longest request id kept in a record, in characters.
const REQUEST_ID_MAX_CHARS: usize = 128;

/// The records, one B-tree keyed by (namespace, id): a record costs one
/// insert (the table of version 1 had a rowid and two indexes, three B-trees
/// per record), the newest of a namespace are a backwards range scan, and a
/// prune deletes one range. Ids are given by the writer (an in-memory counter
/// started at the largest stored id), increasing across namespaces.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS invocation_records (
    namespace TEXT NOT NULL,
    id INTEGER NOT NULL,
    time TEXT NOT NULL,
    function TEXT NOT NULL,
    source TEXT NOT NULL,
    trigger TEXT,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    status INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    request_id TEXT NOT NULL,
    request_bytes INTEGER,
    response_bytes INTEGER,
    PRIMARY KEY (namespace, id)
) WITHOUT ROWID;
";

const COLUMNS: &str = "time, namespace, function, source, trigger, method, path, status, \
                       duration_ms, request_id, request_bytes, response_bytes";

/// Moves the records of a version 1 log (table `invocations`, before
/// 2026-12-05) into [`SCHEMA`]'s table, ids and order kept, in one
/// transaction with the table's removal.
const MIGRATE_V1: &str = "
BEGIN IMMEDIATE;
INSERT INTO invocation_records (id, time, namespace, function, source, trigger, method, path,
    status, duration_ms, request_id, request_bytes, response_bytes)
    SELECT id, time, namespace, function, source, trigger, method, path,
    status, duration_ms, request_id, request_bytes, response_bytes FROM invocations;
DROP TABLE invocations;
COMMIT;
";

/// Deletes all but the newest `?2 + 1` records of namespace `?1`.
const PRUNE: &str = "DELETE FROM invocation_records WHERE namespace = ?1 AND id < (
    SELECT id FROM invocation_records WHERE namespace = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)";

/// Why the invocation log cannot be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum InvocationLogError {
    /// SQLite failed on the log file.
    #[error("invocation log {path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// The writer thread could not be started.
    #[error("starting the invocation log writer: {0}")]
    Thread(std::io::Error),
    /// The writer thread is gone (the log is closed).
    #[error("the invocation log writer has stopped")]
    Stopped,
}

enum Msg {
    Record(Invocation),
    Query {
        namespace: String,
        function: Option<String>,
        limit: usize,
        reply: oneshot::Sender<rusqlite::Result<Vec<Invocation>>>,
    },
    Flush(oneshot::Sender<()>),
}

struct Shared {
    tx: mpsc::Sender<Msg>,
    path: PathBuf,
    recorded: AtomicU64,
    dropped: AtomicU64,
}

/// A handle on the invocation log (cheap to clone).
#[derive(Clone)]
pub struct InvocationLog {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for InvocationLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InvocationLog")
            .field("path", &self.shared.path)
            .finish_non_exhaustive()
    }
}

impl InvocationLog {
    /// Opens (creating) `<data_dir>/invocations.db` and starts its writer
    /// thread, which keeps the newest `keep` (at least 1) records per namespace
    /// (plus at most `keep / 64` between two prunes).
    pub fn open(data_dir: &Path, keep: usize) -> Result<InvocationLog, InvocationLogError> {
        let path = data_dir.join(FILE);
        let sqlite = |source| InvocationLogError::Sqlite {
            path: path.clone(),
            source,
        };
        let conn = rusqlite::Connection::open(&path).map_err(sqlite)?;
        // A log: losing the last records on power loss is acceptable, a slow
        // fsync per batch is not.
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000;",
        )
        .map_err(sqlite)?;
        conn.execute_batch(SCHEMA).map_err(sqlite)?;
        let v1: bool = conn
            .query_row(
                "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'invocations'",
                [],
                |r| r.get(0),
            )
            .map_err(sqlite)?;
        if v1 {
            conn.execute_batch(MIGRATE_V1).map_err(sqlite)?;
        }
        let last_id: i64 = conn
            .query_row(
                "SELECT coalesce(max(id), 0) FROM invocation_records",
                [],
                |r| r.get(0),
            )
            .map_err(sqlite)?;
        let (tx, rx) = mpsc::channel(QUEUE);
        let shared = Arc::new(Shared {
            tx,
            path: path.clone(),
            recorded: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        });
        let keep = keep.max(1);
        std::thread::Builder::new()
            .name("sless-invocations".into())
            .spawn(move || writer(conn, rx, keep, last_id))
            .map_err(InvocationLogError::Thread)?;
        Ok(InvocationLog { shared })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Queues one record; never waits. A full queue drops it (counted in
    /// [`InvocationLog::dropped`], warned about in the operator's log).
    pub fn record(&self, mut inv: Invocation) {
        truncate(&mut inv.path, PATH_MAX_CHARS);
        truncate(&mut inv.request_id, REQUEST_ID_MAX_CHARS);
        match self.shared.tx.try_send(Msg::Record(inv)) {
            Ok(()) => {
                self.shared.recorded.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                let n = self.shared.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                if n == 1 || n.is_multiple_of(1000) {
                    tracing::warn!(
                        dropped = n,
                        "invocation log queue full or closed: records dropped"
                    );
                }
            }
        }
    }

    /// Records queued so far.
    pub fn recorded(&self) -> u64 {
        self.shared.recorded.load(Ordering::Relaxed)
    }

    /// Records dropped so far (queue full or writer stopped).
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// The newest `limit` records of `namespace` (of one function when
    /// `function` is set), newest first; sees every record queued before.
    pub async fn query(
        &self,
        namespace: &str,
        function: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Invocation>, InvocationLogError> {
        let (reply, answer) = oneshot::channel();
        self.shared
            .tx
            .send(Msg::Query {
                namespace: namespace.to_string(),
                function: function.map(str::to_string),
                limit,
                reply,
            })
            .await
            .map_err(|_| InvocationLogError::Stopped)?;
        answer
            .await
            .map_err(|_| InvocationLogError::Stopped)?
            .map_err(|source| InvocationLogError::Sqlite {
                path: self.shared.path.clone(),
                source,
            })
    }

    /// Waits until every record queued before has been written.
    pub async fn flush(&self) -> Result<(), InvocationLogError> {
        let (done, wait) = oneshot::channel();
        self.shared
            .tx
            .send(Msg::Flush(done))
            .await
            .map_err(|_| InvocationLogError::Stopped)?;
        wait.await.map_err(|_| InvocationLogError::Stopped)
    }

    /// The log's counters in the Prometheus text format.
    pub fn metrics_text(&self) -> String {
        format!(
            "# HELP sless_invocations_recorded_total Proxied function calls queued for the invocation log.\n\
             # TYPE sless_invocations_recorded_total counter\n\
             sless_invocations_recorded_total {}\n\
             # HELP sless_invocations_dropped_total Invocation records dropped because the log's queue was full.\n\
             # TYPE sless_invocations_dropped_total counter\n\
             sless_invocations_dropped_total {}\n",
            self.recorded(),
            self.dropped()
        )
    }
}

fn truncate(s: &mut String, max_chars: usize) {
    if let Some((i, _)) = s.char_indices().nth(max_chars) {
        s.truncate(i);
    }
}

/// The writer thread: batches records into transactions, prunes, answers
/// queries and flushes in queue order. Ends when every handle is gone.
fn writer(conn: rusqlite::Connection, mut rx: mpsc::Receiver<Msg>, keep: usize, last_id: i64) {
    let mut w = Writer::new(conn, keep, last_id);
    while let Some(first) = rx.blocking_recv() {
        if matches!(first, Msg::Record(_)) {
            // Let the records of a burst gather: one commit for many of them.
            std::thread::sleep(LINGER);
        }
        let mut next = Some(first);
        while let Some(msg) = next {
            match msg {
                Msg::Record(inv) => {
                    w.batch.push(inv);
                    if w.batch.len() >= BATCH {
                        w.write_out();
                    }
                }
                other => {
                    w.write_out();
                    answer(&w.conn, other);
                }
            }
            next = rx.try_recv().ok();
        }
        w.write_out();
    }
}

/// The writer's state: its connection, the pending batch, and per namespace
/// the records written since that namespace was last pruned.
struct Writer {
    conn: rusqlite::Connection,
    batch: Vec<Invocation>,
    keep: usize,
    /// A namespace is pruned once this many records were added to it: pruning
    /// walks `keep` index entries, so it is amortised over many inserts.
    prune_every: usize,
    since_prune: HashMap<String, usize>,
    /// The id of the newest record written.
    last_id: i64,
}

impl Writer {
    fn new(conn: rusqlite::Connection, keep: usize, last_id: i64) -> Writer {
        Writer {
            last_id,
            conn,
            batch: Vec::with_capacity(BATCH),
            keep,
            prune_every: prune_every(keep),
            since_prune: HashMap::new(),
        }
    }

    fn write_out(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let mut due = Vec::new();
        for inv in &self.batch {
            let n = self.since_prune.entry(inv.namespace.clone()).or_insert(0);
            *n += 1;
            if *n >= self.prune_every {
                *n = 0;
                due.push(inv.namespace.clone());
            }
        }
        match write_batch(&mut self.conn, &self.batch, self.last_id, &due, self.keep) {
            Ok(()) => self.last_id += self.batch.len() as i64,
            Err(e) => {
                tracing::error!(error = %e, records = self.batch.len(), "cannot write to the invocation log")
            }
        }
        self.batch.clear();
    }
}

/// How many records a namespace gets between two prunes: 1/64 of `keep`
/// (a namespace may briefly hold that many more than `keep`).
fn prune_every(keep: usize) -> usize {
    (keep / 64).max(1)
}

fn answer(conn: &rusqlite::Connection, msg: Msg) {
    match msg {
        Msg::Query {
            namespace,
            function,
            limit,
            reply,
        } => {
            let _ = reply.send(select(conn, &namespace, function.as_deref(), limit));
        }
        Msg::Flush(done) => {
            let _ = done.send(());
        }
        Msg::Record(_) => {}
    }
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Inserts `batch` in one transaction, with the ids following `last_id`, and
/// prunes each namespace of `prune` down to its newest `keep` records.
fn write_batch(
    conn: &mut rusqlite::Connection,
    batch: &[Invocation],
    last_id: i64,
    prune: &[String],
    keep: usize,
) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare_cached(&format!(
            "INSERT INTO invocation_records ({COLUMNS}, id) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
        ))?;
        for (id, inv) in (last_id + 1..).zip(batch) {
            insert.execute(rusqlite::params![
                inv.time,
                inv.namespace,
                inv.function,
                inv.source.as_str(),
                inv.trigger,
                inv.method,
                inv.path,
                inv.status,
                to_i64(inv.duration_ms),
                inv.request_id,
                inv.request_bytes.map(to_i64),
                inv.response_bytes.map(to_i64),
                id,
            ])?;
        }
        let mut stmt = tx.prepare_cached(PRUNE)?;
        let offset = to_i64(keep.saturating_sub(1) as u64);
        for ns in prune {
            stmt.execute(rusqlite::params![ns, offset])?;
        }
    }
    tx.commit()
}

fn select(
    conn: &rusqlite::Connection,
    namespace: &str,
    function: Option<&str>,
    limit: usize,
) -> rusqlite::Result<Vec<Invocation>> {
    let limit = to_i64(limit as u64);
    let mut stmt;
    let rows = match function {
        Some(f) => {
            stmt = conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM invocation_records WHERE namespace = ?1 AND function = ?2 \
                 ORDER BY id DESC LIMIT ?3"
            ))?;
            stmt.query_map(rusqlite::params![namespace, f, limit], row_to_invocation)?
        }
        None => {
            stmt = conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM invocation_records WHERE namespace = ?1 ORDER BY id DESC LIMIT ?2"
            ))?;
            stmt.query_map(rusqlite::params![namespace, limit], row_to_invocation)?
        }
    };
    rows.collect()
}

fn row_to_invocation(row: &rusqlite::Row<'_>) -> rusqlite::Result<Invocation> {
    let source: String = row.get(3)?;
    let source = InvocationSource::parse(&source).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            3,
            rusqlite::types::Type::Text,
            format!("unknown invocation source {source:?}").into(),
        )
    })?;
    let unsigned = |v: Option<i64>| v.map(|n| u64::try_from(n).unwrap_or(0));
    Ok(Invocation {
        time: row.get(0)?,
        namespace: row.get(1)?,
        function: row.get(2)?,
        source,
        trigger: row.get(4)?,
        method: row.get(5)?,
        path: row.get(6)?,
        status: row.get(7)?,
        duration_ms: unsigned(row.get(8)?).unwrap_or(0),
        request_id: row.get(9)?,
        request_bytes: unsigned(row.get(10)?),
        response_bytes: unsigned(row.get(11)?),
    })
}

static INSTALLED: OnceLock<InvocationLog> = OnceLock::new();

/// Makes `log` the process's invocation log (once; false if one already was).
pub fn install(log: InvocationLog) -> bool {
    INSTALLED.set(log).is_ok()
}

/// The process's invocation log, if `serve` installed one.
pub fn installed() -> Option<&'static InvocationLog> {
    INSTALLED.get()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inv(ns: &str, function: &str, n: u64) -> Invocation {
        Invocation {
            time: format!("2026-12-02T10:00:{:02}.000Z", n % 60),
            namespace: ns.into(),
            function: function.into(),
            source: InvocationSource::Invoke,
            trigger: None,
            method: "POST".into(),
            path: "/".into(),
            status: 200,
            duration_ms: n,
            request_id: format!("req-{n}"),
            request_bytes: Some(n),
            response_bytes: None,
        }
    }

    #[tokio::test]
    async fn records_round_trip_newest_first_with_filters() {
        let dir = tempfile::tempdir().unwrap();
        let log = InvocationLog::open(dir.path(), 100).unwrap();
        log.record(inv("ns-a", "f", 1));
        let mut cron = inv("ns-a", "g", 2);
        cron.source = InvocationSource::Cron;
        cron.trigger = Some("every-minute".into());
        cron.status = 502;
        log.record(cron.clone());
        log.record(inv("ns-b", "f", 3));
        // A query sees everything queued before it.
        let all = log.query("ns-a", None, 10).await.unwrap();
        assert_eq!(all, vec![cron.clone(), inv("ns-a", "f", 1)]);
        let g = log.query("ns-a", Some("g"), 10).await.unwrap();
        assert_eq!(g, vec![cron]);
        assert_eq!(log.query("ns-a", None, 1).await.unwrap().len(), 1);
        assert!(log.query("ns-c", None, 10).await.unwrap().is_empty());
        assert_eq!(log.recorded(), 3);
        assert_eq!(log.dropped(), 0);
        assert!(
            log.metrics_text()
                .contains("sless_invocations_recorded_total 3\n")
        );
    }

    #[tokio::test]
    async fn retention_keeps_the_newest_per_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let log = InvocationLog::open(dir.path(), 3).unwrap();
        for n in 0..10 {
            log.record(inv("busy", "f", n));
            if n % 4 == 0 {
                // Several batches, not just one.
                log.flush().await.unwrap();
            }
        }
        log.record(inv("quiet", "f", 100));
        log.flush().await.unwrap();
        let busy = log.query("busy", None, 100).await.unwrap();
        let kept: Vec<u64> = busy.iter().map(|i| i.duration_ms).collect();
        assert_eq!(kept, vec![9, 8, 7]);
        assert_eq!(log.query("quiet", None, 100).await.unwrap().len(), 1);
        // Nothing else is left in the file.
        let conn = rusqlite::Connection::open(log.path()).unwrap();
        let total: i64 = conn
            .query_row("SELECT count(*) FROM invocation_records", [], |r| r.get(0))
            .unwrap();
        assert_eq!(total, 4);
    }

    #[tokio::test]
    async fn pruning_is_amortised_and_bounded() {
        assert_eq!(prune_every(3), 1);
        assert_eq!(prune_every(KEEP_PER_NAMESPACE), 156);
        let dir = tempfile::tempdir().unwrap();
        let keep = 128; // pruned every 2 records
        let log = InvocationLog::open(dir.path(), keep).unwrap();
        for n in 0..1000 {
            log.record(inv("ns", "f", n));
            if n % 7 == 0 {
                log.flush().await.unwrap();
            }
            let held = log.query("ns", None, 1000).await.unwrap().len();
            assert!(held <= keep + prune_every(keep), "{held} after {n}");
        }
        let got = log.query("ns", None, 1000).await.unwrap();
        assert!(got.len() >= keep, "{}", got.len());
        assert_eq!(got[0].duration_ms, 999);
        // Newest first and contiguous: only the oldest were removed.
        for (i, rec) in got.iter().enumerate() {
            assert_eq!(rec.duration_ms, 999 - i as u64);
        }
    }

    #[tokio::test]
    async fn the_log_survives_a_reopen_and_bounds_long_fields() {
        let dir = tempfile::tempdir().unwrap();
        {
            let log = InvocationLog::open(dir.path(), 10).unwrap();
            let mut long = inv("ns", "f", 1);
            long.path = format!("/{}", "é".repeat(5000));
            long.request_id = "x".repeat(1000);
            log.record(long);
            log.flush().await.unwrap();
        }
        let log = InvocationLog::open(dir.path(), 10).unwrap();
        let got = log.query("ns", None, 10).await.unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].path.chars().count(), PATH_MAX_CHARS);
        assert_eq!(got[0].request_id.len(), REQUEST_ID_MAX_CHARS);
    }

    /// A log written by version 1 (table `invocations` with a rowid and two
    /// indexes) keeps its records, in order, after an upgrade.
    #[tokio::test]
    async fn a_version_1_log_is_migrated_with_its_records() {
        let dir = tempfile::tempdir().unwrap();
        {
            let conn = rusqlite::Connection::open(dir.path().join(FILE)).unwrap();
            conn.execute_batch(
                "CREATE TABLE invocations (
                    id INTEGER PRIMARY KEY, time TEXT NOT NULL, namespace TEXT NOT NULL,
                    function TEXT NOT NULL, source TEXT NOT NULL, trigger TEXT,
                    method TEXT NOT NULL, path TEXT NOT NULL, status INTEGER NOT NULL,
                    duration_ms INTEGER NOT NULL, request_id TEXT NOT NULL,
                    request_bytes INTEGER, response_bytes INTEGER);
                 CREATE INDEX invocations_by_namespace ON invocations (namespace, id);
                 INSERT INTO invocations (id, time, namespace, function, source, method, path,
                     status, duration_ms, request_id, request_bytes)
                 VALUES (7, '2026-12-02T10:00:01.000Z', 'ns', 'f', 'invoke', 'POST', '/', 200, 1, 'req-1', 1),
                        (9, '2026-12-02T10:00:02.000Z', 'ns', 'f', 'invoke', 'POST', '/', 200, 2, 'req-2', 2),
                        (40, '2026-12-02T10:00:03.000Z', 'other', 'f', 'invoke', 'POST', '/', 200, 3, 'req-3', 3);",
            )
            .unwrap();
        }
        let log = InvocationLog::open(dir.path(), 10).unwrap();
        assert_eq!(
            log.query("ns", None, 10).await.unwrap(),
            vec![inv("ns", "f", 2), inv("ns", "f", 1)]
        );
        // New records get ids above every old one, across namespaces.
        log.record(inv("ns", "f", 4));
        log.flush().await.unwrap();
        assert_eq!(
            log.query("ns", None, 1).await.unwrap(),
            vec![inv("ns", "f", 4)]
        );
        let conn = rusqlite::Connection::open(log.path()).unwrap();
        let (old_tables, min_new_id): (i64, i64) = conn
            .query_row(
                "SELECT (SELECT count(*) FROM sqlite_master WHERE name LIKE 'invocations%'),
                        (SELECT id FROM invocation_records WHERE duration_ms = 4)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(old_tables, 0, "the version 1 table and its index are gone");
        assert_eq!(min_new_id, 41);
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        let mut s = "aé😀b".to_string();
        truncate(&mut s, 3);
        assert_eq!(s, "aé😀");
        let mut short = "ab".to_string();
        truncate(&mut short, 3);
        assert_eq!(short, "ab");
    }
}
