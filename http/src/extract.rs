//! Extractors that turn bad input into our error shape: JSON bodies, numeric ids in paths, and
//! the authenticated token.

use crate::error::ApiError;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use storage::accounts::TokenOwner;

/// A JSON body. Malformed JSON → 400; wrong types or missing fields → 422 naming the problem;
/// too large → 413; not JSON → 415.
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

/// Parses a JSON body already read (same errors as [`ApiJson`]).
pub fn parse_json<T: DeserializeOwned>(
    headers: &axum::http::HeaderMap,
    body: &[u8],
) -> Result<T, ApiError> {
    let is_json = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        });
    if !is_json {
        return Err(ApiError::UnsupportedMediaType);
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    match serde_path_to_error::deserialize(de) {
        Ok(v) => Ok(v),
        Err(e) if e.inner().is_data() => {
            let inner = e.inner().to_string();
            let path = e.path().to_string();
            let field = field_named(&format!("{path}: {inner}")).unwrap_or_else(|| "body".into());
            Err(ApiError::invalid(
                &field,
                "invalid_field",
                format!(
                    "Campo inválido ou ausente no corpo: {path}: {}",
                    in_portuguese(&inner)
                ),
            ))
        }
        Err(e) => Err(ApiError::Malformed(in_portuguese(&e.inner().to_string()))),
    }
}

fn json_rejection(r: JsonRejection) -> ApiError {
    match r {
        JsonRejection::JsonDataError(e) => {
            // serde's message names the field and the expectation, e.g. "missing field `to`".
            let detail = std::error::Error::source(&e)
                .map(|s| s.to_string())
                .unwrap_or_else(|| e.body_text());
            let field = field_named(&detail).unwrap_or_else(|| "body".into());
            ApiError::invalid(
                &field,
                "invalid_field",
                format!(
                    "Campo inválido ou ausente no corpo: {}",
                    in_portuguese(&detail)
                ),
            )
        }
        JsonRejection::JsonSyntaxError(e) => {
            let detail = std::error::Error::source(&e)
                .map(|s| s.to_string())
                .unwrap_or_else(|| e.body_text());
            ApiError::Malformed(in_portuguese(&detail))
        }
        JsonRejection::MissingJsonContentType(_) => ApiError::UnsupportedMediaType,
        other if other.status() == StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
        other => ApiError::Malformed(in_portuguese(&other.body_text())),
    }
}

/// A query string that does not parse into the route's filters: 422 naming the parameter in
/// `field` when serde says which (`invalid_limit` for `limit`, `invalid_cursor` for `cursor`,
/// as when their values are out of range; `invalid_query` otherwise, `field` `query` when no
/// parameter is named).
pub fn query_rejection(e: axum::extract::rejection::QueryRejection) -> ApiError {
    let text = e.body_text();
    let detail = text.trim_start_matches("Failed to deserialize query string: ");
    let field = field_named(detail).unwrap_or_else(|| "query".to_string());
    let code = match field.as_str() {
        "limit" => "invalid_limit",
        "cursor" => "invalid_cursor",
        _ => "invalid_query",
    };
    ApiError::invalid(
        &field,
        code,
        format!("Parâmetro de consulta inválido: {}", in_portuguese(detail)),
    )
}

/// The field a serde error names: `missing field `x``, `unknown field `x``, or a path before
/// `: ` (`template.name: invalid type…`, as `serde_path_to_error` writes it). `None` when it
/// names none.
pub fn field_named(detail: &str) -> Option<String> {
    let prefix = detail
        .split_once(": ")
        .map(|(p, _)| p)
        .filter(|p| is_path(p));
    // A missing field's path is its parent's; an unknown field's path is already its own.
    if let Some(rest) = detail.split_once("missing field `").map(|(_, r)| r) {
        let name = rest.split('`').next().unwrap_or_default();
        return Some(match prefix {
            Some(p) => format!("{p}.{name}"),
            None => name.to_string(),
        });
    }
    if let Some(rest) = detail.split_once("unknown field `").map(|(_, r)| r) {
        let name = rest.split('`').next().unwrap_or_default();
        return Some(prefix.map_or_else(|| name.to_string(), str::to_string));
    }
    prefix.map(str::to_string)
}

