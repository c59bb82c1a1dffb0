//! The disparo application: settings, wiring of storage, provider client, actors and HTTP,
//! and the demo mode with the built-in provider simulator. `src/main.rs` is the CLI around it.

#![forbid(unsafe_code)]

pub mod settings;

use actors::{Runtime, RuntimeConfig};
use anyhow::Context;
use engine::webhook::RetrySchedule;
use provider::sim::{CreateNumber, SimConfig, Simulator};
use provider::{GraphClient, GraphConfig};
pub use settings::Settings;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use storage::{Cipher, Store};
use tokio::net::TcpListener;

/// A built, not yet serving, gateway.
pub struct Application {
    listener: TcpListener,
    addr: SocketAddr,
    services: services::Services,
    router: axum::Router,
    limits: http::limits::ServerLimits,
    /// `DISPARO_TRUSTED_PROXIES`: their connections are not capped per address.
    trusted_proxies: Vec<engine::net::Subnet>,
}

/// Resolves the master key: `DISPARO_MASTER_KEY`, else a key file beside the SQLite database
/// (or in the working directory for PostgreSQL), generated on first use.
///
/// The file is created with `create_new` and mode 0600 from the start (never readable by
/// others, not even for a moment) and fsynced with its folder before it is used. A key file
/// that exists but cannot be read or parsed stops the server: it is never replaced, since the
/// stored credentials are sealed with it (issue 15).
pub fn resolve_cipher(settings: &Settings) -> anyhow::Result<Cipher> {
    if let Some(k) = &settings.master_key {
        return Cipher::from_base64(k.expose()).context("DISPARO_MASTER_KEY");
    }
    let path = settings.key_file_path();
    let read = |path: &std::path::Path| -> anyhow::Result<Cipher> {
        let text = std::fs::read_to_string(path).with_context(|| {
            format!(
                "the key file {} exists but cannot be read; fix it (or set DISPARO_MASTER_KEY): it is never replaced, since stored credentials are sealed with it",
                path.display()
            )
        })?;
        Cipher::from_base64(text.trim()).with_context(|| {
            format!(
                "the key file {} does not hold a base64 key of 32 bytes; it is never replaced",
                path.display()
            )
        })
    };
    if std::fs::symlink_metadata(&path).is_ok() {
        return read(&path);
    }
    let key = Cipher::generate_key_base64();
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = match options.open(&path) {
        Ok(f) => f,
        // Another process created it between the check and the open: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return read(&path),
        Err(e) => return Err(e).with_context(|| format!("creating key file {}", path.display())),
    };
    use std::io::Write;
    file.write_all(key.as_bytes())
        .and_then(|_| file.sync_all())
        .with_context(|| format!("writing key file {}", path.display()))?;
    sync_parent(&path);
    tracing::warn!(
        path = %path.display(),
        "DISPARO_MASTER_KEY is not set: generated a master key into this file. Back it up: stored credentials cannot be read without it."
    );
    Cipher::from_base64(&key).context("generated key")
}

/// Makes `/metrics` need a token in production (issue 46): when neither
/// `DISPARO_METRICS_TOKEN` nor `DISPARO_METRICS_PUBLIC` is set, the token is read from
/// [`Settings::metrics_token_path`], generated there (mode 0600) on first use. The log says
/// where, never the token.
pub fn resolve_metrics_token(settings: &mut Settings) -> anyhow::Result<()> {
    if settings.metrics_token.is_some() || settings.metrics_public {
        return Ok(());
    }
    let path = settings.metrics_token_path();
    let read = |path: &std::path::Path| -> anyhow::Result<engine::Secret> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the metrics token file {}", path.display()))?;
        let token = text.trim();
        anyhow::ensure!(
            !token.is_empty(),
            "the metrics token file {} is empty",
            path.display()
        );
        Ok(engine::Secret::new(token))
    };
    if std::fs::symlink_metadata(&path).is_ok() {
        settings.metrics_token = Some(read(&path)?);
        return Ok(());
    }
    // 32 random bytes, as the master key is made.
    let token = Cipher::generate_key_base64();
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(&path) {
        Ok(mut file) => {
            use std::io::Write;
            file.write_all(token.as_bytes())
                .and_then(|_| file.sync_all())
                .with_context(|| format!("writing the metrics token file {}", path.display()))?;
            sync_parent(&path);
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            settings.metrics_token = Some(read(&path)?);
            return Ok(());
        }
        Err(e) => {
            return Err(e)
                .with_context(|| format!("creating the metrics token file {}", path.display()))
        }
    }
    tracing::warn!(
        path = %path.display(),
        "DISPARO_METRICS_TOKEN is not set: /metrics answers only the token generated into this file (DISPARO_METRICS_PUBLIC=true serves it to anyone)"
    );
    settings.metrics_token = Some(engine::Secret::new(token));
    Ok(())
}

