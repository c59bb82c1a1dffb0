//! The MCP tool endpoint (spec "Other"; decision D-033): a Model Context Protocol server over
//! streamable HTTP at `POST /api/v1/mcp`, JSON-RPC 2.0, one JSON answer per request (no SSE
//! stream, no session). Methods: `initialize`, `ping`, `tools/list`, `tools/call`;
//! notifications (no `id`) get 202 with no body.
//!
//! Each tool is a call of the REST API made in process with the caller's own token, so a tool
//! answers exactly what the route answers: the same checks, access levels (a `read` token
//! cannot send: the route's 403 comes back as a tool error), audit lines and errors. A failed
//! route becomes a tool result with `isError: true` and the route's JSON error as its text;
//! JSON-RPC errors are kept for protocol faults (unknown method or tool, bad params).

use crate::AppState;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};
use tower::ServiceExt;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Protocol revisions this server speaks, newest first. `initialize` answers the client's
/// revision when it is one of these, else the newest.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Routes (under `/api/v1`).
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(rpc))
}

/// A JSON-RPC 2.0 request of the MCP endpoint (for the API document; the handler reads the
/// raw body so it can answer malformed requests in JSON-RPC terms).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
struct McpRequest {
    /// Always `"2.0"`.
    jsonrpc: String,
    /// Request id (string or integer); absent on notifications.
    #[schema(value_type = Option<Object>)]
    id: (),
    /// `initialize`, `ping`, `tools/list`, `tools/call`, or a notification.
    method: String,
    /// Method parameters; `tools/call` takes `{name, arguments}`.
    #[schema(value_type = Option<Object>)]
    params: (),
}

/// JSON-RPC 2.0 error codes.
mod code {
    pub const PARSE: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
}

fn rpc_error(id: Value, code: i64, message: impl Into<String>) -> Response {
    Json(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}}))
        .into_response()
}

fn rpc_result(id: Value, result: Value) -> Response {
    Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

/// Processa uma mensagem JSON-RPC do MCP
///
/// `POST /api/v1/mcp`: one JSON-RPC message per request.
#[utoipa::path(
    post,
    operation_id = "mcp_rpc",
    path = "/mcp",
    tag = "MCP",
    request_body = McpRequest,
    responses((status = 200, description = "Resposta JSON-RPC 2.0: `result`, ou `error` `{code, message}`", body = crate::envelope::JsonRpcResponse), (status = 202, description = "Notificação (sem `id`): aceita, sem corpo"))
)]
async fn rpc(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let msg: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return rpc_error(
                Value::Null,
                code::PARSE,
                format!(
                    "JSON inválido: {}",
                    crate::extract::in_portuguese(&e.to_string())
                ),
            )
        }
    };
    let Some(obj) = msg.as_object() else {
        return rpc_error(
            Value::Null,
            code::INVALID_REQUEST,
            "Envie um único objeto JSON-RPC 2.0 por requisição (lotes não são aceitos).",
        );
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return rpc_error(
            obj.get("id").cloned().unwrap_or(Value::Null),
            code::INVALID_REQUEST,
            "`jsonrpc` deve ser \"2.0\".",
        );
    }
    let Some(method) = obj.get("method").and_then(Value::as_str) else {
        // A response or something else from the client: nothing to answer.
        return StatusCode::ACCEPTED.into_response();
    };
    let Some(id) = obj.get("id").cloned() else {
        // A notification (`notifications/initialized`, `notifications/cancelled`…).
        return StatusCode::ACCEPTED.into_response();
    };
    let params = obj.get("params").cloned().unwrap_or(json!({}));
    match method {
        "initialize" => initialize(id, &params),
        "ping" => rpc_result(id, json!({})),
        "tools/list" => rpc_result(id, json!({ "tools": tools() })),
        "tools/call" => call_tool(state, &headers, id, &params).await,
        other => rpc_error(
            id,
            code::METHOD_NOT_FOUND,
            format!("Método desconhecido: {other}."),
        ),
    }
}

