//! Slow clients (issue 15): 1,000 idle TCP connections to the real operator,
//! half sending nothing, half a request head one byte a second that never
//! ends, while normal clients invoke a real Python function and read
//! `/healthz`. The normal ones get 200s in bounded time; the operator closes
//! every slow connection after `--header-read-timeout-sec`; beyond
//! `--max-connections` connections wait in the backlog, the operator never
//! holds more, and a normal client is served once the slow ones time out.

mod support;

use serde_json::json;
use sless_wire::Phase;
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::{Client, Operator};

/// Raises this process's soft open-files limit to the hard limit.
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
    assert!(
        lim.rlim_cur >= 3000,
        "open files limit {} is too low for this test",
        lim.rlim_cur
    );
}

fn port_of(op: &Operator) -> u16 {
    op.base_url
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port in base url")
}

fn pid_of(op: &Operator) -> u32 {
    op.child.as_ref().expect("operator running").id()
}

/// Connections to `port` the process `pid` has accepted (its socket fds
/// whose local port is `port`, established), from `/proc`.
fn accepted_connections(pid: u32, port: u16) -> usize {
    let mut inodes = HashSet::new();
    if let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for fd in fds.flatten() {
            if let Ok(link) = std::fs::read_link(fd.path()) {
                let link = link.to_string_lossy().into_owned();
                if let Some(inode) = link
                    .strip_prefix("socket:[")
                    .and_then(|s| s.strip_suffix(']'))
                {
                    inodes.insert(inode.to_string());
                }
            }
        }
    }
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).unwrap_or_default();
    let local = format!(":{port:04X}");
    // Distinct inodes: under churn the kernel's table can list an entry twice.
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.len() > 9 && f[1].ends_with(&local) && f[3] == "01" && inodes.contains(f[9]))
                .then(|| f[9].to_string())
        })
        .collect::<HashSet<_>>()
        .len()
}

