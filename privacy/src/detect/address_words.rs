//! The vocabulary of addresses, kept in one place: street-type words per language, unit words, label
//! words, region and country names. The recognisers in `address.rs`, `postal.rs`, `military.rs` and
//! `address_lines.rs` read only these lists, so adding a language means adding words here.
//!
//! Invariants: every entry is lowercase (comparisons lowercase the text's word first); a word that is
//! mostly an ordinary English word after a number or before one ("gate", "ring", "markt", "place" as a
//! suffix) is left out of the suffix lists, since a false address costs precision on prose.

/// Street types written *before* the name, with the house number after it: `Calle de Alcalá 48`,
/// `Via Roma 10`, `ul. Marszałkowska 10/12`, `ул. Тверская, д. 7`, `Rua Augusta 100`.
pub const PREFIX_TYPES: &[&str] = &[
    // Spanish, Catalan
    "calle",
    "c/",
    "avenida",
    "avda.",
    "avda",
    "av.",
    "paseo",
    "pº",
    "plaza",
    "pza.",
    "carrer",
    "rambla",
    "ronda",
    "travesía",
    "camino",
    "carretera",
    "ctra.", // Italian
    "via",
    "viale",
    "v.le",
    "piazza",
    "p.za",
    "piazzale",
    "corso",
    "largo",
    "vicolo",
    "strada",
    "lungomare",
    "lungotevere", // Portuguese
    "rua",
    "praça",
    "travessa",
    "alameda",
    "estrada", // Polish, Czech, Slovak
    "ul.",
    "ulica",
    "al.",
    "aleja",
    "aleje",
    "plac",
    "pl.",
    "os.",
    "osiedle",
    "náměstí",
    "nám.",
    // Romanian
    "str.",
    "bd.",
    "bulevardul",
    "calea",
    "șos.",
    "piața", // Russian, Ukrainian, Bulgarian
    "ул.",
    "улица",
    "пр.",
    "пр-т",
    "проспект",
    "пер.",
    "переулок",
    "бул.",
    "бульвар",
    "наб.",
    "набережная",
    "ш.",
    "шоссе",
    "пл.",
    "площадь",
    "вул.",
    "вулиця",
    "просп.",
    // French and English when written before the name with the number after (`Boulevard Anspach 1`)
    "boulevard",
    "avenue",
    "rue",
    "chaussée",
    "place",
    "quai",
    "chemin",
    "route", // Greek, Turkish
    "οδός",
    "odos",
];

/// Prefix types that are also ordinary words in English prose ("via Slack 2", "Route 66", "Place 3"):
/// they count only when capitalised (`Via Roma 10`, `Avenue Louise 54`).
pub const CAPITALISED_PREFIXES: &[&str] = &[
    "via",
    "place",
    "route",
    "avenue",
    "boulevard",
    "plaza",
    "largo",
    "corso",
    "strada",
    "al.",
    "pl.",
    "os.",
    "av.",
    "bd.",
    "str.",
    "rue",
    "quai",
    "chemin",
    "rambla",
    "ronda",
    "camino",
    "alameda",
    "chaussée",
    "calea",
    "odos",
];

/// Street-type endings of one compound word, with the number after it: `Hauptstraße 12`,
/// `Keizersgracht 123`, `Drottninggatan 5`. The word must be longer than the ending.
pub const COMPOUND_ENDINGS: &[&str] = &[
    // German
    "straße",
    "strasse",
    "str.",
    "weg",
    "gasse",
    "platz",
    "allee",
    "damm",
    "ufer",
    "chaussee",
    "steig",
    "pfad",
    "stieg",
    "graben",
    "promenade", // Dutch, Flemish
    "gracht",
    "straat",
    "laan",
    "plein",
    "kade",
    "singel",
    "dijk",
    "steeg",
    "dreef",
    // Danish, Swedish, Norwegian, Finnish
    "vej",
    "gade",
    "allé",
    "gatan",
    "vägen",
    "gata",
    "väg",
    "veien",
    "gaten",
    "katu",
    "tie",
    // Hungarian compounds are separate words (below); Slovenian, Croatian
    "cesta",
    "ulica",
];

