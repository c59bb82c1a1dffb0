//! Every real provider webhook payload in `provider/testdata` (copied from
//! `shared/provider-samples`), with its ids pointed at a connected number, signed the
//! provider's way, is answered 2xx by the app-level receiver and changes what it should
//! (issue 16's held-out check; the other fields are in tests/provider_fields.rs).

mod common;

use common::{eventually, Backend, Receiver, TestApp};
use reqwest::StatusCode;
use serde_json::{json, Value};

fn sample(name: &str) -> Value {
    let path = format!("{}/provider/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The ids a sample names, pointed at ours.
struct Ours<'a> {
    waba: &'a str,
    phone_number_id: &'a str,
    display: &'a str,
    wamid: Option<&'a str>,
    template: Option<(&'a str, &'a str)>,
}

/// A provider `time` (s) for a sample sent now: each later than the last, since the provider's
/// time orders a field's events (D-099) and the samples' own times are from the past.
fn next_time() -> i64 {
    use std::sync::atomic::{AtomicI64, Ordering};
    static LAST: AtomicI64 = AtomicI64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    LAST.fetch_max(now, Ordering::SeqCst);
    LAST.fetch_add(1, Ordering::SeqCst) + 1
}

fn point(mut v: Value, ours: &Ours<'_>) -> Value {
    for entry in v["entry"].as_array_mut().unwrap() {
        entry["id"] = json!(ours.waba);
        if entry.get("time").is_some() {
            entry["time"] = json!(next_time());
        }
        for change in entry["changes"].as_array_mut().unwrap() {
            let value = &mut change["value"];
            if value.get("metadata").is_some() {
                value["metadata"]["phone_number_id"] = json!(ours.phone_number_id);
                value["metadata"]["display_phone_number"] = json!(ours.display);
            }
            if value.get("display_phone_number").is_some() {
                value["display_phone_number"] = json!(ours.display);
            }
            // `get_mut`: indexing a missing key mutably would insert a `null` into the sample.
            if let (Some(statuses), Some(wamid)) = (
                value.get_mut("statuses").and_then(Value::as_array_mut),
                ours.wamid,
            ) {
                for s in statuses {
                    s["id"] = json!(wamid);
                }
            }
            if let (Some(_), Some((id, name))) = (value.get("message_template_id"), ours.template) {
                value["message_template_id"] = json!(id.parse::<i64>().unwrap());
                value["message_template_name"] = json!(name);
                value["message_template_language"] = json!("pt_BR");
            }
        }
    }
    v
}

async fn post(app: &TestApp, secret: &str, v: &Value) -> StatusCode {
    let body = v.to_string();
    let signature = provider::signature::sign(secret, body.as_bytes());
    app.provider_post(&body, &signature).await
}

async fn health_code(app: &TestApp, channel: i64) -> String {
    let (_, h) = app.get(&format!("/api/v1/channels/{channel}/health")).await;
    h["data"]["code"].as_str().unwrap_or_default().to_string()
}

async fn every_sample_is_accepted_and_applied(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel, n) = app.connect_channel().await;
    let receiver = Receiver::start().await;
    app.subscribe(channel, &receiver, &["message.received", "message.ack"])
        .await;
    let display: String = n
        .display_phone_number
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    let base = Ours {
        waba: &n.waba_id,
        phone_number_id: &n.phone_number_id,
        display: &display,
        wamid: None,
        template: None,
    };

    // Inbound text and image: recorded and told as message.received.
    for (i, name) in ["webhook_messages_text.json", "webhook_messages_image.json"]
        .iter()
        .enumerate()
    {
        let mut v = point(sample(name), &base);
        // Distinct message ids (both samples share one).
        v["entry"][0]["changes"][0]["value"]["messages"][0]["id"] =
            json!(format!("wamid.sample{i}"));
        assert_eq!(
            post(&app, &n.app_secret, &v).await,
            StatusCode::OK,
            "{name}"
        );
    }
    eventually(10, "two message.received", || async {
        (receiver
            .events()
            .iter()
            .filter(|e| e.event() == "message.received")
            .count()
            == 2)
            .then_some(())
    })
    .await;

    // Statuses: sent, delivered, read move a message we sent; failed (131049) fails one.
    let send = |to: &'static str| {
        let app = &app;
        async move {
            let (status, m) = app
                .post(
                    "/api/v1/messages",
                    json!({"to": to, "template": {"name": "hello_world", "language": "en_US"}}),
                )
                .await;
            assert!(status.is_success(), "{m}");
            (
                m["data"]["id"].as_i64().unwrap(),
                m["data"]["provider_message_id"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        }
    };
    let (id, wamid) = send("5511966660001").await;
    for (name, expect) in [
        ("webhook_status_sent_biz_opaque_callback_data.json", "sent"),
        ("webhook_status_delivered.json", "delivered"),
        ("webhook_status_read.json", "read"),
    ] {
        let v = point(
            sample(name),
            &Ours {
                wamid: Some(&wamid),
                ..base
            },
        );
        assert_eq!(
            post(&app, &n.app_secret, &v).await,
            StatusCode::OK,
            "{name}"
        );
        let (_, m) = app.get(&format!("/api/v1/messages/{id}")).await;
        let rank = |s: &str| {
            ["queued", "sent", "delivered", "read"]
                .iter()
                .position(|x| *x == s)
        };
        assert!(
            rank(m["data"]["status"].as_str().unwrap()) >= rank(expect),
            "{name}: {m}"
        );
    }
    let (failed, wamid) = send("5511966660002").await;
    let v = point(
        sample("webhook_status_failed_131049.json"),
        &Ours {
            wamid: Some(&wamid),
            ..base
        },
    );
    assert_eq!(post(&app, &n.app_secret, &v).await, StatusCode::OK);
    eventually(10, "the message failed with 131049", || async {
        let (_, m) = app.get(&format!("/api/v1/messages/{failed}")).await;
        (m["data"]["status"] == "failed" && m.to_string().contains("131049")).then_some(())
    })
    .await;

    // Template reviews: a rejection, then an approval, of our template.
    let t = app
        .approved_template(json!({"name": "Amostra", "category": "utility", "body": "Seu pedido {{1}} saiu hoje.", "var_map": {"1": {"field": "pedido"}}}), &[channel])
        .await;
    let (_, list) = app.get("/api/v1/templates").await;
    let row = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == t)
        .unwrap()
        .clone();
    let tid = row["channels"][0]["provider_template_id"]
        .as_str()
        .unwrap()
        .to_string();
    let tname = row["channels"][0]["provider_name"]
        .as_str()
        .unwrap()
        .to_string();
    let with_template = Ours {
        template: Some((&tid, &tname)),
        ..base
    };
    for (name, status) in [
        (
            "webhook_message_template_status_update_rejected_invalid_format.json",
            "rejected",
        ),
        (
            "webhook_message_template_status_update_approved.json",
            "approved",
        ),
    ] {
        let v = point(sample(name), &with_template);
        assert_eq!(
            post(&app, &n.app_secret, &v).await,
            StatusCode::OK,
            "{name}"
        );
        let (_, list) = app.get("/api/v1/templates").await;
        let now = list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["id"] == t)
            .unwrap()["channels"][0]["status"]
            .clone();
        assert_eq!(now, status, "{name}");
    }

    // account_update: banned (the sample's state turned to DISABLE), then the sample itself
    // (REINSTATE) gives the WABA back.
    let reinstate = point(
        sample("webhook_account_update_disabled_update_ban.json"),
        &base,
    );
    let mut ban = reinstate.clone();
    ban["entry"][0]["changes"][0]["value"]["ban_info"]["waba_ban_state"] = json!("DISABLE");
    assert_eq!(post(&app, &n.app_secret, &ban).await, StatusCode::OK);
    eventually(10, "waba_banida", || async {
        (health_code(&app, channel).await == "waba_banida").then_some(())
    })
    .await;
    assert_eq!(post(&app, &n.app_secret, &reinstate).await, StatusCode::OK);
    eventually(10, "reinstated", || async {
        (health_code(&app, channel).await == "ok").then_some(())
    })
    .await;

    // phone_number_quality_update THROUGHPUT_UPGRADE: accepted; the number is read again.
    let v = point(
        sample("webhook_phone_number_quality_update_throughput_upgrade.json"),
        &base,
    );
    assert_eq!(post(&app, &n.app_secret, &v).await, StatusCode::OK);

    // The same payloads signed by no secret of ours are refused.
    let forged = provider::signature::sign("not-ours", v.to_string().as_bytes());
    assert_eq!(
        app.provider_post(&v.to_string(), &forged).await,
        StatusCode::UNAUTHORIZED
    );
}

on_both_backends! {
    samples => every_sample_is_accepted_and_applied;
}
