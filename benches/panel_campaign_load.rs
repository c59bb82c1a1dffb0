//! Load harness of panel campaigns (issue 20): 100,000 contacts from the CSV import to an
//! approved campaign, with the simulator's contact-hygiene service. The gateway runs as its
//! own process (the `disparo` binary, release build) against the simulator in this process.
//!
//! Phases timed: the import (`POST /api/campaigns/import`, multipart CSV: parse, normalise,
//! store, submit to hygiene), the validation (`POST …/validate` polled until the report is
//! applied), and the approval (`POST …/approve`). The account's dispatch switch is off, so the
//! approval holds the campaign and nothing is sent: the harness measures the flow up to the
//! approval, not the dispatch (`campaign_load` measures that).
//!
//! Run: `cargo bench --bench panel_campaign_load` (`LOAD_CONTACTS`, default 100000;
//! `LOAD_BACKEND` `sqlite` (default) or `postgres`, a fresh database next to
//! `DISPARO_TEST_POSTGRES_URL`).

mod support;

use serde_json::{json, Value};
use std::time::Instant;
use support::{call, env_num, serve_command, wait_until_up, Gateway};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let contacts = env_num("LOAD_CONTACTS", 100_000) as usize;
    let backend = std::env::var("LOAD_BACKEND").unwrap_or_else(|_| "sqlite".into());
    let support::Stage {
        dir: _dir,
        addr,
        sim,
        mut env,
    } = support::stage(&backend, 11, None).await;
    let sim_url = env
        .iter()
        .find(|(k, _)| *k == "PROVIDER_BASE_URL")
        .map(|(_, v)| v.clone())
        .unwrap();
    env.push(("HYGIENE_URL", format!("{sim_url}/hygiene/v1")));
    env.push(("HYGIENE_API_KEY", "load-key".into()));
    support::bootstrap_admin(&env);
    let gw = Gateway {
        child: serve_command(&env).spawn().expect("gateway"),
    };
    let http = reqwest::Client::new();
    wait_until_up(&http, &addr).await;
    let admin = support::admin_session(&http, &addr).await;
    let n = sim
        .create_number(provider::sim::CreateNumber {
            tier: Some("TIER_UNLIMITED".into()),
            ..Default::default()
        })
        .unwrap();
    let (s, bm) = call(&http, &addr, reqwest::Method::POST, "/api/business-managers", &admin,
        Some(json!({"nome": "BM carga", "cliente": "Carga", "id_provider": n.business_id, "access_token": n.access_token, "app_secret": n.app_secret}))).await;
    assert_eq!(s, 201, "{bm}");
    let bm_id = bm["data"]["id"].as_i64().unwrap();
    let (s, synced) = call(
        &http,
        &addr,
        reqwest::Method::POST,
        &format!("/api/business-managers/{bm_id}/sync"),
        &admin,
        None,
    )
    .await;
    assert_eq!(s, 200, "{synced}");
    let (_, numbers) = call(
        &http,
        &addr,
        reqwest::Method::GET,
        "/api/phone-numbers",
        &admin,
        None,
    )
    .await;
    let channel = numbers["data"][0]["id"].as_i64().expect("a number");
    let (_, templates) = call(
        &http,
        &addr,
        reqwest::Method::GET,
        "/api/templates",
        &admin,
        None,
    )
    .await;
    let template = templates["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "hello_world" || t["provider_name"] == "hello_world")
        .and_then(|t| t["id"].as_i64())
        .expect("hello_world imported by the sync");
    let (s, _) = call(
        &http,
        &addr,
        reqwest::Method::PUT,
        "/api/settings/dispatch",
        &admin,
        Some(json!({"habilitado": false})),
    )
    .await;
    assert_eq!(s, 200);
    // 1 in 50 marked without WhatsApp at the hygiene service, 1 in 100 malformed.
    let invalid: Vec<String> = (0..contacts)
        .step_by(50)
        .map(|i| format!("55119{i:08}"))
        .collect();
    let r = http
        .post(format!("{sim_url}/_sim/hygiene/invalid"))
        .json(&json!({"numbers": invalid}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let mut csv = String::from("telefone;nome;cidade\n");
    for i in 0..contacts {
        if i % 100 == 99 {
            csv.push_str(&format!("12{i};Contato {i};Recife\n"));
        } else {
            csv.push_str(&format!("+55 11 9{i:08};Contato {i};Recife\n"));
        }
    }
    let bytes = csv.len();
    let started = Instant::now();
    let form = reqwest::multipart::Form::new()
        .text("nome", "Carga")
        .text("template_id", template.to_string())
        .text("numeros", channel.to_string())
        .part(
            "arquivo",
            reqwest::multipart::Part::bytes(csv.into_bytes()).file_name("contatos.csv"),
        );
    let r = http
        .post(format!("http://{addr}/api/campaigns/import"))
        .bearer_auth(&admin)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let created: Value = r.json().await.unwrap();
    assert_eq!(status, 201, "{created}");
    let imported = started.elapsed().as_secs_f64();
    let id = created["data"]["id"].as_i64().unwrap();
    let validated_at;
    let validated = loop {
        let (s, b) = call(
            &http,
            &addr,
            reqwest::Method::POST,
            &format!("/api/campaigns/{id}/validate"),
            &admin,
            None,
        )
        .await;
        match s {
            200 => {
                validated_at = started.elapsed().as_secs_f64();
                break b;
            }
            409 if b["code"] == "higienizacao_em_andamento" => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await
            }
            _ => panic!("validate: {s} {b}"),
        }
    };
    let (s, approved) = call(
        &http,
        &addr,
        reqwest::Method::POST,
        &format!("/api/campaigns/{id}/approve"),
        &admin,
        None,
    )
    .await;
    assert_eq!(s, 200, "{approved}");
    let total = started.elapsed().as_secs_f64();
    assert_eq!(approved["data"]["status"], "retida");
    let c = &validated["data"]["contatos"];
    println!(
        "panel_campaign_load ({backend}): {contacts} contacts, CSV {:.1} MB",
        bytes as f64 / 1e6
    );
    println!("  import (parse, store, submit to hygiene): {imported:.2} s");
    println!("  validated (report applied):               {validated_at:.2} s");
    println!("  approved:                                 {total:.2} s  (target ≤ 30 s)");
    println!(
        "  contacts: total {} valid {} invalid {} unknown {}",
        c["total"], c["validos"], c["invalidos"], c["desconhecidos"]
    );
    if let Some(rss) = support::peak_rss_mb(gw.child.id()) {
        println!("  gateway peak RSS: {rss:.0} MB");
    }
}
