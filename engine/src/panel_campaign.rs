//! The panel's campaign flow (spec `panel-api.md` "Campaign" rows, issue 20, decision D-062):
//! create with contacts → contact hygiene → validate → pending approval → approve → dispatch.
//! The campaign is the account API's campaign (its [`CampaignState`]); the panel's steps
//! before dispatch are its [`Stage`], and what an operator reads is one [`PanelStatus`].

use crate::campaign::CampaignState;
use crate::library::{VarBinding, VarMap};
use crate::panel::Role;
use crate::ValidationError;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Most contacts in one `POST /api/campaigns` or one CSV import.
pub const MAX_CONTACTS: usize = 100_000;

/// Most columns of a contact (a CSV's header, or `dados` plus number and name; issue 46: a
/// file of 640 columns took the process from 89 to 918 MB).
pub const MAX_COLUMNS: usize = 50;

/// Most characters of a column's name.
pub const MAX_COLUMN_NAME_CHARS: usize = 64;

/// Most characters of one cell (a value of `dados`, the number).
pub const MAX_CELL_CHARS: usize = 500;

/// Most characters of a contact's name.
pub const MAX_NAME_CHARS: usize = 200;

/// Most cells of one import or one `contatos[]` (100,000 contacts of 10 columns). Parsed, a
/// cell costs ~130 bytes (measured in D-099: 2,000,000 cells took the gateway from 54 to
/// 330 MB), so this bounds an import's memory at ~130 MB.
pub const MAX_CELLS: usize = 1_000_000;

/// The panel's step of a campaign before (and at) its approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The contacts are with the hygiene service.
    Hygiene,
    /// The hygiene job could not be submitted, failed or timed out (resubmit it).
    HygieneFailed,
    /// Validated: waits for an Admin or Operador.
    PendingApproval,
    /// Approved: dispatches (or is held by the dispatch switch).
    Approved,
}

impl Stage {
    /// The stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Hygiene => "hygiene",
            Stage::HygieneFailed => "hygiene_failed",
            Stage::PendingApproval => "pending_approval",
            Stage::Approved => "approved",
        }
    }

    /// Parses the stored form.
    pub fn parse(s: &str) -> Option<Self> {
        [
            Stage::Hygiene,
            Stage::HygieneFailed,
            Stage::PendingApproval,
            Stage::Approved,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }
}

/// What the panel shows as a campaign's `status` (the spec leaves the values open: D-062).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PanelStatus {
    /// A draft of the account API (no panel flow).
    Rascunho,
    /// With the hygiene service.
    Higienizando,
    /// Hygiene failed or timed out (see `higienizacao.erro`); resubmit.
    FalhaHigienizacao,
    /// Validated; waits for approval.
    AguardandoAprovacao,
    /// Approved; dispatch not started yet (no contact released).
    Aprovada,
    /// Approved, held by the dispatch switch (`DISPARO_ENABLED` off).
    Retida,
    /// Waiting for its scheduled time.
    Agendada,
    /// Dispatching.
    EmAndamento,
    /// Paused (by an operator, by the rules, or by the dispatch switch).
    Pausada,
    /// Every released contact was sent, failed or skipped.
    Concluida,
    /// Stopped for good.
    Cancelada,
}

impl PanelStatus {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            PanelStatus::Rascunho => "rascunho",
            PanelStatus::Higienizando => "higienizando",
            PanelStatus::FalhaHigienizacao => "falha_higienizacao",
            PanelStatus::AguardandoAprovacao => "aguardando_aprovacao",
            PanelStatus::Aprovada => "aprovada",
            PanelStatus::Retida => "retida",
            PanelStatus::Agendada => "agendada",
            PanelStatus::EmAndamento => "em_andamento",
            PanelStatus::Pausada => "pausada",
            PanelStatus::Concluida => "concluida",
            PanelStatus::Cancelada => "cancelada",
        }
    }

    /// The status of a campaign in `state` at `stage`, `held` by the dispatch switch.
    pub fn of(state: CampaignState, stage: Option<Stage>, held: bool) -> Self {
        match state {
            CampaignState::Draft => match stage {
                None => PanelStatus::Rascunho,
                Some(Stage::Hygiene) => PanelStatus::Higienizando,
                Some(Stage::HygieneFailed) => PanelStatus::FalhaHigienizacao,
                Some(Stage::PendingApproval) => PanelStatus::AguardandoAprovacao,
                Some(Stage::Approved) if held => PanelStatus::Retida,
                Some(Stage::Approved) => PanelStatus::Aprovada,
            },
            CampaignState::Scheduled => PanelStatus::Agendada,
            CampaignState::Running => PanelStatus::EmAndamento,
            CampaignState::Paused if held => PanelStatus::Retida,
            CampaignState::Paused => PanelStatus::Pausada,
            CampaignState::Completed => PanelStatus::Concluida,
            CampaignState::Cancelled => PanelStatus::Cancelada,
        }
    }
}

