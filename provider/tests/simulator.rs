//! The simulator driven through the Graph client, as disparo uses it: registration, templates,
//! media, limits, faults, management edges; every webhook it sends must verify with the app
//! secret.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::Router;
use provider::sim::{CreateNumber, CreatedNumber, SimConfig, Simulator, StatusDelays};
use provider::wire::{
    ChangeValue, CreateTemplate, MediaObject, SendMessageRequest, TemplatePayload, WebhookPayload,
};
use provider::{ErrorKind, GraphClient, GraphConfig, ProviderError};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Default)]
struct Sink {
    posts: Arc<Mutex<Vec<(HeaderMap, Bytes)>>>,
}

impl Sink {
    /// Every change received so far, with its field, after checking each POST's signature.
    fn changes(&self, secret: &str) -> Vec<(String, Value)> {
        let posts = self.posts.lock().unwrap().clone();
        let mut out = Vec::new();
        for (headers, body) in posts {
            let sig = headers
                .get("x-hub-signature-256")
                .expect("signed")
                .to_str()
                .unwrap();
            if !provider::signature::verify(secret, &body, sig) {
                continue; // another business's webhook
            }
            assert!(
                body.is_ascii(),
                "non-ASCII is \\u-escaped like the provider does"
            );
            let p: WebhookPayload = serde_json::from_slice(&body).expect("a provider payload");
            for e in p.entry {
                for c in e.changes {
                    let value = serde_json::from_str(c.value.get()).expect("a change's value");
                    out.push((c.field, value));
                }
            }
        }
        out
    }

    fn statuses(&self, secret: &str) -> Vec<Value> {
        self.changes(secret)
            .into_iter()
            .filter(|(f, _)| f == "messages")
            .flat_map(|(_, v)| v["statuses"].as_array().cloned().unwrap_or_default())
            .collect()
    }
}

async fn capture(State(s): State<Sink>, headers: HeaderMap, body: Bytes) -> &'static str {
    s.posts.lock().unwrap().push((headers, body));
    "ok"
}

struct Env {
    sim: Simulator,
    base: String,
    client: GraphClient,
    sink: Sink,
    http: reqwest::Client,
}