/// A path as serde_path_to_error writes one (`to`, `template.params[0]`), not a sentence.
fn is_path(p: &str) -> bool {
    !p.is_empty()
        && p != "."
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']' | '?'))
}

/// An optional ISO 8601 time with zone from a query (`field` names it) in ms; otherwise 422
/// `invalid_date` with `field`.
pub fn instant(field: &'static str, v: &Option<String>) -> Result<Option<i64>, ApiError> {
    v.as_deref()
        .map(|s| {
            chrono::DateTime::parse_from_rfc3339(s.trim())
                .map(|t| t.timestamp_millis())
                .map_err(|_| {
                    ApiError::invalid(
                        field,
                        "invalid_date",
                        format!("`{field}` deve ser uma data e hora ISO 8601 com fuso (2026-11-24T10:00:00Z)."),
                    )
                })
        })
        .transpose()
}

/// The keyset cursor of a list (the `next_cursor` of the previous page: opaque to clients,
/// the last id today); otherwise 422 `invalid_cursor` with `field`.
pub fn cursor(raw: &Option<String>) -> Result<Option<i64>, ApiError> {
    raw.as_deref()
        .map(|c| {
            c.trim().parse::<i64>().map_err(|_| {
                ApiError::invalid(
                    "cursor",
                    "invalid_cursor",
                    "`cursor` inválido: use o next_cursor da página anterior.",
                )
            })
        })
        .transpose()
}

/// The `limit` (1 to `max`, default `default`) and `cursor` of a keyset list (issue 17):
/// 422 `invalid_limit` / `invalid_cursor` otherwise.
pub fn page_params(
    limit: Option<i64>,
    cursor: &Option<String>,
    default: i64,
    max: i64,
) -> Result<(i64, Option<i64>), ApiError> {
    let limit = limit.unwrap_or(default);
    if !(1..=max).contains(&limit) {
        return Err(ApiError::invalid(
            "limit",
            "invalid_limit",
            format!("`limit` deve estar entre 1 e {max}."),
        ));
    }
    Ok((limit, self::cursor(cursor)?))
}

/// The page of a list route that takes only [`PageQuery`]: its `limit` (default
/// [`LIST_DEFAULT`], at most [`LIST_MAX`]) and cursor, or the 422 of a bad query.
pub fn list_page(
    q: Result<axum::extract::Query<PageQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<(i64, Option<i64>), ApiError> {
    let axum::extract::Query(q) = q.map_err(query_rejection)?;
    page_params(q.limit, &q.cursor, LIST_DEFAULT, LIST_MAX)
}

/// Query parameters of a keyset list: `limit` and the previous page's `next_cursor`.
#[derive(Debug, Clone, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Page size (1 to 500, default 100).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page (opaque).
    #[param(pattern = "^[0-9]{1,18}$")]
    pub cursor: Option<String>,
}

/// Default and largest page of the account's inventory lists (channels, templates, groups,
/// wiki pages, tokens).
pub const LIST_DEFAULT: i64 = 100;
/// See [`LIST_DEFAULT`].
pub const LIST_MAX: i64 = 500;

/// A keyset page `{data, has_more, next_cursor}` from up to `limit + 1` rows read after the
/// cursor: the extra row only says there is more; `next_cursor` is the last row's `id`;
/// each row is written by `render`.
pub fn cursor_page<T, O>(
    mut rows: Vec<T>,
    limit: i64,
    id: impl Fn(&T) -> i64,
    render: impl Fn(&T) -> O,
) -> crate::envelope::Page<O> {
    let has_more = rows.len() as i64 > limit;
    rows.truncate(limit.max(0) as usize);
    let next_cursor = if has_more {
        rows.last().map(|r| id(r).to_string())
    } else {
        None
    };
    crate::envelope::Page {
        data: rows.iter().map(render).collect(),
        has_more,
        next_cursor,
    }
}

