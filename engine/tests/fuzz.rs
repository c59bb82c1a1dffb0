//! Property-based fuzzing of the engine's parsers (issue 53): what a client, a CSV file or a
//! template author sends, as arbitrary text and bytes. No input panics, and the well-formed
//! ones read back what was written. `cargo test` runs each property with proptest's default
//! case count (256); a longer run: `PROPTEST_CASES=20000 cargo test -p engine --test fuzz`.
//! The provider webhook parser's corpus (real payloads, mutated) is fuzzed beside its reader
//! (`engine/src/provider_webhook/read.rs`), the SSRF guard's URL parsing in `actors`, the
//! Markdown sanitizer in `http` and the Graph error parser in `provider`.

use engine::library::{render, VarBinding, VarMap};
use engine::net::{OutboundPolicy, UrlRefusal};
use engine::panel_campaign::{contacts_from_csv, decode_csv, CsvEncoding, CsvMapping};
use engine::phone::Phone;
use engine::template::{body_problems, parameter_count, positional_variables, Given, Layout};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Text with the characters the parsers treat specially, over-represented.
fn tricky_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("{{".to_string()),
            Just("}}".to_string()),
            Just(";".to_string()),
            Just(",".to_string()),
            Just("\"".to_string()),
            Just("\n".to_string()),
            Just("\r\n".to_string()),
            Just("\u{FEFF}".to_string()),
            "[0-9]{1,12}",
            any::<char>().prop_map(String::from),
            "[a-zA-ZçãéÇÃÉ ]{0,8}",
        ],
        0..64,
    )
    .prop_map(|parts| parts.concat())
}

/// A name as Excel users type them: Portuguese letters, spaces, apostrophes.
fn name() -> impl Strategy<Value = String> {
    "[A-Za-zÀ-ÿçÇãõâêôáéíóú][A-Za-zÀ-ÿçÇãõâêôáéíóú' ]{0,20}[A-Za-zà-ÿ]"
}

