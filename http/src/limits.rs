//! Limits on abuse of the HTTP server (issue 15, decision D-043): a per-token rate limit on
//! the account API and the public sender (issue 49), and the accept loop with a header read
//! timeout.

use crate::error::ApiError;
use axum::http::{HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use dashmap::DashMap;
use engine::rate::{Admission, SlidingWindow};
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

type Keyed =
    RateLimiter<i64, DefaultKeyedStateStore<i64>, DefaultClock, StateInformationMiddleware>;

/// The public sender's window, ms: 60 s less the arrival jitter a client paced at the quota
/// may see (500 ms, one request's spacing at 120 per minute). A request at exactly 2/s arrives
/// 60 s after the one 120 before it, give or take the network's jitter; a window of exactly
/// 60 s would refuse it whenever it arrived a millisecond early (D-106).
const SENDER_WINDOW_MS: i64 = 59_500;

/// How a [`TokenRateLimit`] counts.
#[derive(Clone)]
enum Counting {
    /// A GCRA bucket per token (governor): the account API's, its whole minute as its burst.
    Bucket {
        limiter: Arc<Keyed>,
        period: Duration,
    },
    /// A sliding window per token ([`engine::rate::SlidingWindow`]): the public sender's, at
    /// most its quota in any 60 s, so a client at the quota's pace is never refused (issue 49).
    Window {
        windows: Arc<DashMap<i64, SlidingWindow>>,
        /// The origin of the windows' ms.
        origin: Instant,
    },
}

/// This node's admissions of a limit since the cluster's gossip last took them (cluster
/// mode, issue 52, D-112): kept only once [`Pending::share`] was called.
#[derive(Default)]
pub(crate) struct Pending {
    on: std::sync::atomic::AtomicBool,
    counts: DashMap<String, u32>,
}

impl Pending {
    /// Starts keeping admissions.
    pub(crate) fn share(&self) {
        self.on.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Counts one admission of `key` (built only when shared).
    pub(crate) fn count(&self, key: impl FnOnce() -> String) {
        if self.on.load(std::sync::atomic::Ordering::Relaxed) {
            *self.counts.entry(key()).or_insert(0) += 1;
        }
    }

    /// The admissions kept since the last call, by key.
    pub(crate) fn drain(&self) -> Vec<(String, u32)> {
        let keys: Vec<String> = self.counts.iter().map(|e| e.key().clone()).collect();
        keys.into_iter()
            .filter_map(|k| self.counts.remove(&k))
            .collect()
    }
}

/// A per-token request limit. The account API's (`DISPARO_RATE_LIMIT_PER_MIN`, D-043) is a
/// bucket of the whole minute's quota refilled evenly; the public sender's (120 per minute,
/// D-060, issue 49) admits at most its quota in any 60 s. Answers carry the draft IETF
/// `RateLimit-Policy` and `RateLimit` headers (`r` requests left now, `t` seconds until the
/// whole quota is free again); a refusal is 429 `limite_de_requisicoes` with `Retry-After`
/// (≥ 1 s: when one more request is admitted).
#[derive(Clone)]
pub struct TokenRateLimit {
    counting: Counting,
    /// This node's admissions for the other nodes (cluster mode).
    pending: Arc<Pending>,
    /// Most requests in any 60 s (the policy's `q`).
    per_minute: u32,
    /// The policy's name in the headers (`token`, `sender`).
    name: &'static str,
}

impl std::fmt::Debug for TokenRateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenRateLimit")
            .field("name", &self.name)
            .field("per_minute", &self.per_minute)
            .finish()
    }
}

/// What a request may do under its token's rate limit.
pub enum RateVerdict {
    /// Allowed; the headers to add to the answer.
    Allowed([(HeaderName, HeaderValue); 2]),
    /// Refused: the 429 answer.
    Refused(Response),
}

/// Whole seconds of `ms`, rounded up.
fn ceil_secs(ms: i64) -> u64 {
    (ms.max(0) as u64).div_ceil(1000)
}

impl TokenRateLimit {
    /// The account API's limit: `per_minute` requests per token, all of them available at
    /// once; `None` for 0 (no limit).
    pub fn new(per_minute: u32) -> Option<Self> {
        let n = NonZeroU32::new(per_minute)?;
        Some(Self {
            counting: Counting::Bucket {
                limiter: Arc::new(RateLimiter::keyed(Quota::per_minute(n)).with_middleware()),
                period: Duration::from_secs(60) / per_minute,
            },
            pending: Arc::default(),
            per_minute,
            name: "token",
        })
    }

