//! The option a decision names, as the approvals API accepts it.
//!
//! Why both forms: the CLI counts from 1 and people read labels, so the API takes either a label or
//! the button's 0-based index (what the page sends), and says which when neither fits.
//!
//! Invariants: a label matches without regard to case or surrounding spaces; an index counts from 0;
//! a choice that names no option is answered with every option's index and label, never guessed.

use serde_json::Value;

/// The option a decision names.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Choice {
    /// The 0-based index of the option.
    Index(u64),
    /// The option's label, matched without regard to case.
    Label(String),
}

impl Choice {
    /// `option` of a request body; `None` when it is neither a whole number nor a label.
    pub(super) fn of(value: &Value) -> Option<Choice> {
        match value {
            Value::Number(n) => n.as_u64().map(Choice::Index),
            Value::String(label) if !label.trim().is_empty() => {
                Some(Choice::Label(label.trim().to_string()))
            }
            _ => None,
        }
    }

    /// The index of the chosen option among `options`, or a message listing them.
    pub(super) fn index_in(&self, options: &[String]) -> Result<usize, String> {
        let found = match self {
            Choice::Index(index) => usize::try_from(*index)
                .ok()
                .filter(|&index| index < options.len()),
            Choice::Label(label) => {
                let wanted = label.to_lowercase();
                options.iter().position(|o| o.to_lowercase() == wanted)
            }
        };
        found.ok_or_else(|| {
            let listed = options
                .iter()
                .enumerate()
                .map(|(i, o)| format!("{i}: \"{o}\""))
                .collect::<Vec<_>>()
                .join(", ");
            let asked = match self {
                Choice::Index(index) => format!("index {index}"),
                Choice::Label(label) => format!("\"{label}\""),
            };
            format!(
                "`option` {asked} is not an option of this approval; send one of its labels, or its \
                 0-based index: {listed}"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    #[allow(clippy::unwrap_used)]
    fn a_choice_is_a_label_in_any_case_or_a_0_based_index() {
        let options = ["Approve".to_string(), "Reject".to_string()];
        assert_eq!(Choice::of(&json!(1)).unwrap().index_in(&options), Ok(1));
        assert_eq!(
            Choice::of(&json!(" REJECT ")).unwrap().index_in(&options),
            Ok(1)
        );
        assert_eq!(
            Choice::of(&json!("approve")).unwrap().index_in(&options),
            Ok(0)
        );
        let unknown = Choice::of(&json!("maybe"))
            .unwrap()
            .index_in(&options)
            .unwrap_err();
        assert!(
            unknown.contains("\"maybe\"") && unknown.contains("0: \"Approve\", 1: \"Reject\""),
            "{unknown}"
        );
        assert!(Choice::of(&json!(2)).unwrap().index_in(&options).is_err());
        for bad in [json!(-1), json!(1.5), json!(""), json!(null), json!([0])] {
            assert_eq!(Choice::of(&bad), None, "{bad}");
        }
    }
}
