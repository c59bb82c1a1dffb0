//! Three `disparo serve` processes in cluster mode (issue 52, `NATS_URL`) on one PostgreSQL
//! database, leases of 2 s: six numbers in six businesses, connected while one node runs, are
//! spread over the three when the others join (each number on exactly one node, its cell's
//! lease holder); the node running the most numbers is killed with SIGKILL and the other two
//! run its numbers within 10 s. Meanwhile a campaign over the six numbers runs on every node
//! (each over its own numbers) with the simulator's webhooks reaching the nodes round-robin,
//! and 1:1 sends arrive at every node (before the kill) and at the survivors (after), each
//! handed over NATS to the node running its number: every campaign recipient and every
//! accepted 1:1 send exactly once at the simulator's ledger, at most 1 % of the sends refused
//! for throughput (one pacer per number). A RED quality event reaching any node reaches the
//! node that runs the number; any node reads any number's health. A graceful stop hands its
//! cells over at once. The campaign has 12,000 recipients, as the issue's "done when" says.
//! PostgreSQL only; SQLite with `NATS_URL` is refused at start.
//!
//! The second test: two nodes, a 15 s SIGSTOP of the busier one mid-campaign and a
//! `nats-server` restart (a server of the test's own), every recipient and 1:1 send once.

mod common;

use common::gateway::{campaign_over_numbers, sent_log, Api, Gateway};
use common::{eventually, Backend, TestDb};
use futures::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::time::{Duration, Instant};

