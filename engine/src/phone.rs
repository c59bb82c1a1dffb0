//! Phone numbers as the provider addresses them: digits with the country code, no plus sign.

use crate::ValidationError;
use std::fmt;

/// A WhatsApp user's phone number in international form: country code followed by the national
/// number, digits only (E.164 without the `+`), 10 to 15 digits.
///
/// Parsing accepts the formatting people type (`+55 (11) 99999-8888`, spaces, dots, hyphens) and
/// the chat-id forms `5511999998888@c.us` / `@s.whatsapp.net`, and rejects anything else.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Phone(String);

/// Shortest accepted number (country code + national number), in digits.
pub const MIN_DIGITS: usize = 10;
/// Longest number E.164 allows, in digits.
pub const MAX_DIGITS: usize = 15;

impl Phone {
    /// Parses a destination typed by an integrator for `field`.
    ///
    /// Errors: `invalid_phone` when the text has letters or other symbols, or when the digit
    /// count is outside 10..=15.
    pub fn parse(field: &'static str, input: &str) -> Result<Self, ValidationError> {
        let trimmed = input.trim();
        let base = trimmed
            .strip_suffix("@c.us")
            .or_else(|| trimmed.strip_suffix("@s.whatsapp.net"))
            .unwrap_or(trimmed);
        let base = base.strip_prefix('+').unwrap_or(base);
        let mut digits = String::with_capacity(base.len());
        for c in base.chars() {
            match c {
                '0'..='9' => digits.push(c),
                ' ' | '-' | '.' | '(' | ')' => {}
                _ => {
                    return Err(ValidationError::new(
                        "invalid_phone",
                        field,
                        format!(
                            "Número inválido em `{field}`: use só dígitos com o código do país, por exemplo 5511999998888."
                        ),
                    ))
                }
            }
        }
        if digits.len() < MIN_DIGITS || digits.len() > MAX_DIGITS {
            return Err(ValidationError::new(
                "invalid_phone",
                field,
                format!(
                    "Número inválido em `{field}`: são esperados de {MIN_DIGITS} a {MAX_DIGITS} dígitos com o código do país (recebidos {}).",
                    digits.len()
                ),
            ));
        }
        Ok(Self(digits))
    }

    /// Keeps only the digits of a provider-formatted number (`"+1 631-555-5555"` →
    /// `"16315555555"`); the provider's own display numbers are trusted as they come.
    pub fn from_provider_display(display: &str) -> Self {
        Self(display.chars().filter(char::is_ascii_digit).collect())
    }

    /// The digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Phone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_forms_people_type() {
        for (input, want) in [
            ("5511999998888", "5511999998888"),
            ("+55 (11) 99999-8888", "5511999998888"),
            ("5511999998888@c.us", "5511999998888"),
            ("16505551234@s.whatsapp.net", "16505551234"),
            ("  +1 650.555.1234 ", "16505551234"),
        ] {
            assert_eq!(Phone::parse("to", input).unwrap().as_str(), want, "{input}");
        }
    }

    #[test]
    fn rejects_letters_and_wrong_lengths() {
        for input in [
            "",
            "abc",
            "55119999",
            "5511999998888123456",
            "55 11 9999x8888",
            "+",
        ] {
            let err = Phone::parse("to", input).unwrap_err();
            assert_eq!(err.code, "invalid_phone", "{input}");
            assert_eq!(err.field, "to");
        }
    }

    #[test]
    fn provider_display_numbers_keep_their_digits() {
        assert_eq!(
            Phone::from_provider_display("+1 631-555-5555").as_str(),
            "16315555555"
        );
    }
}