proptest! {
    /// Any bytes read as a CSV of contacts: contacts or a clear error, never a panic.
    #[test]
    fn any_bytes_are_contacts_or_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..2048),
                                          number in proptest::option::of("[a-z]{1,8}"),
                                          name in proptest::option::of("[a-z]{1,8}")) {
        let mapping = CsvMapping { number, name };
        let _ = contacts_from_csv(&bytes, &mapping);
        let _ = decode_csv(&bytes);
    }

    /// Text mixing separators, quotes, BOMs and line ends: never a panic.
    #[test]
    fn tricky_text_is_contacts_or_an_error(text in tricky_text()) {
        let mapping = CsvMapping { number: None, name: None };
        let _ = contacts_from_csv(text.as_bytes(), &mapping);
    }

    /// A well-formed file, saved by Excel in Portuguese (Windows-1252, `;`) or as UTF-8 with
    /// a BOM, reads back every row: number, name and the other column.
    #[test]
    fn excel_files_read_back(rows in proptest::collection::vec(("[1-9][0-9]{11,12}", name(), "[a-z0-9]{0,10}"), 1..40),
                             windows in any::<bool>()) {
        let mut text = String::from("Telefone;Nome;Cidade\r\n");
        for (phone, name, city) in &rows {
            text.push_str(&format!("{phone};{name};{city}\r\n"));
        }
        let bytes = if windows {
            let (b, _, unmappable) = encoding_rs::WINDOWS_1252.encode(&text);
            prop_assume!(!unmappable);
            b.into_owned()
        } else {
            [b"\xEF\xBB\xBF".as_slice(), text.as_bytes()].concat()
        };
        let (_, encoding) = decode_csv(&bytes);
        let ascii = text.is_ascii();
        prop_assert_eq!(encoding, if windows && !ascii { CsvEncoding::Windows1252 } else { CsvEncoding::Utf8 });
        let mapping = CsvMapping { number: Some("Telefone".into()), name: Some("Nome".into()) };
        let contacts = contacts_from_csv(&bytes, &mapping).unwrap();
        prop_assert_eq!(contacts.len(), rows.len());
        for (c, (phone, name, city)) in contacts.iter().zip(&rows) {
            prop_assert_eq!(&c.number, phone);
            prop_assert_eq!(c.name.as_deref(), Some(name.trim()));
            prop_assert_eq!(c.data.get("cidade").map(String::as_str).unwrap_or(""), city.as_str());
        }
    }

    /// Any text is a phone number or `invalid_phone`; a number is 10 to 15 digits.
    #[test]
    fn any_text_is_a_phone_or_refused(text in tricky_text()) {
        if let Ok(p) = Phone::parse("to", &text) {
            prop_assert!(p.as_str().chars().all(|c| c.is_ascii_digit()));
            prop_assert!((10..=15).contains(&p.as_str().len()));
        }
    }

    /// Formatted numbers (`+55 (11) 99999-8888`, `…@c.us`) keep their digits.
    #[test]
    fn formatted_numbers_keep_their_digits(digits in "[1-9][0-9]{9,14}", style in 0..4u8) {
        let text = match style {
            0 => format!("+{digits}"),
            1 => format!("{}-{}", &digits[..4], &digits[4..]),
            2 => format!("{digits}@c.us"),
            _ => format!(" ({}) {} ", &digits[..2], &digits[2..]),
        };
        let phone = Phone::parse("to", &text).unwrap();
        prop_assert_eq!(phone.as_str(), digits.as_str());
    }

    /// Template bodies: the variables found are the ones written, and the checks never panic.
    #[test]
    fn template_variables_are_the_ones_written(parts in proptest::collection::vec(("[^{}]{0,12}", 1u32..40), 0..12),
                                               noise in tricky_text()) {
        let mut body = String::new();
        for (text, n) in &parts {
            body.push_str(text);
            body.push_str(&format!("{{{{{n}}}}}"));
        }
        let written: Vec<u32> = parts.iter().map(|(_, n)| *n).collect();
        prop_assert_eq!(positional_variables(&body), written.clone());
        let mut distinct = written;
        distinct.sort_unstable();
        distinct.dedup();
        prop_assert_eq!(parameter_count(&body), distinct.len());
        let _ = body_problems(&body);
        let _ = body_problems(&noise);
        let _ = parameter_count(&noise);
    }

    /// Rendering any body with any bindings and row: parameters or the missing columns.
    #[test]
    fn rendering_never_panics(body in tricky_text(),
                              bindings in proptest::collection::btree_map("[0-9]{1,3}|header:1|btn:0", ("[a-z]{1,6}", proptest::option::of("[a-z]{0,6}")), 0..8),
                              row in proptest::collection::btree_map("[a-z]{1,6}", "[a-zA-Z0-9 ]{0,10}", 0..8)) {
        let var_map: VarMap = bindings
            .into_iter()
            .map(|(k, (field, default))| (k, VarBinding { field, default }))
            .collect();
        let row: BTreeMap<String, String> = row;
        if let Ok(given) = render(&body, &var_map, &row) {
            prop_assert_eq!(given.body.len(), parameter_count(&body));
        }
    }

    /// A template's components from the provider, as any JSON: a layout, and filling it with
    /// any parameters never panics.
    #[test]
    fn any_components_make_a_layout(json in json_value(), body in proptest::collection::vec("[a-z]{0,5}", 0..6),
                                    header in proptest::option::of("[a-z]{0,5}")) {
        let layout = Layout::from_components(&json);
        let given = Given { body, header_text: header, ..Given::default() };
        let _ = layout.fill(&given);
        let _ = Layout::unknown(&given);
    }

    /// The SSRF guard's host check: any text is checked without a panic, and every private,
    /// loopback or link-local address is refused in each way a host can be written.
    #[test]
    fn private_hosts_are_refused(text in tricky_text(), ip in private_ip()) {
        let policy = OutboundPolicy::default();
        let _ = policy.check_host(&text);
        let hosts = match ip {
            IpAddr::V4(v4) => vec![v4.to_string(), format!("[::ffff:{v4}]"), format!("[{}]", v4.to_ipv6_mapped())],
            IpAddr::V6(v6) => vec![format!("[{v6}]")],
        };
        for host in hosts {
            prop_assert!(matches!(policy.check_host(&host), Err(UrlRefusal::PrivateAddress(_))), "{} allowed", host);
        }
    }
}

/// Any JSON value, a few levels deep, with the provider's component keys over-represented.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        "[A-Z_]{0,8}|\\{\\{[0-9]\\}\\}|[a-z ]{0,8}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("type".to_string()),
                    Just("format".to_string()),
                    Just("text".to_string()),
                    Just("buttons".to_string()),
                    Just("example".to_string()),
                    Just("url".to_string()),
                    "[a-z_]{1,8}"
                ],
                inner,
                0..6
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A private, loopback, link-local or unique-local address.
fn private_ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<[u8; 3]>().prop_map(|b| IpAddr::V4(Ipv4Addr::new(10, b[0], b[1], b[2]))),
        any::<[u8; 3]>().prop_map(|b| IpAddr::V4(Ipv4Addr::new(127, b[0], b[1], b[2]))),
        any::<[u8; 2]>().prop_map(|b| IpAddr::V4(Ipv4Addr::new(192, 168, b[0], b[1]))),
        any::<[u8; 2]>().prop_map(|b| IpAddr::V4(Ipv4Addr::new(169, 254, b[0], b[1]))),
        (16u8..32, any::<[u8; 2]>())
            .prop_map(|(x, b)| IpAddr::V4(Ipv4Addr::new(172, x, b[0], b[1]))),
        any::<[u16; 7]>().prop_map(|s| IpAddr::V6(Ipv6Addr::new(
            0xfd00 | (s[0] & 0xff),
            s[1],
            s[2],
            s[3],
            s[4],
            s[5],
            s[6],
            1
        ))),
        any::<[u16; 4]>()
            .prop_map(|s| IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, s[0], s[1], s[2], s[3]))),
        Just(IpAddr::V6(Ipv6Addr::LOCALHOST)),
    ]
}
