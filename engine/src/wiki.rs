//! Wiki pages: slugs and excerpts (spec "Wiki page").

use crate::library::fold;

/// A URL slug from a title: accents folded, lowercase ASCII, other characters as single
/// hyphens ("Promoção de Natal" → `promocao-de-natal`); `pagina` when nothing is left.
pub fn slugify(title: &str) -> String {
    let mut out = String::new();
    for c in title.chars().flat_map(fold).flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let s: String = out.trim_end_matches('-').chars().take(80).collect();
    let s = s.trim_end_matches('-').to_string();
    if s.is_empty() {
        "pagina".into()
    } else {
        s
    }
}

/// The first unused slug among `base`, `base-2`, `base-3`… given the slugs taken.
pub fn unique_slug(base: &str, taken: &[String]) -> String {
    if !taken.iter().any(|t| t == base) {
        return base.to_string();
    }
    (2..)
        .map(|n| format!("{base}-{n}"))
        .find(|c| !taken.contains(c))
        .expect("an unused suffix exists")
}

/// A plain-text excerpt of Markdown content: markup characters dropped, whitespace folded,
/// at most 160 characters (cut at a word, with `…`).
pub fn excerpt(markdown: &str) -> String {
    let mut text = String::new();
    for line in markdown.lines() {
        let line = line
            .trim()
            .trim_start_matches(['#', '>', '-', '*', '+'])
            .trim();
        if line.starts_with("```") {
            continue;
        }
        let cleaned: String = line
            .chars()
            .filter(|c| !matches!(c, '*' | '_' | '`' | '[' | ']'))
            .collect();
        if !cleaned.is_empty() {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(&cleaned);
        }
    }
    if text.chars().count() <= 160 {
        return text;
    }
    let cut: String = text.chars().take(160).collect();
    let at_word = cut
        .rsplit_once(' ')
        .map(|(a, _)| a.to_string())
        .unwrap_or(cut);
    format!("{at_word}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        assert_eq!(slugify("Promoção de Natal"), "promocao-de-natal");
        assert_eq!(slugify("  Ação: 50% OFF!! "), "acao-50-off");
        assert_eq!(slugify("???"), "pagina");
        let taken = vec![
            "promocao-de-natal".to_string(),
            "promocao-de-natal-2".to_string(),
        ];
        assert_eq!(
            unique_slug("promocao-de-natal", &taken),
            "promocao-de-natal-3"
        );
        assert_eq!(unique_slug("outra", &taken), "outra");
    }

    #[test]
    fn excerpts() {
        assert_eq!(
            excerpt("# Título\n\nTexto **forte** e `código`."),
            "Título Texto forte e código."
        );
        let long = "palavra ".repeat(40);
        let e = excerpt(&long);
        assert!(e.ends_with('…') && e.chars().count() <= 161);
    }
}
