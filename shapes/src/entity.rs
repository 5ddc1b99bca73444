//! The kinds of personal data: the config's `detectTypes` vocabulary (`PERSON_NAME`, `EMAIL`, …).
//!
//! Shared by the config validator (which checks `detectTypes` and `requireNer` against it) and the
//! privacy detector (whose spans carry these types), so a type name printed anywhere can be pasted into
//! the config. [`served_by_ner`] lives beside the list because both users decide on it: the validator
//! warns when `requireNer: false` leaves a wanted type to the pattern tier alone, and the gateway waits
//! for the model exactly when a wanted type needs it.

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

/// Whether the NER tier serves `kind`: the pattern tier alone misses most of it, so masking it
/// properly needs the model. Every type is listed (no wildcard), so a new type must be placed here
/// before it compiles: the privacy gateway waits for the model exactly when a wanted type needs it.
pub const fn served_by_ner(kind: EntityType) -> bool {
    match kind {
        EntityType::PersonName | EntityType::Address | EntityType::Location => true,
        EntityType::Email
        | EntityType::Phone
        | EntityType::CreditCard
        | EntityType::ApiKey
        | EntityType::Ssn
        | EntityType::IpAddress
        | EntityType::Iban
        | EntityType::Url => false,
    }
}
