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

/// A path with every `{parameter}` written `{}`.
fn normalized(path: &str) -> String {
    let mut out = String::new();
    let mut in_param = false;
    for ch in path.chars() {
        match ch {
            '{' => {
                in_param = true;
                out.push_str("{}");
            }
            '}' => in_param = false,
            _ if in_param => {}
            _ => out.push(ch),
        }
    }
    out
}

/// The paths the README's endpoint table ("The API in short") names in its first column.
/// Shorthands resolve against the path before them in the cell: `…/resume` and a one-segment
/// `/sync` after `/channels/{id}/verify` are siblings; `[/{key}]` is an optional suffix.
fn readme_table_paths(heading: &str) -> BTreeSet<String> {
    let readme = include_str!("../README.md");
    let section = readme
        .split(heading)
        .nth(1)
        .expect("the README has its API table")
        .split("\n#")
        .next()
        .unwrap();
    let parent = |p: &str| {
        p.rsplit_once('/')
            .map_or(String::new(), |(a, _)| a.to_string())
    };
    let first_segment = |p: &str| {
        p.trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or("")
            .to_string()
    };
    let mut paths = BTreeSet::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cell = line[2..].split(" | ").next().unwrap();
        let mut last: Option<String> = None;
        for code in cell.split('`').skip(1).step_by(2) {
            for token in code.split([' ', ',', ';']) {
                let token = token.split('?').next().unwrap();
                let relative = token.starts_with("…/");
                if !(token.starts_with('/') || relative) {
                    continue;
                }
                let forms: Vec<String> = match token.split_once('[') {
                    Some((base, optional)) => vec![
                        base.to_string(),
                        format!("{base}{}", optional.trim_end_matches(']')),
                    ],
                    None => vec![token.to_string()],
                };
                for form in forms {
                    let full = match (&last, form.strip_prefix('…')) {
                        (Some(prev), Some(rest)) => format!("{}{rest}", parent(prev)),
                        (Some(prev), None)
                            if form.matches('/').count() == 1
                                && first_segment(&form) != first_segment(prev) =>
                        {
                            format!("{}{form}", parent(prev))
                        }
                        _ => form.clone(),
                    };
                    last = Some(full.clone());
                    paths.insert(normalized(&full));
                }
            }
        }
    }
    paths
}

/// The README's endpoint table and the account API's document name the same operations'
/// paths (issue 18): a documented path missing from the table, or a table path of `/api/v1`
/// the document lacks, fails.
#[test]
fn the_readme_endpoint_table_matches_the_document() {
    // Named in the table, served outside `/api/v1` (or not a path).
    assert_same_paths(
        "## The API in short",
        http::openapi::document()
            .paths
            .paths
            .keys()
            .map(|p| normalized(p))
            .collect(),
        &[
            "/api/v1",
            "/docs",
            "/openapi.json",
            "/metrics",
            "/w/{}/{}",
            "/webhooks/alternative",
            "/webhooks/alternative/{}",
            "/webhooks/messaging",
            "/webhooks/messaging/{}",
        ],
    );
}

/// The README table under `heading` and a document's `documented` paths are the same, but for
/// `outside` (paths the table names that are served outside the document).
fn assert_same_paths(heading: &str, documented: BTreeSet<String>, outside: &[&str]) {
    let table = readme_table_paths(heading);
    let missing: Vec<&String> = documented.difference(&table).collect();
    assert!(
        missing.is_empty(),
        "documented, not in the README's table under {heading}: {missing:?}"
    );
    let stale: Vec<&String> = table
        .difference(&documented)
        .filter(|p| !outside.contains(&p.as_str()))
        .collect();
    assert!(
        stale.is_empty(),
        "in the README's table under {heading}, not documented: {stale:?}"
    );
}

/// Every schema name of the three documents belongs to one Rust type: utoipa keeps the last
/// of two types with the same name, so a second `CreateIn` silently replaced the first
/// request body (issue 18). Checked over the sources of `http`.
#[test]
fn schema_names_are_unique() {
    let mut seen: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/http/src");
    let mut stack = vec![std::path::PathBuf::from(dir)];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let mut pending_alias: Option<String> = None;
            let mut derives_schema = false;
            for line in text.lines().map(str::trim) {
                if line.starts_with("#[derive(") && line.contains("ToSchema") {
                    derives_schema = true;
                    pending_alias = None;
                } else if derives_schema && line.starts_with("#[schema(as = ") {
                    pending_alias = line
                        .trim_start_matches("#[schema(as = ")
                        .split(')')
                        .next()
                        .map(|s| s.rsplit("::").next().unwrap().to_string());
                } else if derives_schema && (line.contains("struct ") || line.contains("enum ")) {
                    let name = line
                        .split_whitespace()
                        .skip_while(|w| *w != "struct" && *w != "enum")
                        .nth(1)
                        .unwrap()
                        .trim_end_matches(['{', ';', '('])
                        .split('<')
                        .next()
                        .unwrap()
                        .to_string();
                    seen.entry(pending_alias.take().unwrap_or(name))
                        .or_default()
                        .push(path.display().to_string());
                    derives_schema = false;
                } else if derives_schema && !line.starts_with("#[") && !line.starts_with("///") {
                    derives_schema = false;
                }
            }
        }
    }
    let twice: Vec<_> = seen.iter().filter(|(_, files)| files.len() > 1).collect();
    assert!(twice.is_empty(), "schema names used twice: {twice:?}");
    assert!(
        seen.len() > 40,
        "the scan found the schemas: {}",
        seen.len()
    );
}

/// The same for the panel API's table ("The operator panel API") and its document.
#[test]
fn the_readme_panel_table_matches_the_panel_document() {
    // Public routes of `/api` outside the session document.
    assert_same_paths(
        "## The operator panel API",
        http::panel::document()
            .paths
            .paths
            .keys()
            .map(|p| normalized(p))
            .collect(),
        &["/webhooks/provider", "/hygiene/callback"],
    );
}

/// Issue 55: the records both documents serve (a number is a "channel" in the account API
/// and a "phone number" in the panel) say in each document which record of the other they
/// are, with the same id; every pair names schemas that exist.
#[test]
fn shared_records_name_each_other_across_documents() {
    let account = serde_json::to_value(http::openapi::document()).unwrap();
    let panel = serde_json::to_value(http::panel::document()).unwrap();
    for (a, p, what) in http::openapi::SHARED_RECORDS {
        assert!(
            what.contains("/api/v1/") && what.contains("painel"),
            "{what}: both routes"
        );
        for (doc, name) in [(&account, a), (&panel, p)] {
            let schema = &doc["components"]["schemas"][name];
            assert!(schema.is_object(), "{name} is a schema");
            let description = schema["description"].as_str().unwrap_or_default();
            assert!(
                description.contains(what) && description.contains("mesmo `id`"),
                "{name}: {description}"
            );
        }
    }
}

/// Issue 49 item 7: every request body and success answer of the three served documents has
/// an example — a real exchange recorded while the tests ran, scrubbed of secrets
/// (`tools/openapi_examples.py`, `http::examples`) — and each example fits the schema it
/// illustrates (checked with jsonschema against the document's own components).
#[tokio::test]
async fn every_body_has_an_example_that_fits_its_schema() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let v = common::python_script(
        "tools/openapi_examples.py",
        vec!["--check".into(), app.url("")],
    )
    .await;
    assert_eq!(
        v["invalid"],
        serde_json::json!([]),
        "examples that do not fit"
    );
    assert_eq!(
        v["missing"],
        serde_json::json!([]),
        "bodies without an example"
    );
}