/// serde's (and serde_json's) error messages in Portuguese, so no English reaches a client:
/// missing and unknown fields, unknown variants, invalid types, values and lengths, and the
/// JSON syntax errors, each with its line and column; anything else becomes a generic
/// sentence (issue 17, "honest errors").
pub fn in_portuguese(msg: &str) -> String {
    let mut msg = msg.trim();
    for prefix in [
        "Failed to deserialize the JSON body into the target type: ",
        "Failed to parse the request body as JSON: ",
        "Failed to deserialize query string: ",
    ] {
        msg = msg.strip_prefix(prefix).unwrap_or(msg);
    }
    // A leading `field.path: ` (serde_path_to_error, axum) names where; keep it.
    if let Some((path, rest)) = msg.split_once(": ") {
        let is_path = !path.is_empty()
            && path
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '[' | ']' | '?'));
        if is_path && !["invalid type", "invalid value", "invalid length"].contains(&path) {
            return format!("{path}: {}", in_portuguese(rest));
        }
    }
    let (body, at) = match msg.rfind(" at line ") {
        Some(i) => {
            let pos = &msg[i + " at line ".len()..];
            let (line, col) = pos.split_once(" column ").unwrap_or((pos, ""));
            (&msg[..i], format!(" (linha {line}, coluna {col})"))
        }
        None => (msg, String::new()),
    };
    let body = body.trim();
    format!("{}{at}", said_in_portuguese(body))
}

/// serde's data errors (missing, unknown or repeated field, unknown variant, invalid type,
/// value or length) in Portuguese; anything else goes to [`syntax_in_portuguese`].
fn said_in_portuguese(body: &str) -> String {
    if let Some(rest) = body.strip_prefix("missing field ") {
        format!("o campo {rest} é obrigatório")
    } else if let Some(rest) = body.strip_prefix("unknown field ") {
        match rest.split_once(", expected one of ") {
            Some((f, list)) => format!("campo desconhecido {f}; os aceitos são {list}"),
            None => match rest.split_once(", expected ") {
                Some((f, one)) => format!("campo desconhecido {f}; o aceito é {one}"),
                None => format!(
                    "campo desconhecido {}",
                    rest.trim_end_matches(", there are no fields")
                ),
            },
        }
    } else if let Some(rest) = body.strip_prefix("unknown variant ") {
        match rest.split_once(", expected one of ") {
            Some((v, list)) => format!("valor desconhecido {v}; os aceitos são {list}"),
            None => match rest.split_once(", expected ") {
                Some((v, one)) => format!("valor desconhecido {v}; o aceito é {one}"),
                None => format!("valor desconhecido {rest}"),
            },
        }
    } else if let Some(rest) = body.strip_prefix("invalid type: ") {
        match rest.split_once(", expected ") {
            Some((got, want)) => format!(
                "tipo inválido: veio {}, esperado {}",
                kind(got),
                expected(want)
            ),
            None => format!("tipo inválido: {}", kind(rest)),
        }
    } else if let Some(rest) = body.strip_prefix("invalid value: ") {
        match rest.split_once(", expected ") {
            Some((got, want)) => {
                format!("valor inválido: {}, esperado {}", kind(got), expected(want))
            }
            None => format!("valor inválido: {}", kind(rest)),
        }
    } else if let Some(rest) = body.strip_prefix("invalid length ") {
        match rest.split_once(", expected ") {
            Some((n, want)) => format!("tamanho inválido ({n}), esperado {}", expected(want)),
            None => format!("tamanho inválido ({rest})"),
        }
    } else if let Some(rest) = body.strip_prefix("duplicate field ") {
        format!("campo repetido {rest}")
    } else {
        syntax_in_portuguese(body)
    }
}

