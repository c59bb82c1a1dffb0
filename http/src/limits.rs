//! Limits on abuse of the HTTP server (issue 15, decision D-043): a per-token rate limit on
//! the account API, and the accept loop with a header read timeout.

use crate::error::ApiError;
use axum::http::{HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

type Keyed =
    RateLimiter<i64, DefaultKeyedStateStore<i64>, DefaultClock, StateInformationMiddleware>;

/// A per-token request limit: a GCRA bucket per token of `burst` requests refilled one per
/// `period`. The account API's (`DISPARO_RATE_LIMIT_PER_MIN`, D-043) has the whole minute's
/// quota as its burst; the public sender's (120 per minute, D-060) holds at most its quota in
/// any 60 s. Answers carry the draft IETF `RateLimit-Policy` and `RateLimit` headers; a refusal
/// is 429 `limite_de_requisicoes` with `Retry-After` (≥ 1 s).
#[derive(Clone)]
pub struct TokenRateLimit {
    limiter: Arc<Keyed>,
    /// Most requests in any 60 s (the policy's `q`).
    per_minute: u32,
    burst: u32,
    period: Duration,
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

impl TokenRateLimit {
    /// The account API's limit: `per_minute` requests per token, all of them available at
    /// once; `None` for 0 (no limit).
    pub fn new(per_minute: u32) -> Option<Self> {
        let n = NonZeroU32::new(per_minute)?;
        Some(Self {
            limiter: Arc::new(RateLimiter::keyed(Quota::per_minute(n)).with_middleware()),
            per_minute,
            burst: per_minute,
            period: Duration::from_secs(60) / per_minute,
            name: "token",
        })
    }

    /// The public sender's limit (D-060): at most `per_minute` requests in any 60 s — a burst
    /// of half of them, then one every `120 / per_minute` s (for 120: 60 at once, then one per
    /// second). `None` for 0 (no limit).
    pub fn sender(per_minute: u32) -> Option<Self> {
        let burst = NonZeroU32::new((per_minute / 2).max(1))?;
        NonZeroU32::new(per_minute)?;
        let period = Duration::from_secs(60) / burst.get();
        let quota = Quota::with_period(period)?.allow_burst(burst);
        Some(Self {
            limiter: Arc::new(RateLimiter::keyed(quota).with_middleware()),
            per_minute,
            burst: burst.get(),
            period,
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
        match self.limiter.check_key(&token_id) {
            Ok(snapshot) => {
                let remaining = snapshot.remaining_burst_capacity();
                // Seconds until the bucket is full again.
                let reset = (self.period * (self.burst - remaining.min(self.burst)))
                    .as_secs_f64()
                    .ceil() as u64;
                RateVerdict::Allowed([
                    self.policy(),
                    (
                        HeaderName::from_static("ratelimit"),
                        HeaderValue::from_str(&format!(
                            "\"{}\";r={remaining};t={reset}",
                            self.name
                        ))
                        .expect("ASCII header"),
                    ),
                ])
            }
            Err(not_until) => {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
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

/// Limits of the server itself (`DISPARO_HEADER_TIMEOUT_MS`, `DISPARO_REQUEST_TIMEOUT_MS`,
/// `DISPARO_MAX_CONCURRENT_REQUESTS`).
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    /// How long a client may take to send a request's headers before the connection is
    /// closed (slowloris).
    pub header_read_timeout: Duration,
    /// How long a request may take until its answer starts (then 503 `tempo_esgotado`); a
    /// streamed body (CSV export) is not cut.
    pub request_timeout: Duration,
    /// Requests handled at once; more are refused with 503 `sobrecarregado` and
    /// `Retry-After: 1` instead of queueing without bound.
    pub max_concurrent: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            max_concurrent: 1024,
        }
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets open requests finish.
/// Each connection is HTTP/1.1 (with the header read timeout) or HTTP/2.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: ServerLimits,
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
        let _ = stream.set_nodelay(true);
        // The peer address reaches handlers as axum's `ConnectInfo` (the login attempt limit
        // is per address).
        let service = TowerToHyperService::new(
            tower::ServiceBuilder::new()
                .map_request(move |mut req: axum::http::Request<hyper::body::Incoming>| {
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
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
