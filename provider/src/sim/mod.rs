//! The provider simulator: a real HTTP server that speaks the Graph API's paths, shapes and
//! errors (PROVIDER.md), keeps the provider's state in memory, enforces its limits, and sends
//! signed webhooks like the provider does. Every test, demo and benchmark of disparo runs
//! against it.
//!
//! Two surfaces share one router:
//! - the Graph API under `/{version}/…` (version `v<major>.<minor>`), authenticated with
//!   `Authorization: Bearer <access_token>` exactly like the provider;
//! - a control API under `/_sim/…` for tests, demos and load tests (see the crate README).

// Handler helpers return ready `Response`s (the Graph error envelope) as their error; they run
// once per request, so the size of that error variant does not matter.
#![allow(clippy::result_large_err)]

mod business;
mod control;
mod d360;
pub use business::SIM_APP_ID;
pub use d360::D360TemplateSpec;
mod errors;
mod faults;
mod fields;
mod graph;
mod hygiene;
pub use hygiene::HygieneFaults;
mod media;
mod node;
mod phone;
mod profile;
pub mod state;
mod templates;
mod webhooks;

use axum::Router;
use dashmap::DashMap;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use state::{Business, Ledger, Number, Waba};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::RwLock;

/// Milliseconds since the Unix epoch, from the system clock.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// When each status of an accepted send is emitted, in ms after acceptance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusDelays {
    /// `sent` (default 0).
    pub sent_ms: u64,
    /// `delivered` (default 100).
    pub delivered_ms: u64,
    /// `read` (default 300).
    pub read_ms: u64,
}

impl Default for StatusDelays {
    fn default() -> Self {
        Self {
            sent_ms: 0,
            delivered_ms: 100,
            read_ms: 300,
        }
    }
}

/// The simulator's settings (`disparo sim` flags).
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Makes every random choice (ids, tokens, failure draws) repeatable.
    pub seed: Option<u64>,
    /// The app's secret: a business created without its own signs its webhooks with it (the
    /// provider signs with the secret of the one app every WABA is subscribed to, PROVIDER.md
    /// §8.2); none = each business gets a random one.
    pub app_secret: Option<String>,
    /// Where webhooks are POSTed (the app's callback URL); none = not sent.
    pub webhook_url: Option<String>,
    /// Status timing.
    pub status_delays: StatusDelays,
    /// Share of accepted sends that end `failed` (131026, undeliverable) instead of delivered,
    /// in `[0, 1]`.
    pub failed_share: f64,
    /// Share of delivered messages that are also read, in `[0, 1]`.
    pub read_share: f64,
    /// Throughput of new numbers, messages/s (§10.1: 80).
    pub default_throughput_mps: u32,
    /// Delay before a template created through the Graph API is approved, ms.
    pub template_review_ms: u64,
    /// Delays between webhook retries when the receiver answers non-2xx, ms (the provider
    /// retries for days; the simulator does the same, faster).
    pub webhook_retry_ms: Vec<u64>,
    /// Most events in one webhook POST (the provider batches up to 1000, §8.2).
    pub batch_max: usize,
    /// How long the emitter waits for more events before posting a partial batch, ms. Under
    /// load this is what makes batches large; at rest it delays a webhook by at most this.
    pub batch_window_ms: u64,
    /// How many recent sends the ledger keeps per number (`GET /_sim/numbers/{id}/sent`);
    /// totals and per-recipient counts are kept for every send.
    pub ledger_recent_per_number: usize,
    /// Escape non-ASCII as `\uXXXX` in webhook bodies, like the provider (§8.2).
    pub escape_unicode: bool,
    /// The error code of a business-initiated send beyond the portfolio's 24 h limit of unique
    /// users; it fails asynchronously (PROVIDER.md §10.2 leaves the code open; default 131048).
    pub tier_limit_code: i64,
    /// The key the simulated hygiene service (`/hygiene/v1`) requires; none: any non-empty
    /// key is taken.
    pub hygiene_api_key: Option<String>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            seed: None,
            app_secret: None,
            webhook_url: None,
            status_delays: StatusDelays::default(),
            failed_share: 0.0,
            read_share: 1.0,
            default_throughput_mps: 80,
            template_review_ms: 1000,
            webhook_retry_ms: vec![100, 500, 2000, 5000, 15_000],
            batch_max: 200,
            batch_window_ms: 5,
            ledger_recent_per_number: 20_000,
            escape_unicode: true,
            tier_limit_code: 131048,
            hygiene_api_key: None,
        }
    }
}

