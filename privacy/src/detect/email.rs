//! `EMAIL`: local part (letters and digits of any script), `@`, a dotted domain whose last label is letters (or an IDNA `xn--` label).

use regex::Regex;

use super::{Recognizer, Trigger};
use crate::{Entity, EntityType};

/// Finds e-mail addresses.
pub struct EmailRecognizer {
    re: Regex,
}

impl EmailRecognizer {
    /// Compiles the pattern.
    pub fn new() -> Self {
        let re = Regex::new(
            r"(?i-u)(?u:[\p{L}\p{N}])(?:(?u:[\p{L}\p{N}._%+'-])*(?u:[\p{L}\p{N}_%+-]))?@[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*\.(?:xn--[a-z0-9-]+|[a-z]{2,63})\b",
        )
        .expect("email pattern compiles");
        EmailRecognizer { re }
    }
}

impl Default for EmailRecognizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Recognizer for EmailRecognizer {
    fn name(&self) -> &'static str {
        "email"
    }

    fn types(&self) -> &'static [EntityType] {
        &[EntityType::Email]
    }

    fn trigger(&self) -> Trigger {
        Trigger::AT
    }

    fn find(&self, text: &str, out: &mut Vec<Entity>) {
        for m in self.re.find_iter(text) {
            out.push(Entity {
                kind: EntityType::Email,
                start: m.start(),
                end: m.end(),
                score: 1.0,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        EmailRecognizer::new().find(text, &mut out);
        out.iter().map(|e| e.text(text)).collect()
    }

    #[test]
    fn finds_addresses_and_idna_domains() {
        assert_eq!(
            spans("try info@presidio.site or another.info+x@sub.presidio.co.uk."),
            vec!["info@presidio.site", "another.info+x@sub.presidio.co.uk"]
        );
        assert_eq!(
            spans("a@xn--d1acufc.xn--p1ai"),
            vec!["a@xn--d1acufc.xn--p1ai"]
        );
    }

    #[test]
    fn rejects_non_addresses() {
        assert!(spans("my email is info@presidio.").is_empty());
        assert!(spans("hello-world here, @mention, a@b").is_empty());
    }
}
