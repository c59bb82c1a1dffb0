//! The simulator driven by a real client no one here wrote: pywa (PyPI, pinned in
//! tests/requirements.txt; script `tests/pywa/client.py`). Whatever pywa sends that the
//! provider accepts, the simulator accepts; what it refuses (a template without its URL
//! button parameter) is refused with the provider's code; pywa parses the simulator's
//! webhooks with its own handlers and signature check (issue 16).

use provider::sim::{CreateNumber, SimConfig, Simulator, StatusDelays};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pywa_sends_reads_and_parses_webhooks_against_the_simulator() {
    // pywa reads the first change and the first status of each POST: one event per POST.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let sim = Simulator::new(SimConfig {
        webhook_url: Some(format!("http://127.0.0.1:{port}/")),
        batch_max: 1,
        batch_window_ms: 0,
        status_delays: StatusDelays {
            sent_ms: 0,
            delivered_ms: 50,
            read_ms: 100,
        },
        template_review_ms: 60_000,
        ..SimConfig::default()
    });
    let addr = sim.clone().spawn("127.0.0.1:0").await.unwrap();
    let n = sim
        .create_number(CreateNumber {
            verified_name: Some("Loja".into()),
            ..CreateNumber::default()
        })
        .unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pywa/client.py");
    let args = [
        script.to_string(),
        format!("http://{addr}"),
        n.access_token.clone(),
        n.phone_number_id.clone(),
        n.waba_id.clone(),
        n.app_secret.clone(),
        port.to_string(),
    ];
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .args(&args)
            .env("PYWA_API_VERSION", "25.0")
            .output()
    })
    .await
    .unwrap()
    .expect("python3 runs");
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the pywa client printed no JSON ({e}; install tests/requirements.txt):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(out.status.success(), "{seen:#}");
    assert_eq!(seen["unexpected"], serde_json::json!([]), "{seen:#}");

    // Every send pywa makes is accepted, and its statuses reach pywa's handler.
    for step in ["template", "text", "image_link", "image_id"] {
        assert!(
            seen["sends"][step]
                .as_str()
                .is_some_and(|id| id.starts_with("wamid.")),
            "{step}: {seen:#}"
        );
        let statuses: Vec<&str> = seen["statuses"][step]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for s in ["sent", "delivered"] {
            assert!(statuses.contains(&s), "{step} {s}: {seen:#}");
        }
    }
    // The template went out with header, body and button parameters.
    let sent: Value = reqwest::get(format!(
        "http://{addr}/_sim/numbers/{}/sent?limit=20",
        n.phone_number_id
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let template = sent["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == seen["sends"]["template"])
        .expect("the template send is in the ledger");
    let kinds: Vec<String> = template["payload"]["template"]["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap_or_default().to_ascii_lowercase())
        .collect();
    for k in ["header", "body", "button"] {
        assert!(kinds.contains(&k.to_string()), "{k} in {kinds:?}");
    }
    // Without its URL button parameter the template is refused, with v25.0's code.
    assert_eq!(seen["incomplete_template"]["accepted"], false, "{seen:#}");
    assert_eq!(seen["incomplete_template"]["code"], 132018, "{seen:#}");
    // The inbound message reaches pywa's on_message with the BSUID.
    let inbound = seen["inbound"].as_array().unwrap();
    assert!(
        inbound
            .iter()
            .any(|m| m["text"].as_str().is_some_and(|t| !t.is_empty())
                && m["user_id"].as_str().is_some_and(|u| u.starts_with("BR."))),
        "{seen:#}"
    );
    // A forged signature is refused by pywa itself.
    assert_eq!(seen["bad_signature"]["refused_by_pywa"], true, "{seen:#}");
    assert_eq!(seen["bad_signature"]["handler_called"], false, "{seen:#}");
    // The number read with pywa's own call, every field it asks for answered.
    assert_eq!(
        seen["phone_read_with"], "get_business_phone_number",
        "{seen:#}"
    );
    assert_eq!(seen["phone"]["id"], n.phone_number_id.as_str(), "{seen:#}");
    assert_eq!(seen["phone"]["status"], "CONNECTED", "{seen:#}");
}