async fn env_with(tweak: impl FnOnce(&mut SimConfig)) -> Env {
    let sink = Sink::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sink_addr = listener.local_addr().unwrap();
    let app = Router::new()
        .route("/hook", post(capture))
        .with_state(sink.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    let mut cfg = SimConfig {
        seed: Some(42),
        webhook_url: Some(format!("http://{sink_addr}/hook")),
        status_delays: StatusDelays {
            sent_ms: 0,
            delivered_ms: 20,
            read_ms: 40,
        },
        template_review_ms: 50,
        ..SimConfig::default()
    };
    tweak(&mut cfg);
    let sim = Simulator::new(cfg);
    let addr = sim.clone().spawn("127.0.0.1:0").await.unwrap();
    let base = format!("http://{addr}");
    let client = GraphClient::new(GraphConfig {
        base_url: base.clone(),
        api_version: "v21.0".into(),
        timeout: Duration::from_secs(5),
    });
    Env {
        sim,
        base,
        client,
        sink,
        http: reqwest::Client::new(),
    }
}

async fn env() -> Env {
    env_with(|_| {}).await
}

impl Env {
    fn number(&self, req: CreateNumber) -> CreatedNumber {
        self.sim.create_number(req).unwrap()
    }
    async fn control(&self, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .http
            .request(method, format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }
    async fn send_template(
        &self,
        n: &CreatedNumber,
        to: &str,
        name: &str,
        lang: &str,
        params: &[&str],
    ) -> Result<String, ProviderError> {
        let params: Vec<String> = params.iter().map(|p| p.to_string()).collect();
        // `hello_world` has no buttons; the tests' own templates (`template()`) have a
        // dynamic URL button, whose suffix every send must carry.
        let suffix = (name != "hello_world").then_some("abc");
        let req = SendMessageRequest::template(
            to,
            TemplatePayload::positional(name, lang, &params, suffix),
        );
        self.client
            .send_message(&n.access_token, &n.phone_number_id, &req)
            .await
            .map(|r| r.message_id().unwrap().to_string())
    }
}

async fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    for _ in 0..250 {
        if let Some(v) = f() {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

fn code(e: &ProviderError) -> i64 {
    e.code()
        .unwrap_or_else(|| panic!("a Graph error, got {e:?}"))
}

#[tokio::test]
async fn a_number_is_registered_with_a_code_and_a_pin_before_it_can_send() {
    let env = env().await;
    let owner = env.number(CreateNumber::default());
    let c = &env.client;
    let id = c
        .add_phone_number(
            &owner.access_token,
            &owner.waba_id,
            "55",
            "11988880000",
            "Loja Nova",
        )
        .await
        .unwrap();
    let info = c.phone_number(&owner.access_token, &id).await.unwrap();
    assert_eq!(info.status.as_deref(), Some("PENDING"));
    assert_eq!(
        info.code_verification_status.as_deref(),
        Some("NOT_VERIFIED")
    );
    assert_eq!(info.display_phone_number.as_deref(), Some("5511988880000"));
    let pending = CreatedNumber {
        phone_number_id: id.clone(),
        ..owner.clone()
    };
    let e = env
        .send_template(&pending, "5511900000001", "hello_world", "en_US", &[])
        .await
        .unwrap_err();
    assert_eq!((code(&e), e.kind()), (133010, ErrorKind::NotRegistered));
    // Registering before verifying, a short name, a bad method: refused.
    assert_eq!(
        code(
            &c.register(&owner.access_token, &id, "123456")
                .await
                .unwrap_err()
        ),
        133006
    );
    assert_eq!(
        code(
            &c.add_phone_number(
                &owner.access_token,
                &owner.waba_id,
                "55",
                "11988881111",
                "ab"
            )
            .await
            .unwrap_err()
        ),
        100
    );
    assert_eq!(
        code(
            &c.request_code(&owner.access_token, &id, "FAX", "pt_BR")
                .await
                .unwrap_err()
        ),
        100
    );

    c.request_code(&owner.access_token, &id, "SMS", "pt_BR")
        .await
        .unwrap();
    let (status, body) = env
        .control(
            reqwest::Method::GET,
            &format!("/_sim/numbers/{id}/code"),
            Value::Null,
        )
        .await;
    assert_eq!(status, 200);
    let sms = body["data"]["code"].as_str().unwrap().to_string();
    assert_eq!(
        code(
            &c.verify_code(&owner.access_token, &id, "000000")
                .await
                .unwrap_err()
        ),
        136025
    );
    c.verify_code(
        &owner.access_token,
        &id,
        &format!("{}-{}", &sms[..3], &sms[3..]),
    )
    .await
    .unwrap();
    assert_eq!(
        code(
            &c.register(&owner.access_token, &id, "12345")
                .await
                .unwrap_err()
        ),
        100,
        "PIN has 6 digits"
    );
    c.register(&owner.access_token, &id, "654321")
        .await
        .unwrap();
    let info = c.phone_number(&owner.access_token, &id).await.unwrap();
    assert_eq!(
        (info.status.as_deref(), info.is_pin_enabled),
        (Some("CONNECTED"), Some(true))
    );
    env.send_template(&pending, "5511900000001", "hello_world", "en_US", &[])
        .await
        .unwrap();

    // A number with two-step verification already on needs that PIN.
    let with_pin = env.number(CreateNumber {
        registered: Some(false),
        pin: Some("111222".into()),
        waba_id: Some(owner.waba_id.clone()),
        ..Default::default()
    });
    let id2 = with_pin.phone_number_id.clone();
    c.request_code(&owner.access_token, &id2, "VOICE", "pt_BR")
        .await
        .unwrap();
    let (_, body) = env
        .control(
            reqwest::Method::GET,
            &format!("/_sim/numbers/{id2}/code"),
            Value::Null,
        )
        .await;
    c.verify_code(
        &owner.access_token,
        &id2,
        body["data"]["code"].as_str().unwrap(),
    )
    .await
    .unwrap();
    let e = c
        .register(&owner.access_token, &id2, "999999")
        .await
        .unwrap_err();
    assert_eq!((code(&e), e.kind()), (133005, ErrorKind::Registration));
    c.register(&owner.access_token, &id2, "111222")
        .await
        .unwrap();
    // Listed under the WABA.
    let listed = c
        .waba_phone_numbers(&owner.access_token, &owner.waba_id)
        .await
        .unwrap();
    assert_eq!(listed.len(), 3);
    assert!(listed.iter().any(|n| n.id == id));
}

fn template(name: &str, body: &str, examples: &[&str]) -> CreateTemplate {
    CreateTemplate {
        name: name.into(),
        language: "pt_BR".into(),
        category: "MARKETING".into(),
        parameter_format: None,
        components: vec![
            json!({"type": "BODY", "text": body, "example": {"body_text": [examples]}}),
            json!({"type": "BUTTONS", "buttons": [{"type": "URL", "text": "Ver oferta", "url": "https://loja.example/o/{{1}}", "example": ["abc"]}]}),
        ],
    }
}

#[tokio::test]
async fn templates_go_through_review_pause_and_disable_with_signed_webhooks() {
    let env = env().await;
    let n = env.number(CreateNumber::default());
    let c = &env.client;
    let created = c
        .create_template(
            &n.access_token,
            &n.waba_id,
            &template(
                "promo_natal",
                "Olá {{1}}, sua oferta de Natal: {{2}}.",
                &["Ana", "10%"],
            ),
        )
        .await
        .unwrap();
    assert_eq!(created.status, "PENDING");
    // Sending before approval: 132001, as for an unknown template.
    let e = env
        .send_template(&n, "5511900000002", "promo_natal", "pt_BR", &["Ana", "10%"])
        .await
        .unwrap_err();
    assert_eq!((code(&e), e.kind()), (132001, ErrorKind::TemplateMissing));
    let dup = c
        .create_template(
            &n.access_token,
            &n.waba_id,
            &template("promo_natal", "Olá {{1}}, outra: {{2}}.", &["a", "b"]),
        )
        .await
        .unwrap_err();
    match &dup {
        ProviderError::Graph { error, .. } => {
            assert_eq!((error.code, error.error_subcode), (100, Some(2388024)))
        }
        other => panic!("{other:?}"),
    }
    for bad in [
        template("bad_adjacent", "Olá {{1}} {{2}} tudo bem?", &["a", "b"]),
        template("Bad Name", "Oi {{1}}.", &["a"]),
        template("bad_gap", "Oi {{1}} e {{3}}.", &["a", "b"]),
    ] {
        assert_eq!(
            code(
                &c.create_template(&n.access_token, &n.waba_id, &bad)
                    .await
                    .unwrap_err()
            ),
            100,
            "{}",
            bad.name
        );
    }

    // Approved after the review delay, with a signed webhook carrying an integer id.
    let approved = eventually("APPROVED webhook", || {
        env.sink
            .changes(&n.app_secret)
            .into_iter()
            .find(|(f, v)| f == "message_template_status_update" && v["event"] == "APPROVED")
    })
    .await;
    assert_eq!(
        approved.1["message_template_id"]
            .as_i64()
            .unwrap()
            .to_string(),
        created.id
    );
    let listed = c.list_templates(&n.access_token, &n.waba_id).await.unwrap();
    assert!(listed
        .iter()
        .any(|t| t.name == "promo_natal" && t.status == "APPROVED"));
    let e = env
        .send_template(&n, "5511900000002", "promo_natal", "pt_BR", &["Ana"])
        .await
        .unwrap_err();
    assert_eq!(
        (code(&e), e.kind()),
        (132000, ErrorKind::TemplateParameters)
    );
    env.send_template(&n, "5511900000002", "promo_natal", "pt_BR", &["Ana", "10%"])
        .await
        .unwrap();

    for (status, send_code) in [("PAUSED", 132015), ("DISABLED", 132016)] {
        let (s, _) = env
            .control(
                reqwest::Method::POST,
                &format!("/_sim/templates/{}/status", created.id),
                json!({"status": status}),
            )
            .await;
        assert_eq!(s, 200);
        eventually("status webhook", || {
            env.sink
                .changes(&n.app_secret)
                .into_iter()
                .find(|(_, v)| v["event"] == status)
        })
        .await;
        assert_eq!(
            code(
                &env.send_template(&n, "5511900000002", "promo_natal", "pt_BR", &["Ana", "10%"])
                    .await
                    .unwrap_err()
            ),
            send_code
        );
    }
    assert_eq!(
        code(
            &c.delete_template(&n.access_token, &n.waba_id, "promo_natal", None)
                .await
                .unwrap_err()
        ),
        100,
        "disabled cannot be deleted"
    );

    // Rejection with a reason; deletion by name.
    let other = c
        .create_template(
            &n.access_token,
            &n.waba_id,
            &template("aviso_frete", "Seu frete para {{1}} saiu hoje.", &["SP"]),
        )
        .await
        .unwrap();
    env.control(
        reqwest::Method::POST,
        &format!("/_sim/templates/{}/status", other.id),
        json!({"status": "REJECTED", "reason": "PROMOTIONAL"}),
    )
    .await;
    let rejected = eventually("REJECTED", || {
        env.sink
            .changes(&n.app_secret)
            .into_iter()
            .find(|(_, v)| v["event"] == "REJECTED")
    })
    .await;
    assert_eq!(rejected.1["reason"], "PROMOTIONAL");
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert!(
        c.list_templates(&n.access_token, &n.waba_id)
            .await
            .unwrap()
            .iter()
            .any(|t| t.id == other.id && t.status == "REJECTED"),
        "the review timer does not overturn a decision"
    );
    c.delete_template(&n.access_token, &n.waba_id, "aviso_frete", Some(&other.id))
        .await
        .unwrap();
    assert!(!c
        .list_templates(&n.access_token, &n.waba_id)
        .await
        .unwrap()
        .iter()
        .any(|t| t.name == "aviso_frete"));
    assert_eq!(
        code(
            &c.delete_template(&n.access_token, &n.waba_id, "aviso_frete", None)
                .await
                .unwrap_err()
        ),
        100
    );
}

#[tokio::test]
async fn media_is_uploaded_looked_up_downloaded_and_sent_by_id() {
    let env = env().await;
    let n = env.number(CreateNumber::default());
    let c = &env.client;
    let png = b"\x89PNG\r\n\x1a\nnot-really-a-png".to_vec();
    let id = c
        .upload_media(
            &n.access_token,
            &n.phone_number_id,
            png.clone(),
            "image/png",
            "a.png",
        )
        .await
        .unwrap();
    let info = c.media_info(&n.access_token, &id).await.unwrap();
    assert_eq!(
        (info.mime_type.as_str(), info.file_size.as_str()),
        ("image/png", png.len().to_string().as_str())
    );
    let (bytes, mime) = c
        .download_media(&n.access_token, &info.url, 1 << 20)
        .await
        .unwrap();
    assert_eq!(
        (bytes.as_ref(), mime.as_str()),
        (png.as_slice(), "image/png")
    );
    assert!(
        c.download_media("EAAGwrong", &info.url, 1 << 20)
            .await
            .is_err(),
        "the URL needs the token"
    );
    let req = SendMessageRequest::media(
        "5511900000003",
        "image",
        MediaObject {
            id: Some(id.clone()),
            caption: Some("Foto".into()),
            ..Default::default()
        },
    )
    .unwrap();
    c.send_message(&n.access_token, &n.phone_number_id, &req)
        .await
        .unwrap();
    // A template with an image header by media id.
    let t = TemplatePayload::positional("hello_world", "en_US", &[], None).with_header_media(
        "image",
        MediaObject {
            id: Some(id.clone()),
            ..Default::default()
        },
    );
    assert_eq!(
        serde_json::to_value(&t).unwrap()["components"][0]["type"],
        "header"
    );

    let unknown = SendMessageRequest::media(
        "5511900000003",
        "image",
        MediaObject {
            id: Some("1234".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let e = c
        .send_message(&n.access_token, &n.phone_number_id, &unknown)
        .await
        .unwrap_err();
    assert_eq!((code(&e), e.kind()), (131053, ErrorKind::Media));
    let e = c
        .upload_media(
            &n.access_token,
            &n.phone_number_id,
            b"MZ".to_vec(),
            "application/x-msdownload",
            "a.exe",
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), 131053, "unsupported type");
    let e = c
        .upload_media(
            &n.access_token,
            &n.phone_number_id,
            vec![0u8; 5 * 1024 * 1024 + 1],
            "image/jpeg",
            "big.jpg",
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), 131053, "over 5 MB for images");
    c.delete_media(&n.access_token, &id).await.unwrap();
    assert!(c.media_info(&n.access_token, &id).await.is_err());
}

#[tokio::test]
async fn each_enforced_limit_answers_the_providers_error() {
    let env = env().await;
    let c = &env.client;
    // Throughput: 5 messages/s.
    let slow = env.number(CreateNumber {
        throughput_mps: Some(5),
        ..Default::default()
    });
    let recipients: Vec<String> = (0..12).map(|i| format!("55119100000{i:02}")).collect();
    let sends = recipients
        .iter()
        .map(|to| env.send_template(&slow, to, "hello_world", "en_US", &[]));
    let results = futures::future::join_all(sends).await;
    let limited: Vec<&ProviderError> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        !limited.is_empty() && limited.len() <= 7,
        "{} refused",
        limited.len()
    );
    assert!(limited
        .iter()
        .all(|e| code(e) == 130429 && e.kind() == ErrorKind::RateLimited));
    // The stats count each number's throughput refusals (issue 52).
    let (status, stats) = env
        .control(reqwest::Method::GET, "/_sim/stats", Value::Null)
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        stats["data"]["throughput_refusals"],
        json!({ slow.phone_number_id.clone(): limited.len() }),
        "{stats}"
    );

    // Pair rate: a burst of 45 to one user is allowed, the 46th is not.
    let fast = env.number(CreateNumber {
        throughput_mps: Some(1000),
        ..Default::default()
    });
    for i in 0..45 {
        env.send_template(&fast, "5511922223333", "hello_world", "en_US", &[])
            .await
            .unwrap_or_else(|e| panic!("send {i}: {e}"));
    }
    let e = env
        .send_template(&fast, "5511922223333", "hello_world", "en_US", &[])
        .await
        .unwrap_err();
    assert_eq!((code(&e), e.kind()), (131056, ErrorKind::PairRateLimited));

    // Free text outside the window is accepted, then fails with 131047; inside, it is delivered.
    let text = SendMessageRequest::text("5511933334444", "Olá!");
    let wamid = c
        .send_message(&fast.access_token, &fast.phone_number_id, &text)
        .await
        .unwrap()
        .message_id()
        .unwrap()
        .to_string();
    let failed = eventually("131047", || {
        env.sink
            .statuses(&fast.app_secret)
            .into_iter()
            .find(|s| s["id"] == wamid.as_str())
    })
    .await;
    assert_eq!(
        (
            failed["status"].as_str(),
            failed["errors"][0]["code"].as_i64()
        ),
        (Some("failed"), Some(131047))
    );
    let (s, _) = env
        .control(
            reqwest::Method::POST,
            "/_sim/inbound",
            json!({"phone_number_id": fast.phone_number_id, "from": "5511933334444", "text": "oi"}),
        )
        .await;
    assert_eq!(s, 201);
    let wamid = c
        .send_message(&fast.access_token, &fast.phone_number_id, &text)
        .await
        .unwrap()
        .message_id()
        .unwrap()
        .to_string();
    eventually("read", || {
        env.sink
            .statuses(&fast.app_secret)
            .into_iter()
            .find(|s| s["id"] == wamid.as_str() && s["status"] == "read")
    })
    .await;

    // Portfolio tier: TIER_50 allows 50 unique business-initiated users per 24 h.
    let small = env.number(CreateNumber {
        tier: Some("TIER_50".into()),
        throughput_mps: Some(1000),
        ..Default::default()
    });
    let mut ids = Vec::new();
    for i in 0..51 {
        ids.push(
            env.send_template(
                &small,
                &format!("55119800000{i:02}"),
                "hello_world",
                "en_US",
                &[],
            )
            .await
            .unwrap(),
        );
    }
    let over = eventually("tier failure", || {
        env.sink
            .statuses(&small.app_secret)
            .into_iter()
            .find(|s| s["id"] == ids[50].as_str())
    })
    .await;
    assert_eq!(
        (over["status"].as_str(), over["errors"][0]["code"].as_i64()),
        (Some("failed"), Some(131048))
    );
    assert!(!env
        .sink
        .statuses(&small.app_secret)
        .iter()
        .any(|s| s["id"] == ids[49].as_str() && s["status"] == "failed"));
    // A user already reached does not count again.
    env.send_template(&small, "5511980000000", "hello_world", "en_US", &[])
        .await
        .unwrap();

    // Unknown number, bad token.
    let e = env
        .send_template(
            &CreatedNumber {
                phone_number_id: "1".into(),
                ..fast.clone()
            },
            "5511900000001",
            "hello_world",
            "en_US",
            &[],
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), 100);
    let e = env
        .send_template(
            &CreatedNumber {
                access_token: "EAAGbad".into(),
                ..fast.clone()
            },
            "5511900000001",
            "hello_world",
            "en_US",
            &[],
        )
        .await
        .unwrap_err();
    assert_eq!((code(&e), e.kind()), (190, ErrorKind::InvalidCredential));
}

#[tokio::test]
async fn injected_faults_are_observed_by_the_client() {
    let env = env().await;
    let n = env.number(CreateNumber {
        throughput_mps: Some(1000),
        ..Default::default()
    });
    let (s, _) = env.control(reqwest::Method::PUT, "/_sim/faults", json!({"next_errors": [{"phone_number_id": n.phone_number_id, "code": 131000, "count": 2}]})).await;
    assert_eq!(s, 200);
    for _ in 0..2 {
        let e = env
            .send_template(&n, "5511900000004", "hello_world", "en_US", &[])
            .await
            .unwrap_err();
        assert_eq!((code(&e), e.kind()), (131000, ErrorKind::Transient));
    }
    env.send_template(&n, "5511900000004", "hello_world", "en_US", &[])
        .await
        .unwrap();

    env.control(
        reqwest::Method::PUT,
        "/_sim/faults",
        json!({"share_5xx": 1.0}),
    )
    .await;
    let e = env
        .send_template(&n, "5511900000004", "hello_world", "en_US", &[])
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ProviderError::Graph { status: 500, .. }) && e.kind() == ErrorKind::Transient,
        "{e:?}"
    );

    env.control(
        reqwest::Method::PUT,
        "/_sim/faults",
        json!({"latency_ms": {"p50": 150, "p99": 200}}),
    )
    .await;
    let start = std::time::Instant::now();
    for _ in 0..4 {
        env.send_template(&n, "5511900000005", "hello_world", "en_US", &[])
            .await
            .unwrap();
    }
    assert!(
        start.elapsed() >= Duration::from_millis(150),
        "latency added: {:?}",
        start.elapsed()
    );

    env.control(
        reqwest::Method::PUT,
        "/_sim/faults",
        json!({"share_timeout": 1.0, "timeout_ms": 2000}),
    )
    .await;
    let impatient = GraphClient::new(GraphConfig {
        base_url: env.base.clone(),
        api_version: "v21.0".into(),
        timeout: Duration::from_millis(200),
    });
    let req = SendMessageRequest::template(
        "5511900000006",
        TemplatePayload::positional("hello_world", "en_US", &[], None),
    );
    let e = impatient
        .send_message(&n.access_token, &n.phone_number_id, &req)
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::Timeout) && e.kind() == ErrorKind::Transient);
    env.control(reqwest::Method::PUT, "/_sim/faults", json!({}))
        .await;
    env.send_template(&n, "5511900000006", "hello_world", "en_US", &[])
        .await
        .unwrap();
}