/// serde_json's syntax errors in Portuguese; a message of our own deserializers (already
/// Portuguese) is kept, anything else in English is not shown.
fn syntax_in_portuguese(body: &str) -> String {
    if body.starts_with("EOF while parsing") {
        "o JSON termina antes do fim".into()
    } else if body.starts_with("expected value") {
        "esperado um valor JSON".into()
    } else if body.starts_with("trailing characters") || body.starts_with("trailing comma") {
        "há caracteres depois do fim do JSON (ou uma vírgula sobrando)".into()
    } else if body.starts_with("key must be a string") {
        "as chaves de um objeto JSON devem ser textos".into()
    } else if body.starts_with("expected `:`") {
        "esperado `:` depois da chave".into()
    } else if body.starts_with("expected `,` or `}`") || body.starts_with("expected `,` or `]`") {
        "esperada uma vírgula ou o fecho do objeto ou da lista".into()
    } else if body.starts_with("invalid escape")
        || body.starts_with("invalid unicode")
        || body.starts_with("control character")
        || body.starts_with("lone leading surrogate")
    {
        "texto com escape ou caractere inválido".into()
    } else if body.starts_with("invalid number") || body.starts_with("number out of range") {
        "número inválido ou fora do intervalo".into()
    } else if body.starts_with("recursion limit exceeded") {
        "JSON aninhado demais".into()
    } else if body.starts_with("invalid digit found in string")
        || body.starts_with("cannot parse integer")
    {
        "esperado um número inteiro".into()
    } else if body.is_empty() {
        "entrada inválida".into()
    } else {
        // Messages of our own deserializers are already Portuguese; anything else is not shown.
        let ascii_english = body.split_whitespace().any(|w| {
            [
                "expected", "invalid", "failed", "unknown", "missing", "the", "with",
            ]
            .contains(&w.to_ascii_lowercase().as_str())
        });
        if ascii_english {
            "entrada em formato inesperado".into()
        } else {
            body.to_string()
        }
    }
}

/// serde's words for what it found (`string "abc"`, `integer `-1``, `null`…) in Portuguese.
fn kind(got: &str) -> String {
    let pairs = [
        ("string ", "o texto "),
        ("integer ", "o inteiro "),
        ("floating point ", "o número "),
        ("boolean ", "o booleano "),
        ("character ", "o caractere "),
    ];
    for (en, pt) in pairs {
        if let Some(rest) = got.strip_prefix(en) {
            return format!("{pt}{rest}");
        }
    }
    match got {
        "null" => "nulo".into(),
        "map" => "um objeto".into(),
        "sequence" => "uma lista".into(),
        "unit value" | "unit" => "vazio".into(),
        "string" => "um texto".into(),
        "integer" => "um inteiro".into(),
        other => other.replace("newtype struct", "estrutura"),
    }
}

