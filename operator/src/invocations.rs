//! The invocation log: one record per proxied function call, in a small
//! SQLite file of the data dir (`<data-dir>/invocations.db`), for both
//! backends (the invoke proxy always runs in the operator).
//!
//! Recording never waits: [`InvocationLog::record`] puts the record on a
//! bounded queue (a full queue drops the record and counts it) and one writer
//! thread writes what gathered in 20 ms in one transaction, as one row per
//! namespace (a JSON array of its records). It keeps the newest `keep`
//! records per namespace: queries return no older ones, and a namespace's
//! older rows are deleted each time it got `keep / 64` more records. Queries
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

/// The records, a row per namespace per written batch: the batch's records
/// of that namespace as one JSON array (oldest first), keyed by the
/// namespace and the sequence number of its newest record. Sequence numbers
/// count a namespace's records from 1, so a row holds `last_seq - count + 1
/// ..= last_seq`, the newest of a namespace are a backwards range scan, and
/// pruning to the newest `keep` deletes one key range without walking it.
/// A row costs one B-tree insert however many records it holds: the per-row
/// tables before (2026-12-05, 2026-12-06) spent ~27,000 instructions of the
/// writer thread per proxied call, a fifth of the operator's work per call.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS invocation_batches (
    namespace TEXT NOT NULL,
    last_seq INTEGER NOT NULL,
    count INTEGER NOT NULL,
    records BLOB NOT NULL,
    PRIMARY KEY (namespace, last_seq)
) WITHOUT ROWID;
";

/// The columns of a record in the per-row tables of earlier versions:
/// `invocations` (version 1, until 2026-12-05) and `invocation_records`
/// (version 2, until 2026-12-07).
const OLD_COLUMNS: &str = "time, namespace, function, source, trigger, method, path, status, \
                           duration_ms, request_id, request_bytes, response_bytes";

/// The tables of earlier versions, oldest first, migrated when found.
const OLD_TABLES: [&str; 2] = ["invocations", "invocation_records"];

/// Deletes the rows of namespace `?1` whose records are all older than the
/// newest `keep`: `?2` is the namespace's newest sequence number minus `keep`.
const PRUNE: &str = "DELETE FROM invocation_batches WHERE namespace = ?1 AND last_seq <= ?2";

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
        let mut conn = rusqlite::Connection::open(&path).map_err(sqlite)?;
        // A log: losing the last records on power loss is acceptable, a slow
        // fsync per batch is not.
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000;",
        )
        .map_err(sqlite)?;
        conn.execute_batch(SCHEMA).map_err(sqlite)?;
        for table in OLD_TABLES {
            migrate(&mut conn, table).map_err(sqlite)?;
        }
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
            .spawn(move || writer(conn, rx, keep))
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
fn writer(conn: rusqlite::Connection, mut rx: mpsc::Receiver<Msg>, keep: usize) {
    let mut w = Writer::new(conn, keep);
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
                    w.answer(other);
                }
            }
            next = rx.try_recv().ok();
        }
        w.write_out();
    }
}

/// What the writer knows of a namespace it wrote to.
#[derive(Debug, Clone, Copy)]
struct Tally {
    /// The sequence number of the namespace's newest record.
    last_seq: i64,
    /// Records written since the namespace was last pruned.
    since_prune: usize,
}

/// The writer's state: its connection, the pending batch, and a tally of
/// every namespace written to since the log was opened.
struct Writer {
    conn: rusqlite::Connection,
    batch: Vec<Invocation>,
    keep: usize,
    /// A namespace is pruned once this many records were added to it.
    prune_every: usize,
    tallies: HashMap<String, Tally>,
}

impl Writer {
    fn new(conn: rusqlite::Connection, keep: usize) -> Writer {
        Writer {
            conn,
            batch: Vec::with_capacity(BATCH),
            keep,
            prune_every: prune_every(keep),
            tallies: HashMap::new(),
        }
    }

    fn write_out(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        if let Err(e) = self.write_batch() {
            tracing::error!(error = %e, records = self.batch.len(), "cannot write to the invocation log");
        }
        self.batch.clear();
    }

    /// Writes the batch in one transaction, a row per namespace, and prunes
    /// each namespace that got `prune_every` records since its last prune.
    /// The tallies change only when the transaction commits.
    fn write_batch(&mut self) -> rusqlite::Result<()> {
        // By namespace, each in arrival order (a stable sort).
        let mut records: Vec<&Invocation> = self.batch.iter().collect();
        records.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        let tx = self.conn.transaction()?;
        let mut written = Vec::new();
        for group in records.chunk_by(|a, b| a.namespace == b.namespace) {
            let namespace = &group[0].namespace;
            let mut tally = match self.tallies.get(namespace) {
                Some(t) => *t,
                None => Tally {
                    last_seq: newest_seq(&tx, namespace)?,
                    since_prune: 0,
                },
            };
            tally.last_seq += to_i64(group.len() as u64);
            insert_row(&tx, namespace, tally.last_seq, group)?;
            tally.since_prune += group.len();
            if tally.since_prune >= self.prune_every {
                tally.since_prune = 0;
                let floor = tally.last_seq - to_i64(self.keep as u64);
                tx.prepare_cached(PRUNE)?
                    .execute(rusqlite::params![namespace, floor])?;
            }
            written.push((namespace.clone(), tally));
        }
        tx.commit()?;
        self.tallies.extend(written);
        Ok(())
    }

