//! The API document (OpenAPI 3.1, generated with utoipa) and the interactive page at /docs.

mod common;

use common::{Backend, TestApp};
use reqwest::StatusCode;
use serde_json::Value;
use std::collections::BTreeSet;

async fn the_document_covers_every_route_and_validates(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    // No token needed to read the document.
    let resp = reqwest::get(app.url("/api/v1/openapi.json")).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
    let raw = resp.text().await.unwrap();
    let doc: Value = serde_json::from_str(&raw).unwrap();
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3.1"),
        "{}",
        doc["openapi"]
    );
    assert_eq!(doc["servers"][0]["url"], "/api/v1");
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );

    // Every operation of the document, as `METHOD /api/v1/path`.
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            documented.insert(format!("{} /api/v1{path}", method.to_uppercase()));
            assert!(
                op["responses"].as_object().is_some_and(|r| !r.is_empty()),
                "{method} {path} has answers"
            );
            assert!(op["tags"].as_array().is_some_and(|t| !t.is_empty()));
        }
    }
    // The routers are built from the same annotations (utoipa_axum::routes!), so every
    // routed handler is in the document; the access table lists every route of /api/v1
    // (tests/access.rs checks each answers), so the two must be the same set.
    let mut routed: BTreeSet<String> = http::access::ROUTES
        .iter()
        .map(|(m, r, _)| format!("{m} {r}"))
        .collect();
    routed.insert("GET /api/v1/health".into());
    assert_eq!(
        documented.difference(&routed).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "documented but not in the access table"
    );
    assert_eq!(
        routed.difference(&documented).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "routes missing from the document"
    );
    // Every documented operation is served (a token-less call is 401, not the 404 of an
    // unknown route; the health check answers 200).
    for op in &documented {
        let (method, path) = op.split_once(' ').unwrap();
        let path = path
            .replace("{id}", "1")
            .replace("{waba}", "1")
            .replace("{channel_id}", "1");
        let status = reqwest::Client::new()
            .request(method.parse().unwrap(), app.url(&path))
            .send()
            .await
            .unwrap()
            .status();
        let expected = if op == "GET /api/v1/health" {
            StatusCode::OK
        } else {
            StatusCode::UNAUTHORIZED
        };
        assert_eq!(status, expected, "{op}");
    }
    // Request bodies carry their schemas.
    let create =
        &doc["paths"]["/campaigns"]["post"]["requestBody"]["content"]["application/json"]["schema"];
    assert!(create.is_object(), "{create}");

    // The official validator from PyPI (pinned in tests/requirements.txt).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, &raw).unwrap();
    let out = std::process::Command::new("python3")
        .args(["-m", "openapi_spec_validator"])
        .arg(&file)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "openapi-spec-validator refused the document (install tests/requirements.txt):\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn the_docs_page_is_served_without_a_cdn(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let resp = reqwest::get(app.url("/docs")).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let page = resp.text().await.unwrap();
    assert!(page.contains("/api/v1/openapi.json"));
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "no external asset: {page}"
    );
    for (asset, kind, needle) in [
        (
            "/docs/swagger-ui-bundle.js",
            "text/javascript",
            "SwaggerUIBundle",
        ),
        ("/docs/swagger-ui.css", "text/css", ".swagger-ui"),
    ] {
        assert!(page.contains(asset), "{asset}");
        let resp = reqwest::get(app.url(asset)).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{asset}");
        assert!(resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with(kind));
        let body = resp.text().await.unwrap();
        assert!(body.len() > 10_000 && body.contains(needle), "{asset}");
    }
}

on_both_backends! {
    document => the_document_covers_every_route_and_validates;
    docs_page => the_docs_page_is_served_without_a_cdn;
}
