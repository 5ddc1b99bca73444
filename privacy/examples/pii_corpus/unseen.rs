//! The `unseen` split: a second blind split, written later and by another hand, without reading the
//! other splits' templates or value lists and without running the detector on it.
//!
//! Its document kinds are ones the other splits do not have (Teams and Mattermost exports, Jira and
//! Linear comments, pull-request reviews, on-call handoffs and pages, onboarding checklists, viewing
//! notes, vet records, school e-mails, court notices, speaker bios, podcast transcripts, hotel
//! bookings, Kubernetes, Terraform and CI logs, `.env` files, crash reports, spreadsheet pastes, OCR'd
//! receipts, dictated notes, telegrams, mixed-language chats …), and so are its writers' habits (no
//! capitals, all capitals, typos, emoji, run-on lines, odd table alignment).
//!
//! Invariants:
//! - every value comes from this file's own lists or shapes, drawn through [`Gen::own`] or `mine`,
//!   so only the held-out half of a list is ever used and no name, street, city or domain can equal
//!   one the tuning split draws (that split draws the other half of every list by the same hash);
//! - values are appended only with [`W::e`] (labelled) or [`W::v`] (not personal data), template
//!   text only with [`W::t`], so spans cover exactly the value and the phrasing is recorded;
//! - cards pass Luhn, IBANs pass mod 97, SSNs follow the SSA's rules (area 001–899 but not 666,
//!   group 01–99, serial 0001–9999);
//! - the labelling rules are those at the top of `pii_corpus.rs`; a pet's name, a breed named after a
//!   place, a company named after its founder and a masked card's last four are not labelled.

use super::Template;
use super::doc::Doc;
use super::doc::kind::{
    ADDRESS, API_KEY, CREDIT_CARD, EMAIL, IBAN, IP_ADDRESS, LOCATION, PERSON_NAME, PHONE, SSN, URL,
};
use super::values::{Gen, in_split};

// ---------------------------------------------------------------------------------------------
// Writing with a habit
// ---------------------------------------------------------------------------------------------

/// How a writer treats letter case.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

/// A document being written in one writer's habit: the case applies to template text and to the
/// values a writer would retype (names, places, addresses, e-mails), never to keys, IBANs or URLs;
/// typos touch template text only, so a labelled value is always the value.
struct W<'a> {
    d: &'a mut Doc,
    case: Case,
    /// Chance in percent that a long word of template text gets a typo.
    typo: usize,
}

impl<'a> W<'a> {
    fn new(d: &'a mut Doc) -> W<'a> {
        W {
            d,
            case: Case::Keep,
            typo: 0,
        }
    }

    fn cased(&self, s: &str) -> String {
        match self.case {
            Case::Keep => s.to_string(),
            Case::Lower => s.to_lowercase(),
            Case::Upper => s.to_uppercase(),
        }
    }

    /// Template text.
    fn t(&mut self, g: &mut Gen, s: &str) -> &mut Self {
        let mut s = self.cased(s);
        if self.typo > 0 {
            s = typos(g, &s, self.typo);
        }
        self.d.lit(&s);
        self
    }

    /// A labelled value.
    fn e(&mut self, kind: &'static str, s: &str) -> &mut Self {
        let s = match kind {
            PERSON_NAME | LOCATION | ADDRESS => self.cased(s),
            EMAIL if self.case != Case::Keep => s.to_lowercase(),
            _ => s.to_string(),
        };
        self.d.ent(kind, &s);
        self
    }

    /// Template text: one of `items`.
    fn one(&mut self, g: &mut Gen, items: &[&str]) -> &mut Self {
        let s = g.pick(items);
        self.t(g, s)
    }

    /// A value that is not personal data (ids, hashes, amounts, companies, pets).
    fn v(&mut self, s: &str) -> &mut Self {
        let s = if self.case == Case::Upper {
            s.to_uppercase()
        } else {
            s.to_string()
        };
        self.d.val(&s);
        self
    }
}

/// Swap, drop or double a letter in some words of `s` (ASCII words of five letters or more).
fn typos(g: &mut Gen, s: &str, pct: usize) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    let mut word = String::new();
    let flush = |g: &mut Gen, word: &mut String, out: &mut String| {
        if word.len() >= 5 && g.chance(pct) {
            let mut b: Vec<char> = word.chars().collect();
            let i = 1 + g.below(b.len() - 3);
            match g.below(3) {
                0 => b.swap(i, i + 1),
                1 => {
                    b.remove(i);
                }
                _ => b.insert(i, b[i]),
            }
            out.extend(b);
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in s.chars() {
        if c.is_ascii_alphabetic() {
            word.push(c);
        } else {
            flush(g, &mut word, &mut out);
            out.push(c);
        }
    }
    flush(g, &mut word, &mut out);
    out
}

/// One of `items` whose every key is in this split's half of the stable hash (the held-out half), so
/// no value can equal one the tuning split draws from the same kind of list.
fn mine<T: Copy>(g: &mut Gen, items: &[T], keys: impl Fn(&T) -> Vec<&'static str>) -> T {
    let split = g.split;
    let ok: Vec<T> = items
        .iter()
        .copied()
        .filter(|t| keys(t).iter().all(|k| in_split(k, split)))
        .collect();
    if ok.is_empty() {
        g.pick(items)
    } else {
        g.pick(&ok)
    }
}

/// One of `items`, for template text.
fn one<'s>(g: &mut Gen, items: &[&'s str]) -> &'s str {
    g.pick(items)
}

// ---------------------------------------------------------------------------------------------
// People
// ---------------------------------------------------------------------------------------------

/// A person as this split writes them.
#[derive(Clone)]
struct P {
    /// The given name as written (may be two words: `Nurul Aina`).
    given: String,
    /// The full name as the culture writes it.
    full: String,
    /// The name used after `Mr.`/`Dr.`/`Ato` (family name, or the given name where that is the custom).
    cue: String,
    /// Lowercase ASCII parts for e-mail local parts and handles.
    a_given: String,
    a_family: String,
    /// An honorific the culture puts before the name (`Ato`, `Daw`, `Puan`, `Sra.`, `Mr.`); never
    /// part of the labelled span.
    hon: &'static str,
}

impl P {
    /// The family part when the full name is `given family…` (empty for family-first and one-part
    /// names).
    fn family(&self) -> &str {
        match self.full.strip_prefix(&self.given) {
            Some(rest) if rest.starts_with(' ') => rest.trim_start(),
            _ => "",
        }
    }

    /// The name as typed in a chat (`ġużeppi`, `bat-erdene`).
    fn chat(&self) -> String {
        self.given
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_lowercase()
    }
}

/// The full name as a list or form writes it: as the culture does, `FAMILY Given`, `Family, Given`,
/// `G. Family`, `Given F.`; forms that need a family name fall back to the full name.
fn written(g: &mut Gen, p: &P) -> String {
    let fam = p.family();
    if fam.is_empty() || !fam.starts_with(char::is_uppercase) {
        return p.full.clone();
    }
    let initial = |s: &str| {
        s.chars()
            .next()
            .map(|c| format!("{c}."))
            .unwrap_or_default()
    };
    match g.below(10) {
        0 => format!("{} {}", fam.to_uppercase(), p.given),
        1 => format!("{fam}, {}", p.given),
        2 => format!("{} {fam}", initial(&p.given)),
        3 => format!("{} {}", p.given, initial(fam)),
        _ => p.full.clone(),
    }
}

/// Lowercase ASCII letters (and `-`) of `s`, for e-mail local parts.
fn ascii(s: &str) -> String {
    let mut out = String::new();
    for c in s.to_lowercase().chars() {
        let m: &str = match c {
            'a'..='z' | '0'..='9' => {
                out.push(c);
                continue;
            }
            'á' | 'à' | 'â' | 'ä' | 'ã' | 'å' | 'ā' => "a",
            'é' | 'è' | 'ê' | 'ë' | 'ē' => "e",
            'í' | 'ì' | 'î' | 'ï' | 'ī' => "i",
            'ó' | 'ò' | 'ô' | 'ö' | 'õ' | 'ø' | 'ō' => "o",
            'ú' | 'ù' | 'û' | 'ü' | 'ū' => "u",
            'ñ' => "n",
            'ç' | 'ċ' => "c",
            'ð' => "d",
            'þ' => "th",
            'æ' => "ae",
            'ġ' => "g",
            'ħ' => "h",
            'ż' => "z",
            'š' => "s",
            'ŧ' => "t",
            'đ' => "d",
            'ŋ' => "ng",
            'ý' => "y",
            _ => "",
        };
        out.push_str(m);
    }
    out
}

const YORUBA_GIVEN: &[&str] = &[
    "Oluwaseun",
    "Adebayo",
    "Folasade",
    "Temitope",
    "Olumide",
    "Yetunde",
    "Babatunde",
    "Omolara",
    "Ayodele",
    "Titilayo",
    "Oluwakemi",
    "Damilola",
    "Gbenga",
    "Funmilayo",
    "Kehinde",
    "Abiodun",
    "Morenike",
    "Oreoluwa",
    "Adewale",
    "Bolanle",
];
const YORUBA_FAMILY: &[&str] = &[
    "Adeyemi",
    "Ogunleye",
    "Adebanjo",
    "Oyelaran",
    "Akinwande",
    "Babalola",
    "Oladipo",
    "Fasanya",
    "Olanrewaju",
    "Adeleke",
    "Oyinlola",
    "Ogunbiyi",
    "Adesanya",
    "Akintola",
    "Olatunji",
    "Odukoya",
];
const IGBO_GIVEN: &[&str] = &[
    "Chidinma",
    "Nnamdi",
    "Chukwuemeka",
    "Adaeze",
    "Obinna",
    "Ifeoma",
    "Ikenna",
    "Chiamaka",
    "Uchenna",
    "Somtochukwu",
    "Ebuka",
    "Nkechi",
    "Chinonso",
    "Ogechi",
    "Kelechi",
    "Amarachi",
];
const IGBO_FAMILY: &[&str] = &[
    "Okonkwo",
    "Nwosu",
    "Nwachukwu",
    "Okeke",
    "Anyanwu",
    "Ezeh",
    "Onyekachi",
    "Uzoma",
    "Iheanacho",
    "Nwankwo",
    "Obiora",
    "Chukwuma",
    "Ezeoke",
    "Umeh",
    "Nnaji",
    "Okoli",
];
const ZULU_GIVEN: &[&str] = &[
    "Thandeka",
    "Sipho",
    "Nomvula",
    "Bongani",
    "Lindiwe",
    "Sibusiso",
    "Zanele",
    "Mandla",
    "Nokuthula",
    "Themba",
    "Ayanda",
    "Lwazi",
    "Nosipho",
    "Sandile",
    "Thulisile",
    "Mthunzi",
];
const ZULU_FAMILY: &[&str] = &[
    "Dlamini",
    "Ndlovu",
    "Mkhize",
    "Ngcobo",
    "Khumalo",
    "Mthembu",
    "Shabalala",
    "Nxumalo",
    "Buthelezi",
    "Cele",
    "Mahlangu",
    "Zungu",
    "Msimang",
    "Hadebe",
    "Majola",
    "Sithole",
];
const ANDEAN_GIVEN: &[&str] = &[
    "Killa", "Inti", "Wayra", "Amaru", "Sumaq", "Yupay", "Illari", "Nayra", "Kusi", "Tupaq",
    "Wiñay", "Chaska", "Rumi", "Qori", "Anka", "Urpi",
];
const ANDEAN_FAMILY: &[&str] = &[
    "Quispe",
    "Mamani",
    "Huamán",
    "Condori",
    "Ccama",
    "Choque",
    "Yupanqui",
    "Huarachi",
    "Apaza",
    "Ticona",
    "Quispecahuana",
    "Huillca",
    "Ccorimanya",
    "Layme",
    "Puma",
    "Cusihuamán",
];
const FILIPINO_GIVEN: &[&str] = &[
    "Ma. Cristina",
    "Jerome",
    "Rowena",
    "Arnel",
    "Marivic",
    "Jhun",
    "Lorna",
    "Rodel",
    "Mylene",
    "Dindo",
    "Jocelyn",
    "Reynaldo",
    "Analyn",
    "Jun-Jun",
    "Cherry Mae",
    "Ronaldo",
];
const FILIPINO_FAMILY: &[&str] = &[
    "dela Cruz",
    "Bautista",
    "Macaraeg",
    "Dimaculangan",
    "Pangilinan",
    "Manalo",
    "Tolentino",
    "Magbanua",
    "Dizon",
    "Lacson",
    "de Guzman",
    "Sumulong",
    "Panganiban",
    "Agbayani",
    "Tabuena",
    "Evangelista",
];
const MALAY_GIVEN_F: &[&str] = &[
    "Nurul Aina",
    "Siti Aisyah",
    "Nur Syafiqah",
    "Farah Nadia",
    "Wan Nor Azura",
    "Aida Suraya",
    "Nor Hidayah",
    "Puteri Balqis",
];
const MALAY_GIVEN_M: &[&str] = &[
    "Muhammad Hafiz",
    "Ahmad Fikri",
    "Mohd Azlan",
    "Amirul Hakim",
    "Haziq Irfan",
    "Khairul Anuar",
    "Faizal Rizal",
    "Syed Ashraf",
];
const MALAY_FATHER: &[&str] = &[
    "Ismail",
    "Zulkifli",
    "Yusof",
    "Osman",
    "Kamaruddin",
    "Ariffin",
    "Jamaluddin",
    "Salleh",
    "Mokhtar",
    "Baharuddin",
    "Hamzah",
    "Razak",
];
const MONGOL_GIVEN: &[&str] = &[
    "Bat-Erdene",
    "Oyuntsetseg",
    "Enkhjargal",
    "Ganbold",
    "Sarangerel",
    "Temuulen",
    "Munkhbayar",
    "Nomin",
    "Altantsetseg",
    "Tsogtbaatar",
    "Anujin",
    "Khulan",
    "Erdenechimeg",
    "Batbayar",
    "Uranchimeg",
    "Dulguun",
];
const MONGOL_FATHER: &[&str] = &[
    "Batsaikhan",
    "Tserendorj",
    "Dashdondog",
    "Gantulga",
    "Sukhbat",
    "Otgonbayar",
    "Naranbaatar",
    "Erdenebat",
    "Purevdorj",
    "Lkhagvasuren",
    "Bayarsaikhan",
    "Chuluun",
];
const KAZAKH_GIVEN_F: &[&str] = &[
    "Aigerim", "Dana", "Aruzhan", "Madina", "Zhanar", "Saule", "Gulnaz", "Akmaral",
];
const KAZAKH_GIVEN_M: &[&str] = &[
    "Nurlan", "Yerlan", "Daulet", "Askar", "Bekzat", "Arman", "Timur", "Yerzhan",
];
const KAZAKH_FAMILY: &[&str] = &[
    "Zhaksylykov",
    "Nurpeisov",
    "Abenov",
    "Bekmukhambetov",
    "Kairatov",
    "Iskakov",
    "Zhumabayev",
    "Sarsenbayev",
    "Utepov",
    "Temirkhanov",
    "Baimukhanov",
    "Yessenov",
];
const KAZAKH_CYRILLIC: &[(&str, &str, &str, &str)] = &[
    ("Айгерим", "Жаксылыкова", "aigerim", "zhaksylykova"),
    ("Нурлан", "Абенов", "nurlan", "abenov"),
    ("Аружан", "Искакова", "aruzhan", "iskakova"),
    ("Ерлан", "Сарсенбаев", "yerlan", "sarsenbayev"),
    ("Сауле", "Утепова", "saule", "utepova"),
    ("Даулет", "Темирханов", "daulet", "temirkhanov"),
    ("Жанар", "Баймуханова", "zhanar", "baimukhanova"),
    ("Бекзат", "Есенов", "bekzat", "yessenov"),
    ("Гульназ", "Кайратова", "gulnaz", "kairatova"),
    ("Тимур", "Жумабаев", "timur", "zhumabayev"),
    ("Акмарал", "Нурпеисова", "akmaral", "nurpeisova"),
    ("Ержан", "Абенов", "yerzhan", "abenov"),
];
const UZBEK_GIVEN_F: &[&str] = &[
    "Dilnoza", "Malika", "Gulnora", "Nodira", "Zarina", "Shahnoza", "Feruza", "Mohira",
];
const UZBEK_GIVEN_M: &[&str] = &[
    "Sherzod", "Jasur", "Bekzod", "Otabek", "Farrukh", "Jamshid", "Ulugbek", "Sardor",
];
const UZBEK_FAMILY: &[&str] = &[
    "Karimov",
    "Yusupov",
    "Rakhimov",
    "Abdullayev",
    "Nazarov",
    "Ergashev",
    "Mirzayev",
    "Xolmatov",
    "Qodirov",
    "Tursunov",
    "Saidov",
    "Ismoilov",
];
const LAO_GIVEN: &[&str] = &[
    "Souksavanh",
    "Phonesavanh",
    "Vilayphone",
    "Bounmy",
    "Chanthala",
    "Somphone",
    "Manivanh",
    "Khamphoui",
    "Viengkham",
    "Sengphet",
    "Noudeng",
    "Bouasone",
];
const LAO_FAMILY: &[&str] = &[
    "Phommachanh",
    "Sayavong",
    "Keomany",
    "Vongsa",
    "Sisouk",
    "Inthavong",
    "Luangrath",
    "Sengdara",
    "Phetsarath",
    "Douangchak",
    "Xayaseng",
    "Sivongxay",
];
const KHMER_FAMILY: &[&str] = &[
    "Sok", "Chea", "Meas", "Heng", "Pich", "Chhim", "Prak", "Nhem", "Sim", "Touch", "Mao", "Khiev",
];
const KHMER_GIVEN: &[&str] = &[
    "Dara",
    "Sophea",
    "Vannak",
    "Sreymom",
    "Bopha",
    "Visal",
    "Rithy",
    "Chantha",
    "Sokha",
    "Kunthea",
    "Piseth",
    "Rachana",
    "Sreyneang",
    "Vuthy",
];
const BURMESE: &[&str] = &[
    "Aung Ko Ko",
    "Thida Win",
    "Khin Myat Noe",
    "Zaw Min Htet",
    "Ei Phyu Sin",
    "Kyaw Zin Latt",
    "Nandar Hlaing",
    "Htet Aung Lin",
    "Su Mon Kyaw",
    "Wai Yan Phyo",
    "Hnin Wutt Yee",
    "Thet Naing Oo",
    "May Thu Kyaw",
    "Min Khant Zaw",
    "Yadanar Soe",
    "Pyae Phyo Aung",
    "Thiri Nwe",
    "Naing Lin Tun",
];
const AMHARIC: &[(&str, &str, &str, &str)] = &[
    ("ሰላም", "ተስፋዬ", "Selam", "Tesfaye"),
    ("ዮሐንስ", "ገብረመድህን", "Yohannes", "Gebremedhin"),
    ("መሰረት", "ታደሰ", "Meseret", "Tadesse"),
    ("ትዕግስት", "በቀለ", "Tigist", "Bekele"),
    ("ዳዊት", "አለሙ", "Dawit", "Alemu"),
    ("ሄኖክ", "ደሳለኝ", "Henok", "Desalegn"),
    ("ቤተልሔም", "ኃይሉ", "Betelhem", "Hailu"),
    ("ብርሃኑ", "ወልደማርያም", "Birhanu", "Woldemariam"),
    ("ፀሐይ", "ገብሩ", "Tsehay", "Gebru"),
    ("ሚካኤል", "አሰፋ", "Mikael", "Assefa"),
];
const ETHIOPIAN_LATIN_GIVEN: &[&str] = &[
    "Selamawit",
    "Yonas",
    "Hiwot",
    "Kalkidan",
    "Abenezer",
    "Mahlet",
    "Eyerusalem",
    "Natnael",
    "Bethlehem",
    "Robel",
    "Rahel",
    "Kidus",
];
const SOMALI_GIVEN: &[&str] = &[
    "Hodan",
    "Abdirahman",
    "Fadumo",
    "Khadar",
    "Sahra",
    "Mustafe",
    "Ifrah",
    "Liban",
    "Hibaaq",
    "Guled",
    "Naima",
    "Bashiir",
    "Ayan",
    "Mahad",
];
const SOMALI_FATHER: &[&str] = &[
    "Abdi", "Mohamed", "Hassan", "Ahmed", "Yusuf", "Nur", "Jama", "Egal", "Dualeh", "Ismail",
    "Haji", "Warfaa",
];
const SOMALI_FAMILY: &[&str] = &[
    "Warsame", "Farah", "Samatar", "Elmi", "Hirsi", "Aden", "Gedi", "Abdulle", "Barre", "Mohamud",
    "Kahin", "Shire",
];
const HAWAIIAN_GIVEN: &[&str] = &[
    "Keala", "Kalani", "Noelani", "Makoa", "Leilani", "Kainoa", "Kapono", "Mahina", "Keoni",
    "Iolana", "Kekoa", "Pualani", "Kawika", "Nālani",
];
const HAWAIIAN_FAMILY: &[&str] = &[
    "Kahananui",
    "Kealoha",
    "Akana",
    "Kamakau",
    "Nakoa",
    "Kahale",
    "Kaʻaihue",
    "Mahoe",
    "Kamaka",
    "Keawe",
    "Kauhane",
    "Palakiko",
    "Kaleikini",
    "Kanahele",
];
const SAMI_GIVEN: &[&str] = &[
    "Áilu", "Máret", "Ánde", "Sárá", "Niillas", "Elle", "Biret", "Jovnna", "Inga", "Mihkkal",
    "Risten", "Juhán", "Ánne", "Issát",
];
const SAMI_FAMILY: &[&str] = &[
    "Gaup",
    "Eira",
    "Somby",
    "Utsi",
    "Hætta",
    "Turi",
    "Bongo",
    "Valkeapää",
    "Aslaksen",
    "Balto",
    "Magga",
    "Guttorm",
    "Vars",
    "Siri",
];
const BASQUE_GIVEN: &[&str] = &[
    "Itziar", "Aitor", "Nerea", "Iñaki", "Amaia", "Unai", "Garazi", "Xabier", "Ainhoa", "Gorka",
    "Leire", "Mikel", "Maialen", "Julen",
];
const BASQUE_FAMILY: &[&str] = &[
    "Etxeberria",
    "Goikoetxea",
    "Arrizabalaga",
    "Zubizarreta",
    "Urrutia",
    "Agirre",
    "Olaizola",
    "Larrañaga",
    "Bengoetxea",
    "Iturbe",
    "Ugarte",
    "Aranburu",
    "Etxaniz",
    "Garmendia",
];
const CATALAN_GIVEN: &[&str] = &[
    "Jordi",
    "Montserrat",
    "Pau",
    "Núria",
    "Arnau",
    "Mireia",
    "Oriol",
    "Laia",
    "Meritxell",
    "Quim",
    "Roser",
    "Pol",
    "Ona",
    "Bernat",
];
const CATALAN_FAMILY: &[&str] = &[
    "Puigdomènech",
    "Casals",
    "Soler",
    "Riera",
    "Sabaté",
    "Batlle",
    "Comas",
    "Rovira",
    "Roig",
    "Vilaró",
    "Pujades",
    "Serrat",
    "Cardona",
    "Estruch",
];
const MALTESE_GIVEN: &[&str] = &[
    "Ġużeppi",
    "Marija",
    "Ċensu",
    "Rita",
    "Ġorġ",
    "Doris",
    "Kurt",
    "Josette",
    "Nazzareno",
    "Rebekka",
    "Ġwann",
    "Carmela",
    "Manwel",
    "Antonella",
];
const MALTESE_FAMILY: &[&str] = &[
    "Borg",
    "Camilleri",
    "Vella",
    "Farrugia",
    "Zammit",
    "Galea",
    "Micallef",
    "Grech",
    "Attard",
    "Spiteri",
    "Azzopardi",
    "Cassar",
    "Xuereb",
    "Mifsud",
];
const ICELANDIC_GIVEN_F: &[&str] = &[
    "Guðrún",
    "Sigríður",
    "Þórdís",
    "Ragnheiður",
    "Hrafnhildur",
    "Ásdís",
    "Halldóra",
    "Steinunn",
];
const ICELANDIC_GIVEN_M: &[&str] = &[
    "Sigurður",
    "Gunnar",
    "Ólafur",
    "Einar",
    "Kristján",
    "Bjarki",
    "Þorsteinn",
    "Hörður",
];
const ICELANDIC_FATHER: &[(&str, &str)] = &[
    ("Jóns", "Jóns"),
    ("Sigurðs", "Sigurðar"),
    ("Gunnars", "Gunnars"),
    ("Ólafs", "Ólafs"),
    ("Einars", "Einars"),
    ("Magnús", "Magnús"),
    ("Stefáns", "Stefáns"),
    ("Helga", "Helga"),
    ("Páls", "Páls"),
    ("Björns", "Björns"),
    ("Ragnars", "Ragnars"),
    ("Þórs", "Þórs"),
];
const AFGHAN_GIVEN: &[&str] = &[
    "Zarghuna",
    "Mirwais",
    "Spogmai",
    "Wahida",
    "Farid",
    "Palwasha",
    "Najibullah",
    "Mursal",
    "Hamidullah",
    "Freshta",
    "Shabnam",
    "Khalid",
    "Zalmai",
    "Nargis",
];
const AFGHAN_FAMILY: &[&str] = &[
    "Ahmadzai",
    "Popalzai",
    "Stanikzai",
    "Noorzai",
    "Wardak",
    "Hotak",
    "Sadat",
    "Rahimi",
    "Kakar",
    "Barakzai",
    "Niazi",
    "Safi",
    "Amiri",
    "Sultani",
];
const INDIAN_GIVEN: &[&str] = &[
    "Tanvi",
    "Kunal",
    "Ishita",
    "Rohan",
    "Pallavi",
    "Siddharth",
    "Mrunal",
    "Yash",
    "Anushka",
    "Harshvardhan",
    "Devika",
    "Omkar",
];
const INDIAN_FAMILY: &[&str] = &[
    "Kulkarni",
    "Deshpande",
    "Chatterjee",
    "Bhattacharya",
    "Saxena",
    "Patwardhan",
    "Khandelwal",
    "Rastogi",
    "Dasgupta",
    "Nambiar",
    "Gokhale",
    "Shekhawat",
];