    fn answer(&self, msg: Msg) {
        match msg {
            Msg::Query {
                namespace,
                function,
                limit,
                reply,
            } => {
                let found = select(
                    &self.conn,
                    &namespace,
                    function.as_deref(),
                    limit,
                    self.keep,
                );
                let _ = reply.send(found);
            }
            Msg::Flush(done) => {
                let _ = done.send(());
            }
            Msg::Record(_) => {}
        }
    }
}

/// How many records a namespace gets between two prunes: 1/64 of `keep`.
/// A prune deletes the rows older than the newest `keep` records, so the
/// file may hold that many more, plus the older part of the row the newest
/// `keep` begin in; queries never return more than the newest `keep`.
fn prune_every(keep: usize) -> usize {
    (keep / 64).max(1)
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The sequence number of the newest record of `namespace` (0: none yet).
fn newest_seq(conn: &rusqlite::Connection, namespace: &str) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "SELECT coalesce(max(last_seq), 0) FROM invocation_batches WHERE namespace = ?1",
    )?
    .query_row([namespace], |r| r.get(0))
}

/// Inserts `records` (all of `namespace`, oldest first) as one row whose
/// newest record has sequence number `last_seq`.
fn insert_row(
    conn: &rusqlite::Connection,
    namespace: &str,
    last_seq: i64,
    records: &[&Invocation],
) -> rusqlite::Result<()> {
    let json = serde_json::to_vec(records)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    conn.prepare_cached(
        "INSERT INTO invocation_batches (namespace, last_seq, count, records) \
         VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(rusqlite::params![
        namespace,
        last_seq,
        to_i64(records.len() as u64),
        json
    ])?;
    Ok(())
}

/// The newest `limit` of the newest `keep` records of `namespace` (of one
/// function when `function` is set), newest first.
fn select(
    conn: &rusqlite::Connection,
    namespace: &str,
    function: Option<&str>,
    limit: usize,
    keep: usize,
) -> rusqlite::Result<Vec<Invocation>> {
    let mut stmt = conn.prepare_cached(
        "SELECT last_seq, records FROM invocation_batches WHERE namespace = ?1 \
         ORDER BY last_seq DESC",
    )?;
    let mut rows = stmt.query([namespace])?;
    let mut found = Vec::new();
    // Records at or below the floor are past the newest `keep`.
    let mut floor = None;
    while found.len() < limit {
        let Some(row) = rows.next()? else { break };
        let last_seq: i64 = row.get(0)?;
        let floor = *floor.get_or_insert(last_seq - to_i64(keep as u64));
        if last_seq <= floor {
            break;
        }
        let records: Vec<Invocation> =
            serde_json::from_slice(row.get_ref(1)?.as_blob()?).map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(
                    1,
                    rusqlite::types::Type::Blob,
                    Box::new(e),
                )
            })?;
        let in_window = usize::try_from(last_seq - floor).unwrap_or(usize::MAX);
        let newest_first = records.into_iter().rev().take(in_window);
        let wanted = newest_first.filter(|inv| function.is_none_or(|f| inv.function == f));
        found.extend(wanted.take(limit - found.len()));
    }
    Ok(found)
}

/// Moves the records of `table`, a per-row table of an earlier version
/// ([`OLD_TABLES`]), into [`SCHEMA`]'s rows, order kept, and drops it, in
/// one transaction. Nothing to do when there is no such table.
fn migrate(conn: &mut rusqlite::Connection, table: &str) -> rusqlite::Result<()> {
    let exists: bool = conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [table],
        |r| r.get(0),
    )?;
    if !exists {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    {
        let mut stmt = tx.prepare(&format!(
            "SELECT {OLD_COLUMNS} FROM {table} ORDER BY namespace, id"
        ))?;
        let mut rows = stmt.query([])?;
        let mut pending: Vec<Invocation> = Vec::new();
        let write = |pending: &mut Vec<Invocation>| -> rusqlite::Result<()> {
            let Some(first) = pending.first() else {
                return Ok(());
            };
            let last_seq = newest_seq(&tx, &first.namespace)? + to_i64(pending.len() as u64);
            let records: Vec<&Invocation> = pending.iter().collect();
            insert_row(&tx, &first.namespace, last_seq, &records)?;
            pending.clear();
            Ok(())
        };
        while let Some(row) = rows.next()? {
            let inv = row_to_invocation(row)?;
            if pending.len() >= BATCH
                || pending
                    .first()
                    .is_some_and(|p| p.namespace != inv.namespace)
            {
                write(&mut pending)?;
            }
            pending.push(inv);
        }
        write(&mut pending)?;
    }
    tx.execute_batch(&format!("DROP TABLE {table}"))?;
    tx.commit()
}