#[tokio::test]
async fn provider_events_arrive_as_signed_webhooks_in_the_providers_shapes() {
    let env = env_with(|c| c.failed_share = 0.0).await;
    let n = env.number(CreateNumber {
        throughput_mps: Some(1000),
        ..Default::default()
    });
    // Statuses for a send carry biz_opaque_callback_data and arrive sent → delivered → read.
    let req = SendMessageRequest::template(
        "5511955556666",
        TemplatePayload::positional("hello_world", "en_US", &[], None),
    )
    .with_callback_data("dsp:77");
    let wamid = env
        .client
        .send_message(&n.access_token, &n.phone_number_id, &req)
        .await
        .unwrap()
        .message_id()
        .unwrap()
        .to_string();
    let mine = eventually("three statuses", || {
        let s: Vec<Value> = env
            .sink
            .statuses(&n.app_secret)
            .into_iter()
            .filter(|s| s["id"] == wamid.as_str())
            .collect();
        (s.len() == 3).then_some(s)
    })
    .await;
    assert!(mine
        .iter()
        .all(|s| s["biz_opaque_callback_data"] == "dsp:77"));
    let mut kinds: Vec<&str> = mine.iter().map(|s| s["status"].as_str().unwrap()).collect();
    kinds.sort();
    assert_eq!(kinds, ["delivered", "read", "sent"]);
    assert_eq!(
        mine.iter().find(|s| s["status"] == "sent").unwrap()["pricing"]["category"],
        "utility"
    );

    // Inbound with non-ASCII: escaped on the wire, the same text once parsed.
    env.control(reqwest::Method::POST, "/_sim/inbound", json!({"phone_number_id": n.phone_number_id, "from": "5511977778888", "text": "Promoção já! 😀", "name": "José"})).await;
    let inbound = eventually("inbound", || {
        env.sink
            .changes(&n.app_secret)
            .into_iter()
            .find(|(_, v)| v["messages"].is_array())
    })
    .await;
    match provider::wire::WebhookChange::new(inbound.0.clone(), &inbound.1)
        .parse()
        .unwrap()
    {
        ChangeValue::Messages(m) => {
            assert_eq!(
                m.messages[0].display_text().as_deref(),
                Some("Promoção já! 😀")
            );
            assert_eq!(m.contacts[0].profile.as_ref().unwrap().name, "José");
        }
        other => panic!("{other:?}"),
    }
    // Inbound media is stored and downloadable.
    env.control(reqwest::Method::POST, "/_sim/inbound", json!({"phone_number_id": n.phone_number_id, "from": "5511977778888", "type": "image", "media": {"caption": "foto"}})).await;
    let image = eventually("image", || {
        env.sink
            .changes(&n.app_secret)
            .into_iter()
            .find(|(_, v)| v["messages"][0]["type"] == "image")
    })
    .await;
    let media_id = image.1["messages"][0]["image"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let info = env
        .client
        .media_info(&n.access_token, &media_id)
        .await
        .unwrap();
    assert!(env
        .client
        .download_media(&n.access_token, &info.url, 1 << 20)
        .await
        .is_ok());

    // Quality and account updates.
    env.control(
        reqwest::Method::POST,
        &format!("/_sim/numbers/{}/quality", n.phone_number_id),
        json!({"quality": "RED"}),
    )
    .await;
    let q = eventually("quality", || {
        env.sink
            .changes(&n.app_secret)
            .into_iter()
            .find(|(f, _)| f == "phone_number_quality_update")
    })
    .await;
    assert_eq!(
        (q.1["event"].as_str(), q.1["quality_rating"].as_str()),
        (Some("FLAGGED"), Some("RED"))
    );
    env.control(
        reqwest::Method::POST,
        &format!("/_sim/wabas/{}/account-update", n.waba_id),
        json!({"event": "DISABLED_UPDATE", "ban_state": "DISABLE"}),
    )
    .await;
    let a = eventually("account update", || {
        env.sink
            .changes(&n.app_secret)
            .into_iter()
            .find(|(f, _)| f == "account_update")
    })
    .await;
    assert_eq!(a.1["ban_info"]["waba_ban_state"], "DISABLE");
    let e = env
        .send_template(&n, "5511955556666", "hello_world", "en_US", &[])
        .await
        .unwrap_err();
    assert_eq!((code(&e), e.kind()), (131031, ErrorKind::AccountLocked));
    assert_eq!(
        env.client
            .phone_number(&n.access_token, &n.phone_number_id)
            .await
            .unwrap()
            .status
            .as_deref(),
        Some("BANNED")
    );
}

#[tokio::test]
async fn business_edges_tokens_and_embedded_signup() {
    let env = env().await;
    let n = env.number(CreateNumber::default());
    let c = &env.client;
    let wabas = c
        .owned_wabas(&n.access_token, &n.business_id)
        .await
        .unwrap();
    assert_eq!(wabas.len(), 1);
    assert_eq!(wabas[0].id, n.waba_id);
    let waba = c.waba(&n.access_token, &n.waba_id).await.unwrap();
    assert_eq!(
        waba.whatsapp_business_manager_messaging_limit.as_deref(),
        Some("TIER_250")
    );
    c.subscribe_app(&n.access_token, &n.waba_id).await.unwrap();
    let dbg = c
        .debug_token(&n.access_token, &n.access_token)
        .await
        .unwrap();
    assert!(dbg.is_valid);
    assert!(dbg
        .granular_scopes
        .iter()
        .any(|g| g.target_ids.contains(&n.waba_id)));
    assert!(
        !c.debug_token(&n.access_token, "EAAGnope")
            .await
            .unwrap()
            .is_valid
    );
    let (_, body) = env
        .control(
            reqwest::Method::POST,
            "/_sim/embedded-signup",
            json!({"waba_id": n.waba_id}),
        )
        .await;
    let signup_code = body["data"]["code"].as_str().unwrap().to_string();
    let app_id = body["data"]["app_id"].as_str().unwrap().to_string();
    assert!(c
        .exchange_code(&app_id, "wrong-secret", &signup_code)
        .await
        .is_err());
    let token = c
        .exchange_code(&app_id, &n.app_secret, &signup_code)
        .await
        .unwrap();
    assert_eq!(token.access_token, n.access_token);
    assert!(
        c.exchange_code(&app_id, &n.app_secret, &signup_code)
            .await
            .is_err(),
        "codes are single use"
    );
    // Another business's token cannot read this WABA.
    let other = env.number(CreateNumber::default());
    assert_eq!(
        code(&c.waba(&other.access_token, &n.waba_id).await.unwrap_err()),
        100
    );
}

#[tokio::test]
async fn a_seed_makes_ids_repeatable() {
    let a = Simulator::new(SimConfig {
        seed: Some(9),
        ..SimConfig::default()
    });
    let b = Simulator::new(SimConfig {
        seed: Some(9),
        ..SimConfig::default()
    });
    let (x, y) = (
        a.create_number(CreateNumber::default()).unwrap(),
        b.create_number(CreateNumber::default()).unwrap(),
    );
    assert_eq!(x, y);
}

/// A template send is checked against the template's components like the provider: the
/// header's variable or media, the body's count, each button's parameter (issue 16), with the
/// codes of the API version called (132018 from v23.0 for component problems, D-071).
#[tokio::test]
async fn template_sends_are_checked_component_by_component() {
    use engine::template::{ButtonValue, Filled, HeaderMedia, HeaderValue};
    let env = env().await;
    let n = env.number(CreateNumber::default());
    let c = &env.client;
    let full = CreateTemplate {
        name: "pedido_completo".into(),
        language: "pt_BR".into(),
        category: "UTILITY".into(),
        parameter_format: None,
        components: vec![
            json!({"type": "HEADER", "format": "TEXT", "text": "Pedido {{1}}", "example": {"header_text": ["A1"]}}),
            json!({"type": "BODY", "text": "Olá {{1}}, seu pedido {{2}} saiu.", "example": {"body_text": [["Ana", "A1"]]}}),
            json!({"type": "BUTTONS", "buttons": [
                {"type": "URL", "text": "Ver", "url": "https://loja.example/p/{{1}}", "example": ["https://loja.example/p/A1"]},
                {"type": "QUICK_REPLY", "text": "Parar"},
                {"type": "COPY_CODE", "example": "PROMO10"}
            ]}),
        ],
    };
    // A media header's example is a handle of the app's resumable upload.
    let handle = c
        .upload_handle(
            &n.access_token,
            provider::sim::SIM_APP_ID,
            b"\x89PNG\r\n\x1a\nexemplo".to_vec(),
            "image/png",
            "exemplo",
        )
        .await
        .unwrap();
    let media = CreateTemplate {
        name: "pedido_foto".into(),
        language: "pt_BR".into(),
        category: "UTILITY".into(),
        parameter_format: None,
        components: vec![
            json!({"type": "HEADER", "format": "IMAGE", "example": {"header_handle": [handle]}}),
            json!({"type": "BODY", "text": "Seu pedido saiu."}),
        ],
    };
    for t in [&full, &media] {
        c.create_template(&n.access_token, &n.waba_id, t)
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    let complete = Filled {
        header: Some(HeaderValue::Text("B2".into())),
        body: vec!["Ana".into(), "B2".into()],
        buttons: vec![
            (0, ButtonValue::UrlSuffix("B2".into())),
            (1, ButtonValue::Payload("parar".into())),
            (2, ButtonValue::CouponCode("NATAL".into())),
        ],
    };
    let send = |version: &'static str, name: &'static str, f: Filled| {
        let n = n.clone();
        let base = env.base.clone();
        async move {
            let client = GraphClient::new(GraphConfig {
                base_url: base,
                api_version: version.into(),
                timeout: Duration::from_secs(5),
            });
            let req = SendMessageRequest::template(
                "5511900000042",
                TemplatePayload::filled(name, "pt_BR", &f),
            );
            client
                .send_message(&n.access_token, &n.phone_number_id, &req)
                .await
                .map(|_| ())
                .map_err(|e| code(&e))
        }
    };
    assert_eq!(
        send("v21.0", "pedido_completo", complete.clone()).await,
        Ok(())
    );
    assert_eq!(
        send("v25.0", "pedido_completo", complete.clone()).await,
        Ok(())
    );
    let without = |f: &dyn Fn(&mut Filled)| {
        let mut x = complete.clone();
        f(&mut x);
        x
    };
    let cases: Vec<(&str, Filled, i64, i64)> = vec![
        (
            "no header variable",
            without(&|x| x.header = None),
            131008,
            132018,
        ),
        (
            "no URL suffix",
            without(&|x| {
                x.buttons.remove(0);
            }),
            131008,
            132018,
        ),
        (
            "no coupon code",
            without(&|x| {
                x.buttons.pop();
            }),
            131008,
            132018,
        ),
        (
            "one body parameter short",
            without(&|x| {
                x.body.pop();
            }),
            132000,
            132000,
        ),
        (
            "image for a text header",
            without(&|x| {
                x.header = Some(HeaderValue::Media {
                    kind: HeaderMedia::Image,
                    link: Some("https://loja.example/a.png".into()),
                    id: None,
                })
            }),
            132012,
            132018,
        ),
        (
            "payload for the URL button",
            without(&|x| x.buttons[0] = (0, ButtonValue::Payload("x".into()))),
            132012,
            132018,
        ),
        (
            "a button the template lacks",
            without(&|x| x.buttons.push((7, ButtonValue::Payload("x".into())))),
            132000,
            132000,
        ),
    ];
    for (what, filled, old, new) in cases {
        assert_eq!(
            send("v21.0", "pedido_completo", filled.clone()).await,
            Err(old),
            "{what} (v21.0)"
        );
        assert_eq!(
            send("v25.0", "pedido_completo", filled).await,
            Err(new),
            "{what} (v25.0)"
        );
    }
    let image = |kind| Filled {
        header: Some(HeaderValue::Media {
            kind,
            link: Some("https://loja.example/a.png".into()),
            id: None,
        }),
        ..Filled::default()
    };
    assert_eq!(
        send("v22.0", "pedido_foto", image(HeaderMedia::Image)).await,
        Ok(())
    );
    assert_eq!(
        send("v22.0", "pedido_foto", image(HeaderMedia::Video)).await,
        Err(132012)
    );
    assert_eq!(
        send("v22.0", "pedido_foto", Filled::default()).await,
        Err(131008)
    );
    // Versions: older than v21.0 is served as v21.0; a version after v25.0 does not exist.
    assert_eq!(
        send("v19.0", "pedido_foto", Filled::default()).await,
        Err(131008)
    );
    assert_eq!(
        send("v26.0", "pedido_foto", image(HeaderMedia::Image)).await,
        Err(2500)
    );
}
