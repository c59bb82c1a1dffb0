//! Spec sections "Wiki page" and "Wiki", and the public pages at `/w/{account}/{page}`
//! (decision D-028).

use crate::envelope::{Data, Deleted, List, Page};
use crate::error::ApiError;
use crate::extract::{ApiJson, Auth, IdPath};
use crate::AppState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use chrono::{TimeZone, Utc};
use serde::{Deserialize, Serialize};
use storage::wiki::{CategoryRecord, PageFilter, PageRecord};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Routes under `/api/v1`.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(categories, create_category))
        .routes(routes!(rename_category, delete_category))
        .routes(routes!(read, update, remove))
}

/// The public page route (no token).
pub fn public_routes() -> Router<AppState> {
    Router::new().route("/w/{account}/{page}", get(public_page))
}

/// `YYYY-MM-DD HH:MM:SS` in UTC (spec "Wiki page").
fn stamp(ms: i64) -> String {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or_default()
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

/// A wiki page as the API shows it; `public_url` is absolute under `base` (the gateway's public
/// URL, `DISPARO_PUBLIC_URL`; issue 17) and null for a private page.
pub(crate) fn page_json(
    p: &PageRecord,
    base: &str,
    account_slug: &str,
    with_content: bool,
) -> WikiPageOut {
    WikiPageOut {
        id: p.id,
        title: p.title.clone(),
        slug: p.slug.clone(),
        category_id: p.category_id,
        visibility: p.visibility.clone(),
        bot_knowledge: p.bot_knowledge,
        excerpt: p.excerpt.clone(),
        public_url: (p.visibility == "public")
            .then(|| format!("{}/w/{account_slug}/{}", base.trim_end_matches('/'), p.slug)),
        created_at: stamp(p.created_at),
        updated_at: stamp(p.updated_at),
        content: with_content.then(|| p.content.clone()),
    }
}

/// A wiki page (spec "Wiki page").
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WikiPageOut {
    /// Id.
    id: i64,
    /// Title.
    title: String,
    /// Derived from the title; unique in the account.
    slug: String,
    /// Its category, if any.
    category_id: Option<i64>,
    /// `private` or `public`.
    #[schema(pattern = "^(private|public)$")]
    visibility: String,
    /// The bot uses the page as knowledge.
    bot_knowledge: bool,
    /// The first words of the content, as plain text.
    excerpt: String,
    /// `{public URL}/w/{account}/{slug}` for a public page; null for a private one.
    public_url: Option<String>,
    /// `YYYY-MM-DD HH:MM:SS` (UTC).
    created_at: String,
    /// `YYYY-MM-DD HH:MM:SS` (UTC).
    updated_at: String,
    /// The Markdown: in a page's read, create and update answers; absent in the list.
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<String>,
}

/// A wiki category.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WikiCategoryOut {
    /// Id.
    id: i64,
    /// Name (unique in the account).
    name: String,
    /// `YYYY-MM-DD HH:MM:SS` (UTC).
    created_at: String,
}

fn category_json(c: &CategoryRecord) -> WikiCategoryOut {
    WikiCategoryOut {
        id: c.id,
        name: c.name.clone(),
        created_at: stamp(c.created_at),
    }
}

fn check_visibility(v: &str) -> Result<(), ApiError> {
    if v == "private" || v == "public" {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "visibility",
            "invalid_visibility",
            "`visibility` deve ser private ou public.",
        ))
    }
}

async fn check_category(
    state: &AppState,
    account_id: i64,
    id: Option<i64>,
) -> Result<(), ApiError> {
    if let Some(id) = id {
        let cats = state
            .services
            .store()
            .list_wiki_categories(account_id)
            .await?;
        if !cats.iter().any(|c| c.id == id) {
            return Err(ApiError::invalid(
                "category_id",
                "unknown_category",
                "`category_id` não é uma categoria desta conta.",
            ));
        }
    }
    Ok(())
}