/// Fsyncs the folder of `path`, so a file just created survives a crash (best effort).
fn sync_parent(path: &std::path::Path) {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    if let Ok(dir) = std::fs::File::open(parent) {
        let _ = dir.sync_all();
    }
}

/// Creates the SQLite database file with mode 0600 when it does not exist yet, so neither it
/// nor the WAL and shared-memory files SQLite creates beside it (with the database's mode)
/// are readable by other users (issue 15). PostgreSQL URLs and in-memory databases are left
/// alone.
fn create_private_sqlite_file(settings: &Settings) -> anyhow::Result<()> {
    let Some(file) = settings.sqlite_file_path() else {
        return Ok(());
    };
    if file.exists() {
        return Ok(());
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(&file) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating database file {}", file.display())),
    }
}

/// Connects the store and applies migrations.
pub async fn open_store(settings: &Settings) -> anyhow::Result<Store> {
    let cipher = resolve_cipher(settings)?;
    create_private_sqlite_file(settings)?;
    let store = Store::connect(&settings.database_url, cipher)
        .await
        .context("connecting to the database")?;
    store.migrate().await.context("applying migrations")?;
    Ok(store)
}

/// This node's name in cluster mode (`DISPARO_NODE_ID`, default host name and pid); `None`
/// without `NATS_URL`.
fn cluster_node_id(settings: &Settings) -> Option<String> {
    settings
        .nats_url
        .as_deref()
        .filter(|u| !u.trim().is_empty())?;
    Some(
        settings
            .node_id
            .clone()
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(actors::node_name),
    )
}

/// Cluster mode's settings when `NATS_URL` is set (issue 52): PostgreSQL required, the NATS
/// server reached. Errors: SQLite with `NATS_URL`; NATS unreachable.
async fn cluster_settings(
    settings: &Settings,
    store: &Store,
) -> anyhow::Result<Option<actors::ClusterSettings>> {
    let Some(url) = settings
        .nats_url
        .as_deref()
        .filter(|u| !u.trim().is_empty())
    else {
        return Ok(None);
    };
    anyhow::ensure!(
        store.backend() == storage::Backend::Postgres,
        "cluster mode (NATS_URL) needs PostgreSQL: several nodes share one database, and SQLite \
         is one process's (set DATABASE_URL=postgres://…, or unset NATS_URL for one node)"
    );
    let nats = async_nats::ConnectOptions::new()
        .name("disparo")
        .connection_timeout(Duration::from_secs(5))
        .connect(url)
        .await
        .with_context(|| format!("connecting to NATS at {url} (NATS_URL)"))?;
    Ok(Some(actors::ClusterSettings {
        node_id: cluster_node_id(settings).unwrap_or_else(actors::node_name),
        lease_ttl: Duration::from_millis(settings.lease_ttl_ms.max(400)),
        nats,
        seal_key: engine::cluster::seal::SealKey::new(
            store.cipher().derive_key(actors::NATS_SEAL_LABEL),
        ),
    }))
}

/// Cluster mode: the account API's, the public sender's and the login attempts' limits count
/// every node's admissions (issue 52, D-112); nothing on one node.
fn share_limits(services: &services::Services, config: &http::HttpConfig) {
    use actors::cluster::shared_limits::ClusterLimit;
    let mut limits: Vec<Arc<dyn ClusterLimit>> = vec![Arc::new(config.login_limit.clone())];
    if let Some(l) = &config.rate_limit {
        limits.push(Arc::new(l.clone()));
    }
    if let Some(l) = &config.sender_rate_limit {
        limits.push(Arc::new(l.clone()));
    }
    services.share_limits(limits);
}