/// `initialize`: the protocol version asked when this server speaks it (else its newest),
/// its capabilities and instructions.
fn initialize(id: Value, params: &Value) -> Response {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked
        .filter(|v| PROTOCOL_VERSIONS.contains(v))
        .unwrap_or(PROTOCOL_VERSIONS[0]);
    rpc_result(
        id,
        json!({
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": {"name": "disparo", "version": env!("CARGO_PKG_VERSION")},
            "instructions": "Ferramentas do disparo: números (canais) e sua saúde, templates, envio de template e campanhas. Use create_campaign com dry_run: true para validar público, variáveis e capacidade sem enviar.",
        }),
    )
}

/// `tools/call`: runs the named tool with its arguments as the caller (its bearer token).
async fn call_tool(state: AppState, headers: &HeaderMap, id: Value, params: &Value) -> Response {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return rpc_error(id, code::INVALID_PARAMS, "`params.name` é obrigatório.");
    };
    let args = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return rpc_error(id, code::INVALID_PARAMS, "`arguments` deve ser um objeto."),
    };
    let Some(tool) = TOOLS.iter().find(|t| t.name == name) else {
        return rpc_error(
            id,
            code::INVALID_PARAMS,
            format!("Ferramenta desconhecida: {name}."),
        );
    };
    let bearer = headers.get(header::AUTHORIZATION).cloned();
    let caller = Caller { state, bearer };
    match (tool.run)(&caller, args).await {
        Ok(out) => rpc_result(id, out.into_result()),
        Err(message) => rpc_error(id, code::INVALID_PARAMS, message),
    }
}

/// What a tool produced: the route's status and JSON body.
struct Outcome {
    ok: bool,
    body: Value,
}

impl Outcome {
    /// The `tools/call` result: the JSON as text, as `structuredContent` (an object), and
    /// `isError` for a refused call.
    fn into_result(self) -> Value {
        let text = serde_json::to_string_pretty(&self.body).unwrap_or_default();
        let structured = if self.body.is_object() {
            self.body
        } else {
            json!({ "data": self.body })
        };
        json!({
            "content": [{"type": "text", "text": text}],
            "structuredContent": structured,
            "isError": !self.ok,
        })
    }
}

/// The caller of a tool: the app and the MCP request's `Authorization` header.
struct Caller {
    state: AppState,
    bearer: Option<HeaderValue>,
}

impl Caller {
    /// Calls `method path` of `/api/v1` in process with the caller's token.
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Outcome {
        self.call_with(method, path, body, None).await
    }

    async fn call_with(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        idempotency_key: Option<&str>,
    ) -> Outcome {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("/api/v1{path}"));
        if let Some(b) = &self.bearer {
            req = req.header(header::AUTHORIZATION, b.clone());
        }
        if let Some(k) = idempotency_key {
            req = req.header("idempotency-key", k);
        }
        let req = match body {
            Some(b) => req
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(b.to_string())),
            None => req.body(Body::empty()),
        };
        let req = match req {
            Ok(r) => r,
            Err(e) => {
                return failure(format!(
                    "Requisição inválida: {}",
                    crate::extract::in_portuguese(&e.to_string())
                ))
            }
        };
        let resp = match crate::router(self.state.clone()).oneshot(req).await {
            Ok(r) => r,
            Err(never) => match never {},
        };
        let ok = resp.status().is_success();
        let bytes = match axum::body::to_bytes(resp.into_body(), usize::MAX).await {
            Ok(b) => b,
            Err(e) => return failure(format!("Resposta ilegível: {e}")),
        };
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Outcome { ok, body }
    }
}

fn failure(message: String) -> Outcome {
    Outcome {
        ok: false,
        body: json!({ "message": message }),
    }
}

type ToolFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Outcome, String>> + Send + 'a>>;

/// A tool: its name, description, JSON Schema of its arguments and what it runs. `run`
/// answers `Err` only for arguments the schema refuses (a JSON-RPC "invalid params").
struct Tool {
    name: &'static str,
    description: &'static str,
    schema: fn() -> Value,
    run: for<'a> fn(&'a Caller, Map<String, Value>) -> ToolFuture<'a>,
}