/// Why an approval is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalRefusal {
    /// A Client user never approves.
    Role,
    /// An Operador approving a campaign they created (maker/checker; D-062).
    OwnCampaign,
}

/// Whether `role` (user `approver`) may approve a campaign created by `creator`: Admin always;
/// Operador unless they created it; Client never (spec "Authentication" item 4; issue 20).
pub fn may_approve(role: Role, approver: i64, creator: Option<i64>) -> Result<(), ApprovalRefusal> {
    match role {
        Role::Admin => Ok(()),
        Role::Operador if creator == Some(approver) => Err(ApprovalRefusal::OwnCampaign),
        Role::Operador => Ok(()),
        Role::Client => Err(ApprovalRefusal::Role),
    }
}

/// A contact of a panel campaign (`contatos[]` of the spec): the number as given, a name, and
/// the other columns.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Contact {
    /// Phone with country code, any formatting.
    #[serde(rename = "numero")]
    pub number: String,
    /// Name.
    #[serde(rename = "nome", default)]
    pub name: Option<String>,
    /// Other columns (column → value).
    #[serde(rename = "dados", default)]
    pub data: BTreeMap<String, String>,
}

impl Contact {
    /// Checks the contact's size: at most [`MAX_COLUMNS`] columns, names of at most
    /// [`MAX_COLUMN_NAME_CHARS`], cells of at most [`MAX_CELL_CHARS`] and a name of at most
    /// [`MAX_NAME_CHARS`] characters. `line` names the contact in the error (a CSV line, or
    /// the position in `contatos[]`). Errors: `colunas_demais`, `coluna_longa`,
    /// `celula_longa`, `nome_longo`.
    pub fn check_size(&self, line: &str) -> Result<(), ValidationError> {
        if self.data.len() + 2 > MAX_COLUMNS {
            return Err(ValidationError::new(
                "colunas_demais",
                "contatos",
                format!("{line}: no máximo {MAX_COLUMNS} colunas por contato."),
            ));
        }
        if let Some(k) = self
            .data
            .keys()
            .find(|k| k.chars().count() > MAX_COLUMN_NAME_CHARS)
        {
            let short: String = k.chars().take(20).collect();
            return Err(ValidationError::new(
                "coluna_longa",
                "contatos",
                format!("{line}: a coluna `{short}…` passa de {MAX_COLUMN_NAME_CHARS} caracteres."),
            ));
        }
        let long_cell = self.number.chars().count() > MAX_CELL_CHARS
            || self
                .data
                .values()
                .any(|v| v.chars().count() > MAX_CELL_CHARS);
        if long_cell {
            return Err(ValidationError::new(
                "celula_longa",
                "contatos",
                format!("{line}: um valor passa de {MAX_CELL_CHARS} caracteres."),
            ));
        }
        if self
            .name
            .as_ref()
            .is_some_and(|n| n.chars().count() > MAX_NAME_CHARS)
        {
            return Err(ValidationError::new(
                "nome_longo",
                "contatos",
                format!("{line}: o nome passa de {MAX_NAME_CHARS} caracteres."),
            ));
        }
        Ok(())
    }

    /// The columns a template variable may name: `nome`, `numero` and every key of `dados`.
    pub fn columns(&self) -> BTreeMap<String, String> {
        let mut row = self.data.clone();
        if let Some(n) = &self.name {
            row.insert("nome".into(), n.clone());
        }
        row.insert("numero".into(), self.number.clone());
        row
    }
}

/// Which CSV columns hold the number and the name (`POST /api/campaigns/import`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
pub struct CsvMapping {
    /// The number's column (default the first of `numero`, `telefone`, `phone`, `celular`).
    #[serde(rename = "coluna_numero", default)]
    pub number: Option<String>,
    /// The name's column (default `nome` when present).
    #[serde(rename = "coluna_nome", default)]
    pub name: Option<String>,
}