impl Application {
    /// Binds the listener, opens the store (running migrations), starts the actors and builds
    /// the router. `listener` may be given already bound (tests, demo mode).
    pub async fn build(settings: Settings, listener: Option<TcpListener>) -> anyhow::Result<Self> {
        let listener = match listener {
            Some(l) => l,
            None => TcpListener::bind(&settings.listen)
                .await
                .with_context(|| format!("binding {}", settings.listen))?,
        };
        anyhow::ensure!(
            settings
                .provider_app_secret
                .as_ref()
                .is_some_and(|s| !s.expose().is_empty()),
            "PROVIDER_APP_SECRET is required: the provider signs every webhook with the app's \
             secret, and a number connected without its own is verified with it (spec \
             \"Authentication\"; `serve --simulator` sets one)"
        );
        let addr = listener.local_addr()?;
        // The recorder first: handles taken before it is installed would record nothing.
        let metrics = http::install_metrics(cluster_node_id(&settings).as_deref());
        let store = open_store(&settings).await?;
        store.spawn_availability_probe(&settings.database_url);
        let cluster = cluster_settings(&settings, &store).await?;
        let graph = GraphClient::new(GraphConfig {
            base_url: settings.provider_base_url.clone(),
            api_version: settings.provider_api_version.clone(),
            timeout: Duration::from_millis(settings.provider_timeout_ms),
        });
        let public_url = settings
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{addr}"))
            .trim_end_matches('/')
            .to_string();
        let services = services::Services::new(
            Runtime::start(
                store,
                graph,
                RuntimeConfig {
                    public_url: public_url.clone(),
                    app_secret: settings.provider_app_secret.clone(),
                    app_id: settings.provider_app_id.clone(),
                    config_id: settings.provider_config_id.clone(),
                    call_timeout: Duration::from_millis(settings.call_timeout_ms),
                    webhook_retry: match &settings.webhook_retry_ms {
                        Some(list) => RetrySchedule::from_delays_ms(list.clone()),
                        None => RetrySchedule::default(),
                    },
                    webhook_timeout: Duration::from_millis(settings.webhook_timeout_ms),
                    webhook_max_per_endpoint: settings.webhook_per_endpoint,
                    webhook_disable_after: Duration::from_millis(settings.webhook_disable_after_ms),
                    webhook_retention: Duration::from_secs(
                        settings.webhook_retention_days * 86_400,
                    ),
                    outbound: engine::net::OutboundPolicy {
                        allow_private: settings.allow_private_urls,
                        allowed_subnets: settings.allowed_subnets.clone(),
                    },
                    media_timeout: Duration::from_millis(settings.media_timeout_ms),
                    alternative_hosts: settings.alternative_hosts.clone(),
                    media_max_concurrent: settings.media_max_concurrent,
                    media_max_bytes: settings.media_max_memory_mb * 1024 * 1024,
                    in_doubt_grace: Duration::from_millis(settings.in_doubt_grace_ms),
                    node_ttl: Duration::from_millis(settings.node_ttl_ms),
                    provider_log_retention: Duration::from_millis(
                        settings.provider_log_retention_ms,
                    ),
                    provider_webhook_verify_token: settings.provider_webhook_verify_token.clone(),
                    hygiene: settings
                        .hygiene_url
                        .as_ref()
                        .map(|url| actors::HygieneSettings {
                            url: url.clone(),
                            api_key: settings
                                .hygiene_api_key
                                .clone()
                                .unwrap_or_else(|| engine::Secret::new("")),
                            call_timeout: Duration::from_millis(
                                settings.hygiene_timeout_ms.max(100),
                            ),
                            job_timeout: Duration::from_millis(
                                settings.hygiene_job_timeout_ms.max(1000),
                            ),
                            callback_url: Some(format!("{public_url}/api/hygiene/callback")),
                        }),
                    dispatch_enabled: settings.dispatch_enabled,
                    cluster,
                    ..RuntimeConfig::default()
                },
            )
            .await
            .map_err(|e| anyhow::anyhow!("starting actors: {e}"))?,
        );
        let limits = http::limits::ServerLimits {
            header_read_timeout: Duration::from_millis(settings.header_timeout_ms),
            request_timeout: Duration::from_millis(settings.request_timeout_ms),
            max_concurrent: settings.max_concurrent_requests.max(1),
            body_idle_timeout: Duration::from_millis(settings.body_idle_timeout_ms.max(1)),
            max_connections_per_address: settings.max_connections_per_address.max(1),
        };
        let config = http::HttpConfig {
            public_url: settings
                .public_url
                .clone()
                .unwrap_or_else(|| format!("http://{addr}")),
            provider_verify_token: settings.provider_verify_token.clone(),
            metrics_token: settings.metrics_token.clone(),
            limits,
            rate_limit: http::limits::TokenRateLimit::new(settings.rate_limit_per_min),
            session_ttl: Duration::from_millis(settings.session_ttl_ms.max(1000)),
            sender_rate_limit: http::limits::TokenRateLimit::sender(settings.sender_rate_per_min),
            trusted_proxies: settings.trusted_proxies.clone(),
            receiver_refusals: http::limits::RefusalLimit::new(settings.receiver_refusals_per_min),
            ..http::HttpConfig::default()
        };
        share_limits(&services, &config);
        let state = http::AppState {
            services: services.clone(),
            config: Arc::new(config),
            metrics,
        };
        Ok(Self {
            listener,
            addr,
            services,
            router: http::router(state),
            limits,
            trusted_proxies: settings.trusted_proxies.clone(),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The actors' handle.
    pub fn runtime(&self) -> &Runtime {
        self.services.runtime()
    }

    /// The services' handle (it dereferences to the runtime).
    pub fn services(&self) -> &services::Services {
        &self.services
    }

    /// Serves until `shutdown` resolves, then stops the actors.
    pub async fn run_until(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        tracing::info!(addr = %self.addr, "disparo listening");
        http::limits::serve(
            self.listener,
            self.router,
            (self.limits, self.trusted_proxies),
            shutdown,
        )
        .await?;
        self.services.shutdown().await;
        Ok(())
    }
}

/// The demo mode of `disparo serve --simulator`: an in-process provider simulator that posts
/// its webhooks to this gateway.
pub struct Demo {
    /// The simulator.
    pub sim: Simulator,
    /// Where it listens.
    pub sim_addr: SocketAddr,
}

impl Demo {
    /// Starts a simulator whose webhooks go to `gateway` and points the settings at it.
    pub async fn start(settings: &mut Settings, gateway: SocketAddr) -> anyhow::Result<Self> {
        // One app secret for the simulated app, unless one is configured: the simulator's
        // businesses sign with it like the provider's app does (issue 16).
        let app_secret = settings
            .provider_app_secret
            .get_or_insert_with(|| engine::Secret::new(services::connect::random_verify_token()))
            .expose()
            .to_string();
        if settings.provider_app_id.is_none() {
            settings.provider_app_id = Some(provider::sim::SIM_APP_ID.to_string());
        }
        let sim = Simulator::new(SimConfig {
            app_secret: Some(app_secret),
            webhook_url: Some(format!("http://{gateway}/webhooks/messaging")),
            status_delays: provider::sim::StatusDelays {
                sent_ms: 300,
                delivered_ms: 1200,
                read_ms: 3000,
            },
            ..SimConfig::default()
        });
        let sim_addr = sim
            .clone()
            .spawn(&settings.sim_listen)
            .await
            .context("starting the simulator")?;
        settings.provider_base_url = format!("http://{sim_addr}");
        // The simulated hygiene service, unless one is configured (issue 20).
        if settings.hygiene_url.is_none() {
            settings.hygiene_url = Some(format!("http://{sim_addr}/hygiene/v1"));
            settings.hygiene_api_key = Some(engine::Secret::new("demo"));
        }
        Ok(Self { sim, sim_addr })
    }

    /// Re-creates every stored channel in the (in-memory) simulator with its stored ids and
    /// credentials, so a restarted demo keeps working.
    pub async fn adopt_stored_channels(&self, store: &Store) -> anyhow::Result<usize> {
        let mut n = 0;
        for id in store.all_channel_ids().await? {
            let c = store.channel_unscoped(id).await?;
            let secrets = store.channel_secrets(id).await?;
            self.sim
                .create_number(CreateNumber {
                    display_phone_number: Some(c.phone.clone()),
                    verified_name: Some(c.verified_name.clone()),
                    waba_id: Some(c.waba_id.clone()),
                    phone_number_id: Some(c.phone_number_id.clone()),
                    access_token: Some(secrets.access_token.expose().to_string()),
                    app_secret: secrets.app_secret.as_ref().map(|s| s.expose().to_string()),
                    ..CreateNumber::default()
                })
                .map_err(|e| anyhow::anyhow!("adopting channel {id}: {e}"))?;
            n += 1;
        }
        Ok(n)
    }

    /// On an empty database: creates the `demo` account, a token and a channel connected to
    /// a simulated number, and returns what to print.
    pub async fn seed(&self, app: &Application) -> anyhow::Result<Option<String>> {
        let store = app.runtime().store();
        if store.count_accounts().await? > 0 {
            return Ok(None);
        }
        let account = store.ensure_account("demo").await?;
        let token = store.create_token(account.id, "demo", "admin").await?;
        let number = self
            .sim
            .create_number(CreateNumber {
                verified_name: Some("Loja Demo".into()),
                ..CreateNumber::default()
            })
            .map_err(|e| anyhow::anyhow!(e))?;
        let (channel, _) = app
            .services()
            .connect_official(
                account.id,
                services::connect::ConnectOfficial {
                    name: Some("Demo".into()),
                    phone_number_id: number.phone_number_id.clone(),
                    waba_id: number.waba_id.clone(),
                    access_token: engine::Secret::new(number.access_token.clone()),
                    app_secret: Some(engine::Secret::new(number.app_secret.clone())),
                    verify_token: None,
                },
            )
            .await
            .map_err(|e| anyhow::anyhow!("connecting the demo channel: {e}"))?;
        // A panel Admin with a random password, shown once (issue 19).
        let password: String = services::connect::random_verify_token()
            .chars()
            .take(16)
            .collect();
        services::panel::create_user(
            store,
            account.id,
            services::panel::UserInput {
                email: "admin@demo.local".into(),
                name: "Admin Demo".into(),
                role: "Admin".into(),
                status: None,
                password: password.clone(),
                client_id: None,
                bm_ids: Vec::new(),
            },
        )
        .await
        .map_err(|e| anyhow::anyhow!("creating the demo panel user: {e}"))?;
        let base = format!("http://{}", app.addr());
        Ok(Some(format!(
            "\nDemo ready (simulated provider at http://{sim}).\n\
             \n  account:  demo\n  token:    {token}   (shown once; keep it)\n  channel:  {cid} ({phone}, quality {quality})\n\
             \nSend a template message:\n\n  curl -s -X POST {base}/api/v1/messages \\\n    -H 'Authorization: Bearer {token}' -H 'Content-Type: application/json' \\\n    -d '{{\"to\": \"5511988887777\", \"template\": {{\"name\": \"hello_world\", \"language\": \"en_US\"}}}}'\n\
             \nThen read its status (sent → delivered → read) with the id it returns:\n\n  curl -s {base}/api/v1/messages/<id> -H 'Authorization: Bearer {token}'\n\
             \nOperator panel: open {base}/ and log in as admin@demo.local / {password}   (shown once)\n\nIts API (/api, docs at {base}/docs/painel) takes the same login:\n\n  curl -s -X POST {base}/api/login -H 'Content-Type: application/json' \\\n    -d '{{\"email\": \"admin@demo.local\", \"password\": \"{password}\"}}'\n",
            sim = self.sim_addr,
            token = token.value.expose(),
            cid = channel.id,
            phone = channel.phone,
            quality = channel.quality,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings_in(dir: &std::path::Path) -> Settings {
        let mut s = Settings::defaults();
        s.database_url = format!("sqlite://{}/d.db?mode=rwc", dir.display());
        s
    }

    #[cfg(unix)]
    fn mode(path: &std::path::Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_generated_key_file_is_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let s = settings_in(dir.path());
        let first = resolve_cipher(&s).unwrap();
        let path = s.key_file_path();
        #[cfg(unix)]
        assert_eq!(mode(&path), 0o600);
        let sealed = first.seal(&engine::Secret::new("segredo"), "t", "c", 1);
        let again = resolve_cipher(&s).unwrap();
        assert_eq!(
            again.open(&sealed, "t", "c", 1).unwrap().expose(),
            "segredo"
        );
    }

    #[test]
    fn serve_makes_a_metrics_token_unless_one_is_set_or_metrics_are_public() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = settings_in(dir.path());
        resolve_metrics_token(&mut s).unwrap();
        let made = s.metrics_token.clone().expect("a token");
        let path = s.metrics_token_path();
        #[cfg(unix)]
        assert_eq!(mode(&path), 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), made.expose());
        let mut again = settings_in(dir.path());
        resolve_metrics_token(&mut again).unwrap();
        assert_eq!(
            again.metrics_token.unwrap().expose(),
            made.expose(),
            "reused"
        );
        let mut public = settings_in(dir.path());
        public.metrics_public = true;
        resolve_metrics_token(&mut public).unwrap();
        assert!(public.metrics_token.is_none());
        let mut given = settings_in(dir.path());
        given.metrics_token = Some(engine::Secret::new("dado"));
        resolve_metrics_token(&mut given).unwrap();
        assert_eq!(given.metrics_token.unwrap().expose(), "dado");
    }

    #[test]
    fn a_key_file_that_cannot_be_used_stops_the_server_and_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let s = settings_in(dir.path());
        let path = s.key_file_path();
        std::fs::write(&path, "not a key").unwrap();
        let Err(err) = resolve_cipher(&s).map(|_| ()) else {
            panic!("refused")
        };
        let err = format!("{err:#}");
        assert!(err.contains("never replaced"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "not a key");
        // Unreadable (a folder where the file should be).
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let Err(err) = resolve_cipher(&s).map(|_| ()) else {
            panic!("refused")
        };
        let err = format!("{err:#}");
        assert!(err.contains("cannot be read"), "{err}");
        assert!(path.is_dir());
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_sqlite_database_is_created_private() {
        let dir = tempfile::tempdir().unwrap();
        let s = settings_in(dir.path());
        let store = open_store(&s).await.unwrap();
        store.ensure_account("acme").await.unwrap();
        assert_eq!(mode(&dir.path().join("d.db")), 0o600);
        for side in ["d.db-wal", "d.db-shm"] {
            let p = dir.path().join(side);
            if p.exists() {
                assert_eq!(mode(&p), 0o600, "{side}");
            }
        }
    }
}

#[cfg(test)]
mod sealed_secrets {
    use super::*;
    use sqlx::Connection;

    fn channel(account_id: i64, id: &str, token: &str) -> storage::channels::NewChannel {
        storage::channels::NewChannel {
            account_id,
            name: id.into(),
            phone: format!("55119000000{id}"),
            phone_number_id: id.into(),
            waba_id: "w".into(),
            verified_name: "V".into(),
            status: "WORKING".into(),
            quality: "GREEN".into(),
            tier: None,
            access_token: engine::Secret::new(token),
            app_secret: Some(engine::Secret::new(format!("app-{token}"))),
            verify_token: "v".into(),
            bm_id: None,
        }
    }

    #[tokio::test]
    async fn a_secret_copied_to_another_row_does_not_open_and_legacy_values_are_resealed() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Settings::defaults();
        s.database_url = format!("sqlite://{}/d.db?mode=rwc", dir.path().display());
        let store = open_store(&s).await.unwrap();
        let account = store.ensure_account("acme").await.unwrap();
        let a = store
            .insert_channel(&channel(account.id, "1", "token-a"))
            .await
            .unwrap();
        let b = store
            .insert_channel(&channel(account.id, "2", "token-b"))
            .await
            .unwrap();
        assert_eq!(
            store
                .channel_secrets(b.id)
                .await
                .unwrap()
                .access_token
                .expose(),
            "token-b"
        );
        let mut db = sqlx::SqliteConnection::connect(&s.database_url)
            .await
            .unwrap();
        // Row a's sealed token pasted into row b: it does not open there.
        sqlx::query("UPDATE channels SET access_token_enc = (SELECT access_token_enc FROM channels WHERE id = $1) WHERE id = $2")
            .bind(a.id)
            .bind(b.id)
            .execute(&mut db)
            .await
            .unwrap();
        assert!(store.channel_secrets(b.id).await.is_err());
        // A database from before D-052 (v1, no associated data) is re-sealed at start.
        let cipher = resolve_cipher(&s).unwrap();
        sqlx::query("UPDATE channels SET access_token_enc = $1 WHERE id = $2")
            .bind(cipher.seal_legacy(&engine::Secret::new("token-b")))
            .bind(b.id)
            .execute(&mut db)
            .await
            .unwrap();
        store.migrate().await.unwrap();
        assert_eq!(
            store
                .channel_secrets(b.id)
                .await
                .unwrap()
                .access_token
                .expose(),
            "token-b"
        );
        let stored: String =
            sqlx::query_scalar("SELECT access_token_enc FROM channels WHERE id = $1")
                .bind(b.id)
                .fetch_one(&mut db)
                .await
                .unwrap();
        assert!(stored.starts_with("v2:"), "{stored}");
        assert_eq!(
            store.reseal_legacy_secrets().await.unwrap(),
            0,
            "idempotent"
        );
    }
}
