//! One contact's message on a campaign's page (issue 47 item 10): `GET
//! /campanhas/{id}/previa?numero=` answers the fragment drawn from `GET
//! /api/campaigns/{id}/preview`, for the number typed or a row of the sends table.

use super::pages::{q, render};
use super::{Caller, WebError, WebPath};
use askama::Template;
use axum::extract::Query;
use axum::response::Response;
use serde::Deserialize;

/// `GET /api/campaigns/{id}/preview`'s `data`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ContactPreview {
    pub numero: String,
    pub nome: Option<String>,
    pub texto: Option<String>,
    pub cabecalho: Option<String>,
    pub imagem: Option<String>,
    pub rodape: Option<String>,
    #[serde(default)]
    pub botoes: Vec<String>,
    #[serde(default)]
    pub faltam: Vec<String>,
    pub higienizacao: Option<String>,
}

#[derive(Template)]
#[template(path = "previa_contato.html")]
struct PreviewFragment {
    p: ContactPreview,
}

/// The preview's query: the contact's number.
#[derive(Debug, Deserialize)]
pub(super) struct PreviewQuery {
    #[serde(default)]
    numero: String,
}

/// `GET /campanhas/{id}/previa?numero=`: the contact's message as the campaign sends it; a
/// number not in the campaign is the API's 404 message, in place.
pub(super) async fn contact_preview(
    c: Caller,
    WebPath(id): WebPath<i64>,
    Query(f): Query<PreviewQuery>,
) -> Result<Response, WebError> {
    let p: ContactPreview = c
        .data(&format!(
            "/api/campaigns/{id}/preview?numero={}",
            q(f.numero.trim())
        ))
        .await?;
    render(&PreviewFragment { p })
}