/// Filters of `GET /wiki`: `category_id`, `visibility`, `bot_knowledge=true` (what a bot
/// reads as knowledge).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    category_id: Option<i64>,
    /// `public` or `private`; a panel Client user always reads `public` (issue 46).
    #[param(pattern = "^(private|public)$")]
    pub(crate) visibility: Option<String>,
    bot_knowledge: Option<bool>,
    /// Page size (1 to 500, default 100).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<i64>,
    /// The `next_cursor` of the previous page (opaque).
    #[param(pattern = "^[0-9]{1,18}$")]
    cursor: Option<String>,
}

#[utoipa::path(
    get,
    operation_id = "wiki_list",
    summary = "Lista as páginas da wiki",
    path = "/wiki",
    tag = "Wiki",
    params(ListQuery),
    responses((status = 200, description = "Páginas (sem conteúdo)", body = Page<WikiPageOut>))
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    auth: Auth,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Page<WikiPageOut>>, ApiError> {
    let Query(q) = q.map_err(crate::extract::query_rejection)?;
    if let Some(v) = &q.visibility {
        check_visibility(v)?;
    }
    let (limit, before) = crate::extract::page_params(
        q.limit,
        &q.cursor,
        crate::extract::LIST_DEFAULT,
        crate::extract::LIST_MAX,
    )?;
    let filter = PageFilter {
        category_id: q.category_id,
        visibility: q.visibility,
        bot_knowledge: q.bot_knowledge,
        before_id: before,
        limit: Some(limit + 1),
    };
    let pages = state
        .services
        .store()
        .list_wiki_pages(auth.account_id(), &filter)
        .await?;
    let slug = &auth.0.account_slug;
    Ok(Json(crate::extract::cursor_page(
        pages,
        limit,
        |p| p.id,
        |p| page_json(p, &state.config.public_url, slug, false),
    )))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = WikiPageIn)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateIn {
    /// 1 to 200 characters, not blank.
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    title: String,
    /// Markdown.
    #[serde(default)]
    content: String,
    /// A category of the account.
    category_id: Option<i64>,
    /// `private` (default) or `public`.
    #[schema(pattern = "^(private|public)$")]
    visibility: Option<String>,
    #[serde(default)]
    bot_knowledge: bool,
}

async fn unique_slug(
    state: &AppState,
    account_id: i64,
    title: &str,
    except: Option<&str>,
) -> Result<String, ApiError> {
    let base = engine::wiki::slugify(title);
    let mut taken = state
        .services
        .store()
        .wiki_slugs_like(account_id, &base)
        .await?;
    taken.retain(|s| Some(s.as_str()) != except);
    Ok(engine::wiki::unique_slug(&base, &taken))
}

#[utoipa::path(
    post,
    operation_id = "wiki_create",
    summary = "Cria uma página da wiki",
    path = "/wiki",
    tag = "Wiki",
    request_body = CreateIn,
    responses((status = 201, description = "Página criada", body = Data<WikiPageOut>))
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(b): ApiJson<CreateIn>,
) -> Result<(StatusCode, Json<Data<WikiPageOut>>), ApiError> {
    let title = b.title.trim();
    if title.is_empty() || title.chars().count() > 200 {
        return Err(ApiError::invalid(
            "title",
            "required",
            "`title` é obrigatório (até 200 caracteres).",
        ));
    }
    let visibility = b.visibility.unwrap_or_else(|| "private".into());
    check_visibility(&visibility)?;
    check_category(&state, auth.account_id(), b.category_id).await?;
    let slug = unique_slug(&state, auth.account_id(), title, None).await?;
    let page = state
        .services
        .store()
        .insert_wiki_page(
            auth.account_id(),
            title,
            &slug,
            b.category_id,
            &visibility,
            b.bot_knowledge,
            &engine::wiki::excerpt(&b.content),
            &b.content,
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(Data {
            data: page_json(&page, &state.config.public_url, &auth.0.account_slug, true),
        }),
    ))
}

