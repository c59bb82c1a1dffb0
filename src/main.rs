//! The `disparo` command line: `serve`, `migrate`, `token create`, `sim`. Wiring only.

#![forbid(unsafe_code)]

use anyhow::Context;
use clap::{Parser, Subcommand};
use disparo::{open_store, Application, Demo, Settings};
use provider::sim::{SimConfig, Simulator, StatusDelays};
use tokio::net::TcpListener;

/// mimalloc instead of glibc malloc: under load the gateway and the simulator allocate from
/// both cores at once, where glibc's arenas spent ~30 % of the simulator's CPU (issue 3 notes).
/// The `system-alloc` feature keeps the system allocator, for heap profilers that hook malloc.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// disparo: a self-hosted gateway in front of the WhatsApp Business Platform Cloud API.
#[derive(Parser)]
#[command(name = "disparo", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the gateway (migrations first).
    Serve {
        /// Start the built-in provider simulator and point the gateway at it (local try-out).
        /// On an empty database it creates a demo account, token and channel.
        #[arg(long)]
        simulator: bool,
        #[command(flatten)]
        settings: Settings,
    },
    /// Applies the database migrations and exits.
    Migrate {
        #[command(flatten)]
        settings: Settings,
    },
    /// Manages API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Manages operator panel users.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Runs the provider simulator alone.
    Sim {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:9090")]
        listen: String,
        /// Where to POST webhooks (the gateway's /webhooks/messaging).
        #[arg(long)]
        webhook_url: Option<String>,
        /// Seed for repeatable ids and draws.
        #[arg(long)]
        seed: Option<u64>,
        /// Delays of the sent, delivered and read statuses after acceptance, ms.
        #[arg(long, default_value = "0,100,300", value_delimiter = ',')]
        status_delays_ms: Vec<u64>,
        /// Share of accepted sends that fail (131026) instead of being delivered, 0 to 1.
        #[arg(long, default_value_t = 0.0)]
        failed_share: f64,
        /// Throughput of new numbers, messages/s.
        #[arg(long, default_value_t = 80)]
        throughput_mps: u32,
    },
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Creates a token (and the account when it does not exist); prints only the token.
    Create {
        /// Account slug (a-z, 0-9, -).
        #[arg(long)]
        account: String,
        /// Token name, recorded in the audit log of every write made with it.
        #[arg(long)]
        name: String,
        /// Access level: read, write or admin.
        #[arg(long, default_value = "admin", value_parser = ["read", "write", "admin"])]
        level: String,
        #[command(flatten)]
        settings: Settings,
    },
}

#[derive(Subcommand)]
enum UserCommand {
    /// Creates a panel user (and the account when it does not exist); the password is read
    /// from standard input (one line), never from the command line. Bootstraps the first Admin.
    Create {
        /// Account slug (a-z, 0-9, -).
        #[arg(long)]
        account: String,
        /// Login e-mail.
        #[arg(long)]
        email: String,
        /// Display name (the audit log's author).
        #[arg(long)]
        name: String,
        /// Role.
        #[arg(long, value_parser = ["Admin", "Operador", "Client"])]
        role: String,
        /// The client of a Client user (its id).
        #[arg(long)]
        client: Option<i64>,
        /// Read the password from standard input (required: passwords never go in arguments).
        #[arg(long, required = true)]
        password_stdin: bool,
        #[command(flatten)]
        settings: Settings,
    },
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("DISPARO_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,hyper=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if std::env::var("DISPARO_LOG_FORMAT").as_deref() == Ok("json") {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    init_tracing();
    match Cli::parse().command {
        Command::Serve {
            simulator,
            mut settings,
        } => {
            if !simulator {
                disparo::resolve_metrics_token(&mut settings)?;
                let app = Application::build(settings, None).await?;
                return app.run_until(shutdown_signal()).await;
            }
            let listener = TcpListener::bind(&settings.listen)
                .await
                .with_context(|| format!("binding {}", settings.listen))?;
            let demo = Demo::start(&mut settings, listener.local_addr()?).await?;
            let store = open_store(&settings).await?;
            let adopted = demo.adopt_stored_channels(&store).await?;
            store.close().await;
            let app = Application::build(settings, Some(listener)).await?;
            tracing::info!(simulator = %demo.sim_addr, adopted, "simulator mode");
            if let Some(text) = demo.seed(&app).await? {
                println!("{text}");
            } else {
                println!("disparo with the simulator at http://{} (existing database: use your token, or `disparo token create`).", demo.sim_addr);
            }
            app.run_until(shutdown_signal()).await
        }
        Command::Migrate { settings } => {
            let store = open_store(&settings).await?;
            store.close().await;
            eprintln!("migrations applied");
            Ok(())
        }
        Command::Token {
            command:
                TokenCommand::Create {
                    account,
                    name,
                    level,
                    settings,
                },
        } => {
            if name.trim().is_empty() {
                anyhow::bail!("--name must not be empty");
            }
            let store = open_store(&settings).await?;
            let account = store.ensure_account(&account).await?;
            let token = store.create_token(account.id, name.trim(), &level).await?;
            println!("{}", token.value.expose());
            store.close().await;
            Ok(())
        }
        Command::User {
            command:
                UserCommand::Create {
                    account,
                    email,
                    name,
                    role,
                    client,
                    password_stdin: _,
                    settings,
                },
        } => {
            let mut password = String::new();
            std::io::stdin()
                .read_line(&mut password)
                .context("reading the password from standard input")?;
            let password = password.trim_end_matches(['\r', '\n']).to_string();
            let store = open_store(&settings).await?;
            let account = store.ensure_account(&account).await?;
            let created = services::panel::create_user(
                &store,
                account.id,
                services::panel::UserInput {
                    email,
                    name,
                    role,
                    status: None,
                    password,
                    client_id: client,
                    bm_ids: Vec::new(),
                },
            )
            .await;
            store.close().await;
            match created {
                Ok(u) => {
                    println!("{}", u.id);
                    eprintln!(
                        "user {} ({}) created in account {}",
                        u.email, u.role, account.slug
                    );
                    Ok(())
                }
                Err(actors::ActorError::Rejected { message, .. }) => anyhow::bail!(message),
                Err(actors::ActorError::Validation(v)) => anyhow::bail!(v.message),
                Err(e) => Err(e.into()),
            }
        }
        Command::Sim {
            listen,
            webhook_url,
            seed,
            status_delays_ms,
            failed_share,
            throughput_mps,
        } => {
            let [sent_ms, delivered_ms, read_ms] = status_delays_ms[..] else {
                anyhow::bail!("--status-delays-ms takes three values: sent,delivered,read");
            };
            if !(0.0..=1.0).contains(&failed_share) {
                anyhow::bail!("--failed-share must be between 0 and 1");
            }
            let sim = Simulator::new(SimConfig {
                seed,
                webhook_url,
                status_delays: StatusDelays {
                    sent_ms,
                    delivered_ms,
                    read_ms,
                },
                failed_share,
                default_throughput_mps: throughput_mps,
                ..SimConfig::default()
            });
            let listener = TcpListener::bind(&listen)
                .await
                .with_context(|| format!("binding {listen}"))?;
            tracing::info!(addr = %listener.local_addr()?, "provider simulator listening");
            tokio::select! {
                r = sim.serve(listener) => r.context("simulator server")?,
                _ = shutdown_signal() => {}
            }
            Ok(())
        }
    }
}