/// A person from one of the split's cultures, with an honorific that culture uses.
fn person(g: &mut Gen) -> P {
    let culture = g.below(21);
    let mut p = person_of(g, culture);
    let choices: &[&'static str] = match culture {
        5 => &["Encik", "Puan", "Cik"],
        10 => &["Lok", "Lok Srey"],
        11 => &["U", "Daw", "Ko", "Ma"],
        12 => &["Ato", "W/ro", "Dr."],
        3 | 16 | 17 => &["Sr.", "Sra.", "Dr."],
        19 => &["Dr.", "Ms.", "Mr."],
        _ => &["Mr.", "Ms.", "Mrs.", "Dr.", "Prof."],
    };
    p.hon = g.pick(choices);
    p
}

/// Names in their own script: (given, family, ASCII given, ASCII family, family first).
const SCRIPT_NAMES: &[(&str, &str, &str, &str, bool)] = &[
    ("ສົມພອນ", "ພົມມະຈັນ", "somphone", "phommachanh", false),
    ("ມະນີວັນ", "ສີສຸກ", "manivanh", "sisouk", false),
    ("ដារា", "សុខ", "dara", "sok", true),
    ("សុភា", "ជា", "sophea", "chea", true),
    ("វិសាល", "ហេង", "visal", "heng", true),
    ("Номин", "Батсайхан", "nomin", "batsaikhan", true),
    ("Энхжаргал", "Ганболд", "enkhjargal", "ganbold", true),
    ("Батбаяр", "Цэрэндорж", "batbayar", "tserendorj", true),
];
const BURMESE_SCRIPT: &[(&str, &str, &str)] = &[
    ("အောင်ကိုကို", "aung", "koko"),
    ("သီတာဝင်း", "thida", "win"),
    ("ခင်မြတ်နိုး", "khin", "myatnoe"),
    ("ဇော်မင်းထက်", "zaw", "minhtet"),
];

/// A person of culture `culture` (0–20).
fn person_of(g: &mut Gen, culture: usize) -> P {
    if matches!(culture, 6 | 9 | 10) && g.chance(20) {
        let (gv, fm, lg, lf, family_first) = mine(g, SCRIPT_NAMES, |t| vec![t.0, t.1]);
        let full = if family_first {
            format!("{fm} {gv}")
        } else {
            format!("{gv} {fm}")
        };
        return P {
            given: gv.into(),
            full,
            cue: gv.into(),
            a_given: lg.into(),
            a_family: lf.into(),
            hon: "",
        };
    }
    if culture == 11 && g.chance(20) {
        let (n, lg, lf) = mine(g, BURMESE_SCRIPT, |t| vec![t.0]);
        return P {
            given: n.into(),
            full: n.into(),
            cue: n.into(),
            a_given: lg.into(),
            a_family: lf.into(),
            hon: "",
        };
    }
    let western = |g: &mut Gen, given: &[&'static str], family: &[&'static str]| {
        let (gv, fm) = (g.own(given), g.own(family));
        P {
            given: gv.to_string(),
            full: format!("{gv} {fm}"),
            cue: fm.to_string(),
            a_given: ascii(gv),
            a_family: ascii(fm),
            hon: "",
        }
    };
    match culture {
        0 => western(g, YORUBA_GIVEN, YORUBA_FAMILY),
        1 => western(g, IGBO_GIVEN, IGBO_FAMILY),
        2 => western(g, ZULU_GIVEN, ZULU_FAMILY),
        3 => {
            // Two family names, father's then mother's.
            let (gv, f1, f2) = (
                g.own(ANDEAN_GIVEN),
                g.own(ANDEAN_FAMILY),
                g.own(ANDEAN_FAMILY),
            );
            let full = if f1 == f2 || g.chance(30) {
                format!("{gv} {f1}")
            } else {
                format!("{gv} {f1} {f2}")
            };
            P {
                given: gv.into(),
                full,
                cue: f1.into(),
                a_given: ascii(gv),
                a_family: ascii(f1),
                hon: "",
            }
        }
        4 => western(g, FILIPINO_GIVEN, FILIPINO_FAMILY),
        5 => {
            let female = g.chance(50);
            let gv = g.own(if female { MALAY_GIVEN_F } else { MALAY_GIVEN_M });
            let fa = g.own(MALAY_FATHER);
            let link = match (female, g.below(3)) {
                (true, 0) => "bt.",
                (true, _) => "binti",
                (false, 0) => "b.",
                (false, _) => "bin",
            };
            P {
                given: gv.into(),
                full: format!("{gv} {link} {fa}"),
                cue: gv.into(),
                a_given: ascii(gv),
                a_family: ascii(fa),
                hon: "",
            }
        }
        6 => {
            // Mongolian: the father's name, often shortened to an initial, before the given name.
            let (gv, fa) = (g.own(MONGOL_GIVEN), g.own(MONGOL_FATHER));
            let full = if g.chance(50) {
                let initial: String = fa
                    .chars()
                    .take(if fa.starts_with("Ts") { 2 } else { 1 })
                    .collect();
                format!("{initial}. {gv}")
            } else {
                format!("{fa} {gv}")
            };
            P {
                given: gv.into(),
                full,
                cue: gv.into(),
                a_given: ascii(gv),
                a_family: ascii(fa),
                hon: "",
            }
        }
        7 => {
            if g.chance(30) {
                let (gv, fm, lg, lf) = mine(g, KAZAKH_CYRILLIC, |t| vec![t.0, t.1]);
                return P {
                    given: gv.into(),
                    full: format!("{gv} {fm}"),
                    cue: fm.into(),
                    a_given: lg.into(),
                    a_family: lf.into(),
                    hon: "",
                };
            }
            let female = g.chance(50);
            let gv = g.own(if female {
                KAZAKH_GIVEN_F
            } else {
                KAZAKH_GIVEN_M
            });
            let fm = g.own(KAZAKH_FAMILY);
            let fm = if female && fm.ends_with('v') {
                format!("{fm}a")
            } else {
                fm.to_string()
            };
            P {
                given: gv.into(),
                full: format!("{gv} {fm}"),
                cue: fm.clone(),
                a_given: ascii(gv),
                a_family: ascii(&fm),
                hon: "",
            }
        }
        8 => {
            let female = g.chance(50);
            let gv = g.own(if female { UZBEK_GIVEN_F } else { UZBEK_GIVEN_M });
            let fm = g.own(UZBEK_FAMILY);
            let fm = if female {
                format!("{fm}a")
            } else {
                fm.to_string()
            };
            P {
                given: gv.into(),
                full: format!("{gv} {fm}"),
                cue: fm.clone(),
                a_given: ascii(gv),
                a_family: ascii(&fm),
                hon: "",
            }
        }
        9 => western(g, LAO_GIVEN, LAO_FAMILY),
        10 => {
            // Khmer: family name first.
            let (fm, gv) = (g.own(KHMER_FAMILY), g.own(KHMER_GIVEN));
            P {
                given: gv.into(),
                full: format!("{fm} {gv}"),
                cue: gv.into(),
                a_given: ascii(gv),
                a_family: ascii(fm),
                hon: "",
            }
        }
        11 => {
            // Burmese: no family name; the whole name is used, after `U`, `Daw`, `Ko` or `Ma`.
            let n = g.own(BURMESE);
            let parts: Vec<&str> = n.split(' ').collect();
            P {
                given: n.into(),
                full: n.into(),
                cue: n.into(),
                a_given: ascii(parts[0]),
                a_family: ascii(&parts[1..].concat()),
                hon: "",
            }
        }
        12 => {
            if g.chance(50) {
                let (gv, fa, lg, lf) = mine(g, AMHARIC, |t| vec![t.0, t.1]);
                return P {
                    given: gv.into(),
                    full: format!("{gv} {fa}"),
                    cue: gv.into(),
                    a_given: ascii(lg),
                    a_family: ascii(lf),
                    hon: "",
                };
            }
            let gv = g.own(ETHIOPIAN_LATIN_GIVEN);
            let (_, _, _, fa) = mine(g, AMHARIC, |t| vec![t.3]);
            P {
                given: gv.into(),
                full: format!("{gv} {fa}"),
                cue: gv.into(),
                a_given: ascii(gv),
                a_family: ascii(fa),
                hon: "",
            }
        }
        13 => {
            let (gv, fa, fm) = (
                g.own(SOMALI_GIVEN),
                g.own(SOMALI_FATHER),
                g.own(SOMALI_FAMILY),
            );
            let full = if g.chance(60) {
                format!("{gv} {fa} {fm}")
            } else {
                format!("{gv} {fm}")
            };
            P {
                given: gv.into(),
                full,
                cue: fm.into(),
                a_given: ascii(gv),
                a_family: ascii(fm),
                hon: "",
            }
        }
        14 => western(g, HAWAIIAN_GIVEN, HAWAIIAN_FAMILY),
        15 => western(g, SAMI_GIVEN, SAMI_FAMILY),
        16 => {
            let (gv, f1, f2) = (
                g.own(BASQUE_GIVEN),
                g.own(BASQUE_FAMILY),
                g.own(BASQUE_FAMILY),
            );
            let full = if f1 == f2 {
                format!("{gv} {f1}")
            } else {
                format!("{gv} {f1} {f2}")
            };
            P {
                given: gv.into(),
                full,
                cue: f1.into(),
                a_given: ascii(gv),
                a_family: ascii(f1),
                hon: "",
            }
        }
        17 => {
            let (gv, f1, f2) = (
                g.own(CATALAN_GIVEN),
                g.own(CATALAN_FAMILY),
                g.own(CATALAN_FAMILY),
            );
            let full = if f1 == f2 || g.chance(40) {
                format!("{gv} {f1}")
            } else {
                format!("{gv} {f1} i {f2}")
            };
            P {
                given: gv.into(),
                full,
                cue: f1.into(),
                a_given: ascii(gv),
                a_family: ascii(f1),
                hon: "",
            }
        }
        18 => western(g, MALTESE_GIVEN, MALTESE_FAMILY),
        19 => {
            // Icelandic: a patronymic, and the given name after any cue.
            let female = g.chance(50);
            let gv = g.own(if female {
                ICELANDIC_GIVEN_F
            } else {
                ICELANDIC_GIVEN_M
            });
            let (son, dottir) = g.pick(ICELANDIC_FATHER);
            let pat = if female {
                format!("{dottir}dóttir")
            } else {
                format!("{son}son")
            };
            P {
                given: gv.into(),
                full: format!("{gv} {pat}"),
                cue: gv.into(),
                a_given: ascii(gv),
                a_family: ascii(&pat),
                hon: "",
            }
        }
        _ => {
            if g.chance(40) {
                western(g, INDIAN_GIVEN, INDIAN_FAMILY)
            } else {
                western(g, AFGHAN_GIVEN, AFGHAN_FAMILY)
            }
        }
    }
}

/// A South Asian person, for the Hinglish chats.
fn indian(g: &mut Gen) -> P {
    let (gv, fm) = (g.own(INDIAN_GIVEN), g.own(INDIAN_FAMILY));
    P {
        given: gv.into(),
        full: format!("{gv} {fm}"),
        cue: fm.into(),
        a_given: ascii(gv),
        a_family: ascii(fm),
        hon: "",
    }
}

// ---------------------------------------------------------------------------------------------
// Places and addresses
// ---------------------------------------------------------------------------------------------

/// Cities with their country (named alone, they are `LOCATION`s).
const CITIES: &[(&str, &str)] = &[
    ("Ulaanbaatar", "Mongolia"),
    ("Darkhan", "Mongolia"),
    ("Erdenet", "Mongolia"),
    ("Shymkent", "Kazakhstan"),
    ("Karaganda", "Kazakhstan"),
    ("Aktobe", "Kazakhstan"),
    ("Samarkand", "Uzbekistan"),
    ("Bukhara", "Uzbekistan"),
    ("Namangan", "Uzbekistan"),
    ("Luang Prabang", "Laos"),
    ("Savannakhet", "Laos"),
    ("Pakse", "Laos"),
    ("Battambang", "Cambodia"),
    ("Siem Reap", "Cambodia"),
    ("Kampot", "Cambodia"),
    ("Mandalay", "Myanmar"),
    ("Mawlamyine", "Myanmar"),
    ("Taunggyi", "Myanmar"),
    ("Gondar", "Ethiopia"),
    ("Hawassa", "Ethiopia"),
    ("Bahir Dar", "Ethiopia"),
    ("Hargeisa", "Somaliland"),
    ("Kismayo", "Somalia"),
    ("Baidoa", "Somalia"),
    ("Hilo", "Hawaii"),
    ("Kailua-Kona", "Hawaii"),
    ("Kahului", "Hawaii"),
    ("Kautokeino", "Norway"),
    ("Karasjok", "Norway"),
    ("Jokkmokk", "Sweden"),
    ("Donostia", "Spain"),
    ("Vitoria-Gasteiz", "Spain"),
    ("Girona", "Spain"),
    ("Lleida", "Spain"),
    ("Mdina", "Malta"),
    ("Victoria", "Gozo"),
    ("Akureyri", "Iceland"),
    ("Ísafjörður", "Iceland"),
    ("Egilsstaðir", "Iceland"),
    ("Cusco", "Peru"),
    ("Puno", "Peru"),
    ("Huancayo", "Peru"),
    ("Iloilo City", "Philippines"),
    ("Tacloban", "Philippines"),
    ("Kota Kinabalu", "Malaysia"),
    ("Kuching", "Malaysia"),
    ("Alor Setar", "Malaysia"),
    ("Herat", "Afghanistan"),
    ("Mazar-i-Sharif", "Afghanistan"),
    ("Ibadan", "Nigeria"),
    ("Abeokuta", "Nigeria"),
    ("Enugu", "Nigeria"),
    ("Onitsha", "Nigeria"),
    ("Pietermaritzburg", "South Africa"),
    ("Mthatha", "South Africa"),
    ("Nuuk", "Greenland"),
    ("Tórshavn", "Faroe Islands"),
    ("Manizales", "Colombia"),
    ("Bucaramanga", "Colombia"),
    ("Rotorua", "New Zealand"),
    ("Whanganui", "New Zealand"),
    ("Nizwa", "Oman"),
    ("Salalah", "Oman"),
];