/// Waits until `accepted_connections` satisfies `ok`, failing with the last count.
fn wait_accepted(
    op: &Operator,
    ok: impl Fn(usize) -> bool,
    timeout: Duration,
    what: &str,
) -> usize {
    let deadline = Instant::now() + timeout;
    loop {
        let n = accepted_connections(pid_of(op), port_of(op));
        if ok(n) {
            return n;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the operator holds {n} connections after {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `n` slow connections: even ones send nothing, odd ones the start of a
/// request head and then one byte a second from a thread until `stop`.
fn open_slow(op: &Operator, n: usize, stop: Arc<AtomicBool>) -> Vec<TcpStream> {
    let addr = op.base_url.trim_start_matches("http://").to_string();
    let mut conns = Vec::with_capacity(n);
    let mut drips = Vec::new();
    for i in 0..n {
        let mut s = TcpStream::connect(&addr).expect("connect a slow client");
        if i % 2 == 1 {
            s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                .expect("partial head");
            drips.push(s.try_clone().expect("clone"));
        }
        conns.push(s);
    }
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            for s in &mut drips {
                let _ = s.write_all(b"a");
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    conns
}

/// Waits until every connection of `conns` is closed by the operator (EOF
/// or reset) by `deadline`; returns how many had been sent bytes first.
fn wait_all_closed(conns: &mut [TcpStream], deadline: Instant) -> usize {
    let mut answered = 0;
    for (i, s) in conns.iter_mut().enumerate() {
        let mut got = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "slow connection {i} is still open at the deadline (read so far: {:?})",
                String::from_utf8_lossy(&got)
            );
            s.set_read_timeout(Some(left)).expect("read timeout");
            let mut buf = [0u8; 1024];
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => got.extend_from_slice(&buf[..k]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    continue;
                }
                Err(_) => break, // reset: closed
            }
        }
        if !got.is_empty() {
            answered += 1;
        }
    }
    answered
}

/// One normal client: requests without pause until `until`, each under a
/// 5 s client timeout; new connections per request unless `keep_alive`.
/// Returns (requests, max latency); any non-200 or error fails.
async fn normal_client(
    c: Arc<Client>,
    keep_alive: bool,
    until: Instant,
    invoke: bool,
) -> (usize, Duration) {
    let mut b = reqwest::Client::builder().timeout(Duration::from_secs(5));
    if !keep_alive {
        b = b.pool_max_idle_per_host(0);
    }
    let http = b.build().expect("client");
    let (mut n, mut max) = (0, Duration::ZERO);
    while Instant::now() < until {
        let sent = Instant::now();
        let r = if invoke && n % 2 == 0 {
            http.post(c.url(&sless_wire::paths::function_invoke(&c.namespace, "hello")))
                .bearer_auth(&c.token)
                .json(&json!({"name": "n"}))
                .send()
                .await
        } else {
            http.get(c.url("/healthz")).send().await
        };
        let took = sent.elapsed();
        let r = r.unwrap_or_else(|e| panic!("normal request {n} failed after {took:?}: {e}"));
        assert_eq!(r.status().as_u16(), 200, "normal request {n}");
        let _ = r.bytes().await;
        n += 1;
        max = max.max(took);
    }
    (n, max)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_slow_connections_while_normal_clients_are_served() {
    raise_fd_limit();
    // Long enough that opening the 1,000 and 5 s of normal load fit in it.
    const TIMEOUT_SEC: u64 = 20;
    let op = Operator::start_with(&["--header-read-timeout-sec", &TIMEOUT_SEC.to_string()]);
    let c = Arc::new(op.client("slowloris"));
    c.ensure().await;
    let (code, body) = c
        .create(json!({"name": "hello", "runtime": "python3.11", "entrypoint": "main.handler", "min_instances": 1}))
        .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = c.upload("hello", support::python_hello_zip()).await;
    assert_eq!(code, 202, "{body}");
    c.wait_phase("hello", Phase::Ready, Duration::from_secs(90))
        .await;
    let baseline = accepted_connections(pid_of(&op), port_of(&op));

    let stop = Arc::new(AtomicBool::new(false));
    let opened = Instant::now();
    let mut slow = open_slow(&op, 1000, stop.clone());
    let held = wait_accepted(
        &op,
        |n| n >= 1000,
        Duration::from_secs(10),
        "accepting 1,000 slow connections",
    );
    let open_took = opened.elapsed();

    // Normal clients while the 1,000 are held (well within the timeout).
    let until = Instant::now() + Duration::from_secs(5);
    let tasks: Vec<_> = [(true, true), (false, true), (true, false), (false, false)]
        .into_iter()
        .map(|(keep, invoke)| tokio::spawn(normal_client(c.clone(), keep, until, invoke)))
        .collect();
    let (mut requests, mut max) = (0, Duration::ZERO);
    for t in tasks {
        let (n, m) = t.await.expect("normal client");
        requests += n;
        max = max.max(m);
    }
    let still_held = accepted_connections(pid_of(&op), port_of(&op));
    assert!(
        still_held >= 1000,
        "the slow connections were dropped before their timeout: {still_held} held"
    );

    // The operator closes each slow connection once its head is late.
    let answered = tokio::task::spawn_blocking(move || {
        let n = wait_all_closed(&mut slow, opened + Duration::from_secs(TIMEOUT_SEC + 10));
        drop(slow);
        n
    })
    .await
    .expect("closing");
    let closed_after = opened.elapsed();
    stop.store(true, Ordering::Relaxed);
    let left = wait_accepted(
        &op,
        |n| n <= baseline + 8,
        Duration::from_secs(10),
        "after the timeout",
    );
    println!(
        "slowloris: 1,000 slow connections (500 silent, 500 dripping a head), {held} held by the operator {open_took:?} after the first connect; \
         {requests} normal requests, all 200, slowest {max:?}; all slow ones closed by the operator within \
         {closed_after:?} of opening ({answered} got bytes before the close); connections held after: {left} (before: {baseline})"
    );
    // And the operator still serves.
    let (code, text) = c.invoke("hello", &json!({"name": "after"})).await;
    assert_eq!(code, 200, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_limit_wait_and_are_served_when_slow_ones_time_out() {
    raise_fd_limit();
    let op = Operator::start_with(&[
        "--isolation",
        "none",
        "--max-connections",
        "50",
        "--header-read-timeout-sec",
        "2",
    ]);
    let baseline = accepted_connections(pid_of(&op), port_of(&op));
    let stop = Arc::new(AtomicBool::new(false));
    let mut slow = open_slow(&op, 100, stop.clone());
    let held = wait_accepted(
        &op,
        |n| n >= 50,
        Duration::from_secs(5),
        "accepting 50 slow connections",
    );

    // A normal client arrives behind them: it waits for slots, then is served.
    let sampler_stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (pid, port, stop) = (pid_of(&op), port_of(&op), sampler_stop.clone());
        std::thread::spawn(move || {
            let mut most = 0;
            while !stop.load(Ordering::Relaxed) {
                most = most.max(accepted_connections(pid, port));
                std::thread::sleep(Duration::from_millis(20));
            }
            most
        })
    };
    let sent = Instant::now();
    let r = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client")
        .get(format!("{}/healthz", op.base_url))
        .send()
        .await
        .unwrap_or_else(|e| panic!("the normal request failed after {:?}: {e}", sent.elapsed()));
    let waited = sent.elapsed();
    assert_eq!(r.status().as_u16(), 200);
    sampler_stop.store(true, Ordering::Relaxed);
    let most = sampler.join().expect("sampler");
    stop.store(true, Ordering::Relaxed);
    assert!(
        most <= baseline + 50,
        "the operator held {most} connections at once (limit 50, {baseline} before)"
    );
    assert!(
        waited >= Duration::from_secs(1) && waited < Duration::from_secs(12),
        "the normal client waited {waited:?} (expected: behind the slow ones, for about two 2 s timeouts)"
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    tokio::task::spawn_blocking(move || wait_all_closed(&mut slow, deadline))
        .await
        .expect("closing");
    println!(
        "slowloris limit: 100 slow connections against --max-connections 50, {held} held at once, \
         at most {most} while sampling; a normal request behind them waited {waited:?} and got 200"
    );
}
