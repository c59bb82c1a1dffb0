//! A campaign's audience rows (spec "Campaigns": `POST /campaigns/{id}/recipients`): each
//! row's phone normalised, its variables checked against the template's columns, repeated
//! phones dropped. Pure: the services store what [`check_rows`] keeps.

use crate::library::VarMap;
use crate::phone::Phone;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};

/// A recipient of `POST /campaigns/{id}/recipients`: `phone` with country code, `vars` the
/// audience columns.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecipientInput {
    /// Phone with country code (formatting allowed).
    pub phone: String,
    /// Audience columns.
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
}

/// An audience row refused (`RecipientsAdded.invalid`, `DryRun.invalid`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct InvalidRow {
    /// Its position in the batch (from 0).
    pub index: usize,
    /// The phone as sent.
    pub phone: String,
    /// Why (pt-BR).
    pub reason: String,
}

/// Audience rows after their checks.
pub struct Audience {
    /// `(phone digits, vars as JSON)`.
    pub valid: Vec<(String, String)>,
    /// Rows refused, with why.
    pub invalid: Vec<InvalidRow>,
    /// Repeated phones dropped.
    pub duplicates: u64,
}

/// Checks audience rows: phone normalised, vars against the var_map's columns, repeated phones
/// dropped.
pub fn check_rows(body: &str, var_map: &VarMap, rows: Vec<RecipientInput>) -> Audience {
    let mut invalid = Vec::new();
    let mut duplicates = 0u64;
    let mut seen = HashSet::new();
    let mut valid = Vec::with_capacity(rows.len());
    for (index, row) in rows.into_iter().enumerate() {
        let phone = match Phone::parse("phone", &row.phone) {
            Ok(p) => p,
            Err(e) => {
                invalid.push(InvalidRow {
                    index,
                    phone: row.phone,
                    reason: e.message,
                });
                continue;
            }
        };
        if let Err(missing) = crate::library::render(body, var_map, &row.vars) {
            invalid.push(InvalidRow {
                index,
                phone: row.phone,
                reason: format!("Faltam valores para: {}.", missing.join(", ")),
            });
            continue;
        }
        if !seen.insert(phone.as_str().to_string()) {
            duplicates += 1;
            continue;
        }
        valid.push((
            phone.as_str().to_string(),
            serde_json::to_string(&row.vars).unwrap_or_else(|_| "{}".into()),
        ));
    }
    Audience {
        valid,
        invalid,
        duplicates,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::library::VarBinding;

    fn row(phone: &str, vars: &[(&str, &str)]) -> RecipientInput {
        RecipientInput {
            phone: phone.into(),
            vars: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn rows_are_normalised_checked_and_deduplicated() {
        let var_map: VarMap = [(
            "1".to_string(),
            VarBinding {
                field: "nome".into(),
                default: None,
            },
        )]
        .into();
        let rows = vec![
            row("+55 (11) 98888-0001", &[("nome", "Ana")]),
            row("12", &[("nome", "Bia")]),
            row("5511988880002", &[]),
            row("5511988880001", &[("nome", "Ana de novo")]),
            row("5511988880003", &[("nome", "Caio")]),
        ];
        let a = check_rows("Olá {{1}}", &var_map, rows);
        let phones: Vec<&str> = a.valid.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(phones, ["5511988880001", "5511988880003"]);
        assert_eq!(a.valid[0].1, r#"{"nome":"Ana"}"#);
        assert_eq!(a.duplicates, 1);
        let invalid: Vec<usize> = a.invalid.iter().map(|r| r.index).collect();
        assert_eq!(invalid, [1, 2]);
        assert_eq!(a.invalid[1].reason, "Faltam valores para: nome.");
    }
}