/// A record of a per-row table of an earlier version ([`OLD_COLUMNS`]).
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
        // The rows older than the newest 3 are gone from the file: left are
        // the row of 5-8 (7 and 8 are among the newest), 9's and quiet's.
        assert_eq!(stored(&log), 6);
    }

    /// Records in the file, of every namespace.
    fn stored(log: &InvocationLog) -> i64 {
        let conn = rusqlite::Connection::open(log.path()).unwrap();
        conn.query_row(
            "SELECT coalesce(sum(count), 0) FROM invocation_batches",
            [],
            |r| r.get(0),
        )
        .unwrap()
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
            assert!(held <= keep, "{held} after {n}");
            if n % 50 == 0 {
                // The file holds at most a prune's worth more, plus the
                // older part of the row the newest begin in (rows of at
                // most 7 records here: a flush every 7).
                let in_file = stored(&log);
                let bound = keep + prune_every(keep) + 6;
                assert!(in_file <= bound as i64, "{in_file} in the file after {n}");
            }
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
        // Records after the reopen follow the ones before it.
        log.record(inv("ns", "f", 2));
        let got = log.query("ns", None, 10).await.unwrap();
        let durations: Vec<u64> = got.iter().map(|i| i.duration_ms).collect();
        assert_eq!(durations, vec![2, 1]);
    }

    #[tokio::test]
    async fn a_damaged_row_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let log = InvocationLog::open(dir.path(), 10).unwrap();
        log.record(inv("ns", "f", 1));
        log.flush().await.unwrap();
        let conn = rusqlite::Connection::open(log.path()).unwrap();
        conn.execute("UPDATE invocation_batches SET records = x'7b00ff'", [])
            .unwrap();
        let e = log.query("ns", None, 10).await.unwrap_err();
        assert!(e.to_string().contains("invocations.db"), "{e}");
        // The log goes on.
        assert!(log.query("other", None, 10).await.unwrap().is_empty());
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
        assert_eq!(
            log.query("other", None, 10).await.unwrap(),
            vec![inv("other", "f", 3)]
        );
        // New records come after the old ones.
        log.record(inv("ns", "f", 4));
        let durations: Vec<u64> = log
            .query("ns", None, 10)
            .await
            .unwrap()
            .iter()
            .map(|i| i.duration_ms)
            .collect();
        assert_eq!(durations, vec![4, 2, 1]);
        assert_eq!(
            old_tables(&log),
            0,
            "the version 1 table and its index are gone"
        );
    }

    /// Tables and indexes of earlier versions left in the file.
    fn old_tables(log: &InvocationLog) -> i64 {
        let conn = rusqlite::Connection::open(log.path()).unwrap();
        conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE name IN \
             ('invocations', 'invocations_by_namespace', 'invocation_records')",
            [],
            |r| r.get(0),
        )
        .unwrap()
    }

    /// A log written by version 2 (table `invocation_records`, a row per
    /// record) keeps its records, in order, after an upgrade.
    #[tokio::test]
    async fn a_version_2_log_is_migrated_with_its_records() {
        let dir = tempfile::tempdir().unwrap();
        {
            let conn = rusqlite::Connection::open(dir.path().join(FILE)).unwrap();
            conn.execute_batch(
                "CREATE TABLE invocation_records (
                    namespace TEXT NOT NULL, id INTEGER NOT NULL, time TEXT NOT NULL,
                    function TEXT NOT NULL, source TEXT NOT NULL, trigger TEXT,
                    method TEXT NOT NULL, path TEXT NOT NULL, status INTEGER NOT NULL,
                    duration_ms INTEGER NOT NULL, request_id TEXT NOT NULL,
                    request_bytes INTEGER, response_bytes INTEGER,
                    PRIMARY KEY (namespace, id)) WITHOUT ROWID;",
            )
            .unwrap();
            let mut insert = conn
                .prepare(
                    "INSERT INTO invocation_records (namespace, id, time, function, source, \
                     method, path, status, duration_ms, request_id, request_bytes) \
                     VALUES (?1, ?2, ?3, 'f', 'invoke', 'POST', '/', 200, ?4, ?5, ?4)",
                )
                .unwrap();
            // More than a row's worth in one namespace, ids across two.
            for n in 1..=(BATCH as u64 + 50) {
                let ns = if n % 100 == 0 { "other" } else { "ns" };
                let i = inv(ns, "f", n);
                insert
                    .execute(rusqlite::params![
                        ns,
                        n as i64,
                        i.time,
                        n as i64,
                        i.request_id
                    ])
                    .unwrap();
            }
        }
        let keep = 2000;
        let log = InvocationLog::open(dir.path(), keep).unwrap();
        let got = log.query("ns", None, keep).await.unwrap();
        let expected: Vec<Invocation> = (1..=(BATCH as u64 + 50))
            .rev()
            .filter(|n| n % 100 != 0)
            .map(|n| inv("ns", "f", n))
            .collect();
        assert_eq!(got, expected);
        assert_eq!(log.query("other", None, keep).await.unwrap().len(), 10);
        assert_eq!(old_tables(&log), 0, "the version 2 table is gone");
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