    /// The public sender's limit (D-060, issue 49): at most `per_minute` requests in any 60 s,
    /// in a burst or at any pace. `None` for 0 (no limit).
    pub fn sender(per_minute: u32) -> Option<Self> {
        NonZeroU32::new(per_minute)?;
        Some(Self {
            counting: Counting::Window {
                windows: Arc::new(DashMap::new()),
                origin: Instant::now(),
            },
            pending: Arc::default(),
            per_minute,
            name: "sender",
        })
    }

    fn policy(&self) -> (HeaderName, HeaderValue) {
        (
            HeaderName::from_static("ratelimit-policy"),
            HeaderValue::from_str(&format!("\"{}\";q={};w=60", self.name, self.per_minute))
                .expect("ASCII header"),
        )
    }

    /// Takes one request of `token_id`'s quota.
    pub fn check(&self, token_id: i64) -> RateVerdict {
        let verdict = match &self.counting {
            Counting::Bucket { limiter, period } => match limiter.check_key(&token_id) {
                Ok(snapshot) => {
                    let remaining = snapshot.remaining_burst_capacity();
                    let missing = self.per_minute - remaining.min(self.per_minute);
                    let reset = (*period * missing).as_secs_f64().ceil() as u64;
                    Ok((remaining as u64, reset))
                }
                Err(not_until) => {
                    let wait = not_until.wait_time_from(DefaultClock::default().now());
                    Err(ceil_secs(wait.as_millis() as i64))
                }
            },
            Counting::Window { windows, origin } => {
                let now = origin.elapsed().as_millis() as i64;
                let mut window = windows.entry(token_id).or_insert_with(|| {
                    SlidingWindow::new(self.per_minute as usize, SENDER_WINDOW_MS)
                });
                match window.admit(now) {
                    Admission::Admitted {
                        remaining,
                        reset_ms,
                    } => Ok((remaining as u64, ceil_secs(reset_ms))),
                    Admission::Refused { retry_after_ms } => Err(ceil_secs(retry_after_ms)),
                }
            }
        };
        if verdict.is_ok() {
            self.pending.count(|| token_id.to_string());
        }
        match verdict {
            Ok((remaining, reset)) => RateVerdict::Allowed([
                self.policy(),
                (
                    HeaderName::from_static("ratelimit"),
                    HeaderValue::from_str(&format!("\"{}\";r={remaining};t={reset}", self.name))
                        .expect("ASCII header"),
                ),
            ]),
            Err(secs) => {
                let secs = secs.max(1);
                let mut resp = ApiError::RateLimited { retry_after: secs }.into_response();
                let (name, value) = self.policy();
                resp.headers_mut().insert(name, value);
                resp.headers_mut().insert(
                    HeaderName::from_static("ratelimit"),
                    HeaderValue::from_str(&format!("\"{}\";r=0;t={secs}", self.name))
                        .expect("ASCII"),
                );
                RateVerdict::Refused(resp)
            }
        }
    }
}

/// Cluster mode: a token's quota counts every node's admissions (issue 52, D-112).
impl actors::cluster::shared_limits::ClusterLimit for TokenRateLimit {
    fn name(&self) -> &'static str {
        self.name
    }

    fn share(&self) {
        self.pending.share();
    }

    fn drain(&self) -> Vec<(String, u32)> {
        self.pending.drain()
    }

    fn absorb(&self, key: &str, n: u32) {
        let Ok(token_id) = key.parse::<i64>() else {
            return;
        };
        match &self.counting {
            // As many of the bucket's cells as are left (the other node admitted them).
            Counting::Bucket { limiter, .. } => {
                for _ in 0..n.min(self.per_minute) {
                    if limiter.check_key(&token_id).is_err() {
                        break;
                    }
                }
            }
            Counting::Window { windows, origin } => {
                let now = origin.elapsed().as_millis() as i64;
                windows
                    .entry(token_id)
                    .or_insert_with(|| {
                        SlidingWindow::new(self.per_minute as usize, SENDER_WINDOW_MS)
                    })
                    .record(now, n as usize);
            }
        }
    }
}

