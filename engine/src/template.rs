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
