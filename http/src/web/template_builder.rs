//! The template builder's form action (issue 47 item 6): `POST /templates`, a multipart form
//! (it may carry the example image of a media header) turned into the panel API's calls —
//! `POST /api/templates`, then for an image header `PUT /api/templates/{id}/header-example`
//! and the submission to the ticked numbers (`POST /api/templates/{id}/submit`), which waits
//! for the example because the provider approves a media header only with one.

use super::pages::done;
use super::{Caller, Failure, WebError};
use axum::body::Body;
use axum::extract::multipart::{Multipart, MultipartRejection};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

/// The builder's form as it came: its text fields in order and the example image, when a
/// file was chosen.
struct BuilderForm {
    fields: Vec<(String, String)>,
    image: Option<Vec<u8>>,
}

impl BuilderForm {
    /// The first value of text field `name`, trimmed; `None` when blank or absent.
    fn text(&self, name: &str) -> Option<String> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    /// Every value of the repeated field `name`, trimmed (blank ones kept: the buttons' rows
    /// line up by position).
    fn all(&self, name: &str) -> Vec<String> {
        self.fields
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.trim().to_string())
            .collect()
    }
}

/// Reads the multipart form; a form that cannot be read (too large, cut) is the image
/// field's fault, since the image is what makes it large.
async fn read_form(
    c: &Caller,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<BuilderForm, WebError> {
    let unreadable = || {
        c.fail(Failure::Field {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            message: "O formulário não pôde ser lido: a imagem de exemplo deve ter até 5 MB."
                .into(),
            field: "header_example".into(),
        })
    };
    let mut multipart = multipart.map_err(|_| unreadable())?;
    let mut form = BuilderForm {
        fields: Vec::new(),
        image: None,
    };
    while let Some(field) = multipart.next_field().await.map_err(|_| unreadable())? {
        let name = field.name().unwrap_or_default().to_string();
        if name == "header_example" {
            let bytes = field.bytes().await.map_err(|_| unreadable())?;
            form.image = (!bytes.is_empty()).then(|| bytes.to_vec());
        } else {
            let text = field.text().await.map_err(|_| unreadable())?;
            form.fields.push((name, text));
        }
    }
    Ok(form)
}

/// `POST /templates`: name, category, language, header (none, text, or an image with its
/// example file), body, footer; `colunas` (the audience columns that fill `{{1}}`, `{{2}}`…
/// in order) as the var_map; up to three buttons as repeated `botao_tipo`/`botao_texto`/
/// `botao_valor` (a row without a type is skipped); the ticked `numeros` are submitted to.
/// To the new template's card, whose problems (what the provider would refuse) it shows.
/// A refused example image removes the template just made, so nothing half-built stays.
pub(super) async fn build_template(
    c: Caller,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Response, WebError> {
    let form = read_form(&c, multipart).await?;
    let image_header = form.text("header_type").as_deref() == Some("image");
    if image_header && form.image.is_none() {
        return Err(c.fail(Failure::Field {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            message: "Escolha a imagem de exemplo do cabeçalho (JPEG ou PNG até 5 MB).".into(),
            field: "header_example".into(),
        }));
    }
    let numbers: Vec<i64> = form
        .all("numeros")
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    let body = template_body(&form, if image_header { &[] } else { &numbers });
    let v = c.json(Method::POST, "/api/templates", Some(body)).await?;
    let mut template = v["data"].clone();
    let id = template["id"].as_i64().unwrap_or_default();
    if let (true, Some(image)) = (image_header, form.image) {
        template = send_example(&c, id, image).await?;
        if template["problems"].as_array().is_some_and(Vec::is_empty) && !numbers.is_empty() {
            let v = c
                .json(
                    Method::POST,
                    &format!("/api/templates/{id}/submit"),
                    Some(json!({ "channels": numbers })),
                )
                .await?;
            template = v["data"].clone();
        }
    }
    Ok(done(
        &c,
        &format!("/templates#template-{id}"),
        toast(&template),
    ))
}

/// The example image to `PUT /api/templates/{id}/header-example`; the template as it is
/// then. A refusal removes template `id` and is answered as the API's.
async fn send_example(c: &Caller, id: i64, image: Vec<u8>) -> Result<Value, WebError> {
    const BOUNDARY: &str = "disparo-exemplo-de-cabecalho";
    let mut body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"cabecalho\"\r\nContent-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(&image);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    let resp = c
        .raw(
            Method::PUT,
            &format!("/api/templates/{id}/header-example"),
            HeaderValue::from_str(&format!("multipart/form-data; boundary={BOUNDARY}")).ok(),
            Body::from(body),
        )
        .await?;
    match c.read(resp).await {
        Ok(v) => Ok(v["data"].clone()),
        Err(refused) => {
            // Best effort: the refusal is what the operator must read either way.
            let _ = c
                .json(Method::DELETE, &format!("/api/templates/{id}"), None)
                .await;
            Err(refused)
        }
    }
}

/// What the builder says once the template is made.
fn toast(template: &Value) -> &'static str {
    if template["problems"]
        .as_array()
        .is_some_and(|p| !p.is_empty())
    {
        "Template guardado na biblioteca, com problemas a corrigir antes de submeter."
    } else if template["channels"]
        .as_array()
        .is_some_and(|c| !c.is_empty())
    {
        "Template criado e submetido ao provedor."
    } else {
        "Template guardado na biblioteca."
    }
}

/// The API's template body from the builder's form; `submit_to` the numbers it is submitted
/// to at once.
fn template_body(form: &BuilderForm, submit_to: &[i64]) -> Value {
    let var_map: serde_json::Map<String, Value> = form
        .text("colunas")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .enumerate()
        .map(|(i, col)| ((i + 1).to_string(), json!({"field": col.to_lowercase()})))
        .collect();
    let (texts, values) = (form.all("botao_texto"), form.all("botao_valor"));
    let buttons: Vec<Value> = form
        .all("botao_tipo")
        .iter()
        .enumerate()
        .filter(|(_, k)| !k.is_empty())
        .map(|(i, kind)| {
            let label = texts.get(i).cloned().unwrap_or_default();
            let value = values.get(i).cloned().unwrap_or_default();
            match kind.as_str() {
                "url" => json!({"type": "url", "text": label, "url": value}),
                "phone_number" => {
                    json!({"type": "phone_number", "text": label, "phone_number": value})
                }
                _ => json!({"type": "quick_reply", "text": label}),
            }
        })
        .collect();
    let header_type = form.text("header_type");
    let mut body = json!({
        "name": form.text("name").unwrap_or_default(),
        "category": form.text("category"),
        "language": form.text("language"),
        "body": form.fields.iter().find(|(k, _)| k == "body").map(|(_, v)| v.clone()).unwrap_or_default(),
        "footer_text": form.text("footer_text"),
        "var_map": var_map,
        "buttons": buttons,
        "submit_channels": submit_to,
    });
    // A text header left blank is no header.
    if header_type.as_deref() == Some("image") {
        body["header_type"] = json!("image");
    } else {
        body["header_text"] = json!(form.text("header_text"));
    }
    body
}