/// Regions and countries named alone.
const REGIONS: &[&str] = &[
    "Gobi-Altai",
    "Khövsgöl",
    "Mangystau",
    "Fergana Valley",
    "Karakalpakstan",
    "Champasak",
    "Kampong Cham",
    "Shan State",
    "Oromia",
    "Puntland",
    "the Big Island",
    "Maui",
    "Finnmark",
    "Gipuzkoa",
    "Bizkaia",
    "the Empordà",
    "Gozo",
    "the Westfjords",
    "Madre de Dios",
    "Apurímac",
    "Sabah",
    "Sarawak",
    "Kelantan",
    "Panjshir",
    "Badakhshan",
    "Ogun State",
    "Anambra",
    "KwaZulu-Natal",
    "the Eastern Cape",
    "Boyacá",
    "Northland",
    "Dhofar",
    "Mongolia",
    "Kazakhstan",
    "Uzbekistan",
    "Laos",
    "Cambodia",
    "Myanmar",
    "Ethiopia",
    "Somalia",
    "Malta",
    "Iceland",
    "Peru",
    "Bolivia",
    "Malaysia",
    "Brunei",
    "Afghanistan",
    "Greenland",
    "Oman",
    "Lesotho",
    "Eswatini",
];

/// A place named alone: a city, a region, a country, or `City, Country`.
fn place(g: &mut Gen) -> String {
    match g.below(5) {
        0 | 1 => mine(g, CITIES, |t| vec![t.0]).0.to_string(),
        2 => {
            let (c, k) = mine(g, CITIES, |t| vec![t.0]);
            format!("{c}, {k}")
        }
        _ => g.own(REGIONS).to_string(),
    }
}

/// A postal address, line by line.
struct Addr {
    lines: Vec<String>,
}

impl Addr {
    fn multi(&self) -> String {
        self.lines.join("\n")
    }
    fn inline(&self) -> String {
        self.lines.join(", ")
    }
}

const MALTA_STREETS: &[&str] = &[
    "Triq il-Kbira",
    "Triq San Pawl",
    "Triq il-Wied",
    "Triq Dun Karm",
    "Triq il-Mitħna",
    "Triq tal-Qroqq",
    "Triq l-Imdina",
    "Triq iż-Żagħfran",
    "Triq il-Kappillan",
    "Triq in-Naxxar",
    "Triq Santa Marija",
    "Triq il-Ħarrub",
];
const MALTA_TOWNS: &[(&str, &str)] = &[
    ("Ħaż-Żebbuġ", "ZBG"),
    ("Birkirkara", "BKR"),
    ("Mosta", "MST"),
    ("Sliema", "SLM"),
    ("Żabbar", "ZBR"),
    ("Naxxar", "NXR"),
    ("Marsaskala", "MSK"),
    ("Għargħur", "GHR"),
    ("Xagħra", "XRA"),
];
const MONGOL_DISTRICTS: &[&str] = &[
    "Bayanzürkh",
    "Sükhbaatar",
    "Khan-Uul",
    "Chingeltei",
    "Songinokhairkhan",
    "Bayangol",
    "Nalaikh",
];
const KZ_STREETS: &[&str] = &[
    "ул. Жандосова",
    "пр. Достык",
    "ул. Тимирязева",
    "ул. Сатпаева",
    "ул. Байзакова",
    "ул. Толе би",
    "пр. Абылай хана",
    "ул. Кабанбай батыра",
    "ул. Желтоксан",
];
const KZ_CITIES: &[(&str, &str)] = &[
    ("Алматы", "050000"),
    ("Астана", "010000"),
    ("Шымкент", "160000"),
    ("Караганда", "100000"),
    ("Павлодар", "140000"),
];
const UZ_STREETS: &[&str] = &[
    "Amir Temur ko'chasi",
    "Bobur ko'chasi",
    "Shota Rustaveli ko'chasi",
    "Mustaqillik shoh ko'chasi",
    "Navoiy ko'chasi",
    "Chilonzor ko'chasi",
    "Mirobod ko'chasi",
];
const UZ_DISTRICTS: &[&str] = &[
    "Yunusobod tumani",
    "Chilonzor tumani",
    "Mirzo Ulug'bek tumani",
    "Yakkasaroy tumani",
    "Sergeli tumani",
    "Olmazor tumani",
];
const LAO_VILLAGES: &[&str] = &[
    "Ban Sisaket",
    "Ban Phonxay",
    "Ban Nongbone",
    "Ban Haysok",
    "Ban Thongkhankham",
    "Ban Dongpalane",
    "Ban Saphanthong",
    "Ban Phonsinuan",
];
const LAO_DISTRICTS: &[&str] = &["Chanthabouly", "Sisattanak", "Xaysetha", "Sikhottabong"];
const KH_SANGKATS: &[(&str, &str)] = &[
    ("Boeng Keng Kang Ti Muoy", "Boeng Keng Kang"),
    ("Tonle Basak", "Chamkar Mon"),
    ("Tuol Tumpung Ti Pir", "Chamkar Mon"),
    ("Phsar Thmei Ti Bei", "Daun Penh"),
    ("Veal Vong", "Prampir Makara"),
    ("Boeng Kak Ti Muoy", "Tuol Kouk"),
];
const MM_STREETS: &[&str] = &[
    "Pyay Road",
    "Inya Road",
    "Kabar Aye Pagoda Road",
    "Anawrahta Road",
    "Mahabandoola Road",
    "Shwegondaing Road",
    "U Wisara Road",
    "Dhammazedi Road",
];
const MM_TOWNSHIPS: &[(&str, &str)] = &[
    ("Kamaryut", "11041"),
    ("Bahan", "11201"),
    ("Sanchaung", "11111"),
    ("Pabedan", "11141"),
    ("Tamwe", "11211"),
    ("Mayangone", "11061"),
    ("Hlaing", "11051"),
];
const ET_SUBCITIES: &[&str] = &[
    "Bole",
    "Yeka",
    "Kirkos",
    "Arada",
    "Lideta",
    "Kolfe Keranio",
    "Gulele",
    "Nifas Silk-Lafto",
    "Akaky Kaliti",
];
const PE_STREETS: &[&str] = &[
    "Av. Arequipa",
    "Av. Benavides",
    "Av. Petit Thouars",
    "Av. Brasil",
    "Jr. Huiracocha",
    "Av. Salaverry",
    "Calle Los Pinos",
    "Jr. Cuzco",
    "Av. La Mar",
    "Calle Tarata",
];
const PE_DISTRICTS: &[(&str, &str)] = &[
    ("Lince", "15046"),
    ("Miraflores", "15074"),
    ("Jesús María", "15072"),
    ("Surquillo", "15038"),
    ("Barranco", "15063"),
    ("Pueblo Libre", "15084"),
    ("San Borja", "15036"),
];
const MY_STREETS: &[&str] = &[
    "Jalan SS 2/24",
    "Jalan Kenanga 3",
    "Jalan Meranti 5",
    "Jalan Ampang Hilir",
    "Jalan Kuchai Lama",
    "Jalan Tun Razak",
    "Jalan Bukit Bintang",
    "Jalan Setia Budi 7",
    "Lorong Tanjung 2",
    "Jalan Penang",
];
const MY_TOWNS: &[(&str, &str, &str)] = &[
    ("47300", "Petaling Jaya", "Selangor"),
    ("81200", "Johor Bahru", "Johor"),
    ("88400", "Kota Kinabalu", "Sabah"),
    ("93350", "Kuching", "Sarawak"),
    ("30450", "Ipoh", "Perak"),
    ("10250", "George Town", "Pulau Pinang"),
    ("15050", "Kota Bharu", "Kelantan"),
    ("25200", "Kuantan", "Pahang"),
];
const HI_STREETS: &[&str] = &[
    "Waipio Uka St",
    "Kalanianaole Hwy",
    "Kapiolani Blvd",
    "Aliʻi Dr",
    "Kuakini Hwy",
    "Puainako St",
    "Kilauea Ave",
    "Nāwiliwili Rd",
    "Kamehameha Ave",
    "Haleakala Hwy",
    "Kaumualii Hwy",
    "Keeaumoku St",
];
const HI_TOWNS: &[(&str, &str)] = &[
    ("Waipahu", "96797"),
    ("Hilo", "96720"),
    ("Kailua-Kona", "96740"),
    ("Kāneʻohe", "96744"),
    ("Līhuʻe", "96766"),
    ("Wailuku", "96793"),
    ("Pāhoa", "96778"),
    ("Lahaina", "96761"),
];
const SAPMI_STREETS: &[&str] = &[
    "Hannoluohkká",
    "Báktevárri",
    "Ájastealli",
    "Suomageaidnu",
    "Boaronjárga",
    "Čáhppesvárri",
    "Gieddeluohkká",
    "Márkanluodda",
];
const SAPMI_TOWNS: &[&str] = &[
    "9520 Guovdageaidnu",
    "9730 Kárášjohka",
    "9845 Deatnu",
    "9935 Bugøynes",
];
const BASQUE_STREETS: &[&str] = &[
    "Easo kalea",
    "Urbieta kalea",
    "Matia kalea",
    "Zabaleta kalea",
    "Kale Nagusia",
    "Errekalde kalea",
    "Portu kalea",
    "Aldamar kalea",
];
const BASQUE_TOWNS: &[&str] = &[
    "20004 Donostia",
    "48005 Bilbo",
    "20600 Eibar",
    "20800 Zarautz",
    "01001 Vitoria-Gasteiz",
    "20280 Hondarribia",
];
const CAT_STREETS: &[&str] = &[
    "C/ de Mallorca",
    "C/ de Provença",
    "C/ de Còrsega",
    "C/ del Consell de Cent",
    "C/ de la Riera",
    "C/ de Pujades",
    "Rambla de Catalunya",
    "Pg. de Sant Joan",
    "C/ de Verdi",
];
const CAT_TOWNS: &[&str] = &[
    "08013 Barcelona",
    "17001 Girona",
    "25002 Lleida",
    "43001 Tarragona",
    "08301 Mataró",
    "08500 Vic",
    "17600 Figueres",
];
const IS_STREETS: &[&str] = &[
    "Skólavörðustígur",
    "Bárugata",
    "Þingholtsstræti",
    "Hverfisgata",
    "Ásvallagata",
    "Njálsgata",
    "Eyrarlandsvegur",
    "Hafnarstræti",
];
const IS_TOWNS: &[&str] = &[
    "101 Reykjavík",
    "107 Reykjavík",
    "600 Akureyri",
    "400 Ísafjörður",
    "700 Egilsstaðir",
    "220 Hafnarfjörður",
];
const CO_AREAS: &[(&str, &str)] = &[
    ("Chapinero", "Bogotá, D.C."),
    ("Usaquén", "Bogotá, D.C."),
    ("El Poblado", "Medellín, Antioquia"),
    ("Laureles", "Medellín, Antioquia"),
    ("San Fernando", "Cali, Valle del Cauca"),
    ("Cabecera del Llano", "Bucaramanga, Santander"),
];
const NZ_STREETS: &[&str] = &[
    "Kauri Street",
    "Karangahape Road",
    "Tory Street",
    "Moray Place",
    "Riccarton Road",
    "Pōnui Street",
    "Rata Street",
    "Mokoia Road",
    "Tasman Street",
    "Ōtaki Street",
];
const NZ_AREAS: &[(&str, &str)] = &[
    ("Grey Lynn", "Auckland 1021"),
    ("Te Aro", "Wellington 6011"),
    ("Riccarton", "Christchurch 8041"),
    ("North Dunedin", "Dunedin 9016"),
    ("Birkenhead", "Auckland 0626"),
    ("Mount Victoria", "Wellington 6011"),
];
const AE_AREAS: &[&str] = &[
    "Al Barsha 2",
    "Jumeirah 1",
    "Al Wasl",
    "Mirdif",
    "Al Qusais",
    "Umm Suqeim 3",
    "Al Nahda 1",
];
const KYOTO_STREETS: &[&str] = &[
    "河原町通三条下る",
    "烏丸通御池上る",
    "堀川通四条下る",
    "寺町通丸太町上る",
    "新町通錦小路上る",
    "油小路通綾小路下る",
];
const KYOTO_WARDS: &[(&str, &str)] = &[
    ("中京区", "604"),
    ("下京区", "600"),
    ("上京区", "602"),
    ("左京区", "606"),
];

/// An address in one of the split's countries.
fn address(g: &mut Gen) -> Addr {
    let n = |g: &mut Gen, lo: usize, hi: usize| (lo + g.below(hi - lo)).to_string();
    let lines: Vec<String> = match g.below(18) {
        0 => {
            let (town, code) = mine(g, MALTA_TOWNS, |t| vec![t.0]);
            let mut l = Vec::new();
            if g.chance(40) {
                l.push(format!(
                    "Flat {}, {} Court",
                    n(g, 1, 12),
                    g.own(&["Sunny", "Il-Fanal", "Tal-Ġebel", "Marigold", "San Ġwann"])
                ));
            }
            l.push(format!("{}, {}", n(g, 1, 140), g.own(MALTA_STREETS)));
            l.push(format!("{} {code} {}", town, n(g, 1000, 9999)));
            if g.chance(50) {
                l.push("Malta".into());
            }
            l
        }
        1 => vec![
            format!("Apartment {}, Building {}", n(g, 1, 120), n(g, 1, 60)),
            format!(
                "{} khoroo, {} District",
                ordinal(4 + g.below(22)),
                g.own(MONGOL_DISTRICTS)
            ),
            format!("Ulaanbaatar {}", n(g, 13000, 18999)),
            "Mongolia".into(),
        ],
        2 => {
            let (city, code) = mine(g, KZ_CITIES, |t| vec![t.0]);
            if g.chance(50) {
                vec![
                    format!(
                        "г. {}, {}, д. {}, кв. {}",
                        city,
                        g.own(KZ_STREETS),
                        n(g, 1, 200),
                        n(g, 1, 150)
                    ),
                    format!("{code}, Казахстан"),
                ]
            } else {
                vec![
                    format!("{code}, г. {city}"),
                    format!(
                        "{} {}, кв. {}",
                        g.own(KZ_STREETS),
                        n(g, 1, 200),
                        n(g, 1, 150)
                    ),
                ]
            }
        }
        3 => vec![
            format!("Toshkent sh., {}", g.own(UZ_DISTRICTS)),
            format!(
                "{} {}-uy, {}-xonadon",
                g.own(UZ_STREETS),
                n(g, 1, 90),
                n(g, 1, 80)
            ),
            format!("{}, Uzbekistan", n(g, 100000, 100200)),
        ],
        4 => vec![
            format!("House {}, Unit {}", n(g, 1, 300), n(g, 1, 30)),
            format!("{}, {} District", g.own(LAO_VILLAGES), g.own(LAO_DISTRICTS)),
            "Vientiane Capital, Lao PDR".into(),
        ],
        5 => {
            let (sk, khan) = mine(g, KH_SANGKATS, |t| vec![t.0]);
            vec![
                format!(
                    "#{}{}, St. {}",
                    n(g, 1, 300),
                    g.pick(&["", "E", "Eo"]),
                    n(g, 51, 600)
                ),
                format!("Sangkat {}, Khan {}", sk, khan),
                format!("Phnom Penh {}", n(g, 120101, 120212)),
            ]
        }
        6 => {
            let (ts, code) = mine(g, MM_TOWNSHIPS, |t| vec![t.0]);
            vec![
                format!("No. {}, {}", n(g, 1, 400), g.own(MM_STREETS)),
                format!("{ts} Township, Yangon {code}"),
                "Myanmar".into(),
            ]
        }
        7 => vec![
            format!(
                "House No. {}, Woreda {:02}",
                n(g, 100, 3000),
                g.below(14) + 1
            ),
            format!("{} Sub-City, Addis Ababa", g.own(ET_SUBCITIES)),
            "Ethiopia".into(),
        ],
        8 => {
            let (dist, code) = mine(g, PE_DISTRICTS, |t| vec![t.0]);
            vec![
                format!(
                    "{} {}, Dpto. {}",
                    g.own(PE_STREETS),
                    n(g, 100, 3999),
                    n(g, 101, 1204)
                ),
                format!("{dist} {code}"),
                "Lima, Perú".into(),
            ]
        }
        9 => {
            let (pc, town, state) = mine(g, MY_TOWNS, |t| vec![t.1]);
            vec![
                format!("No. {}, {}", n(g, 1, 90), g.own(MY_STREETS)),
                format!(
                    "Taman {}",
                    g.own(&[
                        "Desa Jaya",
                        "Bukit Indah",
                        "Sri Petaling",
                        "Melawati",
                        "Bayu Perdana",
                        "Seri Kembangan"
                    ])
                ),
                format!("{pc} {town}, {state}"),
            ]
        }
        10 => {
            let (town, zip) = mine(g, HI_TOWNS, |t| vec![t.0]);
            let mut l = vec![format!(
                "{}-{} {}",
                n(g, 41, 99),
                n(g, 100, 1999),
                g.own(HI_STREETS)
            )];
            if g.chance(40) {
                l[0].push_str(&format!(" Apt {}", n(g, 1, 40)));
            }
            l.push(format!("{town}, HI {zip}"));
            l
        }
        11 => vec![
            format!("{} {}", g.own(SAPMI_STREETS), n(g, 1, 40)),
            g.own(SAPMI_TOWNS).to_string(),
            "Norway".into(),
        ],
        12 => vec![
            format!(
                "{} {}, {}. {}",
                g.own(BASQUE_STREETS),
                n(g, 1, 60),
                n(g, 1, 8),
                g.pick(&["esk.", "ezk.", "A", "B"])
            ),
            g.own(BASQUE_TOWNS).to_string(),
        ],
        13 => vec![
            format!(
                "{}, {}, {}r {}a",
                g.own(CAT_STREETS),
                n(g, 1, 500),
                n(g, 1, 7),
                n(g, 1, 4)
            ),
            g.own(CAT_TOWNS).to_string(),
        ],
        14 => vec![
            format!("{} {}", g.own(IS_STREETS), n(g, 1, 80)),
            g.own(IS_TOWNS).to_string(),
            "Iceland".into(),
        ],
        15 => {
            let (area, city) = mine(g, CO_AREAS, |t| vec![t.0]);
            vec![
                format!(
                    "{} {} # {}-{}, Apto {}",
                    g.pick(&["Calle", "Carrera", "Transversal", "Diagonal"]),
                    n(g, 1, 150),
                    n(g, 1, 99),
                    n(g, 1, 99),
                    n(g, 101, 1502)
                ),
                format!("{area}, {city}"),
            ]
        }
        16 => {
            let (sub, city) = mine(g, NZ_AREAS, |t| vec![t.0]);
            let mut l = Vec::new();
            if g.chance(40) {
                l.push(format!("Flat {}", n(g, 1, 9)));
            }
            l.push(format!("{} {}", n(g, 1, 300), g.own(NZ_STREETS)));
            l.push(sub.to_string());
            l.push(city.to_string());
            l
        }
        _ => {
            if g.chance(50) {
                vec![
                    format!(
                        "Villa {}, Street {}{}",
                        n(g, 1, 60),
                        n(g, 1, 40),
                        g.pick(&["", "b", "a"])
                    ),
                    format!("{}, Dubai", g.own(AE_AREAS)),
                    "United Arab Emirates".into(),
                ]
            } else {
                let (ward, code) = g.pick(KYOTO_WARDS);
                vec![format!(
                    "〒{code}-{} 京都府京都市{ward}{}{}番地",
                    n(g, 8000, 8999),
                    g.own(KYOTO_STREETS),
                    n(g, 1, 600)
                )]
            }
        }
    };
    Addr { lines }
}

/// `21st`, `22nd`, `13th`.
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// A US military address (`APO`/`FPO`), for families moving with a posting.
fn military(g: &mut Gen) -> Addr {
    let (kind, region, zip) = g.pick(&[
        ("APO", "AE", "090"),
        ("FPO", "AE", "095"),
        ("APO", "AP", "962"),
        ("FPO", "AP", "966"),
        ("DPO", "AE", "098"),
    ]);
    let first = match g.below(3) {
        0 => format!("Unit {} Box {}", 2000 + g.below(7000), 100 + g.below(9000)),
        1 => format!("PSC {} Box {}", 100 + g.below(900), 1 + g.below(4000)),
        _ => format!("CMR {} Box {}", 400 + g.below(100), 1000 + g.below(9000)),
    };
    Addr {
        lines: vec![first, format!("{kind} {region} {zip}{:02}", g.below(100))],
    }
}

