//! Template text rules shared by sends and the template library.

/// The positional variables `{{n}}` found in `text`, in order of appearance, as numbers.
/// Malformed placeholders (`{{x}}`, `{{ }}`) are not variables and are skipped.
pub fn positional_variables(text: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                if let Ok(n) = after[..end].trim().parse::<u32>() {
                    out.push(n);
                }
                rest = &after[end + 2..];
            }
            None => break,
        }
    }
    out
}

/// How many distinct positional variables `text` has: the count of body parameters a send must
/// give (the provider answers 132000 otherwise, PROVIDER.md §2.4).
pub fn parameter_count(text: &str) -> usize {
    let mut vars = positional_variables(text);
    vars.sort_unstable();
    vars.dedup();
    vars.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_positional_variables_in_order() {
        assert_eq!(
            positional_variables("Olá {{1}}, seu código é {{2}}."),
            vec![1, 2]
        );
        assert_eq!(positional_variables("{{2}} e {{1}} e {{2}}"), vec![2, 1, 2]);
        assert_eq!(positional_variables("sem variáveis"), Vec::<u32>::new());
        assert_eq!(positional_variables("{{nome}} {{ 3 }} {{4"), vec![3]);
        assert_eq!(parameter_count("{{2}} e {{1}} e {{2}}"), 2);
    }
}

/// A problem of a template body, by the provider's rules (PROVIDER.md §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyProblem {
    /// No text.
    Empty,
    /// More than 1024 characters.
    TooLong,
    /// Variables are not `{{1}}`, `{{2}}`… in order without gaps.
    NotSequential,
    /// The body starts or ends with a variable.
    VariableAtEdge,
    /// Two variables stand next to each other.
    AdjacentVariables,
}

impl BodyProblem {
    /// Stable code.
    pub fn code(self) -> &'static str {
        match self {
            BodyProblem::Empty => "body_empty",
            BodyProblem::TooLong => "body_too_long",
            BodyProblem::NotSequential => "variables_not_sequential",
            BodyProblem::VariableAtEdge => "variable_at_edge",
            BodyProblem::AdjacentVariables => "adjacent_variables",
        }
    }

    /// The provider's wording (English), as its error details say it.
    pub fn provider_text(self) -> &'static str {
        match self {
            BodyProblem::Empty => "BODY text is required",
            BodyProblem::TooLong => "BODY text is longer than 1024 characters",
            BodyProblem::NotSequential => {
                "Variables must be numbered {{1}}, {{2}}… in order, without gaps"
            }
            BodyProblem::VariableAtEdge => {
                "Variables can't be at the start or end of the template body"
            }
            BodyProblem::AdjacentVariables => "A variable can't be next to another variable",
        }
    }

    /// pt-BR text for operators.
    pub fn label(self) -> &'static str {
        match self {
            BodyProblem::Empty => "O corpo do template está vazio.",
            BodyProblem::TooLong => "O corpo passa de 1024 caracteres.",
            BodyProblem::NotSequential => {
                "As variáveis devem ser {{1}}, {{2}}… em ordem, sem pular números."
            }
            BodyProblem::VariableAtEdge => {
                "O corpo não pode começar nem terminar com uma variável."
            }
            BodyProblem::AdjacentVariables => "Uma variável não pode ficar colada em outra.",
        }
    }
}

/// Every problem of a template body by the provider's rules.
pub fn body_problems(text: &str) -> Vec<BodyProblem> {
    let mut out = Vec::new();
    if text.trim().is_empty() {
        out.push(BodyProblem::Empty);
        return out;
    }
    if text.chars().count() > 1024 {
        out.push(BodyProblem::TooLong);
    }
    let vars = positional_variables(text);
    let mut sorted = vars.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.iter().enumerate().any(|(i, v)| *v as usize != i + 1) {
        out.push(BodyProblem::NotSequential);
    }
    let trimmed = text.trim();
    if !vars.is_empty() && (trimmed.starts_with("{{") || trimmed.ends_with("}}")) {
        out.push(BodyProblem::VariableAtEdge);
    }
    if has_adjacent_variables(text) {
        out.push(BodyProblem::AdjacentVariables);
    }
    out
}

/// Whether two variables stand next to each other with only spaces between them.
fn has_adjacent_variables(text: &str) -> bool {
    let mut last_end: Option<usize> = None;
    let mut offset = 0;
    while let Some(start) = text[offset..].find("{{") {
        let abs_start = offset + start;
        let Some(end) = text[abs_start..].find("}}") else {
            break;
        };
        if let Some(prev) = last_end {
            if text[prev..abs_start].trim().is_empty() {
                return true;
            }
        }
        last_end = Some(abs_start + end + 2);
        offset = abs_start + end + 2;
    }
    false
}

#[cfg(test)]
mod body_tests {
    use super::*;

    #[test]
    fn body_rules() {
        assert!(body_problems("Olá {{1}}, pedido {{2}} saiu.").is_empty());
        assert_eq!(body_problems(""), vec![BodyProblem::Empty]);
        assert_eq!(
            body_problems("Olá {{1}} e {{3}}."),
            vec![BodyProblem::NotSequential]
        );
        assert_eq!(
            body_problems("{{1}}, oi."),
            vec![BodyProblem::VariableAtEdge]
        );
        assert_eq!(
            body_problems("Oi {{1}} {{2}} tudo?"),
            vec![BodyProblem::AdjacentVariables]
        );
        assert!(body_problems(&"a".repeat(1025)).contains(&BodyProblem::TooLong));
    }
}