/// A CSV file's text encoding as [`decode_csv`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CsvEncoding {
    /// UTF-8, with or without a byte-order mark.
    Utf8,
    /// Not UTF-8: read as Windows-1252 (what Excel in Portuguese saves as "CSV (separado por
    /// vírgulas)"; a superset of Latin-1's printable characters).
    Windows1252,
}

/// The text of a CSV file: UTF-8 when it is valid UTF-8 (a BOM dropped), else Windows-1252
/// (issue 47: Excel's default in Portuguese), decoded with `encoding_rs`. Every byte decodes
/// in Windows-1252, so this never fails.
pub fn decode_csv(bytes: &[u8]) -> (std::borrow::Cow<'_, str>, CsvEncoding) {
    let bytes = bytes.strip_prefix("\u{FEFF}".as_bytes()).unwrap_or(bytes);
    match std::str::from_utf8(bytes) {
        Ok(text) => (std::borrow::Cow::Borrowed(text), CsvEncoding::Utf8),
        Err(_) => {
            let (text, _) = encoding_rs::WINDOWS_1252.decode_without_bom_handling(bytes);
            (text, CsvEncoding::Windows1252)
        }
    }
}

/// Reads contacts from a CSV with a header row (`;` or `,`, detected from the header; UTF-8
/// with or without a BOM, else Windows-1252, [`decode_csv`]): the number and name columns by
/// `mapping`, every other column into `dados` (header names trimmed and lower-cased). Errors:
/// no header, a mapped column missing, more than [`MAX_CONTACTS`] rows, a row that does not
/// parse (with its line).
pub fn contacts_from_csv(
    bytes: &[u8],
    mapping: &CsvMapping,
) -> Result<Vec<Contact>, ValidationError> {
    contacts_and_blank_rows(bytes, mapping).map(|(contacts, _)| contacts)
}

/// [`contacts_from_csv`], and how many blank rows (every cell empty) it skipped (issue 47
/// item 10: the campaign says what its import dropped).
pub fn contacts_and_blank_rows(
    bytes: &[u8],
    mapping: &CsvMapping,
) -> Result<(Vec<Contact>, usize), ValidationError> {
    let (text, _) = decode_csv(bytes);
    let bytes = text.as_bytes();
    let first_line = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    let delimiter = if first_line.iter().filter(|b| **b == b';').count()
        >= first_line.iter().filter(|b| **b == b',').count()
    {
        b';'
    } else {
        b','
    };
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(bytes);
    let headers: Vec<String> = reader
        .headers()
        .map_err(|_| {
            ValidationError::new(
                "csv_invalido",
                "arquivo",
                "O CSV não tem uma linha de cabeçalho legível.",
            )
        })?
        .iter()
        .map(|h| h.trim().to_lowercase())
        .collect();
    if headers.iter().all(String::is_empty) {
        return Err(ValidationError::new(
            "csv_invalido",
            "arquivo",
            "O CSV não tem uma linha de cabeçalho.",
        ));
    }
    if headers.len() > MAX_COLUMNS {
        return Err(ValidationError::new(
            "colunas_demais",
            "arquivo",
            format!(
                "O CSV tem {} colunas; o máximo é {MAX_COLUMNS}.",
                headers.len()
            ),
        ));
    }
    if headers
        .iter()
        .any(|h| h.chars().count() > MAX_COLUMN_NAME_CHARS)
    {
        return Err(ValidationError::new(
            "coluna_longa",
            "arquivo",
            format!("Um nome de coluna do CSV passa de {MAX_COLUMN_NAME_CHARS} caracteres."),
        ));
    }
    let find = |name: &str| {
        headers
            .iter()
            .position(|h| h == &name.trim().to_lowercase())
    };
    let number_col = match &mapping.number {
        Some(c) => find(c).ok_or_else(|| {
            ValidationError::new("coluna_ausente", "coluna_numero", format!("A coluna `{c}` não está no cabeçalho do CSV."))
        })?,
        None => ["numero", "telefone", "phone", "celular"]
            .iter()
            .find_map(|c| find(c))
            .ok_or_else(|| {
                ValidationError::new("coluna_ausente", "coluna_numero", "Informe `coluna_numero`: o CSV não tem coluna numero, telefone, phone ou celular.")
            })?,
    };
    let name_col = match &mapping.name {
        Some(c) => Some(find(c).ok_or_else(|| {
            ValidationError::new(
                "coluna_ausente",
                "coluna_nome",
                format!("A coluna `{c}` não está no cabeçalho do CSV."),
            )
        })?),
        None => find("nome"),
    };
    let mut out = Vec::new();
    let mut cells = 0usize;
    let mut blank = 0usize;
    for (i, record) in reader.records().enumerate() {
        let record = record.map_err(|_| {
            ValidationError::new(
                "csv_invalido",
                "arquivo",
                format!("A linha {} do CSV não pôde ser lida.", i + 2),
            )
        })?;
        if record.iter().all(|f| f.is_empty()) {
            blank += 1;
            continue;
        }
        if out.len() == MAX_CONTACTS {
            return Err(ValidationError::new(
                "contatos_demais",
                "arquivo",
                format!("Envie até {MAX_CONTACTS} contatos por importação."),
            ));
        }
        if record.len() > MAX_COLUMNS {
            return Err(ValidationError::new(
                "colunas_demais",
                "arquivo",
                format!(
                    "A linha {} do CSV tem mais de {MAX_COLUMNS} colunas.",
                    i + 2
                ),
            ));
        }
        cells += record.len();
        if cells > MAX_CELLS {
            return Err(ValidationError::new(
                "celulas_demais",
                "arquivo",
                format!("O CSV passa de {MAX_CELLS} células: divida-o em importações menores."),
            ));
        }
        let mut data = BTreeMap::new();
        for (j, value) in record.iter().enumerate() {
            if j == number_col || Some(j) == name_col {
                continue;
            }
            if let Some(h) = headers.get(j).filter(|h| !h.is_empty()) {
                data.insert(h.clone(), value.to_string());
            }
        }
        let contact = Contact {
            number: record.get(number_col).unwrap_or_default().to_string(),
            name: name_col
                .and_then(|c| record.get(c))
                .filter(|n| !n.is_empty())
                .map(str::to_string),
            data,
        };
        contact.check_size(&format!("Linha {} do CSV", i + 2))?;
        out.push(contact);
    }
    Ok((out, blank))
}

