//! The one documented settings struct (STYLE.md §7): defaults, overridden by environment
//! variables, validated at start. Secrets are wrapped so `Debug` hides them.

use clap::Args;
use engine::net::Subnet;
use engine::Secret;
use std::path::PathBuf;

fn secret(s: &str) -> Result<Secret, String> {
    Ok(Secret::new(s))
}

fn subnet(s: &str) -> Result<Subnet, String> {
    Subnet::parse(s)
}

/// Settings of `disparo serve` and `disparo migrate`. Every field can be set by the named
/// environment variable or flag.
#[derive(Debug, Clone, Args)]
pub struct Settings {
    /// Address to listen on.
    #[arg(long, env = "DISPARO_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// `sqlite://…` (default: `disparo.db` in the working directory, WAL) or `postgres://…`.
    #[arg(long, env = "DATABASE_URL", default_value = storage::DEFAULT_DATABASE_URL)]
    pub database_url: String,
    /// Base64 of 32 bytes: the AES-256-GCM key that seals stored credentials. When unset, a
    /// key file `disparo.key` is generated beside the SQLite database (or in the working
    /// directory) and reused.
    #[arg(long, env = "DISPARO_MASTER_KEY", value_parser = secret, hide_env_values = true)]
    pub master_key: Option<Secret>,
    /// Public base URL of the gateway: the base of every absolute URL it hands out (webhook
    /// blocks, the hygiene callback, wiki `public_url`, events' `media_src`); default
    /// `http://<listen address>`.
    #[arg(long, env = "DISPARO_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Graph API base URL.
    #[arg(
        long,
        env = "PROVIDER_BASE_URL",
        default_value = "https://graph.facebook.com"
    )]
    pub provider_base_url: String,
    /// Graph API version path segment.
    #[arg(long, env = "PROVIDER_API_VERSION", default_value = "v25.0")]
    pub provider_api_version: String,
    /// App secret (required by `serve`; `serve --simulator` makes one): verifies provider
    /// webhooks of channels that have no app secret of their own and exchanges embedded-signup
    /// codes (spec "Authentication").
    #[arg(long, env = "PROVIDER_APP_SECRET", value_parser = secret, hide_env_values = true)]
    pub provider_app_secret: Option<Secret>,
    /// Verify token of the app-level webhook handshake (`GET /webhooks/messaging`).
    #[arg(long, env = "PROVIDER_VERIFY_TOKEN", hide_env_values = true)]
    pub provider_verify_token: Option<String>,
    /// App id (embedded signup front end).
    #[arg(long, env = "PROVIDER_APP_ID")]
    pub provider_app_id: Option<String>,
    /// Embedded signup configuration id (front end).
    #[arg(long, env = "PROVIDER_CONFIG_ID")]
    pub provider_config_id: Option<String>,
    /// Timeout of one provider call, ms.
    #[arg(long, env = "PROVIDER_TIMEOUT_MS", default_value_t = 30_000)]
    pub provider_timeout_ms: u64,
    /// How long an API request waits for an actor before answering 503, ms.
    #[arg(long, env = "DISPARO_CALL_TIMEOUT_MS", default_value_t = 35_000)]
    pub call_timeout_ms: u64,
    /// Delays between outbound webhook attempts, comma-separated ms (default: 5 s, 30 s,
    /// 2 min, 10 min, 30 min, 1 h, 2 h, 4 h, 6 h, 8 h — 11 attempts over about a day).
    #[arg(long, env = "DISPARO_WEBHOOK_RETRY_MS", value_delimiter = ',')]
    pub webhook_retry_ms: Option<Vec<u64>>,
    /// Timeout of one outbound webhook attempt, ms.
    #[arg(long, env = "DISPARO_WEBHOOK_TIMEOUT_MS", default_value_t = 10_000)]
    pub webhook_timeout_ms: u64,
    /// Outbound webhook attempts in flight at once to one subscription, each for a different
    /// conversation: a contact's events stay in order, contacts do not wait for each other
    /// (D-065).
    #[arg(long, env = "DISPARO_WEBHOOK_PER_ENDPOINT", default_value_t = 8)]
    pub webhook_per_endpoint: usize,
    /// A webhook subscription whose attempts have only failed for this long is disabled and
    /// the account's other subscriptions get `webhook.disabled`, ms (default 5 days).
    #[arg(
        long,
        env = "DISPARO_WEBHOOK_DISABLE_AFTER_MS",
        default_value_t = 432_000_000
    )]
    pub webhook_disable_after_ms: u64,
    /// Days settled webhook deliveries (delivered or failed) are kept in the delivery log.
    #[arg(long, env = "DISPARO_WEBHOOK_RETENTION_DAYS", default_value_t = 30)]
    pub webhook_retention_days: u64,
    /// Let requests to URLs clients give (outbound webhooks, media by URL, alternative
    /// providers) reach private, loopback and reserved addresses (off: only public addresses;
    /// D-042). For tests and private deployments; prefer `DISPARO_ALLOWED_SUBNETS`.
    #[arg(long, env = "DISPARO_ALLOW_PRIVATE_URLS", default_value_t = false, action = clap::ArgAction::Set)]
    pub allow_private_urls: bool,
    /// Non-public address blocks those requests may reach anyway, comma-separated CIDR
    /// (`10.20.0.0/16,fd00::/8`; a bare address is one host).
    #[arg(long, env = "DISPARO_ALLOWED_SUBNETS", value_delimiter = ',', value_parser = subnet)]
    pub allowed_subnets: Vec<Subnet>,
    /// Hosts (`host` or `host:port`, comma-separated) an alternative provider's
    /// `provider_url` may name besides the provider's own API host (a sandbox, the simulator).
    #[arg(long, env = "DISPARO_ALTERNATIVE_HOSTS", value_delimiter = ',')]
    pub alternative_hosts: Vec<String>,
    /// Media downloads (sends with `media.url`) at once; more are 503.
    #[arg(long, env = "DISPARO_MEDIA_MAX_CONCURRENT", default_value_t = 16)]
    pub media_max_concurrent: usize,
    /// Megabytes of downloaded media held in memory at once; past it sends are 503.
    #[arg(long, env = "DISPARO_MEDIA_MAX_MEMORY_MB", default_value_t = 256)]
    pub media_max_memory_mb: u64,
    /// Timeout of a media download (sends with `media.url`), ms.
    #[arg(long, env = "DISPARO_MEDIA_TIMEOUT_MS", default_value_t = 20_000)]
    pub media_timeout_ms: u64,

    /// How long an in-doubt campaign send (provider answer lost: timeout or crash) waits for
    /// a status webhook before it is sent again, in ms (D-032).
    #[arg(long, env = "DISPARO_IN_DOUBT_GRACE_MS", default_value_t = 120_000)]
    pub in_doubt_grace_ms: u64,
    /// How long a process's session lives without a heartbeat, in ms (heartbeats every
    /// second): past it, peers on the same database take over what it held (claimed campaign
    /// sends, idempotency keys, webhook subscriptions; issue 50, D-100).
    #[arg(long, env = "DISPARO_NODE_TTL_MS", default_value_t = 10_000)]
    pub node_ttl_ms: u64,
    /// Cluster mode (issue 52): the NATS server the nodes route work through, e.g.
    /// `nats://127.0.0.1:4222`. Needs PostgreSQL (`DATABASE_URL=postgres://…`); each node
    /// then runs only the numbers of the cells it holds a lease on. Unset: one node, as before.
    #[arg(long, env = "NATS_URL")]
    pub nats_url: Option<String>,
    /// This node's name in cluster mode (placement, leases, logs, the `node` metric label);
    /// default: host name and process id.
    #[arg(long, env = "DISPARO_NODE_ID")]
    pub node_id: Option<String>,
    /// How long a cell's lease lasts without a renewal, ms (cluster mode). Renewals every
    /// quarter of it (at most every second); a node that cannot renew stops sending a quarter
    /// before it ends; a dead node's numbers move within about this long.
    #[arg(long, env = "DISPARO_LEASE_TTL_MS", default_value_t = 6_000)]
    pub lease_ttl_ms: u64,
    /// When set, `GET /metrics` answers only `Authorization: Bearer <this>` (the series name
    /// every account's channels; point Prometheus's `authorization` at it).
    #[arg(long, env = "DISPARO_METRICS_TOKEN", value_parser = secret, hide_env_values = true)]
    pub metrics_token: Option<Secret>,
    /// `serve` without `--simulator` and without `DISPARO_METRICS_TOKEN` generates a metrics
    /// token into `disparo.metrics-token` beside the key file (issue 46); `true` serves
    /// `/metrics` to anyone instead.
    #[arg(long, env = "DISPARO_METRICS_PUBLIC", default_value_t = false)]
    pub metrics_public: bool,
    /// How long a client may take to send a request's headers before its connection is
    /// closed (slow clients), ms.
    #[arg(long, env = "DISPARO_HEADER_TIMEOUT_MS", default_value_t = 10_000)]
    pub header_timeout_ms: u64,
    /// How long a request may take until its answer starts (then 503 `tempo_esgotado`), ms.
    #[arg(long, env = "DISPARO_REQUEST_TIMEOUT_MS", default_value_t = 60_000)]
    pub request_timeout_ms: u64,
    /// Requests handled at once by the whole server; more are refused with 503
    /// `sobrecarregado`.
    #[arg(long, env = "DISPARO_MAX_CONCURRENT_REQUESTS", default_value_t = 1024)]
    pub max_concurrent_requests: usize,
    /// How long a request body may send nothing before the request fails, ms (slow uploads;
    /// issue 46).
    #[arg(long, env = "DISPARO_BODY_IDLE_TIMEOUT_MS", default_value_t = 10_000)]
    pub body_idle_timeout_ms: u64,
    /// Reverse proxies (comma-separated CIDR; a bare address is one host) whose
    /// `X-Forwarded-For` names the client for the login attempt limits and the receivers'
    /// refusal limit; from any other peer the header is ignored (issue 46).
    #[arg(long, env = "DISPARO_TRUSTED_PROXIES", value_delimiter = ',', value_parser = subnet)]
    pub trusted_proxies: Vec<Subnet>,
    /// Refused calls (bad signature, bad body) per source address and minute on the
    /// unauthenticated receivers (provider webhooks, hygiene callback) before that address
    /// gets 429 (a bucket refilled at that rate); 0 turns the limit off (issue 46).
    #[arg(long, env = "DISPARO_RECEIVER_REFUSALS_PER_MIN", default_value_t = 60)]
    pub receiver_refusals_per_min: u32,
    /// Connections open at once from one client address; more are closed as they arrive
    /// (issue 46).
    #[arg(
        long,
        env = "DISPARO_MAX_CONNECTIONS_PER_ADDRESS",
        default_value_t = 256
    )]
    pub max_connections_per_address: usize,
    /// Requests per minute per API token on `/api/v1` (429 `limite_de_requisicoes` past it,
    /// with `Retry-After`); 0 turns the limit off. 6,000 (100 requests/s sustained) by default
    /// (issue 46: 60,000 let one leaked token hammer the gateway).
    #[arg(long, env = "DISPARO_RATE_LIMIT_PER_MIN", default_value_t = 6_000)]
    pub rate_limit_per_min: u32,
    /// `PROVIDER_WEBHOOK_VERIFY_TOKEN`: the handshake token of the panel's provider receiver
    /// (`GET /api/webhooks/provider`; issue 21).
    #[arg(long, env = "PROVIDER_WEBHOOK_VERIFY_TOKEN", hide_env_values = true)]
    pub provider_webhook_verify_token: Option<String>,
    /// How long the panel's provider webhook log keeps each call's body, ms (the line stays;
    /// default 7 days; D-061).
    #[arg(long, env = "DISPARO_PROVIDER_LOG_RETENTION_MS", default_value_t = 7 * 24 * 3600 * 1000)]
    pub provider_log_retention_ms: u64,
    /// Requests per minute per public sender token (`pub_…`): at most this many in any 60 s
    /// (a burst of half, then the rest spread; 429 past it); 0 turns the limit off (D-060).
    #[arg(long, env = "DISPARO_SENDER_RATE_PER_MIN", default_value_t = 120)]
    pub sender_rate_per_min: u32,
    /// How long an operator panel session lives without use, ms (sliding: each use extends
    /// it; default 12 h; issue 19).
    #[arg(long, env = "DISPARO_SESSION_TTL_MS", default_value_t = 12 * 3600 * 1000)]
    pub session_ttl_ms: u64,
    /// `DISPARO_ENABLED` (spec "Campaign dispatch is gated by the DISPARO_ENABLED setting";
    /// D-062): when set, every account's dispatch switch takes this value at start (`false`
    /// holds approved campaigns and pauses running ones; `true` releases them); unset, the
    /// switches stored by `PUT /api/settings/dispatch` stand (default on).
    #[arg(long, env = "DISPARO_ENABLED", value_parser = clap::builder::BoolishValueParser::new())]
    pub dispatch_enabled: Option<bool>,
    /// Base URL of the contact-hygiene service's API (panel campaigns; e.g.
    /// `https://hygiene.example/hygiene/v1`). `serve --simulator` points it at the simulator.
    #[arg(long, env = "HYGIENE_URL")]
    pub hygiene_url: Option<String>,
    /// The hygiene service's API key (`Authorization: Bearer`).
    #[arg(long, env = "HYGIENE_API_KEY", value_parser = secret, hide_env_values = true)]
    pub hygiene_api_key: Option<Secret>,
    /// Timeout of one call to the hygiene service, ms.
    #[arg(long, env = "HYGIENE_TIMEOUT_MS", default_value_t = 30_000)]
    pub hygiene_timeout_ms: u64,
    /// How long a hygiene job may run before its campaign shows it failed, ms (default 30 min).
    #[arg(long, env = "HYGIENE_JOB_TIMEOUT_MS", default_value_t = 30 * 60 * 1000)]
    pub hygiene_job_timeout_ms: u64,
    /// Where the built-in simulator listens in `serve --simulator`.
    #[arg(long, env = "DISPARO_SIM_LISTEN", default_value = "127.0.0.1:0")]
    pub sim_listen: String,
}