#[utoipa::path(
    get,
    operation_id = "wiki_read",
    summary = "Lê uma página da wiki",
    path = "/wiki/{id}",
    tag = "Wiki",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Página com o conteúdo Markdown", body = Data<WikiPageOut>))
)]
async fn read(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<WikiPageOut>>, ApiError> {
    let page = state
        .services
        .store()
        .wiki_page(auth.account_id(), id)
        .await?;
    Ok(Json(Data {
        data: page_json(&page, &state.config.public_url, &auth.0.account_slug, true),
    }))
}

/// `PUT /wiki/{id}`: only the fields sent change (`title` renames the slug too; `category_id:
/// null` removes the category).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = WikiPagePatch)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateIn {
    /// 1 to 200 characters, not blank.
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    title: Option<String>,
    /// Markdown.
    content: Option<String>,
    /// A category of the account; `null` takes the page out of its category.
    #[serde(default, deserialize_with = "some_null")]
    #[schema(value_type = Option<i64>)]
    category_id: Option<Option<i64>>,
    /// `private` or `public`.
    #[schema(pattern = "^(private|public)$")]
    visibility: Option<String>,
    bot_knowledge: Option<bool>,
}

/// Tells an absent field (`None`) from an explicit `null` (`Some(None)`).
fn some_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<i64>>, D::Error> {
    Ok(Some(Option::<i64>::deserialize(d)?))
}

#[utoipa::path(
    put,
    operation_id = "wiki_update",
    summary = "Altera uma página da wiki",
    path = "/wiki/{id}",
    tag = "Wiki",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = UpdateIn,
    responses((status = 200, description = "Página atualizada (só os campos enviados)", body = Data<WikiPageOut>))
)]
pub(crate) async fn update(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<UpdateIn>,
) -> Result<Json<Data<WikiPageOut>>, ApiError> {
    let mut page = state
        .services
        .store()
        .wiki_page(auth.account_id(), id)
        .await?;
    if let Some(t) = b.title.as_deref().map(str::trim) {
        if t.is_empty() || t.chars().count() > 200 {
            return Err(ApiError::invalid(
                "title",
                "required",
                "`title` não pode ficar vazio (até 200 caracteres).",
            ));
        }
        if t != page.title {
            page.slug = unique_slug(&state, auth.account_id(), t, Some(&page.slug)).await?;
            page.title = t.to_string();
        }
    }
    if let Some(c) = b.content {
        page.excerpt = engine::wiki::excerpt(&c);
        page.content = c;
    }
    if let Some(cat) = b.category_id {
        check_category(&state, auth.account_id(), cat).await?;
        page.category_id = cat;
    }
    if let Some(v) = b.visibility {
        check_visibility(&v)?;
        page.visibility = v;
    }
    if let Some(k) = b.bot_knowledge {
        page.bot_knowledge = k;
    }
    let page = state.services.store().update_wiki_page(&page).await?;
    Ok(Json(Data {
        data: page_json(&page, &state.config.public_url, &auth.0.account_slug, true),
    }))
}