const TOOLS: &[Tool] = &[
    Tool {
        name: "list_channels",
        description: "Lista os números (canais) da conta: id, name, phone, status e engine. Nível read.",
        schema: || json!({"type": "object", "properties": {}, "additionalProperties": false}),
        run: |c, _| Box::pin(list_channels(c)),
    },
    Tool {
        name: "channel_health",
        description: "Saúde de um número: qualidade, tier, limite de 24 h, enviados, disponível, código e próxima ação. Nível read.",
        schema: || json!({"type": "object", "properties": {"channel_id": {"type": "integer", "description": "id do número"}}, "required": ["channel_id"], "additionalProperties": false}),
        run: |c, a| Box::pin(channel_health(c, a)),
    },
    Tool {
        name: "list_templates",
        description: "Lista os templates da biblioteca com o status em cada número. Nível read.",
        schema: || json!({"type": "object", "properties": {}, "additionalProperties": false}),
        run: |c, _| Box::pin(async move { Ok(c.call(Method::GET, "/templates", None).await) }),
    },
    Tool {
        name: "send_template",
        description: "Envia um template aprovado a um contato por um número (POST /messages, o mesmo objeto template). Nível write: um token read é recusado.",
        schema: || json!({
            "type": "object",
            "properties": {
                "channel_id": {"type": "integer", "description": "id do número que envia"},
                "to": {"type": "string", "description": "telefone com DDI, só dígitos ou formatado"},
                "template": {
                    "type": "object",
                    "description": "o template e seus valores, o mesmo objeto de POST /messages: {id} ou {name, language}, com vars (colunas do var_map) ou params (variáveis em ordem), header_param, header_media, button_param, coupon_code",
                    "properties": {
                        "id": {"type": "integer"},
                        "name": {"type": "string"},
                        "language": {"type": "string"},
                        "vars": {"type": "object", "additionalProperties": {"type": "string"}},
                        "params": {"type": "array", "items": {"type": "string"}},
                        "header_param": {"type": "string"},
                        "header_media": {"type": "object"},
                        "button_param": {"type": "string"},
                        "coupon_code": {"type": "string"}
                    }
                },
                "template_id": {"type": "integer", "description": "obsoleto: use template.id", "deprecated": true},
                "vars": {"type": "object", "additionalProperties": {"type": "string"}, "description": "obsoleto: use template.vars", "deprecated": true},
                "idempotency_key": {"type": "string", "description": "repetir a chamada com a mesma chave não envia de novo"}
            },
            "required": ["channel_id", "to"],
            "additionalProperties": false
        }),
        run: |c, a| Box::pin(send_template(c, a)),
    },
    Tool {
        name: "campaign_status",
        description: "Estado e contadores de uma campanha (total, queued, sending, sent, delivered, read, failed, skipped). Nível read.",
        schema: || json!({"type": "object", "properties": {"campaign_id": {"type": "integer"}}, "required": ["campaign_id"], "additionalProperties": false}),
        run: |c, a| Box::pin(campaign_status(c, a)),
    },
    Tool {
        name: "create_campaign",
        description: "Cria uma campanha de template. Com dry_run: true (o padrão) só valida público, variáveis e a capacidade de hoje dos números, sem gravar nem enviar. Com dry_run: false cria, adiciona o público e, com start: true, inicia. Nível write.",
        schema: || json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "template_id": {"type": "integer"},
                "category": {"type": "string", "enum": ["marketing", "utility", "authentication"]},
                "channels": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {"channel_id": {"type": "integer"}, "weight": {"type": "integer", "minimum": 1, "maximum": 100}}, "required": ["channel_id"]}},
                "var_map": {"type": "object"},
                "recipients": {"type": "array", "items": {"type": "object", "properties": {"phone": {"type": "string"}, "vars": {"type": "object", "additionalProperties": {"type": "string"}}}, "required": ["phone"]}},
                "dry_run": {"type": "boolean", "default": true},
                "start": {"type": "boolean", "default": false}
            },
            "required": ["name", "template_id", "channels"],
            "additionalProperties": false
        }),
        run: |c, a| Box::pin(create_campaign(c, a)),
    },
];

/// The `tools/list` answer.
fn tools() -> Vec<Value> {
    TOOLS
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "inputSchema": (t.schema)()}))
        .collect()
}

fn int_arg(args: &Map<String, Value>, name: &str) -> Result<i64, String> {
    args.get(name)
        .and_then(Value::as_i64)
        .ok_or_else(|| format!("`{name}` é obrigatório e deve ser um inteiro."))
}