pub(crate) struct Inner {
    pub cfg: SimConfig,
    pub webhook_url: Arc<RwLock<Option<String>>>,
    pub businesses: DashMap<String, Business>,
    /// access token → business id
    pub tokens: DashMap<String, String>,
    pub wabas: DashMap<String, Waba>,
    pub numbers: DashMap<String, Number>,
    /// (phone_number_id, user) → last inbound message, ms
    pub windows: DashMap<(String, String), i64>,
    pub ledger: Mutex<Ledger>,
    pub media: DashMap<String, state::Media>,
    /// Embedded Signup code → business id.
    pub signup_codes: DashMap<String, String>,
    /// Business id → unique business-initiated recipients in the rolling 24 h.
    pub portfolio: DashMap<String, engine::limits::RollingUnique>,
    pub faults: Mutex<state::Faults>,
    pub rng: Mutex<StdRng>,
    pub outbox: webhooks::Outbox,
    pub emitter_stats: Arc<webhooks::EmitterStats>,
    /// Graph requests answered with an injected fault (an error or a hang), for tests.
    pub injected_faults: std::sync::atomic::AtomicU64,
    /// 360dialog senders: API key → templates.
    pub d360: DashMap<String, Vec<d360::D360TemplateSpec>>,
    /// Resumable-upload sessions and the handles of finished uploads (D-058).
    pub uploads: DashMap<String, profile::Upload>,
    /// Business profiles by phone number id.
    pub profiles: DashMap<String, profile::Profile>,
    /// The simulated contact-hygiene service.
    pub hygiene: hygiene::HygieneState,
}

impl Inner {
    /// `n` random digits (first one non-zero).
    pub fn digits(&self, n: usize) -> String {
        let mut rng = self.rng.lock().expect("rng lock");
        let mut s = String::with_capacity(n);
        s.push(char::from(b'1' + rng.gen_range(0..9u8)));
        for _ in 1..n {
            s.push(char::from(b'0' + rng.gen_range(0..10u8)));
        }
        s
    }

    /// `n` random characters from `alphabet`.
    pub fn random_from(&self, alphabet: &[u8], n: usize) -> String {
        let mut rng = self.rng.lock().expect("rng lock");
        (0..n)
            .map(|_| char::from(alphabet[rng.gen_range(0..alphabet.len())]))
            .collect()
    }

    /// A draw in `[0, 1)`.
    pub fn draw(&self) -> f64 {
        self.rng.lock().expect("rng lock").gen()
    }

    /// The portfolio's messaging tier: the highest tier among the business's numbers (since
    /// 2025-10-07 the limit is per portfolio and existing portfolios inherited their highest
    /// number's tier, §10.2). `None` when the business has no number.
    pub fn portfolio_tier(&self, business: &str) -> Option<String> {
        self.numbers
            .iter()
            .filter(|n| n.business_id == business)
            .map(|n| n.tier.clone())
            .max_by_key(|t| {
                engine::channel::Tier::parse(t)
                    .map(|t| t.limit_24h().unwrap_or(i64::MAX))
                    .unwrap_or(0)
            })
    }

    /// Counts a business-initiated send to `to` against the portfolio limit; false when the
    /// limit is reached and `to` is a new user.
    pub fn admit_business_initiated(&self, business: &str, to: &str, now: i64) -> bool {
        let limit = self
            .portfolio_tier(business)
            .and_then(|t| engine::channel::Tier::parse(&t))
            .and_then(|t| t.limit_24h());
        let mut counter = self
            .portfolio
            .entry(business.to_string())
            .or_insert_with(|| engine::limits::RollingUnique::new(engine::DAY_MS));
        if counter.contains(to, now) {
            counter.record(to, now);
            return true;
        }
        if limit.is_some_and(|l| counter.count(now) >= l) {
            return false;
        }
        counter.record(to, now);
        true
    }