/// Limits of the server itself (`DISPARO_HEADER_TIMEOUT_MS`, `DISPARO_REQUEST_TIMEOUT_MS`,
/// `DISPARO_MAX_CONCURRENT_REQUESTS`, `DISPARO_BODY_IDLE_TIMEOUT_MS`,
/// `DISPARO_MAX_CONNECTIONS_PER_ADDRESS`; D-043, issue 46).
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    /// How long a client may take to send a request's headers before the connection is
    /// closed (slowloris).
    pub header_read_timeout: Duration,
    /// How long a request may take until its answer starts (then 503 `tempo_esgotado`); a
    /// streamed body (CSV export) is not cut.
    pub request_timeout: Duration,
    /// Requests handled at once by the whole server (one limit, not one per route); more are
    /// refused with 503 `sobrecarregado` and `Retry-After: 1` instead of queueing without
    /// bound.
    pub max_concurrent: usize,
    /// How long a request body may send nothing before the request fails (slow uploads hold
    /// a request slot only that long).
    pub body_idle_timeout: Duration,
    /// Connections open at once from one client address; more are closed as they arrive.
    pub max_connections_per_address: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            max_concurrent: 1024,
            body_idle_timeout: Duration::from_secs(10),
            max_connections_per_address: 256,
        }
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets open requests finish.
/// Each connection is HTTP/1.1 (with the header read timeout) or HTTP/2. `limits` comes with
/// the trusted reverse proxies, whose connections are not capped per address (every client
/// behind one shares its address).
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    (limits, proxies): (ServerLimits, Vec<engine::net::Subnet>),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use hyper_util::server::conn::auto::Builder;
    use hyper_util::server::graceful::GracefulShutdown;
    use hyper_util::service::TowerToHyperService;

    let graceful = GracefulShutdown::new();
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    let per_address = PerAddress::new(limits.max_connections_per_address.max(1), proxies);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait a moment, keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        // One address may hold only so many connections (issue 46): the rest are closed.
        let Some(slot) = per_address.take(peer.ip()) else {
            metrics::counter!("disparo_http_connections_refused_total").increment(1);
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        // The peer address reaches handlers as axum's `ConnectInfo` (the login attempt limit
        // is per address); the body fails when it stops arriving.
        let idle = limits.body_idle_timeout;
        let service = TowerToHyperService::new(
            tower::ServiceBuilder::new()
                .map_request(move |req: axum::http::Request<hyper::body::Incoming>| {
                    let mut req = req.map(|b| IdleBody::new(b, idle));
                    req.extensions_mut()
                        .insert(axum::extract::ConnectInfo(peer));
                    req
                })
                .service(router.clone()),
        );
        let conn = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Open connections per client address, capped (but for trusted proxies).
#[derive(Clone)]
struct PerAddress {
    open: Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
    cap: usize,
    exempt: Arc<[engine::net::Subnet]>,
}

/// One connection's place in [`PerAddress`], given back when dropped.
struct AddressSlot {
    of: PerAddress,
    ip: std::net::IpAddr,
}

impl PerAddress {
    fn new(cap: usize, exempt: Vec<engine::net::Subnet>) -> Self {
        Self {
            open: Arc::default(),
            cap,
            exempt: exempt.into(),
        }
    }

    /// A place for one more connection from `ip`, or `None` when it holds `cap` already (a
    /// trusted proxy always has one).
    fn take(&self, ip: std::net::IpAddr) -> Option<AddressSlot> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(ip).or_insert(0);
        if *n >= self.cap && !self.exempt.iter().any(|s| s.contains(ip)) {
            return None;
        }
        *n += 1;
        Some(AddressSlot {
            of: self.clone(),
            ip,
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self.of.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// A request body that fails once nothing arrives for `idle` after the handler starts reading
/// it (issue 46): a slow upload holds its request slot that long, not the request timeout.
pub struct IdleBody<B> {
    inner: B,
    idle: Duration,
    deadline: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl<B> IdleBody<B> {
    /// Wraps `inner`.
    pub fn new(inner: B, idle: Duration) -> Self {
        Self {
            inner,
            idle,
            deadline: None,
        }
    }
}

impl<B> http_body::Body for IdleBody<B>
where
    B: http_body::Body + Unpin,
    B::Error: Into<tower::BoxError>,
{
    type Data = B::Data;
    type Error = tower::BoxError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        use std::future::Future;
        use std::task::Poll;
        let this = self.get_mut();
        let idle = this.idle;
        let deadline = this
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
        match std::pin::Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                deadline.as_mut().reset(tokio::time::Instant::now() + idle);
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => match deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    metrics::counter!("disparo_http_body_idle_timeouts_total").increment(1);
                    Poll::Ready(Some(Err("request body idle for too long".into())))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A limit on the calls an unauthenticated receiver refuses (provider webhooks, the hygiene
/// callback; issue 46): each source address has a bucket of `per_minute` refusals refilled at
/// `per_minute` a minute; an address whose bucket is empty gets 429 `muitas_recusas` (with
/// `Retry-After`, until one refusal is refilled) before anything is read. Accepted calls never
/// count, so the provider's own traffic (campaign statuses at thousands a second from a few
/// addresses) is never slowed.
#[derive(Clone)]
pub struct RefusalLimit {
    per_minute: u32,
    /// Address → (refusals left, when last counted).
    seen: Arc<
        std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, (f64, std::time::Instant)>>,
    >,
}

impl std::fmt::Debug for RefusalLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefusalLimit")
            .field("per_minute", &self.per_minute)
            .finish()
    }
}

impl RefusalLimit {
    /// Addresses tracked at most; past it, the full buckets are dropped.
    const TRACKED: usize = 10_000;

    /// `per_minute` refusals per address; `None` for 0 (no limit).
    pub fn new(per_minute: u32) -> Option<Self> {
        (per_minute > 0).then(|| Self {
            per_minute,
            seen: Arc::default(),
        })
    }

    /// Refills a bucket to `now`; returns the refusals left.
    fn refill(&self, bucket: &mut (f64, std::time::Instant), now: std::time::Instant) -> f64 {
        let cap = f64::from(self.per_minute);
        let rate = cap / 60.0;
        bucket.0 = (bucket.0 + now.duration_since(bucket.1).as_secs_f64() * rate).min(cap);
        bucket.1 = now;
        bucket.0
    }

    /// Seconds until `ip` may be heard again, when its refusals are spent.
    pub fn blocked(&self, ip: std::net::IpAddr) -> Option<u64> {
        let now = std::time::Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = seen.get_mut(&ip)?;
        let left = self.refill(bucket, now);
        let rate = f64::from(self.per_minute) / 60.0;
        (left < 1.0).then(|| (((1.0 - left) / rate).ceil() as u64).max(1))
    }

    /// Counts one refused call from `ip`.
    pub fn refused(&self, ip: std::net::IpAddr) {
        let now = std::time::Instant::now();
        let cap = f64::from(self.per_minute);
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= Self::TRACKED {
            let this = self.clone();
            seen.retain(|_, b| this.refill(b, now) < cap);
        }
        let bucket = seen.entry(ip).or_insert((cap, now));
        let left = self.refill(bucket, now);
        bucket.0 = (left - 1.0).max(0.0);
    }
}

/// The middleware of the unauthenticated receivers: answers 429 `muitas_recusas` to an
/// address over its [`RefusalLimit`] without reading its body (`Connection: close`), and counts each refusal (4xx but 404/413/429) it answers.
pub async fn limit_refusals(
    axum::extract::State(state): axum::extract::State<crate::AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let Some(limit) = state.config.receiver_refusals.clone() else {
        return next.run(req).await;
    };
    let ip = client_ip(
        req.extensions(),
        req.headers(),
        &state.config.trusted_proxies,
    );
    if let Some(retry_after) = ip.and_then(|ip| limit.blocked(ip)) {
        metrics::counter!("disparo_receiver_refusals_limited_total").increment(1);
        let mut resp = ApiError::TooManyRefusals { retry_after }.into_response();
        // Its body is never read, so the connection ends with this answer: said in the answer,
        // a client does not send its next request on a connection closing under it.
        resp.headers_mut().insert(
            axum::http::header::CONNECTION,
            axum::http::HeaderValue::from_static("close"),
        );
        return resp;
    }
    let resp = next.run(req).await;
    let status = resp.status();
    if status.is_client_error() && !matches!(status.as_u16(), 404 | 413 | 429) {
        if let Some(ip) = ip {
            limit.refused(ip);
        }
    }
    resp
}

/// The client address of a request, when the server recorded it: the peer's, or — when the
/// peer is one of `trusted` proxies — the right-most `X-Forwarded-For` address that is not a
/// trusted proxy (issue 46: from anyone else the header is ignored, it is the client's own
/// word).
pub(crate) fn client_ip(
    parts_ext: &axum::http::Extensions,
    headers: &axum::http::HeaderMap,
    trusted: &[engine::net::Subnet],
) -> Option<std::net::IpAddr> {
    use axum::extract::ConnectInfo;
    use std::net::{IpAddr, SocketAddr};
    let peer = parts_ext
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(a)| a.ip())?;
    let is_proxy = |ip: IpAddr| trusted.iter().any(|s| s.contains(ip));
    if !is_proxy(peer) {
        return Some(peer);
    }
    let forwarded: Vec<IpAddr> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|a| a.trim().parse().ok())
        .collect();
    Some(
        forwarded
            .iter()
            .rev()
            .copied()
            .find(|ip| !is_proxy(*ip))
            .or(forwarded.first().copied())
            .unwrap_or(peer),
    )
}