// ---------------------------------------------------------------------------------------------
// Phones, e-mails, URLs, structured values
// ---------------------------------------------------------------------------------------------

/// Phone shapes (`N` 2–9, `#` any digit): the split's own countries and groupings.
const PHONE_SHAPES: &[&str] = &[
    "+356 79## ####",
    "+356 21## ####",
    "00356 99######",
    "+976 99## ####",
    "+976-88-##-##-##",
    "+7 701 ### ## ##",
    "8 (727) ###-##-##",
    "+7 (777) ###-####",
    "+998 90 ### ## ##",
    "+998 (71) ###-##-##",
    "+856 20 5### ####",
    "+855 12 ### ###",
    "(+855) 97 ### ####",
    "+95 9 ### ### ###",
    "09 4## ### ###",
    "+251 91 ### ####",
    "+251-11-###-####",
    "0911 ## ## ##",
    "+252 61 ### ####",
    "+234 803 ### ####",
    "0803 ### ####",
    "+234 (0) 8N# ### ####",
    "+27 82 ### ####",
    "082 ### ####",
    "+51 9## ### ###",
    "(01) N##-####",
    "+63 917 ### ####",
    "0917-###-####",
    "+60 12-### ####",
    "012-### ####",
    "+60 3-#### ####",
    "(808) N##-####",
    "808.N##.####",
    "+1 808 N## ####",
    "+47 N# ## ## ##",
    "+34 6## ## ## ##",
    "+34 943 ## ## ##",
    "+354 N## ####",
    "+57 3## ### ####",
    "+64 21 ### ####",
    "(09) N## ####",
    "+971 50 ### ####",
    "+81 75-N##-####",
    "+93 70 ### ####",
    "011 356 21## ####",
    "011 976 7### ####",
    "00 251 11 ### ####",
    "+968 9### ####",
    "+299 ## ## ##",
];

/// A phone in one of the split's shapes, sometimes with an extension.
fn phone(g: &mut Gen) -> String {
    let shape = g.pick(PHONE_SHAPES);
    let mut p = g.shape(shape);
    if g.chance(12) {
        let ext = g.pick(&[" ext. ", " ext ", " x", " extn. ", " (ext. "]);
        p.push_str(ext);
        p.push_str(&(10 + g.below(980)).to_string());
        if ext.contains('(') {
            p.push(')');
        }
    }
    p
}

/// A phone without extension.
fn phone_plain(g: &mut Gen) -> String {
    let shape = g.pick(PHONE_SHAPES);
    g.shape(shape)
}

const DOMAINS: &[&str] = &[
    "kestrelpost.com",
    "postbox.mn",
    "steppe-net.kz",
    "zarafshon.uz",
    "mekongmail.la",
    "angkornet.kh",
    "shwe-mail.mm",
    "abay-online.et",
    "hiiraanpost.so",
    "lavarock.haw.org",
    "sapmi-posta.no",
    "txantxangorri.eus",
    "correu-verd.cat",
    "posta-ta.mt",
    "heimapostur.is",
    "altiplano.pe",
    "bahaymail.ph",
    "cendana.my",
    "kabulpost.af",
    "ileifemail.ng",
    "umzimail.co.za",
    "kiwimail.nz",
    "falconnet.ae",
    "dokodemo.jp",
    "tidewater.coop",
    "quillfeather.io",
    "larchwood.dev",
    "brightkelp.org",
    "salt-and-stone.net",
    "pinyon.family",
    "ferrymail.eu",
    "ochre.studio",
];

/// An e-mail address for `p`.
fn email(g: &mut Gen, p: &P) -> String {
    let d = g.own(DOMAINS);
    let (gv, fm) = (&p.a_given, &p.a_family);
    let gi: String = gv.chars().take(1).collect();
    let local = match g.below(8) {
        0 => format!("{gv}.{fm}"),
        1 => format!("{gi}{fm}"),
        2 => format!("{fm}.{gv}{}", 1 + g.below(98)),
        3 => format!("{gv}_{fm}"),
        4 => format!(
            "{gv}+{}",
            g.pick(&["school", "vet", "travel", "bills", "jobs"])
        ),
        5 => format!("{fm}{gi}"),
        6 => format!("{gv}{}", 1970 + g.below(40)),
        _ => format!("{gv}-{fm}"),
    };
    format!("{local}@{d}")
}

/// The e-mail address of someone not otherwise named.
fn someone_email(g: &mut Gen) -> String {
    let p = person(g);
    email(g, &p)
}

/// A URL about `p` (profile, booking page, personal site).
fn url(g: &mut Gen, p: &P) -> String {
    let (gv, fm) = (&p.a_given, &p.a_family);
    match g.below(14) {
        0 => format!("https://calendly.com/{gv}-{fm}/30min"),
        1 => format!("https://www.instagram.com/{gv}.{fm}{}/", g.below(99)),
        2 => format!("https://{gv}{fm}.substack.com"),
        3 => format!("https://mastodon.social/@{gv}{fm}"),
        4 => format!("https://bsky.app/profile/{gv}{fm}.bsky.social"),
        5 => format!("https://t.me/{gv}_{fm}"),
        6 => format!("https://wa.me/{}", g.shape("2348#########")),
        7 => format!(
            "https://orcid.org/0000-000{}-{}-{}",
            g.below(10),
            g.digits(4),
            g.shape("###X")
        ),
        8 => format!("https://www.behance.net/{gv}{fm}"),
        9 => format!("https://{fm}{gv}.carrd.co/"),
        10 => format!("https://linktr.ee/{gv}.{fm}"),
        11 => format!(
            "http://www.{fm}-{}.{}/contact",
            g.pick(&["homestay", "tours", "ceramics", "guesthouse"]),
            g.pick(&["is", "mt", "la", "mn"])
        ),
        12 => format!("https://soundcloud.com/{gv}-{fm}"),
        _ => format!(
            "https://www.airbnb.com/users/show/{}",
            100_000_000 + g.below(800_000_000)
        ),
    }
}

/// An IPv4 or IPv6 address.
fn ip(g: &mut Gen) -> String {
    match g.below(6) {
        0 => format!("10.{}.{}.{}", g.below(256), g.below(256), 1 + g.below(254)),
        1 => format!(
            "172.{}.{}.{}",
            16 + g.below(16),
            g.below(256),
            1 + g.below(254)
        ),
        2 => format!("192.168.{}.{}", g.below(256), 1 + g.below(254)),
        3 => format!(
            "{}.{}.{}.{}",
            g.pick(&[41, 62, 91, 103, 110, 131, 154, 185, 196, 202]),
            g.below(256),
            g.below(256),
            1 + g.below(254)
        ),
        4 => {
            let h = |g: &mut Gen| format!("{:x}", g.below(0x10000));
            format!(
                "2a0{}:{}:{}:{}:{}:{}:{}:{}",
                g.below(10),
                h(g),
                h(g),
                h(g),
                h(g),
                h(g),
                h(g),
                h(g)
            )
        }
        _ => {
            let h = |g: &mut Gen| format!("{:x}", 1 + g.below(0xfffe));
            format!("fe80::{}:{}:{}:{}", h(g), h(g), h(g), h(g))
        }
    }
}

/// A device IMEI: 15 digits that pass Luhn like a card, but not personal data of this vocabulary.
fn imei(g: &mut Gen) -> String {
    let mut d: Vec<u8> = vec![3, 5];
    while d.len() < 14 {
        d.push(g.below(10) as u8);
    }
    d.push(luhn_digit(&d));
    let s: String = d.iter().map(|x| char::from(b'0' + x)).collect();
    if g.chance(50) {
        s
    } else {
        format!("{}-{}-{}-{}", &s[..2], &s[2..8], &s[8..14], &s[14..])
    }
}

/// A Luhn check digit for `digits` (the check digit not yet appended).
fn luhn_digit(digits: &[u8]) -> u8 {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = u32::from(d);
            if i % 2 == 0 {
                let x = d * 2;
                if x > 9 { x - 9 } else { x }
            } else {
                d
            }
        })
        .sum();
    ((10 - sum % 10) % 10) as u8
}

/// A Luhn-valid card of the split's brands (Mir, UnionPay, Diners, Mastercard 2-series, Troy, Verve,
/// RuPay), grouped as that brand prints it.
fn card(g: &mut Gen) -> String {
    let (prefix, len, groups): (String, usize, &[usize]) = match g.below(7) {
        0 => (format!("220{}", g.below(5)), 16, &[4, 4, 4, 4]),
        1 => ("62".into(), 19, &[6, 13]),
        2 => (format!("36{}", g.below(10)), 14, &[4, 6, 4]),
        3 => ((2221 + g.below(500)).to_string(), 16, &[4, 4, 4, 4]),
        4 => ("9792".into(), 16, &[4, 4, 4, 4]),
        5 => (format!("50610{}", g.below(10)), 19, &[4, 4, 4, 4, 3]),
        _ => (format!("60{}", 7 + g.below(3)), 16, &[4, 4, 4, 4]),
    };
    let mut d: Vec<u8> = prefix.bytes().map(|b| b - b'0').collect();
    while d.len() < len - 1 {
        d.push(g.below(10) as u8);
    }
    d.push(luhn_digit(&d));
    let sep = g.pick(&[" ", " ", "-", ""]);
    let mut out = String::new();
    let mut at = 0;
    for (i, n) in groups.iter().enumerate() {
        if i > 0 {
            out.push_str(sep);
        }
        out.extend(d[at..at + n].iter().map(|x| char::from(b'0' + x)));
        at += n;
    }
    out
}

/// IBAN layouts: country and BBAN shape (`#` digit, `A` capital letter, `X` either).
const IBAN_SHAPES: &[(&str, &str)] = &[
    ("MT", "AAAA#####XXXXXXXXXXXXXXXXXX"),
    ("IS", "######################"),
    ("KZ", "###XXXXXXXXXXXXX"),
    ("PK", "AAAA################"),
    ("QA", "AAAAXXXXXXXXXXXXXXXXXXXXX"),
    ("JO", "AAAA####XXXXXXXXXXXXXXXXXX"),
    ("GE", "AA################"),
    ("AD", "########XXXXXXXXXXXX"),
    ("LU", "###XXXXXXXXXXXXX"),
    ("FO", "##############"),
    ("GL", "##############"),
    ("CR", "0#################"),
    ("BH", "AAAAXXXXXXXXXXXXXX"),
    ("AZ", "AAAAXXXXXXXXXXXXXXXXXXXX"),
    ("MN", "################"),
    ("LC", "AAAAXXXXXXXXXXXXXXXXXXXXXXXX"),
];

/// A mod-97-valid IBAN of the split's countries, in groups of four or compact.
fn iban(g: &mut Gen) -> String {
    let (cc, shape) = g.pick(IBAN_SHAPES);
    let bban: String = shape
        .chars()
        .map(|c| match c {
            '#' => char::from(b'0' + g.below(10) as u8),
            'A' => char::from(b'A' + g.below(26) as u8),
            'X' if g.chance(30) => char::from(b'A' + g.below(26) as u8),
            'X' => char::from(b'0' + g.below(10) as u8),
            other => other,
        })
        .collect();
    let mut rem: u32 = 0;
    for c in format!("{bban}{cc}00").chars() {
        rem = match c.to_digit(36) {
            Some(v) if v >= 10 => (rem * 100 + v) % 97,
            Some(v) => (rem * 10 + v) % 97,
            None => rem,
        };
    }
    let compact = format!("{cc}{:02}{bban}", 98 - rem);
    if g.chance(25) {
        return compact;
    }
    let chars: Vec<char> = compact.chars().collect();
    chars
        .chunks(4)
        .map(|c| c.iter().collect::<String>())
        .collect::<Vec<_>>()
        .join(" ")
}

/// An SSN valid by the SSA's rules.
fn ssn(g: &mut Gen) -> String {
    let mut area = 1 + g.below(899);
    if area == 666 {
        area = 667;
    }
    let group = 1 + g.below(99);
    let serial = 1 + g.below(9999);
    match g.below(5) {
        0 => format!("{area:03} {group:02} {serial:04}"),
        1 => format!("{area:03}{group:02}{serial:04}"),
        _ => format!("{area:03}-{group:02}-{serial:04}"),
    }
}

fn alnum(g: &mut Gen, n: usize) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    (0..n).map(|_| char::from(A[g.below(A.len())])).collect()
}

fn hex(g: &mut Gen, n: usize) -> String {
    const H: &[u8] = b"0123456789abcdef";
    (0..n).map(|_| char::from(H[g.below(16)])).collect()
}

/// An API key or token in one of the split's shapes.
fn api_key(g: &mut Gen) -> String {
    match g.below(14) {
        0 => format!("hf_{}", alnum(g, 34)),
        1 => format!("npm_{}", alnum(g, 36)),
        2 => format!("glsa_{}_{}", alnum(g, 32), hex(g, 8)),
        3 => format!("dop_v1_{}", hex(g, 64)),
        4 => format!("SG.{}.{}", alnum(g, 22), alnum(g, 43)),
        5 => format!("shpat_{}", hex(g, 32)),
        6 => format!("lin_api_{}", alnum(g, 40)),
        7 => format!("AIza{}", alnum(g, 35)),
        8 => format!("dapi{}", hex(g, 32)),
        9 => format!("pat{}.{}", alnum(g, 14), hex(g, 64)),
        10 => format!("github_pat_11{}_{}", alnum(g, 20), alnum(g, 59)),
        11 => format!("ntn_{}", alnum(g, 46)),
        12 => format!("rk_live_{}", alnum(g, 48)),
        _ => format!("SK{}", hex(g, 32)),
    }
}

// ---------------------------------------------------------------------------------------------
// Things that are not personal data
// ---------------------------------------------------------------------------------------------

fn git_sha(g: &mut Gen) -> String {
    hex(g, 40)
}
fn short_sha(g: &mut Gen) -> String {
    let n = 7 + g.below(5);
    hex(g, n)
}
fn uuid(g: &mut Gen) -> String {
    format!(
        "{}-{}-4{}-{}{}-{}",
        hex(g, 8),
        hex(g, 4),
        hex(g, 3),
        g.pick(&["8", "9", "a", "b"]),
        hex(g, 3),
        hex(g, 12)
    )
}
fn digest(g: &mut Gen) -> String {
    format!("sha256:{}", hex(g, 64))
}
fn pod(g: &mut Gen) -> String {
    const L: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let tail: String = (0..5).map(|_| char::from(L[g.below(L.len())])).collect();
    format!(
        "{}-{}-{tail}",
        g.pick(&[
            "ledger-api",
            "checkout-worker",
            "geo-tiles",
            "notif-fanout",
            "search-indexer",
            "auth-gw"
        ]),
        hex(g, 9)
    )
}
fn region(g: &mut Gen) -> &'static str {
    g.pick(&[
        "eu-north-1",
        "ap-southeast-3",
        "me-central-1",
        "af-south-1",
        "sa-east-1",
        "ca-west-1",
        "EMEA",
        "APAC",
        "LATAM",
        "ANZ",
        "MEA",
        "DACH",
        "NORAM",
    ])
}
fn version(g: &mut Gen) -> String {
    match g.below(4) {
        0 => format!("v{}.{}.{}", g.below(6), g.below(30), g.below(20)),
        1 => format!(
            "{}.{}.{}-rc.{}",
            1 + g.below(4),
            g.below(40),
            g.below(9),
            1 + g.below(4)
        ),
        2 => format!(
            "{}.{}.{}.{}",
            1 + g.below(9),
            g.below(9),
            g.below(9),
            g.below(9)
        ),
        _ => format!("{}.{}", 2024 + g.below(3), 1 + g.below(12)),
    }
}
fn ticket(g: &mut Gen) -> String {
    match g.below(5) {
        0 => format!("PLAT-{}", 100 + g.below(9000)),
        1 => format!("ENG-{}", 10 + g.below(2000)),
        2 => format!("INC{:07}", g.below(9_999_999)),
        3 => format!("CHG{:06}", g.below(999_999)),
        _ => format!("OPS-{}", 100 + g.below(900)),
    }
}
fn booking_ref(g: &mut Gen) -> String {
    format!(
        "{}{}",
        g.pick(&["HB", "RSV-", "CNF", "BK"]),
        g.shape("A#A##A")
    )
}
fn money(g: &mut Gen) -> String {
    let n = 5 + g.below(2000);
    match g.below(8) {
        0 => format!("MNT {},{:03}", n, g.below(1000)),
        1 => format!("₱{},{:03}.00", 1 + g.below(40), g.below(1000)),
        2 => format!("RM {n}.{:02}", g.below(100)),
        3 => format!("ISK {}.{:03}", 1 + g.below(90), g.below(1000)),
        4 => format!("€{n}.{:02}", g.below(100)),
        5 => format!("${n}.{:02}", g.below(100)),
        6 => format!("KZT {} {:03}", 1 + g.below(90), g.below(1000)),
        _ => format!("{n} Br"),
    }
}
fn day(g: &mut Gen) -> String {
    let m = g.pick(&[
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]);
    match g.below(4) {
        0 => format!("{} {m} 2026", 1 + g.below(28)),
        1 => format!("2026-{:02}-{:02}", 1 + g.below(12), 1 + g.below(28)),
        2 => format!("{:02}/{:02}/2026", 1 + g.below(28), 1 + g.below(12)),
        _ => format!("{m} {}", 1 + g.below(28)),
    }
}
fn clock(g: &mut Gen) -> String {
    if g.chance(50) {
        format!("{:02}:{:02}", g.below(24), g.below(60))
    } else {
        format!(
            "{}:{:02} {}",
            1 + g.below(12),
            g.below(60),
            g.pick(&["AM", "PM"])
        )
    }
}
fn web_id(g: &mut Gen) -> String {
    match g.below(3) {
        0 => format!("web:{}", hex(g, 16)),
        1 => format!("slack:U{}", g.shape("A#AA#A#A")),
        _ => g.opc_id(),
    }
}
fn masked_card(g: &mut Gen) -> String {
    match g.below(3) {
        0 => format!("**** **** **** {}", g.digits(4)),
        1 => format!("XXXX-{}", g.digits(4)),
        _ => format!("•••• {}", g.digits(4)),
    }
}

const COMPANIES: &[&str] = &[
    "Tern & Larch Logistics",
    "Blue Yurt Freight",
    "Mekong Ridge Coffee",
    "Koru Analytics",
    "Ochre Bay Resorts",
    "Steppe Signal LLP",
    "Harbourlight Vets",
    "Lantern Quay Realty",
    "Saltmarsh Legal",
    "Quillfeather Press",
    "Ironwood Schools Trust",
    "Pinyon Health Co-op",
    "Adeyemi Brothers Haulage",
    "Kahale Surf Co.",
    "Gaup Reindeer Cooperative",
    "Borg & Vella Advocates",
];

fn company(g: &mut Gen) -> &'static str {
    g.own(COMPANIES)
}

const PETS: &[(&str, &str)] = &[
    ("Mochi", "Shiba Inu"),
    ("Biscuit", "Boston Terrier"),
    ("Pepper", "Norwegian Forest Cat"),
    ("Tofu", "Maltese"),
    ("Bruno", "Labrador"),
    ("Luna", "Siamese"),
    ("Kiwi", "cockatiel"),
    ("Pancake", "Dachshund"),
    ("Saffron", "Abyssinian"),
    ("Nugget", "Jack Russell"),
    ("Chai", "Persian"),
    ("Ziggy", "Border Collie"),
];

// ---------------------------------------------------------------------------------------------
// Templates: chat and collaboration tools
// ---------------------------------------------------------------------------------------------