/// Street-type words written as a separate word *after* the name, then the number:
/// `Berliner Straße 5`, `Andrássy út 60`, `İstiklal Caddesi 12`.
pub const AFTER_NAME_TYPES: &[&str] = &[
    "straße",
    "strasse",
    "str.",
    "weg",
    "gasse",
    "platz",
    "allee",
    "damm",
    "ufer",
    "chaussee",
    "utca",
    "út",
    "u.",
    "tér",
    "körút",
    "náměstí",
    "nám.",
    "třída",
    "krt.",
    "caddesi",
    "cad.",
    "sokak",
    "sok.",
    "bulvarı",
    "gracht",
    "straat",
    "laan",
    "plein",
    "kade",
    "vej",
    "gade",
    "gatan",
    "vägen",
    "cesta",
    "ulica",
];

/// Street types after a leading house number in French (`12 rue de la Paix`, `8, avenue Foch`).
pub const FRENCH_TYPES: &[&str] = &[
    "rue",
    "avenue",
    "av.",
    "boulevard",
    "bd",
    "bd.",
    "bld",
    "chemin",
    "place",
    "allée",
    "allee",
    "impasse",
    "quai",
    "cours",
    "route",
    "passage",
    "square",
    "faubourg",
    "rond-point",
    "voie",
    "villa",
    "cité",
    "sentier",
    "montée",
    "esplanade",
    "parvis",
];

/// Small words inside street and city names (`Calle de Alcalá`, `rue de la Paix`, `Frankfurt am Main`).
pub const CONNECTORS: &[&str] = &[
    "de", "del", "la", "las", "los", "le", "les", "du", "des", "d'", "l'", "di", "da", "della",
    "delle", "dei", "degli", "do", "dos", "das", "van", "von", "der", "den", "het", "'t", "am",
    "an", "im", "auf", "bei", "ob", "sur", "sous", "en", "et", "y", "i", "e", "upon", "on", "the",
    "st.", "saint", "sainte", "san", "santa", "santo",
];

/// Markers of the house number itself (`Via Roma n. 10`, `д. 7`, `Hauptstr. Nr. 5`).
pub const NUMBER_MARKERS: &[&str] = &[
    "д.", "дом", "nr.", "nr", "no.", "n.", "nº", "n°", "núm.", "num.",
];

/// Unit and building words, for unit lines (`Suite 1120`, `Apt. 4C`, `Floor 3`) and building lines.
pub const UNIT_WORDS: &[&str] = &[
    "suite",
    "ste",
    "ste.",
    "apt",
    "apt.",
    "apartment",
    "unit",
    "floor",
    "fl",
    "fl.",
    "room",
    "rm",
    "rm.",
    "flat",
    "level",
    "lvl",
    "office",
    "dept",
    "dept.",
    "department",
    "box",
    "po box",
    "p.o. box",
    "p. o. box",
    "pob",
    "building",
    "bldg",
    "bldg.",
    "block",
    "tower",
    "wing",
    "mailstop",
    "ms",
    "stock",
    "etage",
    "wohnung",
    "whg.",
    "piso",
    "planta",
    "puerta",
    "escalera",
    "esc.",
    "bâtiment",
    "bât.",
    "étage",
    "appartement",
    "app.",
    "interno",
    "int.",
    "scala",
    "piano",
    "кв.",
    "квартира",
    "офис",
    "корп.",
    "корпус",
    "стр.",
    "строение",
    "этаж",
];