impl Settings {
    /// Settings with every default (what `disparo serve` uses with no environment).
    pub fn defaults() -> Self {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrap {
            #[command(flatten)]
            s: Settings,
        }
        Wrap::parse_from(["disparo"]).s
    }

    /// The SQLite database file of `database_url` (`None` for PostgreSQL or `:memory:`).
    pub fn sqlite_file_path(&self) -> Option<PathBuf> {
        self.database_url
            .strip_prefix("sqlite://")
            .or_else(|| self.database_url.strip_prefix("sqlite:"))
            .map(|rest| rest.split('?').next().unwrap_or(rest))
            .filter(|p| !p.is_empty() && *p != ":memory:")
            .map(PathBuf::from)
    }

    /// Where a generated metrics token lives: beside the key file.
    pub fn metrics_token_path(&self) -> PathBuf {
        self.key_file_path().with_file_name("disparo.metrics-token")
    }

    /// Where the generated master key lives: beside the SQLite file, else `./disparo.key`.
    pub fn key_file_path(&self) -> PathBuf {
        match self.sqlite_file_path() {
            Some(file) => {
                let parent = file.parent().map(PathBuf::from).unwrap_or_default();
                parent.join("disparo.key")
            }
            None => PathBuf::from("disparo.key"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_retry_list_parses_from_one_comma_separated_value() {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrap {
            #[command(flatten)]
            s: Settings,
        }
        let w = Wrap::try_parse_from(["disparo", "--webhook-retry-ms", "100,200,400"]).unwrap();
        assert_eq!(w.s.webhook_retry_ms, Some(vec![100, 200, 400]));
        assert!(Wrap::try_parse_from(["disparo", "--webhook-retry-ms", "100,x"]).is_err());
        assert_eq!(Settings::defaults().webhook_retry_ms, None);
    }

    #[test]
    fn the_key_file_sits_beside_the_sqlite_database() {
        let mut s = Settings::defaults();
        assert_eq!(s.key_file_path(), PathBuf::from("disparo.key"));
        s.database_url = "sqlite:///var/lib/disparo/x.db?mode=rwc".into();
        assert_eq!(
            s.key_file_path(),
            PathBuf::from("/var/lib/disparo/disparo.key")
        );
        s.database_url = "postgres://u@h/db".into();
        assert_eq!(s.key_file_path(), PathBuf::from("disparo.key"));
        assert!(format!(
            "{:?}",
            Settings {
                master_key: Some(Secret::new("k")),
                ..s
            }
        )
        .contains("***"));
    }
}