/// A Microsoft Teams conversation copied from the desktop client.
fn teams_copy(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let (a, b) = (person(g), person(g));
    // Teams shows one display name per person for the whole thread: `Family, Given` in many
    // directories, the name as written elsewhere.
    let display = |g: &mut Gen, p: &P| {
        if !p.family().is_empty() && g.chance(40) {
            format!("{}, {}", p.family(), p.given)
        } else {
            p.full.clone()
        }
    };
    let names = [display(g, &a), display(g, &b)];
    let head = |w: &mut W, g: &mut Gen, who: usize| {
        w.e(PERSON_NAME, &names[who]);
        let c = clock(g);
        w.t(g, "  ").v(&c).t(g, "\n");
    };
    head(&mut w, g, 0);
    match g.below(3) {
        0 => {
            w.t(g, "quick one — the courier needs a phone for the drop-off, can I give them yours?\n\n");
            head(&mut w, g, 1);
            w.t(g, "sure, it's ").e(PHONE, &phone(g)).t(g, " 👍\n\n");
        }
        1 => {
            w.t(
                g,
                "has anyone got the new starter's address for the welcome box?\n\n",
            );
            head(&mut w, g, 1);
            w.t(g, "yep:\n")
                .e(ADDRESS, &address(g).multi())
                .t(g, "\n\n");
        }
        _ => {
            let t = ticket(g);
            w.t(g, "I've moved ")
                .v(&t)
                .t(g, " to Blocked, waiting on finance\n\n");
            head(&mut w, g, 1);
            w.t(g, "ok. ")
                .e(PERSON_NAME, &a.given)
                .t(g, " can you mail me the remittance? ")
                .e(EMAIL, &email(g, &b))
                .t(g, "\n\n");
        }
    }
    head(&mut w, g, 0);
    let x = one(
        g,
        &[
            "Thanks!",
            "Done ✅",
            "On it.",
            "Will do.",
            "Grace period ends Friday btw",
        ],
    );
    w.t(g, x);
    if g.chance(40) {
        w.t(g, "\n(1 reaction: 👍 ")
            .e(PERSON_NAME, &b.given)
            .t(g, ")");
    }
}

/// A Mattermost export: `handle` speaker lines, lowercase, with emoji shortcodes.
fn mattermost_export(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.case = Case::Lower;
    w.typo = 8;
    let (a, b, c) = (person(g), person(g), person(g));
    let ch = g.pick(&[
        "town-square",
        "ops-kitchen",
        "field-team",
        "lab-bookings",
        "parents-committee",
    ]);
    w.t(g, "~").v(ch).t(g, " export\n");
    let line = |w: &mut W, g: &mut Gen, p: &P| {
        let t = clock(g);
        w.v(&t).t(g, " ");
        w.d.ent(PERSON_NAME, &p.chat());
        w.t(g, ": ");
    };
    line(&mut w, g, &a);
    match g.below(5) {
        0 => {
            w.t(g, "who is picking up the samples from ")
                .e(LOCATION, &place(g))
                .t(g, " :truck:\n");
            line(&mut w, g, &b);
            w.t(g, "me, landing tmrw. ping me on ")
                .e(PHONE, &phone_plain(g))
                .t(g, "\n");
        }
        1 => {
            w.t(g, "new wifi box is up at ")
                .e(IP_ADDRESS, &ip(g))
                .t(g, " admin pw in the vault not here pls\n");
            line(&mut w, g, &b);
            w.t(g, ":+1: also pinned ").v(&web_id(g)).t(g, "\n");
        }
        2 => {
            w.t(g, "can someone send ")
                .e(PERSON_NAME, &c.given)
                .t(g, " the deck, she is not in this channel\n");
            line(&mut w, g, &b);
            w.t(g, "sent to ")
                .e(EMAIL, &email(g, &c))
                .t(g, " :email:\n");
        }
        3 => {
            w.t(
                g,
                "parcel for the lab came back, is this still the right addr? ",
            )
            .e(ADDRESS, &address(g).inline())
            .t(g, "\n");
            line(&mut w, g, &b);
            w.t(g, "nope they moved, will dm u\n");
        }
        _ => {
            w.t(g, "reminder standup moved to ")
                .v(&clock(g))
                .t(g, " :alarm_clock:\n");
            line(&mut w, g, &b);
            w.t(g, "ack\n");
        }
    }
    line(&mut w, g, &c);
    let x = one(
        g,
        &[
            "lol ok",
            ":pray: ty",
            "brb",
            "same",
            "will check after lunch :ramen:",
        ],
    );
    w.t(g, x);
}

/// A Jira comment with @mentions, ticket ids and versions.
fn jira_comment(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let (a, b) = (person(g), person(g));
    let t = ticket(g);
    w.v(&t).t(g, " ").one(
        g,
        &[
            "Checkout fails for",
            "Sync job stalls on",
            "Wrong totals in",
            "Timeouts from",
        ],
    );
    w.t(g, " ").v(region(g)).t(g, "\n\n");
    w.e(PERSON_NAME, &a.full)
        .t(g, " added a comment - ")
        .v(&day(g))
        .t(g, " ")
        .v(&clock(g))
        .t(g, "\n");
    if g.chance(30) {
        let who = written(g, &b);
        w.t(g, "Assignee (")
            .e(PERSON_NAME, &who)
            .t(g, ") · Reporter (")
            .e(PERSON_NAME, &a.full)
            .t(g, ")\n");
    }
    w.t(g, "[~").e(PERSON_NAME, &b.full).t(g, "] ");
    match g.below(4) {
        0 => {
            w.t(g, "reproduced on ")
                .v(&version(g))
                .t(g, " with the customer's account; their callback came from ");
            w.e(IP_ADDRESS, &ip(g))
                .t(g, ". Hash of the payload: ")
                .v(&hex(g, 64))
                .t(g, ".");
        }
        1 => {
            let c = person(g);
            w.t(g, "the customer (")
                .e(PERSON_NAME, &c.full)
                .t(g, ", ")
                .e(EMAIL, &email(g, &c))
                .t(g, ") confirmed it started after ");
            w.v(&version(g)).t(g, ". Request id ").v(&uuid(g)).t(g, ".");
        }
        2 => {
            w.t(g, "please don't paste tokens here. I've revoked ")
                .e(API_KEY, &api_key(g))
                .t(g, " and rotated it in the vault.");
        }
        _ => {
            w.t(g, "Will pick this up after ")
                .v(&ticket(g))
                .t(g, ". Estimate 3 points, no customer data involved.");
        }
    }
    if g.chance(40) {
        w.t(g, "\n\ncc @").e(PERSON_NAME, &person(g).given);
    }
}

/// A Linear comment thread with `@handle` mentions.
fn linear_thread(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let (a, b) = (person(g), person(g));
    let t = format!(
        "{}-{}",
        g.pick(&["GRO", "APP", "INFRA", "DATA"]),
        10 + g.below(3000)
    );
    w.v(&t)
        .t(g, " · ")
        .one(g, &["Bug", "Improvement", "Chore"])
        .t(g, " · ")
        .one(g, &["Urgent", "High", "Medium", "No priority"])
        .t(g, "\n");
    w.e(PERSON_NAME, &a.full)
        .t(g, " · ")
        .v(&format!("{}h", 1 + g.below(20)))
        .t(g, "\n");
    match g.below(3) {
        0 => {
            w.t(g, "@")
                .e(PERSON_NAME, &b.chat())
                .t(g, " the webhook for the ")
                .e(LOCATION, &place(g))
                .t(g, " warehouse still points at ");
            w.e(IP_ADDRESS, &ip(g))
                .t(g, " — can you swap it to the LB?\n");
        }
        1 => {
            w.t(g, "Merged in ")
                .v(&short_sha(g))
                .t(g, ". @")
                .e(PERSON_NAME, &b.chat())
                .t(g, " to verify on staging build ")
                .v(&version(g))
                .t(g, ".\n");
        }
        _ => {
            w.t(g, "Customer call notes: ")
                .e(PERSON_NAME, &person(g).full)
                .t(g, " wants invoices addressed to\n");
            w.e(ADDRESS, &address(g).multi())
                .t(g, "\ninstead of the old office.\n");
        }
    }
    w.e(PERSON_NAME, &b.full)
        .t(g, " · ")
        .v(&format!("{}m", 1 + g.below(59)))
        .t(g, "\n");
    let x = one(
        g,
        &[
            "👀",
            "Done.",
            "Mark as duplicate of the older one?",
            "Will do after lunch",
        ],
    );
    w.t(g, x);
}

/// A GitHub pull-request review thread.
fn pr_review(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let (a, b) = (person(g), person(g));
    let file = g.pick(&[
        "src/billing/charge.rs",
        "deploy/values.yaml",
        "app/config/settings.py",
        "cmd/worker/main.go",
        ".github/workflows/release.yml",
    ]);
    w.e(PERSON_NAME, &a.full)
        .t(g, " requested changes on ")
        .v(file)
        .t(g, " (commit ")
        .v(&short_sha(g))
        .t(g, ")\n\n");
    match g.below(4) {
        0 => {
            w.t(g, "```diff\n+  api_token: \"")
                .e(API_KEY, &api_key(g))
                .t(g, "\"\n```\n");
            w.t(g, "This is a live credential — please rotate it and read it from the secret store instead.\n\n");
        }
        1 => {
            w.t(g, "```diff\n-  image: registry.local/geo@")
                .v(&digest(g))
                .t(g, "\n+  image: registry.local/geo@")
                .v(&digest(g))
                .t(g, "\n```\n");
            w.t(
                g,
                "Digest bump looks fine. Nit: pin the base image too.\n\n",
            );
        }
        2 => {
            let c = person(g);
            w.t(g, "The fixture still contains a real customer: `")
                .e(PERSON_NAME, &c.full)
                .t(g, "`, `");
            w.e(EMAIL, &email(g, &c))
                .t(g, "`. Swap it for the synthetic one.\n\n");
        }
        _ => {
            w.t(g, "Why hardcode `")
                .e(IP_ADDRESS, &ip(g))
                .t(g, "`? The service has a DNS name.\n\n");
        }
    }
    w.e(PERSON_NAME, &b.full).t(g, " replied\n");
    let x = one(
        g,
        &["Good catch, fixed in ", "Addressed in ", "Rebased; see "],
    );
    w.t(g, x).v(&short_sha(g)).t(g, ".");
    if g.chance(30) {
        w.t(g, "\n\nCo-authored-by: ")
            .e(PERSON_NAME, &b.full)
            .t(g, " <")
            .e(EMAIL, &email(g, &b))
            .t(g, ">");
    }
}

/// A pull-request description with a checklist and trailers.
fn pr_description(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let b = person(g);
    w.t(g, "## What\n")
        .one(
            g,
            &[
                "Moves geocoding behind a queue",
                "Adds retry with jitter to the payout client",
                "Drops the legacy CSV importer",
            ],
        )
        .t(g, ".\n\n");
    w.t(g, "## Why\nCloses #")
        .v(&(100 + g.below(5000)).to_string())
        .t(g, "; p95 went from ")
        .v(&format!("{}ms", 200 + g.below(900)))
        .t(g, " to ")
        .v(&format!("{}ms", 40 + g.below(150)))
        .t(g, " in ")
        .v(region(g))
        .t(g, ".\n\n");
    w.t(
        g,
        "## Checklist\n- [x] migrations reviewed\n- [ ] changelog\n- [x] no secrets in the diff (",
    )
    .v(&git_sha(g))
    .t(g, ")\n\n");
    if g.chance(60) {
        w.t(g, "Tested against the sandbox at ")
            .e(
                URL,
                &format!(
                    "https://sandbox-{}.internal.example/run/{}",
                    hex(g, 6),
                    uuid(g)
                ),
            )
            .t(g, "\n\n");
    }
    w.t(g, "Co-authored-by: ")
        .e(PERSON_NAME, &b.full)
        .t(g, " <")
        .e(EMAIL, &email(g, &b))
        .t(g, ">");
}

// ---------------------------------------------------------------------------------------------
// Templates: operations
// ---------------------------------------------------------------------------------------------

/// An on-call handoff note.
fn oncall_handoff(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.typo = 4;
    let (a, b) = (person(g), person(g));
    w.t(g, "On-call handoff ")
        .e(PERSON_NAME, &a.given)
        .t(g, " → ")
        .e(PERSON_NAME, &b.given)
        .t(g, " (")
        .v(&day(g))
        .t(g, ")\n");
    w.t(g, "- ")
        .v(&ticket(g))
        .t(g, ": disk pressure on ")
        .v(&pod(g))
        .t(g, ", cordoned node ")
        .e(IP_ADDRESS, &ip(g))
        .t(g, "\n");
    w.t(g, "- ")
        .v(region(g))
        .t(g, " latency back to normal after ")
        .v(&version(g))
        .t(g, " rollback\n");
    match g.below(3) {
        0 => {
            w.t(g, "- vendor escalation: their engineer ")
                .e(PERSON_NAME, &person(g).full)
                .t(g, ", reachable on ")
                .e(PHONE, &phone(g))
                .t(g, " until 18:00 their time\n");
        }
        1 => {
            w.t(g, "- the customer who reported it (")
                .e(EMAIL, &someone_email(g))
                .t(g, ") wants a postmortem\n");
        }
        _ => {
            w.t(g, "- nothing customer-facing; runbook ")
                .v(&format!("RB-{}", 10 + g.below(90)))
                .t(g, " updated\n");
        }
    }
    if g.chance(50) {
        w.t(g, "\n").e(PERSON_NAME, &person(g).given).one(
            g,
            &[
                " owns the vendor follow-up.\n",
                " knows the billing side, loop them in.\n",
                " has the laptop with the VPN token.\n",
            ],
        );
    }
    w.t(g, "- I'm in ")
        .e(LOCATION, &place(g))
        .t(g, " till Monday, call only if it's sev1\n");
    let x = one(
        g,
        &["gl 🫡", "Have a quiet week!", "May the pager be silent."],
    );
    w.t(g, x);
}

/// A pager alert and its acknowledgement.
fn pager_alert(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let a = person(g);
    w.t(g, "[FIRING:")
        .v(&(1 + g.below(4)).to_string())
        .t(g, "] ")
        .one(
            g,
            &[
                "HighErrorRate",
                "CertExpiringSoon",
                "QueueBacklog",
                "NodeNotReady",
            ],
        )
        .t(g, " ")
        .v(region(g))
        .t(g, "\n");
    // An IPv6 address with a port is bracketed, so the port never reads as the last group.
    let addr = ip(g);
    let (open, close) = if addr.contains(':') {
        ("[", "]:")
    } else {
        ("", ":")
    };
    w.t(g, "instance=")
        .t(g, open)
        .e(IP_ADDRESS, &addr)
        .t(g, close)
        .v(&(8000 + g.below(2000)).to_string())
        .t(g, " job=")
        .v(g.pick(&["node-exporter", "blackbox", "kube-state"]))
        .t(g, "\n");
    w.t(g, "oid=1.3.6.1.2.1.2.2.1.")
        .v(&(10 + g.below(10)).to_string())
        .t(g, " fingerprint=")
        .v(&hex(g, 16))
        .t(g, " runbook=RB-")
        .v(&(10 + g.below(90)).to_string())
        .t(g, "\n");
    w.t(g, "Acknowledged by ")
        .e(PERSON_NAME, &a.full)
        .t(g, " at ")
        .v(&clock(g));
    if g.chance(50) {
        w.t(g, " via SMS to ").e(PHONE, &phone_plain(g));
    }
}

/// Kubernetes pod logs with hashes, and sometimes a leaked key or an address.
fn k8s_log(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let p = pod(g);
    for _ in 0..2 + g.below(3) {
        let ts = format!(
            "2026-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            1 + g.below(12),
            1 + g.below(28),
            g.below(24),
            g.below(60),
            g.below(60),
            g.below(1000)
        );
        w.v(&ts).t(g, " ").v(&p).t(g, " ");
        match g.below(7) {
            0 => {
                w.t(g, "level=info msg=\"pulled image\" digest=")
                    .v(&digest(g))
                    .t(g, "\n");
            }
            1 => {
                w.t(g, "level=warn msg=\"login failed\" remote=")
                    .e(IP_ADDRESS, &ip(g))
                    .t(g, " user=")
                    .e(EMAIL, &someone_email(g))
                    .t(g, "\n");
            }
            2 => {
                w.t(g, "level=debug msg=\"env\" PAYMENTS_TOKEN=")
                    .e(API_KEY, &api_key(g))
                    .t(g, "\n");
            }
            3 => {
                w.t(g, "level=info msg=\"geocode ok\" input=\"")
                    .e(ADDRESS, &address(g).inline())
                    .t(g, "\"\n");
            }
            4 => {
                w.t(g, "level=info trace_id=")
                    .v(&hex(g, 32))
                    .t(g, " span_id=")
                    .v(&hex(g, 16))
                    .t(g, " status=200\n");
            }
            5 => {
                w.t(g, "level=error msg=\"upstream reset\" peer=")
                    .e(IP_ADDRESS, &ip(g))
                    .t(g, " retry=")
                    .v(&g.below(5).to_string())
                    .t(g, "\n");
            }
            _ => {
                w.t(g, "level=info msg=\"leader elected\" uid=")
                    .v(&uuid(g))
                    .t(g, " resourceVersion=")
                    .v(&(10000 + g.below(90000)).to_string())
                    .t(g, "\n");
            }
        }
    }
}