#[utoipa::path(
    delete,
    operation_id = "wiki_remove",
    summary = "Remove uma página da wiki",
    path = "/wiki/{id}",
    tag = "Wiki",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Página removida", body = Data<Deleted>))
)]
pub(crate) async fn remove(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<Deleted>>, ApiError> {
    state
        .services
        .store()
        .delete_wiki_page(auth.account_id(), id)
        .await?;
    Ok(Deleted::json(id))
}

#[utoipa::path(
    get,
    operation_id = "wiki_categories",
    summary = "Lista as categorias da wiki",
    path = "/wiki/categories",
    tag = "Wiki",
    responses((status = 200, description = "Categorias", body = List<WikiCategoryOut>))
)]
async fn categories(
    State(state): State<AppState>,
    auth: Auth,
) -> Result<Json<List<WikiCategoryOut>>, ApiError> {
    let cats = state
        .services
        .store()
        .list_wiki_categories(auth.account_id())
        .await?;
    Ok(Json(List {
        data: cats.iter().map(category_json).collect(),
    }))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct CategoryIn {
    /// 1 to 100 characters, not blank.
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    name: String,
}

fn category_name(n: &str) -> Result<&str, ApiError> {
    let n = n.trim();
    if n.is_empty() || n.chars().count() > 100 {
        return Err(ApiError::invalid(
            "name",
            "required",
            "`name` deve ter de 1 a 100 caracteres.",
        ));
    }
    Ok(n)
}

#[utoipa::path(
    post,
    operation_id = "wiki_create_category",
    summary = "Cria uma categoria da wiki",
    path = "/wiki/categories",
    tag = "Wiki",
    request_body = CategoryIn,
    responses((status = 201, description = "Categoria criada", body = Data<WikiCategoryOut>))
)]
async fn create_category(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(b): ApiJson<CategoryIn>,
) -> Result<(StatusCode, Json<Data<WikiCategoryOut>>), ApiError> {
    let c = state
        .services
        .store()
        .insert_wiki_category(auth.account_id(), category_name(&b.name)?)
        .await?;
    Ok((StatusCode::CREATED, Data::json(category_json(&c))))
}

#[utoipa::path(
    put,
    operation_id = "wiki_rename_category",
    summary = "Renomeia uma categoria da wiki",
    path = "/wiki/categories/{id}",
    tag = "Wiki",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = CategoryIn,
    responses((status = 200, description = "Categoria renomeada", body = Data<WikiCategoryOut>))
)]
async fn rename_category(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<CategoryIn>,
) -> Result<Json<Data<WikiCategoryOut>>, ApiError> {
    let c = state
        .services
        .store()
        .rename_wiki_category(auth.account_id(), id, category_name(&b.name)?)
        .await?;
    Ok(Data::json(category_json(&c)))
}