/// Checks that each of a panel campaign's `variaveis` names a column its contacts have
/// (`columns`, lower-cased: `nome`, `numero` and every data column; the name and number
/// columns of a CSV are read as `nome` and `numero`). A variable naming no column would make
/// every contact invalid (issue 47, "the name-column trap").
///
/// Errors: 422 `coluna_desconhecida` (field `variaveis`) naming the unknown columns and
/// listing the known ones.
pub fn check_variables(
    variables: &[String],
    columns: &BTreeSet<String>,
) -> Result<(), ValidationError> {
    let unknown: Vec<&str> = variables
        .iter()
        .map(|v| v.trim())
        .filter(|v| !columns.contains(&v.to_lowercase()))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let known: Vec<&str> = columns.iter().map(String::as_str).collect();
    Err(ValidationError::new(
        "coluna_desconhecida",
        "variaveis",
        format!(
            "As variáveis pedem colunas que os contatos não têm: {}. Colunas disponíveis: {} (a coluna do nome é `nome`, a do número é `numero`).",
            unknown.join(", "),
            known.join(", ")
        ),
    ))
}

/// The var_map of a panel campaign: `variaveis[i]` is the column that fills `{{i+1}}`;
/// `botao_variavel` is the column that fills the URL button's suffix when it names one of
/// `columns`, else the suffix itself (the same for every contact).
pub fn var_map(variables: &[String], button: Option<&str>, columns: &BTreeSet<String>) -> VarMap {
    let mut map = VarMap::new();
    for (i, column) in variables.iter().enumerate() {
        map.insert(
            (i + 1).to_string(),
            VarBinding {
                field: column.trim().to_lowercase(),
                default: None,
            },
        );
    }
    if let Some(b) = button.map(str::trim).filter(|b| !b.is_empty()) {
        let column = b.to_lowercase();
        map.insert(
            "btn:0".into(),
            if columns.contains(&column) {
                VarBinding {
                    field: column,
                    default: None,
                }
            } else {
                // A literal suffix: bound to no column, so the default always applies.
                VarBinding {
                    field: "__botao".into(),
                    default: Some(b.to_string()),
                }
            },
        );
    }
    map
}