/// A Kubernetes Secret manifest someone pasted (string data in clear).
fn k8s_secret(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.t(g, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: ")
        .v(g.pick(&["mailer-creds", "maps-api", "crm-sync"]))
        .t(g, "\n  uid: ")
        .v(&uuid(g))
        .t(g, "\n");
    w.t(g, "  annotations:\n    checksum/config: ")
        .v(&hex(g, 64))
        .t(g, "\ntype: Opaque\nstringData:\n");
    w.t(g, "  API_KEY: ").e(API_KEY, &api_key(g)).t(g, "\n");
    if g.chance(50) {
        w.t(g, "  FROM_ADDRESS: ")
            .e(EMAIL, &someone_email(g))
            .t(g, "\n");
    }
    w.t(g, "  SMTP_HOST: ")
        .e(IP_ADDRESS, &ip(g))
        .t(g, "\n  REGION: ")
        .v(region(g));
}

/// A Terraform plan excerpt.
fn terraform_plan(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.t(g, "  # aws_instance.bastion will be updated in-place\n  ~ resource \"aws_instance\" \"bastion\" {\n");
    w.t(g, "        id            = \"i-")
        .v(&hex(g, 17))
        .t(g, "\"\n");
    w.t(g, "      ~ private_ip    = \"")
        .e(IP_ADDRESS, &ip(g))
        .t(g, "\" -> \"")
        .e(IP_ADDRESS, &ip(g))
        .t(g, "\"\n");
    w.t(g, "        ami           = \"ami-")
        .v(&hex(g, 17))
        .t(g, "\"\n");
    match g.below(3) {
        0 => {
            w.t(g, "      ~ user_data     = \"")
                .v(&hex(g, 40))
                .t(g, "\" -> (known after apply)\n");
        }
        1 => {
            w.t(g, "      + tags          = {\n          + \"Owner\" = \"")
                .e(EMAIL, &someone_email(g))
                .t(g, "\"\n        }\n");
        }
        _ => {
            w.t(
                g,
                "      ~ environment   = {\n          ~ \"DATADOG_API_KEY\" = \"",
            )
            .e(API_KEY, &api_key(g))
            .t(g, "\" -> (sensitive value)\n        }\n");
        }
    }
    w.t(g, "    }\n\nPlan: 0 to add, 1 to change, 0 to destroy.");
}

/// A CI job log.
fn ci_log(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.t(g, "Run actions/checkout@v4\n  repository: ")
        .v(g.pick(&["larchwood/api", "koru/mobile", "tern/infra"]))
        .t(g, "\n  ref: ")
        .v(&git_sha(g))
        .t(g, "\n");
    w.t(g, "Syncing repository\n")
        .t(g, "HEAD is now at ")
        .v(&short_sha(g))
        .t(g, " Merge pull request #")
        .v(&(10 + g.below(4000)).to_string())
        .t(g, "\n");
    match g.below(4) {
        0 => {
            w.t(g, "Run ./scripts/smoke.sh\n+ curl -H 'X-Api-Key: ")
                .e(API_KEY, &api_key(g))
                .t(g, "' https://staging/api/health\n");
        }
        1 => {
            w.t(g, "Run npm ci\nadded 812 packages, integrity sha512-")
                .v(&alnum(g, 86))
                .t(g, "==\n");
        }
        2 => {
            w.t(g, "Run git log -1 --format='%an <%ae>'\n")
                .e(PERSON_NAME, &person(g).full);
            let p = person(g);
            w.t(g, " <").e(EMAIL, &email(g, &p)).t(g, ">\n");
        }
        _ => {
            w.t(g, "Run docker push\n")
                .v(&version(g))
                .t(g, ": digest: ")
                .v(&digest(g))
                .t(g, " size: ")
                .v(&(1000 + g.below(9000)).to_string())
                .t(g, "\n");
        }
    }
    w.t(g, "Job completed in ")
        .v(&format!("{}m {}s", g.below(20), g.below(60)));
}

/// A `.env` file.
fn dotenv(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.t(
        g,
        "# local overrides — DO NOT COMMIT\nNODE_ENV=production\nPORT=",
    )
    .v(&(3000 + g.below(6000)).to_string())
    .t(g, "\n");
    w.t(g, "APP_VERSION=")
        .v(&version(g))
        .t(g, "\nBUILD_SHA=")
        .v(&git_sha(g))
        .t(g, "\nAWS_REGION=")
        .v(region(g))
        .t(g, "\n");
    if g.chance(70) {
        w.t(g, "MAPS_KEY=").e(API_KEY, &api_key(g)).t(g, "\n");
    }
    if g.chance(50) {
        w.t(g, "CACHE_HOST=").e(IP_ADDRESS, &ip(g)).t(g, "\n");
    }
    if g.chance(50) {
        w.t(g, "SUPPORT_INBOX=")
            .e(EMAIL, &someone_email(g))
            .t(g, "\n");
    }
    if g.chance(30) {
        w.t(g, "SMS_TEST_NUMBER=")
            .e(PHONE, &phone_plain(g))
            .t(g, "\n");
    }
    w.t(g, "SESSION_ID_SALT=")
        .v(&uuid(g))
        .t(g, "\nFEATURE_FLAGS=new_cart,geo_v2");
}

/// A crash report from a desktop app.
fn crash_report(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.t(g, "Incident Identifier: ")
        .v(&uuid(g).to_uppercase())
        .t(g, "\nHardware Model:      ")
        .v(g.pick(&["Mac14,9", "MacBookAir10,1", "iPhone15,3"]))
        .t(g, "\n");
    w.t(g, "Version:             ")
        .v(&version(g))
        .t(g, "\nException Type:      EXC_BAD_ACCESS (SIGSEGV)\n");
    w.t(g, "Exception Codes:     KERN_INVALID_ADDRESS at 0x")
        .v(&hex(g, 16))
        .t(g, "\n\n");
    w.t(g, "Thread 0 Crashed:\n0   libsystem_kernel.dylib  0x")
        .v(&hex(g, 12))
        .t(g, " __pthread_kill + 8\n1   Ledger                  0x")
        .v(&hex(g, 12))
        .t(g, " SyncEngine.flush() + 412\n\n");
    let p = person(g);
    w.t(g, "User comment: ");
    match g.below(3) {
        0 => {
            w.t(g, "it crashed when I pasted my address ")
                .e(ADDRESS, &address(g).inline());
        }
        1 => {
            w.t(g, "crashed again while saving contact ")
                .e(PERSON_NAME, &person(g).full)
                .t(g, " ")
                .e(PHONE, &phone_plain(g));
        }
        _ => {
            w.t(g, "happens every time I open the invoice for ")
                .e(PERSON_NAME, &person(g).full);
        }
    }
    w.t(g, "\nReply to: ").e(EMAIL, &email(g, &p));
}

// ---------------------------------------------------------------------------------------------
// Templates: HR, property, pets, school, legal
// ---------------------------------------------------------------------------------------------

/// An HR onboarding checklist.
fn hr_onboarding(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let p = person(g);
    let box_ = |g: &mut Gen| g.pick(&["☐", "☑", "[ ]", "[x]"]);
    w.t(g, "Onboarding — ")
        .e(PERSON_NAME, &p.full)
        .t(g, " (start ")
        .v(&day(g))
        .t(g, ", team ")
        .v(g.pick(&["Platform", "Growth", "Payments", "Field Ops"]))
        .t(g, ")\n");
    let b = box_(g);
    w.t(g, b).t(g, " Laptop shipped to:\n");
    if g.chance(15) {
        w.e(ADDRESS, &military(g).multi());
    } else {
        w.e(ADDRESS, &address(g).multi());
    }
    w.t(g, "\n");
    let b = box_(g);
    w.t(g, b).t(g, " Emergency contact: ");
    let ec = person(g);
    w.e(PERSON_NAME, &ec.full)
        .t(g, " (")
        .one(g, &["spouse", "mother", "brother", "partner", "aunt"])
        .t(g, ") ")
        .e(PHONE, &phone(g))
        .t(g, "\n");
    let b = box_(g);
    match g.below(3) {
        0 => {
            w.t(g, b)
                .t(g, " Payroll account: ")
                .e(IBAN, &iban(g))
                .t(g, "\n");
        }
        1 => {
            w.t(g, b).t(g, " I-9 seen, SSN ").e(SSN, &ssn(g)).t(g, "\n");
        }
        _ => {
            w.t(g, b)
                .t(g, " Payroll: pending, employee id ")
                .v(&format!("E{}", g.digits(6)))
                .t(g, "\n");
        }
    }
    let b = box_(g);
    w.t(g, b)
        .t(g, " Buddy: ")
        .e(PERSON_NAME, &person(g).given)
        .t(g, "\n");
    let b = box_(g);
    w.t(g, b)
        .t(g, " Personal e-mail for day-one pack: ")
        .e(EMAIL, &email(g, &p));
}

/// A payroll change pasted from a spreadsheet (tabs, ragged columns).
fn sheet_payroll(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.t(g, "emp_id\tname\t\tbank\t\t\tssn\teffective\n");
    for _ in 0..2 + g.below(3) {
        let p = person(g);
        let name = written(g, &p);
        w.v(&format!("E{}", g.digits(5)))
            .t(g, "\t")
            .e(PERSON_NAME, &name)
            .t(g, "\t");
        if g.chance(60) {
            w.e(IBAN, &iban(g));
        } else {
            w.t(g, "(cheque)");
        }
        w.t(g, "\t");
        if g.chance(50) {
            w.e(SSN, &ssn(g));
        } else {
            w.t(g, "n/a");
        }
        w.t(g, "\t").v(&day(g)).t(g, "\n");
    }
}

/// Contacts pasted from a spreadsheet, columns out of line.
fn sheet_contacts(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let sep = g.pick(&["\t", "  |  ", " ; "]);
    w.t(g, "Name")
        .t(g, sep)
        .t(g, "Mobile")
        .t(g, sep)
        .t(g, "Email")
        .t(g, sep)
        .t(g, "Home town\n");
    for _ in 0..2 + g.below(4) {
        let p = person(g);
        let name = written(g, &p);
        w.e(PERSON_NAME, &name).t(g, sep);
        if g.chance(80) {
            w.e(PHONE, &phone_plain(g));
        } else {
            w.t(g, "—");
        }
        w.t(g, sep)
            .e(EMAIL, &email(g, &p))
            .t(g, sep)
            .e(LOCATION, &place(g))
            .t(g, "\n");
    }
    w.t(g, "Rows: ")
        .v(&(2 + g.below(400)).to_string())
        .t(g, "   Sheet1!A1:D")
        .v(&(3 + g.below(400)).to_string());
}

/// Notes from a property viewing.
fn viewing_notes(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.typo = 5;
    let (agent, buyer) = (person(g), person(g));
    w.t(g, "Viewing ")
        .v(&day(g))
        .t(g, " ")
        .v(&clock(g))
        .t(g, "\nProperty: ");
    let a = address(g);
    if g.chance(50) {
        w.t(g, "\n").e(ADDRESS, &a.multi());
    } else {
        w.e(ADDRESS, &a.inline());
    }
    w.t(g, "\nAgent: ")
        .e(PERSON_NAME, &agent.full)
        .t(g, " / ")
        .e(PHONE, &phone(g))
        .t(g, "\n");
    w.t(g, "Buyers: ")
        .e(PERSON_NAME, &buyer.full)
        .t(g, " + partner, relocating from ")
        .e(LOCATION, &place(g))
        .t(g, "\n");
    w.t(g, "- ").one(
        g,
        &[
            "damp in 2nd bedroom, agent says fixed 2024",
            "south facing, no parking",
            "lift out of order, 4th floor",
            "new boiler, asking ",
            "garden shared with flat B",
        ],
    );
    w.t(g, "\n- offer deadline ")
        .v(&day(g))
        .t(g, ", ref ")
        .v(&format!("LQ-{}", g.digits(5)));
    if g.chance(40) {
        w.t(g, "\n- vendor wants deposit to ").e(IBAN, &iban(g));
    }
}

/// A buyer's offer e-mail to an estate agent.
fn offer_email(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let (agent, me) = (person(g), person(g));
    w.t(g, "Hi ")
        .e(PERSON_NAME, &agent.given)
        .t(g, ",\n\nFollowing Saturday's viewing we'd like to offer ")
        .v(&money(g))
        .t(g, " for\n");
    w.e(ADDRESS, &address(g).multi()).t(g, "\n\n");
    w.t(g, "Our mortgage in principle is attached (ref ")
        .v(&format!("MIP{}", g.digits(8)))
        .t(g, "). We're flexible on dates; we currently rent in ");
    w.e(LOCATION, &place(g))
        .t(g, ".\n\nBest,\n")
        .e(PERSON_NAME, &me.full)
        .t(g, "\n")
        .e(PHONE, &phone(g));
}

/// A vet clinic visit record.
fn vet_record(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let owner = person(g);
    let (pet, breed) = g.pick(PETS);
    w.t(g, "PATIENT: ")
        .v(pet)
        .t(g, " (")
        .v(breed)
        .t(g, ", ")
        .v(&format!("{}y", 1 + g.below(14)))
        .t(g, ", ")
        .v(&format!("{}.{} kg", 2 + g.below(30), g.below(10)))
        .t(g, ")\n");
    w.t(g, "OWNER: ").e(PERSON_NAME, &owner.full).t(g, "\n");
    w.t(g, "ADDR: ");
    if g.chance(15) {
        w.e(ADDRESS, &military(g).inline());
    } else {
        w.e(ADDRESS, &address(g).inline());
    }
    w.t(g, "\nTEL: ").e(PHONE, &phone(g)).t(g, "\n");
    w.t(g, "Microchip: ")
        .v(&g.digits(15))
        .t(g, "   Rabies tag: ")
        .v(&format!("RT-{}", g.digits(6)))
        .t(g, "\n");
    w.t(g, "S: ")
        .one(
            g,
            &[
                "vomiting x2 since last night",
                "limping LH",
                "annual vacc + nail trim",
                "itchy ears, shaking head",
            ],
        )
        .t(g, "\n");
    w.t(g, "O: T ")
        .v(&format!("38.{}", g.below(10)))
        .t(g, " HR ")
        .v(&(80 + g.below(100)).to_string())
        .t(g, "\n");
    w.t(g, "Vet: Dr. ")
        .e(PERSON_NAME, &person(g).cue)
        .t(g, "   Paid ")
        .v(&money(g))
        .t(g, " card ")
        .v(&masked_card(g));
}

/// A vet reminder SMS.
fn vet_sms(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let owner = person(g);
    let (pet, _) = g.pick(PETS);
    w.t(g, "Hi ")
        .e(PERSON_NAME, &owner.given)
        .t(g, ", ")
        .v(pet)
        .t(g, " is due for boosters on ")
        .v(&day(g))
        .t(g, ". Reply Y to confirm or call ");
    w.e(PHONE, &phone_plain(g))
        .t(g, ". ")
        .v(company(g))
        .t(g, ". Text END to unsubscribe");
}

/// A parent's e-mail to a teacher.
fn parent_email(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    if g.chance(30) {
        w.case = Case::Lower;
    }
    w.typo = 3;
    let (teacher, parent, kid) = (person(g), person(g), person(g));
    w.t(g, "Dear ");
    if g.chance(50) {
        w.one(g, &["Ms. ", "Mr. ", "Mrs. ", "Teacher "]);
    } else {
        w.t(g, teacher.hon).t(g, " ");
    }
    w.e(PERSON_NAME, &teacher.cue).t(g, ",\n\n");
    match g.below(3) {
        0 => {
            w.e(PERSON_NAME, &kid.given)
                .t(g, " will miss school on ")
                .v(&day(g))
                .t(g, " — we're flying to ")
                .e(LOCATION, &place(g))
                .t(g, " for a family wedding. ");
            w.t(g, "Could you send any homework to ")
                .e(EMAIL, &email(g, &parent))
                .t(g, "?\n\n");
        }
        1 => {
            w.t(g, "We moved last month, please update the contact sheet:\n")
                .e(ADDRESS, &address(g).multi())
                .t(g, "\nmobile ")
                .e(PHONE, &phone(g))
                .t(g, "\n\n");
        }
        _ => {
            w.t(g, "Regarding the trip form: my son ")
                .e(PERSON_NAME, &kid.given)
                .t(g, " can go, I paid the ")
                .v(&money(g))
                .t(g, " online (receipt ")
                .v(&format!("#{}", g.digits(6)))
                .t(g, "). ");
            w.t(g, "His grandmother ")
                .e(PERSON_NAME, &person(g).full)
                .t(g, " will collect him.\n\n");
        }
    }
    let x = one(
        g,
        &[
            "Kind regards,\n",
            "Many thanks\n",
            "Thank u!!\n",
            "Warmly,\n",
        ],
    );
    w.t(g, x)
        .e(PERSON_NAME, &parent.full)
        .t(g, " (")
        .e(PERSON_NAME, &kid.given)
        .t(g, "'s ")
        .one(g, &["mum", "dad", "guardian", "mother"])
        .t(g, ")");
}

/// A court notice.
fn court_notice(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let (pl, df) = (person(g), person(g));
    w.t(g, "IN THE ")
        .one(
            g,
            &[
                "DISTRICT COURT",
                "MAGISTRATES' COURT",
                "CIRCUIT COURT OF THE FIRST CIRCUIT",
            ],
        )
        .t(g, "\n");
    w.t(g, "Case No. ")
        .v(&format!("{}-CV-{}", 2024 + g.below(3), g.digits(5)))
        .t(g, "\n\n");
    w.e(PERSON_NAME, &pl.full.to_uppercase())
        .t(g, ", Plaintiff,\nv.\n")
        .e(PERSON_NAME, &df.full.to_uppercase())
        .t(g, ", Defendant.\n\n");
    w.t(g, "NOTICE OF HEARING\n\nTO: ")
        .e(PERSON_NAME, &df.full)
        .t(g, "\n");
    w.e(ADDRESS, &address(g).multi()).t(g, "\n\n");
    w.t(g, "You are notified that a hearing is set for ")
        .v(&day(g))
        .t(g, " at ")
        .v(&clock(g))
        .t(g, " in Courtroom ")
        .v(&format!("{}{}", 1 + g.below(9), g.pick(&["A", "B", "C"])))
        .t(g, ".");
    if g.chance(50) {
        w.t(g, " Counsel for Plaintiff: ")
            .e(PERSON_NAME, &person(g).full)
            .t(g, ", ")
            .v(company(g))
            .t(g, ", tel. ")
            .e(PHONE, &phone(g))
            .t(g, ".");
    }
}

/// A wage garnishment order with the debtor's SSN.
fn garnishment(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let p = person(g);
    w.t(g, "ORDER TO WITHHOLD EARNINGS\nEmployer: ")
        .v(company(g))
        .t(g, " (EIN ")
        .v(&format!("{}-{}", g.digits(2), g.digits(7)))
        .t(g, ")\nJudgment debtor: ")
        .e(PERSON_NAME, &p.full)
        .t(g, "\n");
    w.t(g, "Social Security No.: ")
        .e(SSN, &ssn(g))
        .t(g, "\nLast known address: ")
        .e(ADDRESS, &address(g).inline())
        .t(g, "\n");
    w.t(g, "Amount of judgment: ")
        .v(&money(g))
        .t(g, "   Docket ")
        .v(&format!("{}-{}", g.digits(2), g.digits(6)))
        .t(g, "\n");
    w.t(g, "Remit to the clerk, account ")
        .e(IBAN, &iban(g))
        .t(g, " (BIC ")
        .v(g.pick(&["KAZBKZKA", "VALLMTMT", "HALOKZKZ", "BKMNMNUB", "MAYBMYKL"]))
        .t(g, "), quoting the docket number.");
}

// ---------------------------------------------------------------------------------------------
// Templates: events, media, travel
// ---------------------------------------------------------------------------------------------

/// A conference speaker bio.
fn speaker_bio(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let p = person(g);
    w.e(PERSON_NAME, &p.full)
        .t(g, " ")
        .one(
            g,
            &[
                "is a staff engineer at ",
                "leads the data team at ",
                "runs research at ",
                "co-founded ",
            ],
        )
        .v(company(g))
        .t(g, ". ");
    match g.below(3) {
        0 => {
            w.t(g, "Originally from ")
                .e(LOCATION, &place(g))
                .t(g, ", ")
                .one(g, &["she", "he", "they"])
                .t(g, " now lives in ")
                .e(LOCATION, &place(g))
                .t(g, ". ");
        }
        1 => {
            w.t(g, "Before that, ")
                .e(PERSON_NAME, &p.given)
                .t(g, " spent six years building payment rails across ")
                .v(region(g))
                .t(g, ". ");
        }
        _ => {
            w.e(PERSON_NAME, &p.cue)
                .t(g, "'s talk covers schema migrations without downtime. ");
        }
    }
    w.t(g, "Find ")
        .one(g, &["her", "him", "them"])
        .t(g, " at ")
        .e(URL, &url(g, &p));
    if g.chance(40) {
        w.t(g, " or write to ").e(EMAIL, &email(g, &p));
    }
    w.t(g, ".");
}

/// A call-for-papers submission form.
fn cfp_form(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let p = person(g);
    w.t(g, "Submission #")
        .v(&g.digits(4))
        .t(g, "\nTrack: ")
        .v(g.pick(&["Infra", "Data", "Security", "Community"]))
        .t(g, "\nSpeaker: ")
        .e(PERSON_NAME, &p.full)
        .t(g, "\n");
    w.t(g, "Email: ")
        .e(EMAIL, &email(g, &p))
        .t(g, "\nPhone (for the day): ")
        .e(PHONE, &phone(g))
        .t(g, "\n");
    w.t(g, "Travelling from: ")
        .e(LOCATION, &place(g))
        .t(g, "\nTravel grant: ")
        .one(g, &["yes", "no"])
        .t(g, "\n");
    w.t(g, "Website: ")
        .e(URL, &url(g, &p))
        .t(g, "\nTitle: ")
        .one(
            g,
            &[
                "Queues all the way down",
                "What our pager taught us",
                "Offline-first field apps",
            ],
        );
}

/// A podcast transcript with speaker turns.
fn podcast(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let (host, guest) = (person(g), person(g));
    let ts = |g: &mut Gen| format!("[{:02}:{:02}:{:02}]", g.below(2), g.below(60), g.below(60));
    w.v(&ts(g))
        .t(g, " ")
        .e(PERSON_NAME, &host.full.to_uppercase())
        .t(g, ": Welcome back. My guest today grew up in ")
        .e(LOCATION, &place(g))
        .t(g, " and now farms seaweed. ");
    w.t(g, "Welcome, ").e(PERSON_NAME, &guest.given).t(g, ".\n");
    w.v(&ts(g))
        .t(g, " ")
        .e(PERSON_NAME, &guest.full.to_uppercase())
        .t(g, ": Thanks for having me. ");
    w.one(
        g,
        &[
            "Honestly it started by accident. ",
            "So, um, my uncle had a boat. ",
            "Right, so the short version is, we were broke. ",
        ],
    );
    w.t(g, "[laughs]\n");
    w.v(&ts(g))
        .t(g, " ")
        .e(PERSON_NAME, &host.chat().to_uppercase())
        .t(g, ": ");
    match g.below(2) {
        0 => {
            w.t(g, "And if people want to order, where do they go?\n")
                .v(&ts(g))
                .t(g, " ")
                .e(PERSON_NAME, &guest.chat().to_uppercase())
                .t(g, ": The site, ");
            w.e(URL, &url(g, &guest))
                .t(g, ", or honestly just text me, ")
                .e(PHONE, &phone_plain(g))
                .t(g, ".\n");
        }
        _ => {
            w.t(g, "This episode is sponsored by ")
                .v(company(g))
                .t(g, " — use code ")
                .v(g.pick(&["KELP20", "SPRING15", "PODFRIENDS"]))
                .t(g, " for ")
                .v(&format!("{}%", 10 + g.below(20)))
                .t(g, " off.\n");
        }
    }
}

/// A hotel booking confirmation.
fn hotel_booking(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let p = person(g);
    w.t(g, "Booking confirmed ✔\nConfirmation number: ")
        .v(&booking_ref(g))
        .t(g, "\nGuest: ")
        .e(PERSON_NAME, &p.full)
        .t(g, "\n");
    w.t(g, "Check-in ")
        .v(&day(g))
        .t(g, " from 15:00 · Check-out ")
        .v(&day(g))
        .t(g, " until 11:00\nRoom: ")
        .v(g.pick(&[
            "Deluxe King",
            "Twin, garden view",
            "Family suite",
            "Capsule",
        ]))
        .t(g, " · ")
        .v(&money(g))
        .t(g, "\n\n");
    w.t(g, "Property address:\n")
        .e(ADDRESS, &address(g).multi())
        .t(g, "\nFront desk: ")
        .e(PHONE, &phone(g))
        .t(g, "\n\n");
    if g.chance(50) {
        w.t(g, "Guaranteed by card ")
            .e(CREDIT_CARD, &card(g))
            .t(g, " (exp ")
            .v(&format!("{:02}/{}", 1 + g.below(12), 27 + g.below(5)))
            .t(g, ")\n");
    } else {
        w.t(g, "Paid with ").v(&masked_card(g)).t(g, "\n");
    }
    w.t(g, "Manage your booking: ").e(
        URL,
        &format!("https://book.example-stays.com/m/{}", alnum(g, 24)),
    );
}

/// A front-desk note between shifts.
fn front_desk(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.case = if g.chance(50) {
        Case::Lower
    } else {
        Case::Keep
    };
    let p = person(g);
    w.t(g, "rm ")
        .v(&(100 + g.below(700)).to_string())
        .t(g, " — ")
        .e(PERSON_NAME, &p.full)
        .t(g, " late arrival ~")
        .v(&clock(g))
        .t(g, ", flight from ")
        .e(LOCATION, &place(g))
        .t(g, " delayed. ");
    w.t(
        g,
        "card on file declined twice, guest read a new one over the phone: ",
    )
    .e(CREDIT_CARD, &card(g))
    .t(g, ". ");
    w.t(g, "call back on ")
        .e(PHONE, &phone_plain(g))
        .t(g, " if it fails again. pls shred this after.");
}

/// An ALL CAPS telegram-style message.
fn telegram(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.case = Case::Upper;
    let (a, b) = (person(g), person(g));
    w.t(g, "ARRIVING ")
        .e(LOCATION, &place(g))
        .t(g, " ")
        .v(&day(g))
        .t(g, " STOP ");
    match g.below(3) {
        0 => {
            w.t(g, "CONTACT ")
                .e(PERSON_NAME, &a.full)
                .t(g, " ")
                .e(PHONE, &phone_plain(g))
                .t(g, " STOP ");
        }
        1 => {
            w.t(g, "SEND FUNDS TO ").e(IBAN, &iban(g)).t(g, " STOP ");
        }
        _ => {
            w.t(g, "STAYING WITH ")
                .e(PERSON_NAME, &a.full)
                .t(g, " ")
                .e(ADDRESS, &address(g).inline())
                .t(g, " STOP ");
        }
    }
    w.t(g, "LOVE ").e(PERSON_NAME, &b.given).t(g, " STOP");
}

/// A courier's dispatch message in a group chat.
fn courier_dispatch(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.typo = 6;
    let p = person(g);
    w.t(g, "🚚 job ")
        .v(&format!("#{}", g.digits(5)))
        .t(g, " pickup ")
        .v(&clock(g))
        .t(g, "\ndrop: ");
    if g.chance(15) {
        w.e(ADDRESS, &military(g).inline());
    } else {
        w.e(ADDRESS, &address(g).inline());
    }
    w.t(g, "\nrecipient ")
        .e(PERSON_NAME, &p.full)
        .t(g, " ")
        .e(PHONE, &phone_plain(g))
        .t(g, "\nCOD ")
        .v(&money(g))
        .t(g, " 📦 fragile");
}

// ---------------------------------------------------------------------------------------------
// Templates: habits (OCR, dictation, non-native English, mixed languages)
// ---------------------------------------------------------------------------------------------

/// An OCR'd receipt with broken spacing.
fn ocr_receipt(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.v(&company(g).to_uppercase()).t(g, "\n");
    w.e(ADDRESS, &address(g).inline().to_uppercase())
        .t(g, "\nTE L ")
        .e(PHONE, &phone_plain(g))
        .t(g, "\n");
    w.t(g, "- - - - - - - - - - - -\n");
    for _ in 0..2 + g.below(3) {
        let item = g.pick(&[
            "FLAT WHITE",
            "PAN DE SAL",
            "MOMO X6",
            "LAGMAN",
            "PAPA RELLENA",
            "BOSTON CREAM",
            "LIMA BEAN SOUP",
            "KAYA TOAST",
        ]);
        w.v(item).t(g, "   ").v(&money(g)).t(g, "\n");
    }
    w.t(g, "T0TAL   ")
        .v(&money(g))
        .t(g, "\nC ARD ")
        .v(&masked_card(g))
        .t(g, "  AUTH ")
        .v(&g.shape("##A###"))
        .t(g, "\n");
    w.t(g, "Cash ier: ")
        .e(PERSON_NAME, &person(g).given.to_uppercase())
        .t(g, "   ")
        .v(&day(g))
        .t(g, " ")
        .v(&clock(g))
        .t(g, "\nTH ANK Y0U  C0ME AGA1N");
}

/// Voice-to-text with no punctuation or capitals.
fn dictated(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.case = Case::Lower;
    let (me, other) = (person(g), person(g));
    w.t(g, "hey its ").e(PERSON_NAME, &me.given).t(g, " ");
    match g.below(4) {
        0 => {
            w.t(g, "calling about the flat on ")
                .e(ADDRESS, &address(g).inline().replace(',', ""))
                .t(g, " ring me when you get this ")
                .e(PHONE, &phone_plain(g))
                .t(g, " thanks bye");
        }
        1 => {
            w.t(g, "i am at the clinic with ")
                .e(PERSON_NAME, &other.given)
                .t(g, " they need her date of birth and the insurance number ")
                .t(g, "ill text you later the address is ");
            w.e(ADDRESS, &address(g).inline().replace(',', ""))
                .t(g, " ok");
        }
        2 => {
            w.t(g, "just landed in ")
                .e(LOCATION, &place(g))
                .t(g, " tell ")
                .e(PERSON_NAME, &other.given)
                .t(g, " to pick me up at gate ")
                .v(&(1 + g.below(40)).to_string())
                .t(g, " love you");
        }
        _ => {
            w.t(g, "reminder to self order ")
                .v(&format!("{}", 2 + g.below(9)))
                .t(g, " chairs for the hall and ask about the ")
                .v(&money(g))
                .t(g, " deposit will do tomorrow");
        }
    }
}

/// An e-mail from a writer whose English is a second language.
fn esl_email(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.typo = 3;
    let (me, them) = (person(g), person(g));
    if g.chance(50) {
        w.t(g, "Dear Sir/Madam ");
    } else {
        w.t(g, "Respected ").t(g, them.hon).t(g, " ");
    }
    w.e(PERSON_NAME, &them.cue).t(g, ",\n\n");
    w.t(
        g,
        "Kindly find below my details for the registration. My name is ",
    )
    .e(PERSON_NAME, &me.full)
    .t(g, " and I am staying in ")
    .e(LOCATION, &place(g))
    .t(g, " since ")
    .v(&(2015 + g.below(11)).to_string())
    .t(g, ". ");
    match g.below(3) {
        0 => {
            w.t(g, "My postal address is ")
                .e(ADDRESS, &address(g).inline())
                .t(g, ". Please to send the documents there only. ");
        }
        1 => {
            w.t(g, "For the fees I am doing the transfer from my account ")
                .e(IBAN, &iban(g))
                .t(g, ", please confirm you are receiving. ");
        }
        _ => {
            w.t(g, "You can reach to me in whatsapp ")
                .e(PHONE, &phone(g))
                .t(g, " any time, also in the evening. ");
        }
    }
    w.t(g, "I am waiting your kind reply.\n\nWith best regards\n")
        .e(PERSON_NAME, &me.full)
        .t(g, "\n")
        .e(EMAIL, &email(g, &me));
}

/// A Spanish/English chat.
fn spanglish(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.typo = 4;
    let (a, b, c) = (person(g), person(g), person(g));
    w.e(PERSON_NAME, &a.chat())
        .t(g, ": oye, ya le mandaste el invoice a ")
        .e(PERSON_NAME, &c.cue)
        .t(g, "?\n");
    w.e(PERSON_NAME, &b.chat()).t(g, ": ");
    match g.below(3) {
        0 => {
            w.t(g, "nope, no tengo su email. me lo pasas?\n")
                .e(PERSON_NAME, &a.chat())
                .t(g, ": ")
                .e(EMAIL, &email(g, &c))
                .t(g, " 🙏 y su cel es ")
                .e(PHONE, &phone_plain(g));
        }
        1 => {
            w.t(g, "sí, pero rebotó. she moved to ")
                .e(LOCATION, &place(g))
                .t(g, " creo\n")
                .e(PERSON_NAME, &a.chat())
                .t(g, ": ufff ok");
        }
        _ => {
            w.t(g, "todavía no, el PO ")
                .v(&format!("PO-{}", g.digits(6)))
                .t(g, " sigue pending en ")
                .v(region(g))
                .t(g, "\n")
                .e(PERSON_NAME, &a.chat())
                .t(g, ": dale, mañana");
        }
    }
}

/// A Hinglish chat.
fn hinglish(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.case = Case::Lower;
    let (a, b, c) = (indian(g), indian(g), person(g));
    w.e(PERSON_NAME, &a.chat())
        .t(g, ": bhai ")
        .e(PERSON_NAME, &c.given)
        .t(
            g,
            " ka number bhej do na, delivery wala call kar raha hai\n",
        );
    w.e(PERSON_NAME, &b.chat()).t(g, ": ");
    match g.below(3) {
        0 => {
            w.e(PHONE, &phone_plain(g))
                .t(g, " ye hai, abhi ")
                .e(LOCATION, &place(g))
                .t(g, " mein hai woh\n");
        }
        1 => {
            w.t(g, "arre address bhi chahiye? ")
                .e(ADDRESS, &address(g).inline())
                .t(g, "\n");
        }
        _ => {
            w.t(g, "pata nahi yaar, ticket ")
                .v(&ticket(g))
                .t(g, " pe dekh lo\n");
        }
    }
    w.e(PERSON_NAME, &a.chat())
        .t(g, ": ")
        .one(g, &["thik hai thanks 🙏", "done, sorted", "accha ok"]);
}

/// A German/English workplace message.
fn denglisch(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let (a, b) = (person(g), person(g));
    w.t(g, "Hi ")
        .e(PERSON_NAME, &a.given)
        .t(g, ", kannst du bitte ")
        .one(g, &["Herrn ", "Frau "])
        .e(PERSON_NAME, &b.cue)
        .t(g, " zurückrufen? ");
    match g.below(3) {
        0 => {
            w.t(g, "Seine Nummer ist ")
                .e(PHONE, &phone(g))
                .t(g, ", er wartet auf das Feedback zum Angebot ")
                .v(&format!("AG-{}", g.digits(5)))
                .t(g, ". ");
        }
        1 => {
            w.t(g, "Sie hat die Lieferadresse geändert:\n")
                .e(ADDRESS, &address(g).multi())
                .t(g, "\nDas Meeting ist dann ")
                .v(&day(g))
                .t(g, ". ");
        }
        _ => {
            w.t(g, "Der Deploy ist durch (")
                .v(&version(g))
                .t(g, "), nur das Monitoring zickt noch. ");
        }
    }
    w.t(g, "Danke & cheers, ").e(PERSON_NAME, &person(g).given);
}

/// A Taglish or Manglish message.
fn taglish(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.case = if g.chance(60) {
        Case::Lower
    } else {
        Case::Keep
    };
    let (a, b) = (person(g), person(g));
    if g.chance(50) {
        w.t(g, "Hello po ")
            .e(PERSON_NAME, &a.given)
            .t(g, "! Pa-confirm lang po ng delivery bukas. ");
        w.t(g, "Padala na lang po sa ")
            .e(ADDRESS, &address(g).inline())
            .t(g, ". Salamat po! Text niyo lang ako sa ")
            .e(PHONE, &phone_plain(g));
    } else {
        w.t(g, "boss ")
            .e(PERSON_NAME, &a.given)
            .t(g, ", parcel sampai already ah, but nobody at house. ");
        w.t(g, "can call ")
            .e(PERSON_NAME, &b.given)
            .t(g, " or not? number ")
            .e(PHONE, &phone_plain(g))
            .t(g, " lah. tq");
    }
}

/// A Malay-English visa invitation letter.
fn invitation_letter(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let (host, guest) = (person(g), person(g));
    w.t(g, "LETTER OF INVITATION\n\nTo the Consular Section,\n\nI, ")
        .e(PERSON_NAME, &host.full)
        .t(g, ", residing at\n");
    w.e(ADDRESS, &address(g).multi())
        .t(g, "\nhereby invite my ")
        .one(
            g,
            &["cousin", "friend", "sister-in-law", "former colleague"],
        )
        .t(g, " ")
        .e(PERSON_NAME, &guest.full)
        .t(g, " of ");
    w.e(LOCATION, &place(g))
        .t(g, " to visit from ")
        .v(&day(g))
        .t(g, " to ")
        .v(&day(g))
        .t(g, ". I will cover lodging and meals.\n\n");
    w.t(g, "Contact: ")
        .e(PHONE, &phone(g))
        .t(g, " / ")
        .e(EMAIL, &email(g, &host))
        .t(g, "\n\nSigned,\n")
        .e(PERSON_NAME, &host.full);
}

/// A sports club membership form with a card for the subscription.
fn club_form(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let p = person(g);
    w.t(g, "MEMBERSHIP FORM — ")
        .v(company(g))
        .t(g, " Rowing Club\n");
    w.t(g, "Member name ........ ")
        .e(PERSON_NAME, &p.full)
        .t(g, "\nHome address ...... ")
        .e(ADDRESS, &address(g).inline())
        .t(g, "\n");
    w.t(g, "Mobile ............ ")
        .e(PHONE, &phone(g))
        .t(g, "\nCard for dues ..... ")
        .e(CREDIT_CARD, &card(g))
        .t(g, "\n");
    w.t(g, "Tier .............. ")
        .v(g.pick(&["Junior", "Adult", "Masters", "Family"]))
        .t(g, " (")
        .v(&money(g))
        .t(g, "/yr)\nSigned ")
        .v(&day(g));
}

/// A caller reading a card and an address to a phone-order desk.
fn phone_order(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.typo = 3;
    let p = person(g);
    w.t(g, "Call log ")
        .v(&clock(g))
        .t(g, " — caller ")
        .e(PERSON_NAME, &p.full)
        .t(g, ", order ")
        .v(&format!("SO-{}", g.digits(6)))
        .t(g, "\n");
    w.t(g, "Paid by card ")
        .e(CREDIT_CARD, &card(g))
        .t(g, " (read out twice), ship to\n");
    w.e(ADDRESS, &address(g).multi())
        .t(g, "\nCallback ")
        .e(PHONE, &phone(g))
        .t(g, ". Caller connected from ")
        .e(IP_ADDRESS, &ip(g))
        .t(g, " for the web receipt.");
}

/// A Japanese hotel's arrival notice in English with the address in Japanese.
fn ryokan_notice(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let p = person(g);
    let (ward, code) = g.pick(KYOTO_WARDS);
    let addr = format!(
        "〒{code}-{} 京都府京都市{ward}{}{}番地",
        8000 + g.below(999),
        g.own(KYOTO_STREETS),
        1 + g.below(600)
    );
    w.t(g, "Dear ").e(PERSON_NAME, &p.given).t(
        g,
        " sama,\n\nThank you for choosing us. Please show this address to the taxi driver:\n",
    );
    w.e(ADDRESS, &addr)
        .t(g, "\n\nDinner is served at ")
        .v(&clock(g))
        .t(g, ". Your reservation code is ")
        .v(&booking_ref(g))
        .t(g, ".\nIf delayed, please telephone ")
        .e(PHONE, &phone_plain(g))
        .t(g, ".");
}

/// A contact dump in a group chat with OPC's own ids around it (those are never labelled).
fn bot_relay(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let p = person(g);
    w.t(g, "relay from ")
        .v(&format!("web:{}", hex(g, 16)))
        .t(g, " to ")
        .v(&format!("slack:U{}", g.shape("A#AA#A#A")))
        .t(g, "\n");
    w.t(g, "> new lead: ")
        .e(PERSON_NAME, &p.full)
        .t(g, ", ")
        .e(EMAIL, &email(g, &p))
        .t(g, ", ")
        .e(PHONE, &phone(g))
        .t(g, "\n");
    w.t(g, "> source: ")
        .e(URL, &url(g, &p))
        .t(g, "\n> conversation ")
        .v(&format!("c-{}", hex(g, 12)));
}

// ---------------------------------------------------------------------------------------------
// Templates with no personal data
// ---------------------------------------------------------------------------------------------

fn none_retro(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.t(g, "Sprint ")
        .v(&(20 + g.below(60)).to_string())
        .t(g, " retro — Team ")
        .v(g.pick(&["Falcon", "Kelp", "Marmot", "Obsidian"]))
        .t(g, "\n");
    w.t(g, "Went well: ")
        .v(&ticket(g))
        .t(g, " shipped to ")
        .v(region(g))
        .t(g, ", error budget at ")
        .v(&format!("{}%", 60 + g.below(40)))
        .t(g, ".\n");
    let x = one(g, &["Mark ", "Bill ", "Grace ", "Will "]);
    match x {
        "Mark " => w.t(g, "Mark the flaky test as quarantined.\n"),
        "Bill " => w.t(g, "Bill the pilot customer from next month.\n"),
        "Grace " => w.t(g, "Grace period for the old API ends in Q3.\n"),
        _ => w.t(g, "Will revisit the runbook in the next cycle.\n"),
    };
    w.t(g, "Action items: migrate ")
        .v(g.pick(&["Kestrel CLI", "Northwind Ledger", "Harbor UI"]))
        .t(g, " to ")
        .v(&version(g))
        .t(g, "; HR to confirm the OKR template.");
}

fn none_k8s_events(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.t(g, "LAST SEEN   TYPE      REASON      OBJECT\n");
    for _ in 0..3 + g.below(3) {
        w.v(&format!("{}m", 1 + g.below(59)))
            .t(g, "          ")
            .v(g.pick(&["Normal ", "Warning"]))
            .t(g, "   ")
            .v(g.pick(&["Pulled     ", "Scheduled  ", "BackOff    ", "Killing    "]))
            .t(g, " pod/")
            .v(&pod(g))
            .t(g, "\n");
    }
    w.t(g, "image digest ").v(&digest(g));
}

fn none_git_log(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    for _ in 0..3 + g.below(4) {
        w.v(&short_sha(g))
            .t(g, " ")
            .one(
                g,
                &[
                    "fix(cart): round half-even",
                    "chore: bump deps",
                    "feat(geo): tile cache",
                    "docs: regen API ref",
                    "refactor: split worker pool",
                    "revert: drop retry storm guard",
                ],
            )
            .t(g, " (")
            .v(&ticket(g))
            .t(g, ")\n");
    }
    w.t(g, "Merge: ")
        .v(&short_sha(g))
        .t(g, " ")
        .v(&short_sha(g));
}

fn none_lockfile(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let pkg = g.pick(&["left-pad", "tslib", "zod", "undici", "picomatch"]);
    w.t(g, "\"node_modules/")
        .v(pkg)
        .t(g, "\": {\n  \"version\": \"")
        .v(&version(g))
        .t(g, "\",\n  \"resolved\": \"registry/")
        .v(pkg)
        .t(g, ".tgz\",\n");
    w.t(g, "  \"integrity\": \"sha512-")
        .v(&alnum(g, 86))
        .t(g, "==\",\n  \"license\": \"MIT\"\n}");
}

fn none_api_docs(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.t(
        g,
        "### Authentication\nPass your key in the header: `Authorization: Bearer YOUR_API_KEY`. ",
    );
    w.t(
        g,
        "Keys start with a prefix that names the environment; test keys never move money.\n\n",
    );
    w.t(g, "Example response id: ")
        .v(&uuid(g))
        .t(g, ", rate limit ")
        .v(&(100 + g.below(900)).to_string())
        .t(g, "/min, region ")
        .v(region(g))
        .t(g, ".");
}

fn none_status_page(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.t(g, "Degraded performance — ")
        .v(region(g))
        .t(g, "\n")
        .v(&day(g))
        .t(g, " ")
        .v(&clock(g))
        .t(
            g,
            " UTC: Investigating elevated error rates for card payments.\n",
        );
    w.t(g, "Update: mitigated by ")
        .v(&version(g))
        .t(g, " rollback. Incident ")
        .v(&ticket(g))
        .t(g, " closed.");
}

fn none_menu(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.t(g, "Today's specials\n");
    for _ in 0..3 + g.below(3) {
        let item = g.pick(&[
            "Lima bean stew",
            "Boston cream pie",
            "Turkey club",
            "Java chip frappé",
            "Brussels sprouts",
            "Swiss roll",
            "Jordan almonds",
            "Peking duck bao",
            "Denver omelette",
        ]);
        w.v(item).t(g, " ..... ").v(&money(g)).t(g, "\n");
    }
    w.t(g, "May contain nuts. Summer hours from June.");
}

fn none_warehouse(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.t(g, "BIN     SKU          QTY  LOT\n");
    for _ in 0..3 + g.below(4) {
        w.v(&g.shape("A#-##-A"))
            .t(g, "  ")
            .v(&g.shape("AAA-####-A"))
            .t(g, "  ")
            .v(&format!("{:>4}", g.below(900)))
            .t(g, "  ")
            .v(&g.shape("L##A##"))
            .t(g, "\n");
    }
    w.t(g, "cycle count ")
        .v(&day(g))
        .t(g, ", variance ")
        .v(&format!("{}.{}%", g.below(3), g.below(10)));
}

fn none_standup_bot(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.t(g, "Daily digest for ").v(&web_id(g)).t(g, "\n");
    w.one(
        g,
        &[
            "Rose 4% week over week. ",
            "Amber alerts: 2. ",
            "Hope to close the audit by Friday. ",
            "Faith in the new cache is restored. ",
        ],
    );
    w.t(g, "Open: ")
        .v(&ticket(g))
        .t(g, ", ")
        .v(&ticket(g))
        .t(g, ". Deploy ")
        .v(&short_sha(g))
        .t(g, " to ")
        .v(region(g))
        .t(g, " at ")
        .v(&clock(g))
        .t(g, ".");
}

fn none_ci_matrix(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.t(
        g,
        "strategy:\n  matrix:\n    runner: [self-hosted-arm64, macos-15]\n    toolchain: [",
    )
    .v(&version(g))
    .t(g, ", nightly]\n");
    w.t(g, "cache-key: ")
        .v(&hex(g, 40))
        .t(g, "\nartifact: build-")
        .v(&uuid(g))
        .t(g, ".tar.zst");
}

fn none_price_sheet(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.t(
        g,
        "Plan       | Seats | Price\n-----------|-------|------\n",
    );
    for plan in ["Starter", "Team", "Enterprise"] {
        w.v(plan)
            .t(g, "  |  ")
            .v(&(1 + g.below(500)).to_string())
            .t(g, "  | ")
            .v(&money(g))
            .t(g, "\n");
    }
    w.t(
        g,
        "Prices exclude VAT; APAC and LATAM billed in local currency.",
    );
}

// ---------------------------------------------------------------------------------------------
// Templates: more kinds
// ---------------------------------------------------------------------------------------------

/// An out-of-office auto-reply naming a colleague to contact.
fn out_of_office(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    if g.chance(25) {
        w.case = Case::Lower;
    }
    let (me, cover) = (person(g), person(g));
    w.one(g, &["Automatic reply: ", "Auto-Reply: ", "Out of office: "])
        .v(&ticket(g))
        .t(g, "\n\n");
    w.one(
        g,
        &[
            "Thanks for your note. ",
            "Salaam, and thanks for writing. ",
            "Hello! ",
        ],
    );
    w.t(g, "I'm ")
        .one(
            g,
            &[
                "on leave",
                "at a field site",
                "on parental leave",
                "travelling",
            ],
        )
        .t(g, " in ")
        .e(LOCATION, &place(g))
        .t(g, " until ")
        .v(&day(g));
    w.t(
        g,
        " and reading mail rarely. For anything that can't wait, ",
    )
    .one(g, &["reach ", "please contact ", "ask "]);
    w.t(g, cover.hon)
        .t(g, " ")
        .e(PERSON_NAME, &cover.full)
        .t(g, " on ")
        .e(PHONE, &phone(g));
    if g.chance(50) {
        w.t(g, " or ").e(EMAIL, &email(g, &cover));
    }
    w.t(g, ".\n\n").e(PERSON_NAME, &me.given);
    if g.chance(40) {
        w.t(g, " 🌴");
    }
}

/// A SQL dump of a customer table.
fn sql_dump(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.t(g, "-- dump ")
        .v(&day(g))
        .t(g, " schema_version=")
        .v(&(100 + g.below(400)).to_string())
        .t(g, "\n");
    w.t(
        g,
        "INSERT INTO crm.people (cust_id, legal_name, mail, msisdn, hometown, inserted_at) VALUES\n",
    );
    let rows = 2 + g.below(3);
    for i in 0..rows {
        let p = person(g);
        w.t(g, "  (")
            .v(&(1000 + g.below(90000)).to_string())
            .t(g, ", '")
            .e(PERSON_NAME, &p.full.replace('\'', "''"))
            .t(g, "', '");
        w.e(EMAIL, &email(g, &p)).t(g, "', ");
        if g.chance(70) {
            w.t(g, "'").e(PHONE, &phone_plain(g)).t(g, "'");
        } else {
            w.t(g, "NULL");
        }
        w.t(g, ", '")
            .e(
                LOCATION,
                &mine(g, CITIES, |t| vec![t.0]).0.replace('\'', "''"),
            )
            .t(g, "', '")
            .v(&format!(
                "2026-{:02}-{:02} {:02}:{:02}:00",
                1 + g.below(12),
                1 + g.below(28),
                g.below(24),
                g.below(60)
            ))
            .t(g, "')");
        w.t(g, if i + 1 == rows { ";\n" } else { ",\n" });
    }
    w.t(g, "-- rows: ")
        .v(&rows.to_string())
        .t(g, ", checksum ")
        .v(&hex(g, 32));
}

/// An sshd auth log.
fn auth_log(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let host = g.pick(&["bastion-2", "edge-kz1", "db-replica", "jump01"]);
    for _ in 0..2 + g.below(3) {
        let ts = format!(
            "{} {:2} {:02}:{:02}:{:02}",
            g.pick(&["Jan", "Mar", "Jun", "Oct", "Nov"]),
            1 + g.below(28),
            g.below(24),
            g.below(60),
            g.below(60)
        );
        w.v(&ts)
            .t(g, " ")
            .v(host)
            .t(g, " sshd[")
            .v(&(1000 + g.below(60000)).to_string())
            .t(g, "]: ");
        match g.below(3) {
            0 => {
                w.t(g, "Failed password for invalid user ")
                    .v(g.pick(&["admin", "oracle", "test", "pi", "ubnt"]))
                    .t(g, " from ")
                    .e(IP_ADDRESS, &ip(g))
                    .t(g, " port ")
                    .v(&(1024 + g.below(60000)).to_string())
                    .t(g, " ssh2\n");
            }
            1 => {
                w.t(g, "Accepted publickey for deploy from ")
                    .e(IP_ADDRESS, &ip(g))
                    .t(g, " port ")
                    .v(&(1024 + g.below(60000)).to_string())
                    .t(g, " ssh2: ED25519 SHA256:")
                    .v(&alnum(g, 43))
                    .t(g, "\n");
            }
            _ => {
                w.t(
                    g,
                    "pam_unix(sshd:session): session closed for user deploy\n",
                );
            }
        }
    }
}

/// A commit with trailers.
fn commit_trailers(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let (a, r, v) = (person(g), person(g), person(g));
    w.t(g, "commit ")
        .v(&git_sha(g))
        .t(g, "\nAuthor: ")
        .e(PERSON_NAME, &a.full)
        .t(g, " <")
        .e(EMAIL, &email(g, &a))
        .t(g, ">\nDate:   ")
        .v(&day(g))
        .t(g, "\n\n    ");
    w.one(
        g,
        &[
            "geo: stop double-counting ferry legs",
            "payroll: accept compact IBANs",
            "api: reject keys in query strings",
            "ui: keep RTL names intact",
        ],
    )
    .t(g, "\n\n    ");
    w.t(g, "Fixes ")
        .v(&ticket(g))
        .t(g, ".\n\n    Reported-by: ")
        .e(PERSON_NAME, &r.full)
        .t(g, "\n    Reviewed-by: ")
        .e(PERSON_NAME, &v.full)
        .t(g, " <")
        .e(EMAIL, &email(g, &v))
        .t(g, ">\n    Signed-off-by: ")
        .e(PERSON_NAME, &a.full)
        .t(g, " <")
        .e(EMAIL, &email(g, &a))
        .t(g, ">");
}

/// A removals company's estimate.
fn moving_quote(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let p = person(g);
    w.t(g, "REMOVALS ESTIMATE ")
        .v(&format!("#{}", g.digits(6)))
        .t(g, "\nCustomer: ")
        .e(PERSON_NAME, &p.full)
        .t(g, "\n\nCollect from:\n")
        .e(ADDRESS, &address(g).multi())
        .t(g, "\n\nDeliver to:\n");
    if g.chance(25) {
        w.e(ADDRESS, &military(g).multi());
    } else {
        w.e(ADDRESS, &address(g).multi());
    }
    w.t(g, "\n\nVolume ")
        .v(&format!("{} m³", 8 + g.below(60)))
        .t(g, " · crates ")
        .v(&(2 + g.below(30)).to_string())
        .t(g, " · piano: ")
        .one(g, &["no", "yes (upright)"])
        .t(g, "\n");
    w.t(g, "Moving-day contact: ")
        .e(PHONE, &phone(g))
        .t(g, "\n");
    if g.chance(50) {
        w.t(g, "Deposit ")
            .v(&money(g))
            .t(g, " taken on ")
            .e(CREDIT_CARD, &card(g));
    } else {
        w.t(g, "Deposit ")
            .v(&money(g))
            .t(g, " due by transfer to ")
            .e(IBAN, &iban(g));
    }
}

/// A short-let host's welcome message.
fn host_message(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.typo = 4;
    let (guest, host) = (person(g), person(g));
    w.t(g, "Hi ")
        .e(PERSON_NAME, &guest.given)
        .t(g, "! 🏡 Welcome. The place is at ")
        .e(ADDRESS, &address(g).inline())
        .t(g, ". ");
    w.t(g, "Door code ")
        .v(&format!("{}#", g.digits(4)))
        .t(g, ", wifi ")
        .v(g.pick(&["Kelp-Guest", "Yurt5G", "CasaRoser", "Hale_Wifi"]))
        .t(g, " / ")
        .v(&alnum(g, 10))
        .t(g, ". ");
    w.t(g, "Bins go out Tuesday. Anything at all, WhatsApp me on ")
        .e(PHONE, &phone_plain(g))
        .t(g, " — ")
        .e(PERSON_NAME, &host.given);
}

/// A youth team roster with parents' phones, odd alignment.
fn team_roster(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.one(g, &["U12 GIRLS", "U10 MIXED", "U14 BOYS"])
        .t(g, " — ")
        .one(g, &["SPRING", "AUTUMN"])
        .t(
            g,
            " ROSTER\n#   Player              Parent/guardian        Phone\n",
        );
    for _ in 0..3 + g.below(3) {
        let (kid, parent) = (person(g), person(g));
        let (kid, parent) = (written(g, &kid), written(g, &parent));
        w.v(&format!("{:<4}", 1 + g.below(30)))
            .e(PERSON_NAME, &kid)
            .t(g, "   ")
            .e(PERSON_NAME, &parent)
            .t(g, "    ")
            .e(PHONE, &phone_plain(g))
            .t(g, "\n");
    }
    w.t(g, "Kit fee ")
        .v(&money(g))
        .t(g, " · pitch ")
        .v(&format!("{}", 1 + g.below(8)))
        .t(g, " · Will confirm times by Friday.");
}

/// An IT helpdesk chat.
fn helpdesk_chat(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let (agent, user) = (person(g), person(g));
    let mac: Vec<String> = (0..6).map(|_| hex(g, 2)).collect();
    w.t(g, "[Helpdesk] ")
        .e(PERSON_NAME, &agent.given)
        .t(g, " (agent): hi ")
        .e(PERSON_NAME, &user.given)
        .t(g, ", can you run ipconfig and read me the address?\n");
    w.e(PERSON_NAME, &user.given)
        .t(g, ": ")
        .e(IP_ADDRESS, &ip(g))
        .t(g, ", physical address ")
        .v(&mac.join("-"))
        .t(g, "\n");
    if g.chance(50) {
        w.e(PERSON_NAME, &agent.given)
            .t(g, " (agent): and the phone's IMEI from *#06#?\n");
        w.e(PERSON_NAME, &user.given)
            .t(g, ": ")
            .v(&imei(g))
            .t(g, "\n");
    }
    w.e(PERSON_NAME, &agent.given)
        .t(g, " (agent): thanks. asset tag ")
        .v(&format!("AT-{}", g.digits(5)))
        .t(g, ", hostname ")
        .v(&g.shape("LT-AAA###"))
        .t(g, ". ");
    w.one(
        g,
        &[
            "Rebooting the VPN profile now.",
            "Ticket raised, you'll get an e-mail.",
            "Reset done, try again.",
        ],
    );
    if g.chance(40) {
        w.t(g, "\n")
            .e(PERSON_NAME, &user.given)
            .t(g, ": if it drops again call me on ")
            .e(PHONE, &phone(g));
    }
}

/// A family-history note.
fn genealogy_note(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let (a, b, c) = (person(g), person(g), person(g));
    let y = 1890 + g.below(60);
    w.e(PERSON_NAME, &a.full)
        .t(g, " (b. ")
        .v(&y.to_string())
        .t(g, ", ")
        .e(LOCATION, &place(g))
        .t(g, " – d. ")
        .v(&(y + 50 + g.below(40)).to_string())
        .t(g, ", ")
        .e(LOCATION, &place(g))
        .t(g, ") married ");
    w.e(PERSON_NAME, &b.full)
        .t(g, " in ")
        .v(&(y + 20 + g.below(8)).to_string())
        .t(g, ". ");
    w.t(g, "Their daughter ")
        .e(PERSON_NAME, &c.given)
        .t(g, " emigrated to ")
        .e(LOCATION, &place(g))
        .t(g, "; letters from her survive in the box marked ")
        .v(&g.shape("A-##"))
        .t(g, ".");
}

/// A parish bulletin's prayer list.
fn prayer_list(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    let (a, b, c) = (person(g), person(g), person(g));
    w.t(g, "Please keep in your prayers ")
        .e(PERSON_NAME, &a.full)
        .t(g, ", ")
        .e(PERSON_NAME, &b.full)
        .t(g, " (recovering in ")
        .e(LOCATION, &place(g))
        .t(g, "), and the family of the late ");
    w.e(PERSON_NAME, &c.full).t(g, ".\n");
    w.one(
        g,
        &[
            "Rose Sunday collection: ",
            "Harvest appeal so far: ",
            "Roof fund: ",
        ],
    )
    .v(&money(g))
    .t(g, ". Grace Fellowship meets Thursdays at ")
    .v(&clock(g))
    .t(g, ".");
    if g.chance(40) {
        w.t(g, "\nTo join the rota call the parish office on ")
            .e(PHONE, &phone(g))
            .t(g, ".");
    }
}

/// One-time-code and delivery notifications: no personal data.
fn none_otp(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.v(company(g))
        .t(g, ": your verification code is ")
        .v(&g.digits(6))
        .t(g, ". It expires in ")
        .v(&format!("{}", 5 + g.below(10)))
        .t(g, " minutes. Never share it. Ref ")
        .v(&booking_ref(g));
}

/// A SQL dump of an orders table: no personal data.
fn none_sql_orders(g: &mut Gen, d: &mut Doc) {
    let mut w = W::new(d);
    w.t(
        g,
        "INSERT INTO orders (id, sku, qty, amount, region) VALUES\n",
    );
    let rows = 2 + g.below(4);
    for i in 0..rows {
        w.t(g, "  (")
            .v(&(10000 + g.below(90000)).to_string())
            .t(g, ", '")
            .v(&g.shape("AAA-####"))
            .t(g, "', ")
            .v(&(1 + g.below(9)).to_string())
            .t(g, ", ")
            .v(&format!("{}.{:02}", g.below(900), g.below(100)))
            .t(g, ", '")
            .v(region(g))
            .t(g, "')");
        w.t(g, if i + 1 == rows { ";" } else { ",\n" });
    }
}

/// The split's templates: (id, weight, template).
pub const TEMPLATES: &[(&str, u32, Template)] = &[
    ("teams/copy", 4, teams_copy),
    ("mattermost/export", 4, mattermost_export),
    ("jira/comment", 4, jira_comment),
    ("linear/thread", 3, linear_thread),
    ("github/pr-review", 4, pr_review),
    ("github/pr-description", 2, pr_description),
    ("oncall/handoff", 3, oncall_handoff),
    ("oncall/pager", 2, pager_alert),
    ("k8s/pod-log", 4, k8s_log),
    ("k8s/secret", 2, k8s_secret),
    ("terraform/plan", 3, terraform_plan),
    ("ci/job-log", 3, ci_log),
    ("dotenv/file", 3, dotenv),
    ("crash/report", 3, crash_report),
    ("hr/onboarding", 4, hr_onboarding),
    ("sheet/payroll", 3, sheet_payroll),
    ("sheet/contacts", 3, sheet_contacts),
    ("realestate/viewing", 3, viewing_notes),
    ("realestate/offer", 2, offer_email),
    ("vet/record", 3, vet_record),
    ("vet/sms", 2, vet_sms),
    ("school/parent-email", 4, parent_email),
    ("legal/hearing-notice", 3, court_notice),
    ("legal/garnishment", 2, garnishment),
    ("conf/speaker-bio", 3, speaker_bio),
    ("conf/cfp-form", 2, cfp_form),
    ("podcast/transcript", 3, podcast),
    ("hotel/confirmation", 3, hotel_booking),
    ("hotel/front-desk", 2, front_desk),
    ("hotel/ryokan", 2, ryokan_notice),
    ("telegram/caps", 2, telegram),
    ("courier/dispatch", 2, courier_dispatch),
    ("ocr/receipt", 3, ocr_receipt),
    ("voice/dictated", 3, dictated),
    ("esl/email", 3, esl_email),
    ("mixed/spanglish", 2, spanglish),
    ("mixed/hinglish", 2, hinglish),
    ("mixed/denglisch", 2, denglisch),
    ("mixed/taglish-manglish", 2, taglish),
    ("letter/visa-invitation", 2, invitation_letter),
    ("form/club-membership", 2, club_form),
    ("calllog/phone-order", 2, phone_order),
    ("bot/relay", 2, bot_relay),
    ("mail/out-of-office", 3, out_of_office),
    ("sql/customer-dump", 2, sql_dump),
    ("log/sshd-auth", 2, auth_log),
    ("git/commit-trailers", 2, commit_trailers),
    ("removals/estimate", 2, moving_quote),
    ("shortlet/host-message", 2, host_message),
    ("club/youth-roster", 2, team_roster),
    ("helpdesk/chat", 2, helpdesk_chat),
    ("family/genealogy-note", 2, genealogy_note),
    ("parish/prayer-list", 2, prayer_list),
    ("none/retro", 2, none_retro),
    ("none/otp-sms", 1, none_otp),
    ("none/sql-orders", 1, none_sql_orders),
    ("none/k8s-events", 2, none_k8s_events),
    ("none/git-log", 2, none_git_log),
    ("none/lockfile", 1, none_lockfile),
    ("none/api-docs", 1, none_api_docs),
    ("none/status-page", 1, none_status_page),
    ("none/menu", 2, none_menu),
    ("none/warehouse", 1, none_warehouse),
    ("none/standup-bot", 2, none_standup_bot),
    ("none/ci-matrix", 1, none_ci_matrix),
    ("none/price-sheet", 1, none_price_sheet),
];