#[utoipa::path(
    delete,
    operation_id = "wiki_delete_category",
    summary = "Remove uma categoria da wiki",
    path = "/wiki/categories/{id}",
    tag = "Wiki",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Categoria removida", body = Data<Deleted>))
)]
async fn delete_category(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<Deleted>>, ApiError> {
    state
        .services
        .store()
        .delete_wiki_category(auth.account_id(), id)
        .await?;
    Ok(Deleted::json(id))
}

/// Escapes text for HTML (`& < > " '`).
fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A page's Markdown as safe HTML: rendered by pulldown-cmark (every extension) and
/// sanitized by ammonia (no script, no event handler, no `javascript:` link). The public page
/// and the web panel's wiki show the same HTML.
pub(crate) fn markdown_html(content: &str) -> String {
    let mut html = String::new();
    pulldown_cmark::html::push_html(
        &mut html,
        pulldown_cmark::Parser::new_ext(content, pulldown_cmark::Options::all()),
    );
    ammonia::clean(&html)
}

/// A public page as HTML: Markdown rendered (pulldown-cmark) and sanitized (ammonia). Private
/// and missing pages are 404.
async fn public_page(
    State(state): State<AppState>,
    Path((account, page)): Path<(String, String)>,
) -> Response {
    let not_found = || {
        (StatusCode::NOT_FOUND, Html("<!doctype html><meta charset=\"utf-8\"><title>Página não encontrada</title><p>Página não encontrada.</p>".to_string())).into_response()
    };
    let p = match state
        .services
        .store()
        .public_wiki_page(&account, &page)
        .await
    {
        Ok(p) => p,
        Err(storage::StorageError::NotFound) => return not_found(),
        Err(e) => return ApiError::from(e).into_response(),
    };
    let body = markdown_html(&p.content);
    let title = escape_html(&p.title);
    Html(format!(
        "<!doctype html>\n<html lang=\"pt-BR\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title}</title><style>body{{font-family:system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;line-height:1.6;color:#222}}\
         h1{{line-height:1.2}}pre,code{{background:#f4f4f4;border-radius:4px}}pre{{padding:.75rem;overflow:auto}}img{{max-width:100%}}\
         footer{{margin-top:3rem;color:#777;font-size:.85rem}}</style></head>\
         <body><article><h1>{title}</h1>\n{body}</article><footer>Atualizado em {}</footer></body></html>",
        stamp(p.updated_at)
    ))
    .into_response()
}

#[cfg(test)]
mod fuzz_tests {
    use super::markdown_html;
    use proptest::prelude::*;

    /// The tags of sanitized HTML (text is escaped, so every `<` opens a tag): each tag's
    /// name and its attributes as `(name, value)`, values read with their quotes.
    fn tags(html: &str) -> Vec<(String, Vec<(String, String)>)> {
        let mut out = Vec::new();
        for part in html.split('<').skip(1) {
            let mut chars = part.chars().peekable();
            let name: String =
                std::iter::from_fn(|| chars.next_if(|c| !c.is_whitespace() && *c != '>')).collect();
            let mut attrs = Vec::new();
            loop {
                while chars.peek().is_some_and(|c| c.is_whitespace() || *c == '/') {
                    chars.next();
                }
                match chars.peek() {
                    None | Some('>') => break,
                    _ => {}
                }
                let attr: String = std::iter::from_fn(|| {
                    chars.next_if(|c| !c.is_whitespace() && *c != '=' && *c != '>')
                })
                .collect();
                let mut value = String::new();
                if chars.next_if_eq(&'=').is_some() {
                    match chars.next_if(|c| *c == '"' || *c == '\'') {
                        Some(q) => {
                            value = std::iter::from_fn(|| chars.next_if(|c| *c != q)).collect()
                        }
                        None => {
                            value = std::iter::from_fn(|| {
                                chars.next_if(|c| !c.is_whitespace() && *c != '>')
                            })
                            .collect()
                        }
                    }
                    chars.next();
                }
                if attr.is_empty() && value.is_empty() {
                    chars.next();
                }
                attrs.push((attr.to_ascii_lowercase(), value));
            }
            out.push((name.to_ascii_lowercase(), attrs));
        }
        out
    }

    fn fragment() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("<script>alert(1)</script>".to_string()),
            Just("<img src=x onerror=alert(1)>".to_string()),
            Just("[clique](javascript:alert(1))".to_string()),
            Just("[x](JaVaScRiPt:alert(1) \"t onclick=y\")".to_string()),
            Just("<a href=\"javascript:alert(1)\">a</a>".to_string()),
            Just("<iframe src=//evil></iframe>".to_string()),
            Just("<svg onload=alert(1)>".to_string()),
            Just("<div style=\"background:url(javascript:x)\">".to_string()),
            Just("![i](x\" onerror=\"alert(1))".to_string()),
            Just("```\n<script>x</script>\n```".to_string()),
            Just("\n\n".to_string()),
            Just("**".to_string()),
            Just("| a | b |\n|---|---|\n| <b onmouseover=x>c</b> | d |".to_string()),
            "[a-zA-Z <>\"'=/:()\\[\\]!*_`#-]{0,20}",
        ]
    }

    proptest! {
        /// Fuzzing (issue 53): Markdown mixing every injection a wiki author could try comes
        /// out with no script, frame, style or event handler and no `javascript:` address.
        #[test]
        fn sanitized_markdown_runs_nothing(parts in proptest::collection::vec(fragment(), 0..12)) {
            let html = markdown_html(&parts.concat());
            for (name, attrs) in tags(&html) {
                let name = name.trim_start_matches('/');
                prop_assert!(!["script", "iframe", "style", "svg", "object", "embed"].contains(&name), "{}: {}", name, html);
                for (attr, value) in attrs {
                    prop_assert!(!attr.starts_with("on") && attr != "style", "{}={} in {}", attr, value, html);
                    prop_assert!(!value.to_ascii_lowercase().trim_start().starts_with("javascript:"), "{} in {}", value, html);
                }
            }
        }
    }
}