/// A panel campaign's own request rules: 1 to [`MAX_CONTACTS`] contacts, each within the size
/// caps and all within [`MAX_CELLS`]; `volume` at least 1; `imagem_url` an http(s) URL of up
/// to 2,048 characters.
///
/// Errors: `contatos_invalidos`, the size caps' codes, `celulas_demais`, `volume_invalido`,
/// `imagem_url_invalida`.
pub fn check_request(
    contacts: &[Contact],
    volume: Option<i64>,
    image_url: Option<&str>,
) -> Result<(), ValidationError> {
    if contacts.is_empty() || contacts.len() > MAX_CONTACTS {
        return Err(ValidationError::new(
            "contatos_invalidos",
            "contatos",
            format!("Envie de 1 a {} contatos por campanha.", MAX_CONTACTS),
        ));
    }
    let mut cells = 0usize;
    for (i, c) in contacts.iter().enumerate() {
        c.check_size(&format!("contatos[{i}]"))?;
        cells += c.data.len() + 2;
    }
    if cells > MAX_CELLS {
        return Err(ValidationError::new(
            "celulas_demais",
            "contatos",
            format!(
                "Os contatos passam de {} células: divida-os em campanhas menores.",
                MAX_CELLS
            ),
        ));
    }
    if let Some(v) = volume {
        if v < 1 {
            return Err(ValidationError::new(
                "volume_invalido",
                "volume",
                "`volume` deve ser ao menos 1.",
            ));
        }
    }
    if let Some(url) = image_url {
        if !(url.starts_with("https://") || url.starts_with("http://")) || url.len() > 2048 {
            return Err(ValidationError::new(
                "imagem_url_invalida",
                "imagem_url",
                "`imagem_url` deve ser uma URL http(s) de até 2048 caracteres.",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_variable_must_name_a_column_of_the_contacts() {
        let columns: BTreeSet<String> = ["nome", "numero", "cidade"].map(String::from).into();
        assert!(check_variables(&["Nome".into(), " cidade ".into()], &columns).is_ok());
        let e = check_variables(&["nome completo".into(), "cidade".into()], &columns).unwrap_err();
        assert_eq!(e.code, "coluna_desconhecida");
        assert_eq!(e.field, "variaveis");
        assert!(
            e.message
                .contains("não têm: nome completo. Colunas disponíveis: cidade, nome, numero"),
            "{}",
            e.message
        );
    }

    use super::*;

    #[test]
    fn statuses_and_approval() {
        assert_eq!(
            PanelStatus::of(CampaignState::Draft, Some(Stage::PendingApproval), false),
            PanelStatus::AguardandoAprovacao
        );
        assert_eq!(
            PanelStatus::of(CampaignState::Draft, Some(Stage::Approved), true),
            PanelStatus::Retida
        );
        assert_eq!(
            PanelStatus::of(CampaignState::Running, Some(Stage::Approved), false).as_str(),
            "em_andamento"
        );
        assert_eq!(
            may_approve(Role::Operador, 1, Some(1)),
            Err(ApprovalRefusal::OwnCampaign)
        );
        assert_eq!(may_approve(Role::Operador, 2, Some(1)), Ok(()));
        assert_eq!(may_approve(Role::Admin, 1, Some(1)), Ok(()));
        assert_eq!(
            may_approve(Role::Client, 2, Some(1)),
            Err(ApprovalRefusal::Role)
        );
        for s in [
            Stage::Hygiene,
            Stage::HygieneFailed,
            Stage::PendingApproval,
            Stage::Approved,
        ] {
            assert_eq!(Stage::parse(s.as_str()), Some(s));
        }
    }

    #[test]
    fn csv_with_mapping() {
        let csv =
            "\u{FEFF}Telefone;Nome;Cidade\n+55 11 99999-0001;Ana;Recife\n\n5511999990002;;Natal\n";
        let rows = contacts_from_csv(csv.as_bytes(), &CsvMapping::default()).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].number, "+55 11 99999-0001");
        assert_eq!(rows[0].name.as_deref(), Some("Ana"));
        assert_eq!(
            rows[0].data.get("cidade").map(String::as_str),
            Some("Recife")
        );
        assert_eq!(rows[1].name, None);
        // An empty line is no row at all; Excel's blank row (`;;`) is counted as skipped.
        let (rows, blank) = contacts_and_blank_rows(
            format!("{csv};;\n ; ; \n5511999990004;Caio;Recife\n").as_bytes(),
            &CsvMapping::default(),
        )
        .unwrap();
        assert_eq!((rows.len(), blank), (3, 2));
        let comma = "cel,first\n5511999990003,Bia\n";
        let mapping = CsvMapping {
            number: Some("CEL".into()),
            name: Some("first".into()),
        };
        assert_eq!(
            contacts_from_csv(comma.as_bytes(), &mapping).unwrap()[0]
                .name
                .as_deref(),
            Some("Bia")
        );
        let err = contacts_from_csv(b"a;b\n1;2\n", &CsvMapping::default()).unwrap_err();
        assert_eq!(err.code, "coluna_ausente");
    }

    #[test]
    fn var_maps() {
        let cols: BTreeSet<String> = ["nome".to_string(), "cupom".to_string()].into();
        let m = var_map(&["Nome".into()], Some("cupom"), &cols);
        assert_eq!(m["1"].field, "nome");
        assert_eq!(m["btn:0"].field, "cupom");
        let m = var_map(&[], Some("PROMO10"), &cols);
        assert_eq!(m["btn:0"].default.as_deref(), Some("PROMO10"));
    }

    #[test]
    fn excel_csv_in_windows_1252_is_read() {
        // "Nome completo;Número\nJoão Ávila;5511988887777" as Excel in Portuguese saves it.
        let mut bytes = b"Nome completo;N\xfamero\nJo\xe3o \xc1vila;5511988887777\n".to_vec();
        let (text, enc) = decode_csv(&bytes);
        assert_eq!(enc, CsvEncoding::Windows1252);
        assert!(text.starts_with("Nome completo;Número"));
        let mapping = CsvMapping {
            number: Some("número".into()),
            name: Some("nome completo".into()),
        };
        let rows = contacts_from_csv(&bytes, &mapping).unwrap();
        assert_eq!(rows[0].name.as_deref(), Some("João Ávila"));
        assert_eq!(rows[0].number, "5511988887777");
        // UTF-8 with a BOM stays UTF-8.
        bytes = "\u{FEFF}nome;numero\nJoão;5511988887777\n"
            .as_bytes()
            .to_vec();
        let (text, enc) = decode_csv(&bytes);
        assert_eq!((enc, text.starts_with("nome")), (CsvEncoding::Utf8, true));
        assert_eq!(
            contacts_from_csv(&bytes, &CsvMapping::default()).unwrap()[0]
                .name
                .as_deref(),
            Some("João")
        );
    }

    #[test]
    fn csv_sizes_are_capped() {
        let code = |csv: String| {
            contacts_from_csv(csv.as_bytes(), &CsvMapping::default())
                .err()
                .map(|e| e.code)
        };
        let cols = |n: usize| {
            std::iter::once("telefone".to_string())
                .chain((1..n).map(|i| format!("c{i}")))
                .collect::<Vec<_>>()
                .join(";")
        };
        assert_eq!(code(format!("{}\n5511999990001", cols(MAX_COLUMNS))), None);
        assert_eq!(
            code(format!("{}\n5511999990001", cols(MAX_COLUMNS + 1))),
            Some("colunas_demais")
        );
        // A row wider than its header counts too (the CSV reader is flexible).
        let wide_row = format!("telefone\n5511999990001{}", ";x".repeat(MAX_COLUMNS));
        assert_eq!(code(wide_row), Some("colunas_demais"));
        let long_header = format!("telefone;{}\n5511999990001;x", "h".repeat(65));
        assert_eq!(code(long_header), Some("coluna_longa"));
        let cell = |n: usize| format!("telefone;obs\n5511999990001;{}", "o".repeat(n));
        assert_eq!(code(cell(MAX_CELL_CHARS)), None);
        assert_eq!(code(cell(MAX_CELL_CHARS + 1)), Some("celula_longa"));
        // More than MAX_CELLS cells in all, though each row is small.
        let mut many = cols(21);
        for r in 0..(MAX_CELLS / 21 + 1) {
            many.push_str(&format!("\n55119{r:08}"));
            many.push_str(&";x".repeat(20));
        }
        assert_eq!(code(many), Some("celulas_demais"));
    }
}