/// Context words that raise a weak address piece (a postcode alone, `75008 Paris` alone), for every
/// address recogniser.
pub const CONTEXT_WORDS: &[&str] = &[
    "address",
    "postcode",
    "post code",
    "postal",
    "zip",
    "live at",
    "lives at",
    "located",
    "ship to",
    "deliver",
    "mail to",
    "send to",
    "adresse",
    "anschrift",
    "plz",
    "dirección",
    "indirizzo",
    "адрес",
];

/// Words that label an address field; they are context, never part of the span.
pub const LABELS: &[&str] = &[
    "address",
    "addr",
    "postcode",
    "post code",
    "postal code",
    "zip",
    "zip code",
    "zipcode",
    "city",
    "state",
    "country",
    "street",
    "location",
    "adresse",
    "anschrift",
    "dirección",
    "indirizzo",
    "адрес",
    "ship to",
    "shipping address",
    "billing address",
    "mailing address",
    "home address",
    "work address",
    "deliver to",
    "plz",
    "cap",
    "cp",
];

/// US state and territory codes.
pub const US_STATES: &[&str] = &[
    "AL", "AK", "AZ", "AR", "CA", "CO", "CT", "DE", "DC", "FL", "GA", "HI", "ID", "IL", "IN", "IA",
    "KS", "KY", "LA", "ME", "MD", "MA", "MI", "MN", "MS", "MO", "MT", "NE", "NV", "NH", "NJ", "NM",
    "NY", "NC", "ND", "OH", "OK", "OR", "PA", "RI", "SC", "SD", "TN", "TX", "UT", "VT", "VA", "WA",
    "WV", "WI", "WY", "PR", "GU", "VI", "AS", "MP",
];

/// Australian state and territory codes (`Sydney NSW 2000`).
pub const AU_STATES: &[&str] = &["NSW", "VIC", "QLD", "WA", "SA", "TAS", "ACT", "NT"];

/// Canadian province and territory codes.
pub const CA_PROVINCES: &[&str] = &[
    "AB", "BC", "MB", "NB", "NL", "NS", "NT", "NU", "ON", "PE", "QC", "SK", "YT",
];

/// Regions written out after a city (`Austin, Texas`, `Cupertino, California`, `Toronto, Ontario`).
pub const REGIONS: &[&str] = &[
    "alabama",
    "alaska",
    "arizona",
    "arkansas",
    "california",
    "colorado",
    "connecticut",
    "delaware",
    "florida",
    "georgia",
    "hawaii",
    "idaho",
    "illinois",
    "indiana",
    "iowa",
    "kansas",
    "kentucky",
    "louisiana",
    "maine",
    "maryland",
    "massachusetts",
    "michigan",
    "minnesota",
    "mississippi",
    "missouri",
    "montana",
    "nebraska",
    "nevada",
    "new hampshire",
    "new jersey",
    "new mexico",
    "new york",
    "north carolina",
    "north dakota",
    "ohio",
    "oklahoma",
    "oregon",
    "pennsylvania",
    "rhode island",
    "south carolina",
    "south dakota",
    "tennessee",
    "texas",
    "utah",
    "vermont",
    "virginia",
    "washington",
    "west virginia",
    "wisconsin",
    "wyoming",
    "ontario",
    "quebec",
    "québec",
    "british columbia",
    "alberta",
    "manitoba",
    "saskatchewan",
    "nova scotia",
    "new brunswick",
    "bavaria",
    "bayern",
    "hessen",
    "catalonia",
    "catalunya",
    "lombardia",
    "lombardy",
    "tuscany",
    "toscana",
    "île-de-france",
    "new south wales",
    "victoria",
    "queensland",
];