/// serde's words for what it expected (`i64`, `a string`, `struct CreateIn`…) in Portuguese.
fn expected(want: &str) -> String {
    let w = want.trim();
    let int = [
        "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "usize", "isize",
    ];
    if int.contains(&w) || w.contains("integer") {
        return "um número inteiro".into();
    }
    if ["f32", "f64"].contains(&w) || w.contains("float") {
        return "um número".into();
    }
    match w {
        "a string" | "string" | "a borrowed string" => "um texto".into(),
        "a boolean" | "bool" => "verdadeiro ou falso".into(),
        "a sequence" => "uma lista".into(),
        "a map" => "um objeto".into(),
        "a character" | "char" => "um caractere".into(),
        w if w.starts_with("struct ") || w.starts_with("a map") => "um objeto".into(),
        w if w.starts_with("a sequence")
            || w.starts_with("an array")
            || w.starts_with("a tuple") =>
        {
            "uma lista".into()
        }
        w if w.starts_with("variant identifier") || w.starts_with("enum ") => {
            "um dos valores aceitos".into()
        }
        w if w.starts_with("field identifier") => "um nome de campo".into(),
        w if w.chars().all(|c| c.is_ascii_digit() || c == ' ') => w.to_string(),
        w if w.starts_with("an ") || w.starts_with("a ") => "outro formato".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod portuguese_tests {
    use super::in_portuguese;

    #[test]
    fn serde_messages_read_in_portuguese() {
        assert_eq!(
            in_portuguese("missing field `to` at line 1 column 2"),
            "o campo `to` é obrigatório (linha 1, coluna 2)"
        );
        assert_eq!(
            in_portuguese("unknown field `cnpj`, expected one of `nome`, `documento`"),
            "campo desconhecido `cnpj`; os aceitos são `nome`, `documento`"
        );
        assert_eq!(
            in_portuguese("invalid type: string \"abc\", expected i64 at line 1 column 9"),
            "tipo inválido: veio o texto \"abc\", esperado um número inteiro (linha 1, coluna 9)"
        );
        assert_eq!(
            in_portuguese("EOF while parsing a value at line 1 column 0"),
            "o JSON termina antes do fim (linha 1, coluna 0)"
        );
        assert_eq!(
            in_portuguese("invalid type: null, expected a string"),
            "tipo inválido: veio nulo, esperado um texto"
        );
        assert_eq!(
            in_portuguese("something unexpected with the input"),
            "entrada em formato inesperado"
        );
        assert_eq!(
            in_portuguese("`volume` deve ser ao menos 1."),
            "`volume` deve ser ao menos 1."
        );
        for m in [
            "unknown variant `x`, expected `a` or `b`",
            "invalid value: integer `-1`, expected u64",
            "invalid length 0, expected a non-empty list",
            "trailing characters at line 1 column 3",
            "key must be a string at line 1 column 2",
        ] {
            let pt = in_portuguese(m);
            assert!(
                !pt.contains("expected") && !pt.contains("invalid "),
                "{m} → {pt}"
            );
        }
    }
}

/// The raw request body (for handlers that hash it, like idempotent sends); a body over the
/// limit is 413 in our envelope.
pub struct RawBody(pub bytes::Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match bytes::Bytes::from_request(req, state).await {
            Ok(b) => Ok(RawBody(b)),
            Err(r) if r.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(ApiError::PayloadTooLarge),
            Err(r) => Err(ApiError::Malformed(r.body_text())),
        }
    }
}

/// A numeric id from the path (`/{id}`); anything else is a record that does not exist: 404.
pub struct IdPath(pub i64);

impl<S: Send + Sync> FromRequestParts<S> for IdPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::NotFound)?;
        raw.parse::<i64>()
            .map(IdPath)
            .map_err(|_| ApiError::NotFound)
    }
}

/// The account and token behind the request (set by the auth middleware).
#[derive(Debug, Clone)]
pub struct Auth(pub TokenOwner);

impl<S: Send + Sync> FromRequestParts<S> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<TokenOwner>()
            .cloned()
            .map(Auth)
            .ok_or(ApiError::Unauthorized)
    }
}

impl Auth {
    /// The account id.
    pub fn account_id(&self) -> i64 {
        self.0.account_id
    }
}

/// For `#[serde(default, deserialize_with = "crate::extract::present")]` on an
/// `Option<Option<T>>` field of a partial update: absent → `None` (keep), `null` →
/// `Some(None)` (clear), a value → `Some(Some(v))`.
pub fn present<'de, D: serde::Deserializer<'de>, T: serde::Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    <Option<T> as serde::Deserialize>::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::field_named;

    #[test]
    fn a_serde_error_names_its_field() {
        let named = |d: &str| field_named(d);
        assert_eq!(named("missing field `to`").as_deref(), Some("to"));
        assert_eq!(
            named("template: missing field `name` at line 1 column 20").as_deref(),
            Some("template.name")
        );
        assert_eq!(
            named("unknown field `surprise`, expected one of `to`, `text`").as_deref(),
            Some("surprise")
        );
        assert_eq!(
            named("template.extra: unknown field `extra`, expected `name`").as_deref(),
            Some("template.extra")
        );
        assert_eq!(
            named("to: invalid type: integer `5`, expected a string").as_deref(),
            Some("to")
        );
        assert_eq!(
            named("limit: invalid digit found in string").as_deref(),
            Some("limit")
        );
        assert_eq!(named("expected value at line 1 column 1"), None);
        assert_eq!(named(".: invalid type: null"), None);
    }
}