    /// Emits a webhook now, signed with the app secret of `business_id`'s app; false when
    /// the business is unknown.
    pub(crate) fn emit_now(
        &self,
        business_id: &str,
        waba_id: String,
        kind: webhooks::EmissionKind,
    ) -> bool {
        let Some(secret) = self
            .businesses
            .get(business_id)
            .map(|b| b.app_secret.clone())
        else {
            return false;
        };
        self.outbox.emit_after(
            Duration::ZERO,
            webhooks::Emission {
                app_secret: Arc::from(secret.as_str()),
                waba_id,
                kind,
            },
        );
        true
    }

    /// A `wamid.`-prefixed message id (§11.2).
    pub fn wamid(&self) -> String {
        const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        format!("wamid.HBgM{}", self.random_from(B64, 40))
    }
}

/// The provider simulator. Cheap to clone; all clones share one state.
#[derive(Clone)]
pub struct Simulator {
    inner: Arc<Inner>,
}

impl Simulator {
    /// Creates a simulator and starts its webhook tasks (must run inside a tokio runtime).
    pub fn new(cfg: SimConfig) -> Self {
        let recent_cap = cfg.ledger_recent_per_number;
        let url = Arc::new(RwLock::new(cfg.webhook_url.clone()));
        let stats = Arc::new(webhooks::EmitterStats::default());
        let outbox = webhooks::start(
            url.clone(),
            webhooks::EmitterConfig {
                batch_max: cfg.batch_max.max(1),
                batch_window: ms(cfg.batch_window_ms),
                retry_ms: cfg.webhook_retry_ms.clone(),
                escape_unicode: cfg.escape_unicode,
                max_in_flight: 64,
            },
            stats.clone(),
        );
        let rng = match cfg.seed {
            Some(s) => StdRng::seed_from_u64(s),
            None => StdRng::from_entropy(),
        };
        Self {
            inner: Arc::new(Inner {
                cfg,
                webhook_url: url,
                businesses: DashMap::new(),
                tokens: DashMap::new(),
                wabas: DashMap::new(),
                numbers: DashMap::new(),
                windows: DashMap::new(),
                ledger: Mutex::new(Ledger {
                    recent_cap,
                    ..Ledger::default()
                }),
                media: DashMap::new(),
                signup_codes: DashMap::new(),
                portfolio: DashMap::new(),
                faults: Mutex::new(state::Faults::default()),
                rng: Mutex::new(rng),
                outbox,
                emitter_stats: stats,
                injected_faults: std::sync::atomic::AtomicU64::new(0),
                d360: DashMap::new(),
                uploads: DashMap::new(),
                profiles: DashMap::new(),
                hygiene: hygiene::HygieneState::default(),
            }),
        }
    }

    /// The router: Graph API paths plus `/_sim/…`.
    pub fn router(&self) -> Router {
        control::routes()
            .merge(d360::routes())
            .merge(fields::routes())
            .merge(hygiene::routes())
            .merge(graph::routes(self.inner.clone()))
            .with_state(self.inner.clone())
    }

    /// Changes where webhooks go.
    pub async fn set_webhook_url(&self, url: Option<String>) {
        *self.inner.webhook_url.write().await = url;
    }

    /// Creates a number (as `POST /_sim/numbers` does) and returns its credentials.
    pub fn create_number(
        &self,
        req: control::CreateNumber,
    ) -> Result<control::CreatedNumber, String> {
        control::create_number(&self.inner, req)
    }

    /// Serves on `listener` until the task is dropped.
    pub async fn serve(self, listener: TcpListener) -> std::io::Result<()> {
        axum::serve(listener, self.router()).await
    }

    /// Binds `addr` and serves in a background task; returns the bound address.
    pub async fn spawn(self, addr: &str) -> std::io::Result<std::net::SocketAddr> {
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        tokio::spawn(async move {
            if let Err(e) = self.serve(listener).await {
                tracing::error!(error = %e, "simulator server stopped");
            }
        });
        Ok(local)
    }
}

pub use control::{CreateNumber, CreatedNumber};

/// Turns a delay in ms into a [`Duration`].
pub(crate) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