/// Country names as they end an address (English and native names, common abbreviations).
pub const COUNTRIES: &[&str] = &[
    "usa",
    "u.s.a.",
    "us",
    "u.s.",
    "united states",
    "united states of america",
    "uk",
    "u.k.",
    "united kingdom",
    "great britain",
    "england",
    "scotland",
    "wales",
    "northern ireland",
    "ireland",
    "éire",
    "france",
    "germany",
    "deutschland",
    "spain",
    "españa",
    "italy",
    "italia",
    "netherlands",
    "the netherlands",
    "nederland",
    "holland",
    "belgium",
    "belgique",
    "belgië",
    "luxembourg",
    "switzerland",
    "schweiz",
    "suisse",
    "svizzera",
    "austria",
    "österreich",
    "portugal",
    "poland",
    "polska",
    "czech republic",
    "czechia",
    "česko",
    "slovakia",
    "hungary",
    "magyarország",
    "romania",
    "românia",
    "bulgaria",
    "greece",
    "ελλάδα",
    "turkey",
    "türkiye",
    "russia",
    "россия",
    "russian federation",
    "ukraine",
    "україна",
    "sweden",
    "sverige",
    "norway",
    "norge",
    "denmark",
    "danmark",
    "finland",
    "suomi",
    "iceland",
    "ísland",
    "estonia",
    "latvia",
    "lithuania",
    "croatia",
    "slovenia",
    "serbia",
    "japan",
    "日本",
    "china",
    "中国",
    "south korea",
    "korea",
    "taiwan",
    "hong kong",
    "singapore",
    "india",
    "pakistan",
    "bangladesh",
    "vietnam",
    "việt nam",
    "thailand",
    "malaysia",
    "indonesia",
    "philippines",
    "australia",
    "new zealand",
    "canada",
    "mexico",
    "méxico",
    "brazil",
    "brasil",
    "argentina",
    "chile",
    "colombia",
    "peru",
    "perú",
    "south africa",
    "nigeria",
    "kenya",
    "egypt",
    "morocco",
    "israel",
    "uae",
    "united arab emirates",
    "saudi arabia",
    "qatar",
];

/// Whether `word` (any case) is in `list` (lowercase entries).
pub fn is_in(list: &[&str], word: &str) -> bool {
    if word.is_ascii() {
        list.iter().any(|w| w.eq_ignore_ascii_case(word))
    } else {
        let lower = word.to_lowercase();
        list.contains(&lower.as_str())
    }
}

/// The entry of `list` that `word` ends with (any case), if the word is longer than that entry.
pub fn ending_in<'l>(list: &[&'l str], word: &str) -> Option<&'l str> {
    if word.is_ascii() {
        let w = word.as_bytes();
        return list.iter().copied().find(|e| {
            w.len() > e.len() + 1 && w[w.len() - e.len()..].eq_ignore_ascii_case(e.as_bytes())
        });
    }
    let lower = word.to_lowercase();
    list.iter()
        .copied()
        .find(|e| lower.len() > e.len() + 1 && lower.ends_with(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_is_lowercase() {
        for list in [
            PREFIX_TYPES,
            CAPITALISED_PREFIXES,
            COMPOUND_ENDINGS,
            AFTER_NAME_TYPES,
            FRENCH_TYPES,
            CONNECTORS,
            NUMBER_MARKERS,
            UNIT_WORDS,
            CONTEXT_WORDS,
            LABELS,
            REGIONS,
            COUNTRIES,
        ] {
            for w in list {
                assert_eq!(*w, w.to_lowercase(), "{w}");
            }
        }
        for list in [US_STATES, CA_PROVINCES, AU_STATES] {
            for w in list {
                assert_eq!(*w, w.to_uppercase(), "{w}");
            }
        }
    }

    #[test]
    fn lookups_ignore_case_and_need_a_stem() {
        assert!(is_in(COUNTRIES, "France"));
        assert!(is_in(COUNTRIES, "РОССИЯ"));
        assert_eq!(ending_in(COMPOUND_ENDINGS, "Hauptstraße"), Some("straße"));
        assert_eq!(ending_in(COMPOUND_ENDINGS, "Keizersgracht"), Some("gracht"));
        assert_eq!(ending_in(COMPOUND_ENDINGS, "Weg"), None);
    }
}
