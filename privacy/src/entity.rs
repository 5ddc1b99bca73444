//! What a detector finds: a typed span of personal data in a text.
//!
//! Invariants:
//! - `start..end` are **byte** offsets into the text the entity was found in, on `char` boundaries
//!   (callers that need code points, such as `opc privacy detect`, convert at the edge);
//! - the vocabulary of [`EntityType`] is the config's (`PERSON_NAME`, `EMAIL`, …), so a type name printed
//!   anywhere can be pasted into `framework.privacy.detectTypes`. This crate does not depend on the config
//!   crate; the agents crate maps the config's list onto these types.

use std::fmt;

/// A kind of personal data. The names are the config's `detectTypes` vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntityType {
    /// Person names.
    PersonName,
    /// E-mail addresses.
    Email,
    /// Phone numbers (validated by libphonenumber's rules).
    Phone,
    /// Payment card numbers (Luhn-checked).
    CreditCard,
    /// API keys, tokens, private keys, credentials in `key = value` pairs.
    ApiKey,
    /// Postal addresses.
    Address,
    /// Places named as where someone is, lives or goes: a city, a region or a country alone
    /// ("she lives in Tromsø", "moved to Reykjavík"). HIPAA's Safe Harbor counts every geographic
    /// subdivision smaller than a state, and GDPR counts location data as personal data; a user
    /// whose text names public places only takes the type out of `detectTypes` or whitelists them.
    Location,
    /// US social security numbers.
    Ssn,
    /// IPv4 and IPv6 addresses.
    IpAddress,
    /// International bank account numbers (mod-97 checked).
    Iban,
    /// URLs.
    Url,
}

impl EntityType {
    /// Every type, in the config's documented order.
    pub const ALL: [EntityType; 11] = [
        EntityType::PersonName,
        EntityType::Email,
        EntityType::Phone,
        EntityType::CreditCard,
        EntityType::ApiKey,
        EntityType::Address,
        EntityType::Location,
        EntityType::Ssn,
        EntityType::IpAddress,
        EntityType::Iban,
        EntityType::Url,
    ];

    /// The config's name for the type (`PERSON_NAME`).
    pub const fn as_str(self) -> &'static str {
        match self {
            EntityType::PersonName => "PERSON_NAME",
            EntityType::Email => "EMAIL",
            EntityType::Phone => "PHONE",
            EntityType::CreditCard => "CREDIT_CARD",
            EntityType::ApiKey => "API_KEY",
            EntityType::Address => "ADDRESS",
            EntityType::Location => "LOCATION",
            EntityType::Ssn => "SSN",
            EntityType::IpAddress => "IP_ADDRESS",
            EntityType::Iban => "IBAN",
            EntityType::Url => "URL",
        }
    }

    /// The type named `name` in the config's vocabulary.
    pub fn parse(name: &str) -> Option<EntityType> {
        EntityType::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

impl fmt::Display for EntityType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One detected span.
#[derive(Clone, Debug, PartialEq)]
pub struct Entity {
    /// Its type.
    pub kind: EntityType,
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset one past the last byte.
    pub end: usize,
    /// Confidence, 0 to 1, after context words were applied.
    pub score: f32,
}

impl Entity {
    /// The span's text in `text` (the text it was found in).
    pub fn text<'a>(&self, text: &'a str) -> &'a str {
        &text[self.start..self.end]
    }
}
