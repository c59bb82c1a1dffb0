//! Every message type: media by public URL (downloaded, checked, uploaded, sent by id), the
//! private-address guard, and inbound media streamed back.

mod common;

use axum::http::header;
use axum::routing::get;
use axum::Router;
use common::{eventually, Backend, Receiver, TestApp};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn file_server() -> String {
    fn file(mime: &'static str, bytes: Vec<u8>) -> axum::routing::MethodRouter {
        get(move || {
            let bytes = bytes.clone();
            async move { ([(header::CONTENT_TYPE, mime)], bytes) }
        })
    }
    let app = Router::new()
        .route(
            "/foto.png",
            file("image/png", b"\x89PNG\r\n\x1a\nfoto".to_vec()),
        )
        .route(
            "/contrato.pdf",
            file("application/pdf", b"%PDF-1.4 contrato".to_vec()),
        )
        .route(
            "/video.mp4",
            file("video/mp4", b"\x00\x00\x00\x18ftypmp42".to_vec()),
        )
        .route(
            "/audio.ogg",
            file("audio/ogg; codecs=opus", b"OggS audio".to_vec()),
        )
        .route(
            "/grande.jpg",
            file("image/jpeg", vec![0u8; 5 * 1024 * 1024 + 1]),
        )
        .route(
            "/dois-mega.jpg",
            file("image/jpeg", vec![0xffu8; 2 * 1024 * 1024]),
        )
        .route("/app.exe", file("application/x-msdownload", b"MZ".to_vec()))
        .route(
            "/sem-tipo/foto.jpg",
            file("application/octet-stream", b"\xff\xd8\xff jpeg".to_vec()),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    format!("http://{addr}")
}

async fn media_by_url_is_uploaded_and_sent_by_id_for_every_type(backend: Backend) {
    let app = TestApp::spawn_with(backend, |s| s.allow_private_urls = true).await;
    let files = file_server().await;
    let (channel_id, number) = app.connect_channel().await;
    let to = "5511933335555";
    // Media is a session message: outside the window it is refused like free text.
    let (status, err) = app
        .post(
            "/api/v1/messages",
            json!({"to": to, "media": {"type": "image", "url": format!("{files}/foto.png")}}),
        )
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("janela_24h_fechada"))
    );
    app.inbound(&number.phone_number_id, to, "manda a foto")
        .await;
    eventually(10, "window", || async {
        app.runtime
            .store()
            .last_inbound_at(channel_id, to)
            .await
            .unwrap()
            .map(|_| ())
    })
    .await;

    for (kind, path, caption) in [
        ("image", "/foto.png", Some("Nossa loja")),
        ("document", "/contrato.pdf", Some("Contrato")),
        ("video", "/video.mp4", None),
        ("audio", "/audio.ogg", None),
        ("image", "/sem-tipo/foto.jpg", None),
    ] {
        let mut body = json!({"to": to, "media": {"type": kind, "url": format!("{files}{path}")}});
        if let Some(c) = caption {
            body["caption"] = json!(c);
        }
        let (status, sent) = app.post("/api/v1/messages", body).await;
        assert_eq!(status, StatusCode::CREATED, "{kind} {path}: {sent}");
        assert_eq!(sent["data"]["type"], kind);
        let id = sent["data"]["id"].as_i64().unwrap();
        eventually(10, "read", || async {
            let (_, m) = app.get(&format!("/api/v1/messages/{id}")).await;
            (m["data"]["status"] == "read").then_some(())
        })
        .await;
    }
    let ledger: Value = app
        .http
        .get(format!(
            "http://{}/_sim/numbers/{}/sent?limit=10",
            app.sim_addr, number.phone_number_id
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sent = ledger["data"]["messages"].as_array().unwrap();
    let doc = sent
        .iter()
        .find(|m| m["type"] == "document")
        .expect("document sent");
    assert!(
        doc["payload"]["document"]["id"].is_string(),
        "sent by uploaded media id: {doc}"
    );
    assert_eq!(doc["payload"]["document"]["filename"], "contrato.pdf");
    assert_eq!(doc["payload"]["document"]["caption"], "Contrato");
    let image = sent
        .iter()
        .find(|m| m["type"] == "image" && m["payload"]["image"]["caption"] == "Nossa loja")
        .expect("image with caption");
    assert!(image["payload"]["image"]["link"].is_null());
    assert!(sent
        .iter()
        .any(|m| m["type"] == "audio" && m["payload"]["audio"]["caption"].is_null()));

    for (kind, path, code) in [
        ("image", "/grande.jpg", "media_too_large"),
        ("document", "/app.exe", "unsupported_media"),
        ("image", "/nao-existe.png", "media_unreachable"),
        ("image", "/contrato.pdf", "unsupported_media"),
    ] {
        let (status, err) = app
            .post(
                "/api/v1/messages",
                json!({"to": to, "media": {"type": kind, "url": format!("{files}{path}")}}),
            )
            .await;
        assert_eq!(
            (status, err["code"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some(code)),
            "{path}: {err}"
        );
    }
    let (status, err) = app
        .post(
            "/api/v1/messages",
            json!({"to": to, "media": {"type": "sticker", "url": format!("{files}/foto.png")}}),
        )
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_media_type"))
    );
}

async fn media_downloads_stay_within_the_memory_budget(backend: Backend) {
    let app = TestApp::spawn_with(backend, |s| s.media_max_memory_mb = 1).await;
    let files = file_server().await;
    let (channel_id, number) = app.connect_channel().await;
    app.inbound(&number.phone_number_id, "5511933337777", "oi")
        .await;
    eventually(10, "window", || async {
        app.runtime
            .store()
            .last_inbound_at(channel_id, "5511933337777")
            .await
            .unwrap()
            .map(|_| ())
    })
    .await;
    // 2 MB does not fit a 1 MB budget: 503 with Retry-After, nothing stored or sent.
    let r = app
        .http
        .post(app.url("/api/v1/messages"))
        .bearer_auth(&app.token)
        .json(&json!({"to": "5511933337777", "media": {"type": "image", "url": format!("{files}/dois-mega.jpg")}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.headers()["retry-after"], "1");
    // The budget is given back: small files keep going through, one after another.
    for _ in 0..3 {
        let (status, sent) = app
            .post(
                "/api/v1/messages",
                json!({"to": "5511933337777", "media": {"type": "image", "url": format!("{files}/foto.png")}}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{sent}");
    }
}

async fn private_media_urls_are_refused_by_default(backend: Backend) {
    let app = TestApp::spawn_with(backend, |s| s.allowed_subnets.clear()).await;
    let files = file_server().await;
    let (channel_id, number) = app.connect_channel().await;
    app.inbound(&number.phone_number_id, "5511933336666", "oi")
        .await;
    eventually(10, "window", || async {
        app.runtime
            .store()
            .last_inbound_at(channel_id, "5511933336666")
            .await
            .unwrap()
            .map(|_| ())
    })
    .await;
    for url in [
        format!("{files}/foto.png"),
        "http://localhost:9/x.png".into(),
        "http://10.0.0.1/x.png".into(),
        "http://[::1]/x.png".into(),
    ] {
        let (status, err) = app
            .post(
                "/api/v1/messages",
                json!({"to": "5511933336666", "media": {"type": "image", "url": url}}),
            )
            .await;
        assert_eq!(
            (status, err["code"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some("private_media_url")),
            "{url}: {err}"
        );
    }
    let (status, err) = app
        .post(
            "/api/v1/messages",
            json!({"to": "5511933336666", "media": {"type": "image", "url": "ftp://x/y.png"}}),
        )
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_media_url"))
    );
}

async fn inbound_media_is_streamed_back_with_the_token(backend: Backend) {
    use base64::Engine;
    let app = TestApp::spawn(backend).await;
    let (channel_id, number) = app.connect_channel().await;
    let receiver = Receiver::start().await;
    app.subscribe(channel_id, &receiver, &["message.received"])
        .await;
    let photo = b"\xff\xd8\xff\xe0 a real-looking jpeg".to_vec();
    let r = app
        .http
        .post(format!("http://{}/_sim/inbound", app.sim_addr))
        .json(&json!({"phone_number_id": number.phone_number_id, "from": "5511977770000", "type": "image",
                      "media": {"mime_type": "image/jpeg", "caption": "olha", "data_base64": base64::engine::general_purpose::STANDARD.encode(&photo)}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let event = eventually(10, "message.received", || async {
        receiver.events().into_iter().next()
    })
    .await
    .json();
    let message = &event["data"]["message"];
    assert_eq!(
        (message["type"].as_str(), message["text"].as_str()),
        (Some("image"), Some("olha"))
    );
    // Absolute, under the gateway's public URL (issue 17): fetched as it comes.
    let src = message["media_src"].as_str().unwrap().to_string();
    assert!(src.starts_with(&app.url("/api/v1/messages/")), "{src}");
    let src = src.trim_start_matches(&app.url("")).to_string();
    let r = app
        .http
        .get(app.url(&src))
        .bearer_auth(&app.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers().get("content-type").unwrap(), "image/jpeg");
    assert_eq!(r.bytes().await.unwrap().as_ref(), photo.as_slice());
    let r = app.http.get(app.url(&src)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let other = app.other_account_token().await;
    let r = app
        .http
        .get(app.url(&src))
        .bearer_auth(&other)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // A message without media has no file.
    let (_, sent) = app
        .post(
            "/api/v1/messages",
            json!({"to": "5511977770000", "text": "recebido!"}),
        )
        .await;
    let r = app
        .http
        .get(app.url(&format!("/api/v1/messages/{}/media", sent["data"]["id"])))
        .bearer_auth(&app.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

on_both_backends! {
    media_by_url => media_by_url_is_uploaded_and_sent_by_id_for_every_type;
    private_urls => private_media_urls_are_refused_by_default;
    media_budget => media_downloads_stay_within_the_memory_budget;
    inbound_media => inbound_media_is_streamed_back_with_the_token;
}