async fn list_channels(c: &Caller) -> Result<Outcome, String> {
    let out = c.call(Method::GET, "/channels", None).await;
    if !out.ok {
        return Ok(out);
    }
    let rows: Vec<Value> = out.body["data"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|ch| {
                    json!({"id": ch["id"], "name": ch["name"], "phone": ch["phone"],
                           "status": ch["status"], "engine": ch["engine"]})
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Outcome {
        ok: true,
        body: json!({ "channels": rows }),
    })
}

async fn channel_health(c: &Caller, a: Map<String, Value>) -> Result<Outcome, String> {
    let id = int_arg(&a, "channel_id")?;
    Ok(c.call(Method::GET, &format!("/channels/{id}/health"), None)
        .await)
}

async fn campaign_status(c: &Caller, a: Map<String, Value>) -> Result<Outcome, String> {
    let id = int_arg(&a, "campaign_id")?;
    Ok(c.call(Method::GET, &format!("/campaigns/{id}"), None).await)
}

/// `send_template`: `POST /messages` with the `template` object as given (D-127); the old
/// `template_id` + `vars` arguments are read into it.
async fn send_template(c: &Caller, a: Map<String, Value>) -> Result<Outcome, String> {
    let channel_id = int_arg(&a, "channel_id")?;
    let to = a
        .get("to")
        .and_then(Value::as_str)
        .ok_or("`to` é obrigatório.")?;
    let template = match (a.get("template"), a.get("template_id")) {
        (Some(t), None) if t.is_object() => t.clone(),
        (None, Some(_)) => {
            let vars = a.get("vars").cloned().unwrap_or(json!({}));
            json!({"id": int_arg(&a, "template_id")?, "vars": vars})
        }
        (Some(_), Some(_)) => {
            return Err("Informe `template` ou `template_id` (obsoleto), não os dois.".into())
        }
        _ => return Err("`template` (objeto) é obrigatório.".into()),
    };
    let key = a.get("idempotency_key").and_then(Value::as_str);
    let body = json!({"channel_id": channel_id, "to": to, "template": template});
    Ok(c.call_with(Method::POST, "/messages", Some(body), key)
        .await)
}

async fn create_campaign(c: &Caller, a: Map<String, Value>) -> Result<Outcome, String> {
    let dry_run = a.get("dry_run").and_then(Value::as_bool).unwrap_or(true);
    let start = a.get("start").and_then(Value::as_bool).unwrap_or(false);
    let mut campaign = Map::new();
    for field in ["name", "template_id", "category", "channels", "var_map"] {
        if let Some(v) = a.get(field) {
            campaign.insert(field.into(), v.clone());
        }
    }
    let recipients = a.get("recipients").cloned();
    if dry_run {
        campaign.insert("dry_run".into(), Value::Bool(true));
        if let Some(r) = recipients {
            campaign.insert("recipients".into(), r);
        }
        return Ok(c
            .call(Method::POST, "/campaigns", Some(Value::Object(campaign)))
            .await);
    }
    let created = c
        .call(Method::POST, "/campaigns", Some(Value::Object(campaign)))
        .await;
    if !created.ok {
        return Ok(created);
    }
    let id = created.body["data"]["id"].as_i64().unwrap_or_default();
    let mut added = Vec::new();
    if let Some(Value::Array(rows)) = recipients {
        for chunk in rows.chunks(services::campaigns::MAX_RECIPIENTS_PER_CALL) {
            let out = c
                .call(
                    Method::POST,
                    &format!("/campaigns/{id}/recipients"),
                    Some(json!({ "recipients": chunk })),
                )
                .await;
            if !out.ok {
                return Ok(out);
            }
            added.push(out.body["data"].clone());
        }
    }
    let campaign = if start {
        let out = c
            .call(Method::POST, &format!("/campaigns/{id}/start"), None)
            .await;
        if !out.ok {
            return Ok(out);
        }
        out.body["data"].clone()
    } else {
        c.call(Method::GET, &format!("/campaigns/{id}"), None)
            .await
            .body["data"]
            .clone()
    };
    Ok(Outcome {
        ok: true,
        body: json!({"campaign": campaign, "recipients": added}),
    })
}