/// The cluster tests run one at a time: each starts several gateways on this 2-core machine.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A cluster test's prologue: PostgreSQL and a `nats-server` of its own (else `None`, the
/// test is skipped), a fresh database, and one gateway `node-<name>` per name on a free port
/// (not started) in cluster mode — one master key, leases of 2 s, sessions of 3 s — with
/// `extra` settings.
async fn cluster(
    names: &[&str],
    extra: &[(&'static str, String)],
) -> Option<(TestDb, Nats, Vec<Gateway>)> {
    let Some(backend) = Backend::postgres() else {
        eprintln!("DISPARO_TEST_POSTGRES_URL unset: PostgreSQL run skipped");
        return None;
    };
    let Some(nats) = Nats::start(None) else {
        eprintln!("nats-server not installed: cluster run skipped");
        return None;
    };
    let db = TestDb::create(&backend).await;
    let mut env = vec![
        ("DATABASE_URL", db.url.clone()),
        ("DISPARO_MASTER_KEY", storage::Cipher::generate_key_base64()),
        ("NATS_URL", nats.url()),
        ("DISPARO_LEASE_TTL_MS", "2000".into()),
        ("DISPARO_NODE_TTL_MS", "3000".into()),
    ];
    env.extend_from_slice(extra);
    let nodes = names
        .iter()
        .map(|id| {
            let mut e = env.clone();
            e.push(("DISPARO_NODE_ID", format!("node-{id}")));
            Gateway::on_free_port(e)
        })
        .collect();
    Some((db, nats, nodes))
}

/// `count` 1:1 template sends through one node's API to new recipients (`prefix` + index),
/// over the numbers in turn: each must be accepted (201), whichever node runs its number.
/// A 503 (nothing sent: e.g. a number whose lease renewal came late on a loaded machine, so
/// its fence refused the send before the provider call) is retried after its `Retry-After`,
/// as a client would, at most 10 times; the callers' "sent more than once" checks hold that a
/// retried send reached the provider once. Returns how many 503s were retried.
async fn one_to_one(
    api: &Api,
    channels: &[i64],
    template: &Value,
    prefix: &str,
    count: usize,
) -> usize {
    let mut retried = 0;
    for i in 0..count {
        let body = serde_json::json!({
            "channel_id": channels[i % channels.len()],
            "to": format!("{prefix}{i:03}"),
            "template": {"id": template, "vars": {"nome": "Ana"}},
        });
        let mut attempts = 0;
        let (status, m) = loop {
            let (status, m) = api
                .call(Method::POST, "/api/v1/messages", Some(body.clone()))
                .await;
            if status != StatusCode::SERVICE_UNAVAILABLE || attempts == 10 {
                break (status, m);
            }
            assert_eq!(m["retryable"], true, "{m}");
            attempts += 1;
            retried += 1;
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        assert_eq!(status, StatusCode::CREATED, "{m}");
        assert_eq!(m["data"]["to"], format!("{prefix}{i:03}"), "{m}");
    }
    if retried > 0 {
        eprintln!("{prefix}: {retried} answers 503 retried");
    }
    retried
}

/// Two nodes (`nodes`, not started) on one simulator whose webhooks reach the first: the
/// first starts and connects four numbers with a campaign of `n` recipients over them, the
/// second joins, and the numbers spread over both. The simulator, its address, the API at
/// the first node, the campaign and the numbers.
async fn four_numbers_over_two_nodes(
    nodes: &mut [Gateway],
    n: usize,
) -> (
    provider::sim::Simulator,
    std::net::SocketAddr,
    Api,
    i64,
    Vec<i64>,
) {
    let sim =
        common::gateway::patient_simulator(format!("http://{}/webhooks/messaging", nodes[0].addr));
    let sim_addr = sim.clone().spawn("127.0.0.1:0").await.unwrap();
    for g in nodes.iter_mut() {
        g.env
            .push(("PROVIDER_BASE_URL", format!("http://{sim_addr}")));
    }
    nodes[0].start().await;
    let api = Api::new(&nodes[0].addr, &nodes[0].token());
    let (id, channels) = campaign_over_numbers(&api, &sim, n, 4).await;
    nodes[1].start().await;
    eventually(15, "the numbers spread over two nodes", || async {
        let per = channels_per_node(&[&nodes[0], &nodes[1]]).await;
        (per.iter().sum::<u64>() == 4 && per.iter().all(|n| *n > 0)).then_some(())
    })
    .await;
    (sim, sim_addr, api, id, channels)
}

/// `GET /health`'s cluster part of a node, when it answers.
async fn cluster_of(g: &Gateway) -> Option<Value> {
    let r = reqwest::get(format!("http://{}/health", g.addr))
        .await
        .ok()?;
    let body: Value = r.json().await.ok()?;
    Some(body["data"]["cluster"].clone())
}

/// How many numbers each of `nodes` runs (0 for a node that does not answer).
async fn channels_per_node(nodes: &[&Gateway]) -> Vec<u64> {
    let mut out = Vec::new();
    for g in nodes {
        out.push(
            cluster_of(g)
                .await
                .and_then(|c| c["channels"].as_u64())
                .unwrap_or(0),
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_share_the_numbers_and_survive_a_killed_node() {
    let _one = ONE_AT_A_TIME.lock().await;
    let grace = [("DISPARO_IN_DOUBT_GRACE_MS", "10000".to_string())];
    let Some((db, _nats, mut nodes)) = cluster(&["a", "b", "c"], &grace).await else {
        return;
    };
    // The provider's webhooks reach the nodes round-robin, past a dead one (a load balancer).
    let balancer =
        common::gateway::round_robin(nodes.iter().map(|g| g.addr.clone()).collect()).await;
    let sim =
        common::gateway::patient_simulator(format!("http://{}/webhooks/messaging", balancer.addr));
    let sim_addr = sim.clone().spawn("127.0.0.1:0").await.unwrap();
    for g in nodes.iter_mut() {
        g.env
            .push(("PROVIDER_BASE_URL", format!("http://{sim_addr}")));
    }
    // The first node alone: it holds every cell while the numbers are connected.
    nodes[0].start().await;
    let api = Api::new(&nodes[0].addr, &nodes[0].token());
    const N: usize = 12_000;
    let (id, channels) = campaign_over_numbers(&api, &sim, N, 6).await;
    let first = cluster_of(&nodes[0]).await.expect("cluster mode on");
    assert_eq!(first["node"], "node-a", "{first}");
    eventually(10, "the first node runs the six numbers", || async {
        (channels_per_node(&[&nodes[0]]).await == [6]).then_some(())
    })
    .await;
    // Two more nodes join: rendezvous gives each its cells, handed over by the first.
    nodes[1].start().await;
    nodes[2].start().await;
    let spread = eventually(15, "the numbers spread over three nodes", || async {
        let per = channels_per_node(&[&nodes[0], &nodes[1], &nodes[2]]).await;
        let live = cluster_of(&nodes[2]).await?["nodes"].as_u64()?;
        (live == 3 && per.iter().sum::<u64>() == 6 && per.iter().filter(|n| **n > 0).count() >= 2)
            .then_some(per)
    })
    .await;
    eprintln!("numbers per node after the join: {spread:?}");
    // Each number on exactly one node: the lease rows name one live holder per cell.
    let pg = sqlx::PgPool::connect(&db.url).await.unwrap();
    let holders: Vec<(String, Option<String>, i64)> =
        eventually(5, "one lease per cell", || async {
            let rows: Vec<(String, Option<String>, i64)> =
                sqlx::query_as("SELECT key, owner_node, epoch FROM leases ORDER BY key")
                    .fetch_all(&pg)
                    .await
                    .ok()?;
            (rows.len() == 6 && rows.iter().all(|(_, o, _)| o.is_some())).then_some(rows)
        })
        .await;
    assert!(holders.iter().all(|(_, o, _)| o.is_some()), "{holders:?}");

    // The campaign runs on every node over its own numbers; a status reaching a node that
    // does not run its number is applied there all the same.
    let (status, body) = api
        .call(Method::POST, &format!("/api/v1/campaigns/{id}/start"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // 1:1 sends arrive at every node meanwhile, for numbers run anywhere.
    let (_, c) = api
        .call(Method::GET, &format!("/api/v1/campaigns/{id}"), None)
        .await;
    let template = c["data"]["template_id"].clone();
    const PER_NODE: usize = 12;
    for (k, g) in nodes.iter().enumerate() {
        one_to_one(
            &api.on(&g.addr),
            &channels,
            &template,
            &format!("55119700{k}"),
            PER_NODE,
        )
        .await;
    }
    eventually(90, "30 % sent", || async {
        (sent_log(sim_addr).await["total"].as_u64()? >= (N * 3 / 10) as u64).then_some(())
    })
    .await;
    // SIGKILL of the node running the most numbers.
    let victim = (0..3).max_by_key(|i| spread[*i]).unwrap();
    let survivors: Vec<usize> = (0..3).filter(|i| *i != victim).collect();
    nodes[victim].kill();
    let killed_at = Instant::now();
    eventually(15, "the dead node's numbers run elsewhere", || async {
        let per = channels_per_node(&[&nodes[survivors[0]], &nodes[survivors[1]]]).await;
        (per.iter().sum::<u64>() == 6).then_some(())
    })
    .await;
    let rehome = killed_at.elapsed();
    eprintln!("re-homed in {rehome:?} (lease TTL 2 s)");
    assert!(rehome < Duration::from_secs(10), "re-homed in {rehome:?}");
    // The victim's cells are held by the survivors under a new epoch (the fencing token).
    let victim_name = format!("node-{}", ["a", "b", "c"][victim]);
    let after: Vec<(String, Option<String>, i64)> =
        sqlx::query_as("SELECT key, owner_node, epoch FROM leases ORDER BY key")
            .fetch_all(&pg)
            .await
            .unwrap();
    for ((key, owner, epoch), (_, owner_after, epoch_after)) in holders.iter().zip(&after) {
        assert_ne!(owner_after.as_deref(), Some(victim_name.as_str()), "{key}");
        if owner.as_deref() == Some(victim_name.as_str()) {
            assert!(
                epoch_after > epoch,
                "{key}: epoch {epoch} then {epoch_after}"
            );
        }
    }
    let api = api.on(&nodes[survivors[0]].addr);
    // And at the survivors after the kill, for the dead node's numbers too.
    for k in &survivors {
        one_to_one(
            &api.on(&nodes[*k].addr),
            &channels,
            &template,
            &format!("55119710{k}"),
            PER_NODE,
        )
        .await;
    }
    let one_to_one_total = (3 + survivors.len()) * PER_NODE;
    let done = eventually(120, "campaign completed", || async {
        let (_, c) = api
            .call(Method::GET, &format!("/api/v1/campaigns/{id}"), None)
            .await;
        (c["data"]["state"] == "completed").then_some(c["data"].clone())
    })
    .await;
    // Every campaign recipient and every accepted 1:1 send exactly once at the provider.
    let log = sent_log(sim_addr).await;
    let per_recipient = log["per_recipient"].as_object().unwrap();
    assert_eq!(per_recipient.len(), N + one_to_one_total, "none left out");
    let twice: Vec<_> = per_recipient
        .iter()
        .filter(|(_, t)| t["oferta"] != 1)
        .collect();
    assert!(twice.is_empty(), "sent more than once: {twice:?}");
    assert_eq!(log["total"], N + one_to_one_total);
    assert_eq!(done["stats"]["sent"], N, "{done}");
    let stats: Value = reqwest::get(format!("http://{sim_addr}/_sim/stats"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let refused: u64 = stats["data"]["throughput_refusals"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(Value::as_u64)
        .sum();
    eprintln!("throughput refusals: {refused} of {N}");
    assert!(refused as usize <= N / 100, "{stats}");
    // A RED quality event for each number, all reaching one node: the numbers the other node
    // runs get theirs over NATS, and the webhook is answered once that node took it.
    let per = channels_per_node(&[&nodes[survivors[0]], &nodes[survivors[1]]]).await;
    assert!(per[1] > 0, "the other node runs numbers: {per:?}");
    let hook = format!("http://{}/webhooks/messaging", nodes[survivors[0]].addr);
    api.http
        .put(format!("http://{sim_addr}/_sim/config"))
        .json(&serde_json::json!({ "webhook_url": hook }))
        .send()
        .await
        .unwrap();
    // Any node lists every number with its live state (read from the node that runs it).
    let (status, list) = api.call(Method::GET, "/api/v1/channels", None).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["data"].as_array().expect("a list").len(), 6, "{list}");
    for c in &channels {
        let (status, official) = api
            .call(Method::GET, &format!("/api/v1/channels/{c}/official"), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{official}");
        let pnid = official["data"]["phone_number_id"].as_str().unwrap();
        let r = api
            .http
            .post(format!("http://{sim_addr}/_sim/numbers/{pnid}/quality"))
            .json(&serde_json::json!({"quality": "RED"}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
    }
    // Read on both nodes: each answers every number's health, the one that runs it directly.
    eventually(20, "every number RED, read on either node", || async {
        let mut red = 0;
        for c in &channels {
            for i in &survivors {
                let (status, h) = api
                    .on(&nodes[*i].addr)
                    .call(Method::GET, &format!("/api/v1/channels/{c}/health"), None)
                    .await;
                if status == StatusCode::OK && h["data"]["code"] == "qualidade_red" {
                    red += 1;
                }
            }
        }
        (red == 2 * channels.len()).then_some(())
    })
    .await;
    // A graceful stop hands the cells over at once (no TTL to wait for).
    nodes[survivors[0]].terminate();
    eventually(5, "the last node runs every number", || async {
        (channels_per_node(&[&nodes[survivors[1]]]).await == [6]).then_some(())
    })
    .await;
    let (status, body) = api
        .on(&nodes[survivors[1]].addr)
        .call(
            Method::GET,
            &format!("/api/v1/channels/{}/health", channels[0]),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for g in nodes.iter_mut() {
        g.kill();
    }
}

#[tokio::test]
async fn cluster_mode_on_sqlite_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let g = Gateway::on_free_port(vec![
        (
            "DATABASE_URL",
            format!("sqlite://{}/t.db?mode=rwc", dir.path().display()),
        ),
        ("DISPARO_MASTER_KEY", storage::Cipher::generate_key_base64()),
        ("NATS_URL", "nats://127.0.0.1:4222".into()),
    ]);
    let out = g
        .command()
        .arg("serve")
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cluster mode (NATS_URL) needs PostgreSQL"),
        "{err}"
    );
}

/// A `nats-server` of the test's own on a free port (so restarting it disturbs no other
/// test); `None` when the binary is not installed.
struct Nats {
    port: u16,
    child: Option<std::process::Child>,
}

impl Nats {
    fn start(port: Option<u16>) -> Option<Nats> {
        let port = port.unwrap_or_else(|| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        });
        let child = std::process::Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        // Listening within a second.
        for _ in 0..50 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(Nats {
            port,
            child: Some(child),
        })
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.stop();
    }
}

/// SIGSTOP of the node running the most numbers for 15 s mid-campaign: the other node takes
/// its numbers; the frozen node, woken, sends nothing more (its cells' deadlines passed, its
/// leases were taken) and gives its numbers up. Then `nats-server` is restarted mid-run: sends
/// resume through both nodes. Every campaign recipient and every accepted 1:1 send once, and
/// the campaign completes: the sends whose outcomes the woken node could not record (its
/// connections were ended while it was frozen) are resolved by its sweep (D-115).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_node_fences_itself_and_a_nats_restart_loses_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    // Longer than the freeze, as the default (120 s) is: a provider call the frozen node had
    // under way reaches the provider only when it wakes; the other node waits that long for
    // its status before sending the recipient again (D-032).
    let grace = [("DISPARO_IN_DOUBT_GRACE_MS", "30000".to_string())];
    let Some((db, mut nats, mut nodes)) = cluster(&["a", "b"], &grace).await else {
        return;
    };
    let balancer =
        common::gateway::round_robin(nodes.iter().map(|g| g.addr.clone()).collect()).await;
    let sim =
        common::gateway::patient_simulator(format!("http://{}/webhooks/messaging", balancer.addr));
    let sim_addr = sim.clone().spawn("127.0.0.1:0").await.unwrap();
    for g in nodes.iter_mut() {
        g.env
            .push(("PROVIDER_BASE_URL", format!("http://{sim_addr}")));
    }
    nodes[0].start().await;
    let api = Api::new(&nodes[0].addr, &nodes[0].token());
    const N: usize = 6_000;
    let (id, channels) = campaign_over_numbers(&api, &sim, N, 6).await;
    nodes[1].start().await;
    let spread = eventually(15, "the numbers spread over two nodes", || async {
        let per = channels_per_node(&[&nodes[0], &nodes[1]]).await;
        (per.iter().sum::<u64>() == 6 && per.iter().all(|n| *n > 0)).then_some(per)
    })
    .await;
    let (status, body) = api
        .call(Method::POST, &format!("/api/v1/campaigns/{id}/start"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, c) = api
        .call(Method::GET, &format!("/api/v1/campaigns/{id}"), None)
        .await;
    let template = c["data"]["template_id"].clone();
    eventually(90, "30 % sent", || async {
        (sent_log(sim_addr).await["total"].as_u64()? >= (N * 3 / 10) as u64).then_some(())
    })
    .await;
    let frozen = if spread[0] >= spread[1] { 0 } else { 1 };
    let awake = 1 - frozen;
    let frozen_name = format!("node-{}", ["a", "b"][frozen]);
    let pg = sqlx::PgPool::connect(&db.url).await.unwrap();
    let before: Vec<(String, i64)> =
        sqlx::query_as("SELECT key, epoch FROM leases WHERE owner_node = $1 ORDER BY key")
            .bind(&frozen_name)
            .fetch_all(&pg)
            .await
            .unwrap();
    assert!(!before.is_empty());
    let frozen_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    nodes[frozen].signal("STOP");
    // The balancer's health check fails for it: webhooks go to the other node only.
    balancer.set_down(&nodes[frozen].addr, true);
    // About 3 s here; up to the idle-in-transaction timeout (5 s) and a lease TTL when the
    // frozen node was inside a transaction holding its leases' rows (D-138).
    eventually(15, "the awake node runs every number", || async {
        (channels_per_node(&[&nodes[awake]]).await == [6]).then_some(())
    })
    .await;
    // 1:1 sends at the awake node meanwhile (every number is its own now).
    let api_awake = api.on(&nodes[awake].addr);
    one_to_one(&api_awake, &channels, &template, "551196000", 12).await;
    // Frozen for 15 s in all.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let left = (frozen_at + 15_000 - now).max(0) as u64;
    tokio::time::sleep(Duration::from_millis(left)).await;
    nodes[frozen].signal("CONT");
    balancer.set_down(&nodes[frozen].addr, false);
    // Woken, it has lost its leases (renewals return nothing: they expired and were taken)
    // and stopped those cells; rendezvous gives them back to it through a hand-off, under new
    // epochs — nothing it does under the old ones reaches the provider.
    eventually(15, "the woken node's cells under new epochs", || async {
        let mut newer = 0;
        for (key, epoch) in &before {
            let now: i64 = sqlx::query_scalar("SELECT epoch FROM leases WHERE key = $1")
                .bind(key)
                .fetch_one(&pg)
                .await
                .ok()?;
            if now > *epoch {
                newer += 1;
            }
        }
        let per = channels_per_node(&[&nodes[0], &nodes[1]]).await;
        (newer == before.len() && per.iter().sum::<u64>() == 6).then_some(())
    })
    .await;
    // NATS restarted mid-run: the nodes reconnect and route again.
    let port = nats.port;
    nats.stop();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let _nats = Nats::start(Some(port)).expect("nats-server starts again");
    let spread_again = eventually(30, "the numbers spread again", || async {
        let per = channels_per_node(&[&nodes[0], &nodes[1]]).await;
        (per.iter().sum::<u64>() == 6 && per.iter().all(|n| *n > 0)).then_some(per)
    })
    .await;
    eprintln!("numbers per node: {spread:?}, after the freeze and NATS restart {spread_again:?}");
    for (k, g) in nodes.iter().enumerate() {
        let api = api.on(&g.addr);
        eventually(30, "1:1 sends routed again", || async {
            let body = serde_json::json!({
                "channel_id": channels[0],
                "to": format!("55119610{k}000"),
                "template": {"id": template, "vars": {"nome": "Ana"}},
            });
            let (status, m) = api.call(Method::POST, "/api/v1/messages", Some(body)).await;
            // During the outage a send that must cross nodes answers 503 (nothing sent).
            assert!(
                status == StatusCode::CREATED || status == StatusCode::SERVICE_UNAVAILABLE,
                "{status}: {m}"
            );
            (status == StatusCode::CREATED).then_some(())
        })
        .await;
        one_to_one(&api, &channels, &template, &format!("55119620{k}"), 12).await;
    }
    let extra = 12 + 2 + 2 * 12;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let (_, c) = api
            .call(Method::GET, &format!("/api/v1/campaigns/{id}"), None)
            .await;
        if c["data"]["state"] == "completed" {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            // Where the campaign's recipients stand, and whose claims they are.
            let states: Vec<(String, Option<i64>, i64)> = sqlx::query_as(
                "SELECT state, claim_session, COUNT(*) FROM campaign_recipients \
                 WHERE campaign_id = $1 GROUP BY state, claim_session ORDER BY 1, 2",
            )
            .bind(id)
            .fetch_all(&pg)
            .await
            .unwrap();
            let sessions: Vec<(i64, String, Option<i64>)> =
                sqlx::query_as("SELECT id, node, ended_at FROM node_sessions ORDER BY id")
                    .fetch_all(&pg)
                    .await
                    .unwrap();
            panic!("campaign not completed: {c}\nrecipients {states:?}\nsessions {sessions:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let log = sent_log(sim_addr).await;
    let per_recipient = log["per_recipient"].as_object().unwrap();
    let twice: Vec<_> = per_recipient
        .iter()
        .filter(|(_, t)| t["oferta"] != 1)
        .collect();
    if !twice.is_empty() {
        // Where each second send came from: number, time from the freeze, our message id.
        for c in &channels {
            let (_, o) = api
                .call(Method::GET, &format!("/api/v1/channels/{c}/official"), None)
                .await;
            let pnid = o["data"]["phone_number_id"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let sent: Value = reqwest::get(format!(
                "http://{sim_addr}/_sim/numbers/{pnid}/sent?limit=100000"
            ))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
            for m in sent["data"]["messages"].as_array().into_iter().flatten() {
                let to = m["to"].as_str().unwrap_or_default();
                if twice.iter().take(3).any(|(r, _)| r.as_str() == to) {
                    eprintln!(
                        "{to} via channel {c} at {} ms from the freeze, callback {}",
                        m["at"].as_i64().unwrap_or(0) - frozen_at,
                        m["payload"]["biz_opaque_callback_data"]
                    );
                }
            }
        }
    }
    assert!(twice.is_empty(), "sent more than once: {twice:?}");
    assert_eq!(per_recipient.len(), N + extra, "none left out");
    for g in nodes.iter_mut() {
        g.kill();
    }
}

/// Actions on a number at the node that does not run it reach the node that does (issue 52,
/// "Routing"): guardrails read, changed and authorized, a sync, a credential update and the
/// panel's removal of a number, each answered as on that node. And a NATS client that is not
/// a node of the cluster (no master key) is answered nothing (D-111): an unsigned snapshot
/// request and a forged RED quality change get no reply and change nothing, and a signed 1:1
/// send captured on the wire and published again is refused as a replay — its recipient gets
/// the message once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_reach_the_numbers_node_and_outsiders_reach_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some((db, nats, mut nodes)) = cluster(&["a", "b"], &[]).await else {
        return;
    };
    let (sim, sim_addr, api, id, channels) = four_numbers_over_two_nodes(&mut nodes, 2).await;
    let (_, c) = api
        .call(Method::GET, &format!("/api/v1/campaigns/{id}"), None)
        .await;
    let template = c["data"]["template_id"].clone();
    routed_actions(&nodes, &api, &sim, &db.url, &channels).await;
    let outsider = async_nats::connect(nats.url()).await.unwrap();
    let mut wire = outsider.subscribe("dsp.ch.*.ctl").await.unwrap();
    let unanswered = |subject: String, payload: Vec<u8>| {
        let outsider = outsider.clone();
        async move {
            let asked = tokio::time::timeout(
                Duration::from_secs(2),
                outsider.request(subject, payload.into()),
            )
            .await;
            assert!(
                !matches!(asked, Ok(Ok(_))),
                "a message from outside the cluster was answered"
            );
        }
    };
    for c in &channels {
        let subject = format!("dsp.ch.{c}.ctl");
        unanswered(subject.clone(), br#""Snapshot""#.to_vec()).await;
        let forged = serde_json::json!({"Quality": {"quality": "RED", "tier": null, "at": 1}});
        unanswered(subject, serde_json::to_vec(&forged).unwrap()).await;
    }
    // Read at both nodes (one of them asks the other, signed): no number went RED.
    for g in &nodes {
        for c in &channels {
            let (status, h) = api
                .on(&g.addr)
                .call(Method::GET, &format!("/api/v1/channels/{c}/health"), None)
                .await;
            assert_eq!(status, StatusCode::OK, "{h}");
            assert_ne!(h["data"]["code"], "qualidade_red", "{h}");
        }
    }
    // 1:1 sends through each node to every number: at least one is handed over NATS.
    for (n, g) in nodes.iter().enumerate() {
        one_to_one(
            &api.on(&g.addr),
            &channels,
            &template,
            &format!("55119700{n}"),
            4,
        )
        .await;
    }
    let captured = loop {
        let msg = tokio::time::timeout(Duration::from_secs(5), wire.next())
            .await
            .expect("a forwarded send on the wire")
            .unwrap();
        if msg.payload.windows(6).any(|w| w == b"\"Send\"") {
            break msg;
        }
    };
    unanswered(captured.subject.to_string(), captured.payload.to_vec()).await;
    // The node that served it stops; the number moves to the other node, which never saw
    // the request: the capture replayed there is refused too (D-118).
    let channel: i64 = captured.subject.split('.').nth(2).unwrap().parse().unwrap();
    let pg = sqlx::PgPool::connect(&db.url).await.unwrap();
    let served_by = runner_of(&pg, channel).await;
    nodes[served_by].terminate();
    let (survivor, pg) = (1 - served_by, &pg);
    eventually(15, "the number runs at the other node", || async move {
        let node = owner_node(pg, channel).await?;
        node.ends_with(char::from(b'a' + survivor as u8))
            .then_some(())
    })
    .await;
    // Someone listens on the number's subject again: a request is not answered "no
    // responders" (the survivor's listener ignores it), so the replay below reaches a node.
    let outsider_ref = &outsider;
    let subject = captured.subject.to_string();
    eventually(15, "the survivor listens on the number's subject", || {
        let subject = subject.clone();
        async move {
            let asked = tokio::time::timeout(
                Duration::from_millis(500),
                outsider_ref.request(subject, b"?".to_vec().into()),
            )
            .await;
            asked.is_err().then_some(())
        }
    })
    .await;
    unanswered(captured.subject.to_string(), captured.payload.to_vec()).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let log = sent_log(sim_addr).await;
    let per_recipient = log["per_recipient"].as_object().unwrap();
    assert_eq!(per_recipient.len(), 8, "{log}");
    assert!(
        per_recipient
            .values()
            .all(|t| t.as_object().unwrap().values().all(|n| n == 1)),
        "each 1:1 send once: {log}"
    );
    for g in nodes.iter_mut() {
        g.kill();
    }
}

/// The node running `channel` (its cell's lease holder), as an index into `nodes` named
/// `node-a`, `node-b`….
async fn runner_of(pg: &sqlx::PgPool, channel: i64) -> usize {
    let node = owner_node(pg, channel)
        .await
        .expect("the number's cell is held");
    usize::from(node.as_bytes()[node.len() - 1] - b'a')
}

/// The name of the node holding `channel`'s cell, if one does.
async fn owner_node(pg: &sqlx::PgPool, channel: i64) -> Option<String> {
    let row: Option<(String,)> = sqlx::query_as(
        "SELECT l.owner_node FROM channels c JOIN leases l \
         ON l.key = COALESCE('bm:' || c.bm_id, 'group:' || c.group_id, 'ch:' || c.id) \
         WHERE c.id = $1 AND l.owner_node IS NOT NULL",
    )
    .bind(channel)
    .fetch_optional(pg)
    .await
    .unwrap();
    row.map(|(n,)| n)
}

/// Guardrails, authorization, sync and a credential update of every number through the node
/// that does not run it; then the panel removes a number (without history) another node runs.
async fn routed_actions(
    nodes: &[Gateway],
    api: &Api,
    sim: &provider::sim::Simulator,
    db_url: &str,
    channels: &[i64],
) {
    let pg = sqlx::PgPool::connect(db_url).await.unwrap();
    for (i, c) in channels.iter().enumerate() {
        let runner = runner_of(&pg, *c).await;
        let far = api.on(&nodes[1 - runner].addr);
        let near = api.on(&nodes[runner].addr);
        let path = format!("/api/v1/channels/{c}/guardrails");
        let cadence = 100 + i as i64;
        let (status, g) = far
            .call(
                Method::PATCH,
                &path,
                Some(serde_json::json!({"cadence_ms": cadence})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{g}");
        assert_eq!(g["data"]["cadence_ms"], cadence, "{g}");
        let (status, g) = far
            .call(
                Method::POST,
                &format!("{path}/authorize"),
                Some(serde_json::json!({"extra": 7})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{g}");
        assert_eq!(g["data"]["today"]["authorized"], 7, "{g}");
        // The node running it has them live (its actor took them).
        let (status, g) = near.call(Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::OK, "{g}");
        assert_eq!(
            (
                g["data"]["cadence_ms"].clone(),
                g["data"]["today"]["authorized"].clone()
            ),
            (serde_json::json!(cadence), serde_json::json!(7)),
            "{g}"
        );
        let (status, g) = far.call(Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::OK, "{g}");
        let (status, synced) = far
            .call(Method::POST, &format!("/api/v1/channels/{c}/sync"), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{synced}");
        assert_eq!(synced["data"]["channel"]["id"], *c, "{synced}");
        // A record change made at the far node: the running actor reads it again.
        let name = format!("Loja {i}");
        let (status, updated) = far
            .call(
                Method::PATCH,
                &format!("/api/v1/channels/{c}/official"),
                Some(serde_json::json!({ "name": name })),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{updated}");
        let (status, list) = near.call(Method::GET, "/api/v1/channels", None).await;
        assert_eq!(status, StatusCode::OK, "{list}");
        let live = list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == *c)
            .cloned()
            .unwrap();
        assert_eq!(live["name"], name.as_str(), "{live}");
    }
    // Two more numbers, in no campaign: the panel removes the one the other node runs.
    let mut extra = Vec::new();
    for _ in 0..2 {
        let num = sim
            .create_number(provider::sim::CreateNumber {
                tier: Some("TIER_10K".into()),
                ..Default::default()
            })
            .unwrap();
        let (status, c) = api
            .call(
                Method::POST,
                "/api/v1/channels/official",
                Some(serde_json::json!({"phone_number_id": num.phone_number_id, "waba_id": num.waba_id, "access_token": num.access_token, "app_secret": num.app_secret})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{c}");
        extra.push(c["data"]["id"].as_i64().unwrap());
    }
    eventually(10, "six numbers running", || async {
        let per = channels_per_node(&[&nodes[0], &nodes[1]]).await;
        (per.iter().sum::<u64>() == 6).then_some(())
    })
    .await;
    let mut placed = Vec::new();
    for c in &extra {
        placed.push((runner_of(&pg, *c).await, *c));
    }
    // Removed through node a when node b runs it, else through b.
    let (runner, gone) = placed[0];
    let far = &nodes[1 - runner];
    let session = far.panel_admin("ops@acme.com.br", "senha-longa-123").await;
    let r = reqwest::Client::new()
        .delete(format!("http://{}/api/phone-numbers/{gone}", far.addr))
        .bearer_auth(&session)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text().await);
    eventually(10, "the removed number stopped where it ran", || async {
        let per = channels_per_node(&[&nodes[0], &nodes[1]]).await;
        (per.iter().sum::<u64>() == 5).then_some(())
    })
    .await;
    let (status, _) = api
        .call(
            Method::GET,
            &format!("/api/v1/channels/{gone}/official"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // The panel's cluster view at that node: both nodes, the five numbers between them, the
    // account's cells each held by one of them under an epoch.
    let view: Value = reqwest::Client::new()
        .get(format!("http://{}/api/cluster", far.addr))
        .bearer_auth(&session)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let data = &view["data"];
    assert_eq!(data["modo"], "cluster", "{view}");
    let nodes = data["nos"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{view}");
    assert_eq!(
        nodes
            .iter()
            .map(|n| n["numeros"].as_u64().unwrap())
            .sum::<u64>(),
        5,
        "{view}"
    );
    assert_eq!(
        nodes.iter().filter(|n| n["este"] == true).count(),
        1,
        "{view}"
    );
    let cells = data["celulas"].as_array().unwrap();
    let numbers: usize = cells
        .iter()
        .map(|c| c["numeros"].as_array().unwrap().len())
        .sum();
    assert_eq!(numbers, 5, "{view}");
    assert!(
        cells
            .iter()
            .all(|c| c["no"].as_str().is_some() && c["epoca"].as_i64() >= Some(1)),
        "{view}"
    );
}

/// Request limits per cluster (issue 52, D-112): a token's per-minute quota and the login
/// attempts of an e-mail count every node's admissions — requests spread over two nodes get
/// the quota once, not once per node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_count_every_nodes_admissions() {
    let _one = ONE_AT_A_TIME.lock().await;
    let limit = [("DISPARO_RATE_LIMIT_PER_MIN", "60".to_string())];
    let Some((_db, _nats, mut nodes)) = cluster(&["a", "b"], &limit).await else {
        return;
    };
    for g in nodes.iter_mut() {
        g.start().await;
    }
    let token = nodes[0].token();
    let admitted = |g: &Gateway, n: usize| {
        let api = Api::new(&g.addr, &token);
        async move {
            let mut ok = 0;
            for _ in 0..n {
                let (status, _) = api.call(Method::GET, "/api/v1/channels", None).await;
                if status == StatusCode::OK {
                    ok += 1;
                } else {
                    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
                }
            }
            ok
        }
    };
    let started = Instant::now();
    assert_eq!(admitted(&nodes[0], 40).await, 40);
    tokio::time::sleep(Duration::from_millis(800)).await;
    let at_b = admitted(&nodes[1], 40).await;
    // 20 left of the minute's 60, plus one a second refilled meanwhile.
    let refilled = started.elapsed().as_secs() as usize + 1;
    assert!(
        (18..=20 + refilled).contains(&at_b),
        "node b admitted {at_b} of 40 after node a took 40 of 60"
    );
    // Login attempts of one e-mail: 10 at node a (a burst of 10), the next at node b waits.
    nodes[0]
        .panel_admin("ops@acme.com.br", "senha-longa-123")
        .await;
    let login = |g: &Gateway| {
        let url = format!("http://{}/api/login", g.addr);
        async move {
            reqwest::Client::new()
                .post(url)
                .json(&serde_json::json!({"email": "ops@acme.com.br", "password": "errada"}))
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    for _ in 0..9 {
        assert_eq!(login(&nodes[0]).await, StatusCode::UNAUTHORIZED);
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(login(&nodes[1]).await, StatusCode::TOO_MANY_REQUESTS);
    for g in nodes.iter_mut() {
        g.kill();
    }
}

/// A campaign over two nodes is coordinated by one of them (D-123): a 3:1 weight holds
/// between a number on one node and a number on the other; when every number on both nodes
/// turns RED the campaign pauses itself ("no number can send") and resumes when they recover;
/// a pause asked at the node that does not coordinate stops every send before it answers; a
/// resume completes it with every recipient once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_is_coordinated_across_nodes() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some((db, _nats, mut nodes)) = cluster(&["a", "b"], &[]).await else {
        return;
    };
    let (_sim, sim_addr, api, first, channels) = four_numbers_over_two_nodes(&mut nodes, 0).await;
    let pg = sqlx::PgPool::connect(&db.url).await.unwrap();
    let mut on = [Vec::new(), Vec::new()];
    for c in &channels {
        on[runner_of(&pg, *c).await].push(*c);
    }
    let (x, y) = (on[0][0], on[1][0]);
    let pnid = |c: i64| {
        let api = &api;
        async move {
            let (_, o) = api
                .call(Method::GET, &format!("/api/v1/channels/{c}/official"), None)
                .await;
            o["data"]["phone_number_id"].as_str().unwrap().to_string()
        }
    };
    let (px, py) = (pnid(x).await, pnid(y).await);
    let (_, c) = api
        .call(Method::GET, &format!("/api/v1/campaigns/{first}"), None)
        .await;
    let template = c["data"]["template_id"].as_i64().unwrap();
    // 3:1 across the two nodes, started at node b.
    let weighted = new_campaign(&api, template, &[(x, 3), (y, 1)], 1_200, "5511981").await;
    let api_b = api.on(&nodes[1].addr);
    let (status, body) = api_b
        .call(
            Method::POST,
            &format!("/api/v1/campaigns/{weighted}/start"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_campaign(&api, weighted, "completed", 60).await;
    let log = sent_log(sim_addr).await;
    let (sx, sy) = (
        log["per_number"][&px].as_f64().unwrap(),
        log["per_number"][&py].as_f64().unwrap(),
    );
    assert_eq!(sx + sy, 1_200.0, "{log}");
    assert!(
        (2.4..=3.6).contains(&(sx / sy)),
        "3:1 weights across nodes gave {sx}:{sy}"
    );
    // A slower campaign (40 sends/s per number) over the same two numbers.
    for c in [x, y] {
        let body = serde_json::json!({"cadence_ms": 25});
        let (status, g) = api
            .call(
                Method::PATCH,
                &format!("/api/v1/channels/{c}/guardrails"),
                Some(body),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{g}");
    }
    let slow = new_campaign(&api, template, &[(x, 1), (y, 1)], 2_000, "5511982").await;
    let (status, body) = api
        .call(
            Method::POST,
            &format!("/api/v1/campaigns/{slow}/start"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let coordinator = eventually(10, "one node coordinates the campaign", || async {
        let mut at = Vec::new();
        for (i, g) in nodes.iter().enumerate() {
            let c = cluster_of(g).await?;
            if c["campaigns"].as_array()?.iter().any(|v| v == slow) {
                at.push(i);
            }
        }
        (at.len() == 1).then(|| at[0])
    })
    .await;
    let sent = |id: i64| {
        let api = &api;
        async move {
            let (_, c) = api
                .call(Method::GET, &format!("/api/v1/campaigns/{id}"), None)
                .await;
            c["data"]["stats"]["sent"].as_u64().unwrap_or(0)
        }
    };
    eventually(20, "the slow campaign under way", || async {
        (sent(slow).await >= 100).then_some(())
    })
    .await;
    // Both numbers RED (each number's quality event reaches its own node): no number can
    // send on either node, so the coordinator pauses the campaign by its rules.
    let quality = |pnid: String, q: &'static str| {
        let http = api.http.clone();
        async move {
            let r = http
                .post(format!("http://{sim_addr}/_sim/numbers/{pnid}/quality"))
                .json(&serde_json::json!({ "quality": q }))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success());
        }
    };
    quality(px.clone(), "RED").await;
    quality(py.clone(), "RED").await;
    let paused = wait_campaign(&api, slow, "paused", 20).await;
    assert!(
        paused["pause_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("Nenhum número disponível"),
        "{paused}"
    );
    let at_pause = sent_log(sim_addr).await["total"].as_u64().unwrap();
    quality(px, "GREEN").await;
    quality(py, "GREEN").await;
    wait_campaign(&api, slow, "running", 20).await;
    let resumed_from = sent(slow).await;
    eventually(20, "sending again after the recovery", || async {
        (sent(slow).await >= resumed_from + 100).then_some(())
    })
    .await;
    assert!(sent_log(sim_addr).await["total"].as_u64().unwrap() > at_pause);
    // Paused at the node that does not coordinate: nothing is sent after the answer.
    let other = api.on(&nodes[1 - coordinator].addr);
    let (status, body) = other
        .call(
            Method::POST,
            &format!("/api/v1/campaigns/{slow}/pause"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let after_pause = sent_log(sim_addr).await["total"].as_u64().unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let later = sent_log(sim_addr).await["total"].as_u64().unwrap();
    assert_eq!(later, after_pause, "sends after the pause answered");
    let (status, body) = other
        .call(
            Method::POST,
            &format!("/api/v1/campaigns/{slow}/resume"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_campaign(&api, slow, "completed", 90).await;
    common::gateway::assert_each_once(&sent_log(sim_addr).await, 3_200);
    for g in nodes.iter_mut() {
        g.kill();
    }
}

/// A campaign over `channels` (`(id, weight)`) of `template` with `n` recipients (`prefix` +
/// index), not started.
async fn new_campaign(
    api: &Api,
    template: i64,
    channels: &[(i64, i64)],
    n: usize,
    prefix: &str,
) -> i64 {
    let body = serde_json::json!({
        "name": format!("Campanha {prefix}"),
        "template_id": template,
        "channels": channels
            .iter()
            .map(|(c, w)| serde_json::json!({"channel_id": c, "weight": w}))
            .collect::<Vec<_>>(),
    });
    let (status, c) = api
        .call(Method::POST, "/api/v1/campaigns", Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let id = c["data"]["id"].as_i64().unwrap();
    let rows: Vec<Value> = (0..n)
        .map(|i| serde_json::json!({"phone": format!("{prefix}{i:06}"), "vars": {"nome": "Ana"}}))
        .collect();
    let (status, body) = api
        .call(
            Method::POST,
            &format!("/api/v1/campaigns/{id}/recipients"),
            Some(serde_json::json!({ "recipients": rows })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    id
}

/// Waits up to `secs` for campaign `id` to reach `state`; its view then.
async fn wait_campaign(api: &Api, id: i64, state: &str, secs: u64) -> Value {
    eventually(secs, state, || async {
        let (_, c) = api
            .call(Method::GET, &format!("/api/v1/campaigns/{id}"), None)
            .await;
        (c["data"]["state"] == state).then(|| c["data"].clone())
    })
    .await
}
