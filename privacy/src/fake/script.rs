//! Which writing system a real value is in, and stand-in names and places written in it.
//!
//! A fake keeps the script of what it replaces: a Cyrillic name gets a Cyrillic fake, `王小明` a Chinese
//! one, `Nguyễn Thị Minh Khai` a Vietnamese one with its diacritics. A model reading the masked text
//! then sees the same kind of text the user wrote, and a reply that speaks of "Москва" still reads
//! right once restored.
//!
//! Where the `fake` crate has a locale for a script it is used (English, Chinese, Japanese, Arabic,
//! Turkish, German, French); elsewhere (Cyrillic, Vietnamese, Korean, Greek, Devanagari, the Nordic
//! and Central European letters, and real place names in every script) a short curated list does.
//! Place fakes are real places of the same kind (a city for a city, a country for a country): an
//! invented town reads as one, and the vault never hands out a fake equal to a real value it holds.
//!
//! Invariant: every function here is a pure function of its input and the RNG.

use fake::Fake;
use fake::faker::name::raw::{FirstName, LastName};
use fake::locales::{AR_SA, DE_DE, Data, EN, FR_FR, JA_JP, TR_TR, ZH_CN};
use rand::RngExt;

use super::FakeRng;

/// The writing system of a value, as far as fakes care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Script {
    /// ASCII letters only.
    Ascii,
    /// Latin with diacritics (Nordic, German, Slavic, Hungarian, Turkish, French …).
    LatinMarked,
    /// Latin with Vietnamese tone marks.
    Vietnamese,
    /// Cyrillic.
    Cyrillic,
    /// Chinese characters without kana.
    Han,
    /// Japanese (kana, possibly with kanji).
    Japanese,
    /// Hangul.
    Hangul,
    /// Arabic script.
    Arabic,
    /// Greek.
    Greek,
    /// Devanagari.
    Devanagari,
}

/// Letters that only Vietnamese writes (`đ`, `ơ`, `ư`, and the Latin Extended Additional vowels
/// with tone marks). `ă` is Romanian too, so it does not count.
fn vietnamese_letter(c: char) -> bool {
    matches!(c, 'đ' | 'Đ' | 'ơ' | 'Ơ' | 'ư' | 'Ư') || ('\u{1EA0}'..='\u{1EF9}').contains(&c)
}

/// The script of `s`: the first non-ASCII script among its letters decides; kana makes Han
/// Japanese, a Vietnamese letter makes Latin Vietnamese.
pub(crate) fn script_of(s: &str) -> Script {
    let mut script = Script::Ascii;
    for c in s.chars().filter(|c| c.is_alphabetic()) {
        let this = match c {
            'a'..='z' | 'A'..='Z' => continue,
            '\u{3040}'..='\u{30FF}' => return Script::Japanese,
            '\u{0400}'..='\u{04FF}' => Script::Cyrillic,
            '\u{4E00}'..='\u{9FFF}' | '\u{3400}'..='\u{4DBF}' => Script::Han,
            '\u{AC00}'..='\u{D7AF}' | '\u{1100}'..='\u{11FF}' => Script::Hangul,
            '\u{0600}'..='\u{06FF}' | '\u{0750}'..='\u{077F}' => Script::Arabic,
            '\u{0370}'..='\u{03FF}' => Script::Greek,
            '\u{0900}'..='\u{097F}' => Script::Devanagari,
            c if vietnamese_letter(c) => return Script::Vietnamese,
            _ => Script::LatinMarked,
        };
        // Keep looking past Han for kana, and past marked Latin for a Vietnamese letter.
        if script == Script::Ascii || script == Script::LatinMarked {
            script = this;
        }
    }
    script
}

/// Whether names in this script are written without spaces between family and given name.
pub(crate) fn unspaced(script: Script) -> bool {
    matches!(script, Script::Han | Script::Hangul)
}

fn pick(list: &[&str], rng: &mut FakeRng) -> String {
    list[rng.random_range(0..list.len())].to_string()
}

// ---------------------------------------------------------------------------------------------------
// Names

const LATIN_MARKED_GIVEN: &[&str] = &[
    "Søren",
    "Bjørn",
    "Åsa",
    "Jørgen",
    "Ingrid",
    "Märta",
    "Åke",
    "Björk",
    "Sigrún",
    "Þóra",
    "Kristín",
    "Jürgen",
    "Jörg",
    "Günther",
    "Käthe",
    "Zoë",
    "Hélène",
    "Céline",
    "Jérôme",
    "André",
    "François",
    "Mónica",
    "Sofía",
    "Inês",
    "João",
    "Tomáš",
    "Jiří",
    "Miloš",
    "Zdeněk",
    "Łukasz",
    "Paweł",
    "Bożena",
    "Małgorzata",
    "Ştefan",
    "Gábor",
    "Zoltán",
    "Erzsébet",
    "Dávid",
    "Ágnes",
    "Gökhan",
    "Çağla",
    "Şule",
    "Doğan",
    "İlker",
    "Özge",
    "Dragoš",
    "Željko",
    "Mirjana",
    "Niño",
];
const LATIN_MARKED_FAMILY: &[&str] = &[
    "Jørgensen",
    "Sørensen",
    "Lindström",
    "Åberg",
    "Björklund",
    "Hämäläinen",
    "Mäkelä",
    "Guðmundsson",
    "Müller",
    "Schröder",
    "Köhler",
    "Weiß",
    "Lefèvre",
    "Dubé",
    "Gonçalves",
    "Muñoz",
    "Peña",
    "Fernández",
    "Novák",
    "Dvořák",
    "Černý",
    "Wróbel",
    "Wójcik",
    "Nowiński",
    "Łęcki",
    "Kovács",
    "Szabó",
    "Tóth",
    "Horváth",
    "Nagyné",
    "Öztürk",
    "Yılmaz",
    "Çelik",
    "Şahin",
    "Doğru",
    "Jovanović",
    "Petrović",
    "Kovačević",
    "Popescu-Tăriceanu",
    "Ionescu-Pătrașcu",
    "Hăngănuț",
    "Klíma",
    "Štěpánek",
];
const VIETNAMESE_FAMILY: &[&str] = &[
    "Nguyễn", "Trần", "Lê", "Phạm", "Hoàng", "Huỳnh", "Phan", "Vũ", "Võ", "Đặng", "Bùi", "Đỗ",
    "Hồ", "Ngô", "Dương", "Lý",
];
const VIETNAMESE_GIVEN: &[&str] = &[
    "Anh", "Bảo", "Châu", "Dũng", "Giang", "Hà", "Hải", "Hằng", "Hiếu", "Hòa", "Hùng", "Hương",
    "Khánh", "Lan", "Linh", "Long", "Mai", "Nam", "Nga", "Ngân", "Phúc", "Phương", "Quân", "Quang",
    "Sơn", "Tâm", "Thảo", "Thành", "Thủy", "Trang", "Trí", "Trung", "Tuấn", "Vy", "Yến", "Thị",
    "Văn", "Hữu", "Đức", "Minh", "Ngọc", "Xuân", "Thu",
];
const CYRILLIC_GIVEN: &[&str] = &[
    "Алексей",
    "Дмитрий",
    "Иван",
    "Михаил",
    "Сергей",
    "Андрей",
    "Николай",
    "Павел",
    "Юрий",
    "Олег",
    "Ольга",
    "Анна",
    "Мария",
    "Елена",
    "Наталья",
    "Татьяна",
    "Ирина",
    "Светлана",
    "Юлия",
    "Ксения",
    "Богдан",
    "Оксана",
    "Тарас",
    "Людмила",
];
const CYRILLIC_FAMILY: &[&str] = &[
    "Иванов",
    "Смирнов",
    "Кузнецов",
    "Попов",
    "Васильев",
    "Петров",
    "Соколов",
    "Михайлов",
    "Новиков",
    "Федоров",
    "Морозов",
    "Волков",
    "Алексеев",
    "Лебедев",
    "Семенов",
    "Егоров",
    "Павлов",
    "Козлов",
    "Степанов",
    "Николаев",
    "Шевченко",
    "Бондаренко",
    "Коваленко",
    "Ткаченко",
];
const HANGUL_FAMILY: &[&str] = &[
    "김", "이", "박", "최", "정", "강", "조", "윤", "장", "임", "한", "오",
];
const HANGUL_GIVEN: &[&str] = &[
    "민준", "서연", "지훈", "서윤", "도윤", "지우", "하준", "하은", "예준", "수아", "시우", "지민",
    "현우", "유진", "준서", "채원",
];
const GREEK_GIVEN: &[&str] = &[
    "Γιώργος",
    "Νίκος",
    "Δημήτρης",
    "Κώστας",
    "Γιάννης",
    "Μαρία",
    "Ελένη",
    "Κατερίνα",
    "Σοφία",
    "Αναστασία",
];
const GREEK_FAMILY: &[&str] = &[
    "Παπαδόπουλος",
    "Νικολάου",
    "Γεωργίου",
    "Οικονόμου",
    "Παπαδάκης",
    "Βασιλείου",
    "Καραγιάννης",
    "Αλεξίου",
];
const DEVANAGARI_GIVEN: &[&str] = &[
    "अमित",
    "प्रिया",
    "राहुल",
    "सुनीता",
    "विकास",
    "अंजलि",
    "रवि",
    "पूजा",
    "संजय",
    "नेहा",
];
const DEVANAGARI_FAMILY: &[&str] = &["शर्मा", "वर्मा", "गुप्ता", "सिंह", "पटेल", "मेहता", "जोशी", "कुमार"];

/// A given name in `script`.
pub(crate) fn given(script: Script, rng: &mut FakeRng) -> String {
    match script {
        Script::Ascii => unreachable_ascii(rng),
        Script::LatinMarked => {
            // Half the time from the German, French or Turkish locale, else the curated list.
            match rng.random_range(0..6u8) {
                0 => FirstName(DE_DE).fake_with_rng(rng),
                1 => FirstName(FR_FR).fake_with_rng(rng),
                2 => FirstName(TR_TR).fake_with_rng(rng),
                _ => pick(LATIN_MARKED_GIVEN, rng),
            }
        }
        Script::Vietnamese => pick(VIETNAMESE_GIVEN, rng),
        Script::Cyrillic => pick(CYRILLIC_GIVEN, rng),
        Script::Han => FirstName(ZH_CN).fake_with_rng(rng),
        Script::Japanese => FirstName(JA_JP).fake_with_rng(rng),
        Script::Hangul => pick(HANGUL_GIVEN, rng),
        Script::Arabic => FirstName(AR_SA).fake_with_rng(rng),
        Script::Greek => pick(GREEK_GIVEN, rng),
        Script::Devanagari => pick(DEVANAGARI_GIVEN, rng),
    }
}

/// A family name in `script`.
pub(crate) fn family(script: Script, rng: &mut FakeRng) -> String {
    match script {
        Script::Ascii => LastName(EN).fake_with_rng(rng),
        Script::LatinMarked => match rng.random_range(0..6u8) {
            0 => LastName(DE_DE).fake_with_rng(rng),
            1 => LastName(FR_FR).fake_with_rng(rng),
            2 => LastName(TR_TR).fake_with_rng(rng),
            _ => pick(LATIN_MARKED_FAMILY, rng),
        },
        Script::Vietnamese => pick(VIETNAMESE_FAMILY, rng),
        Script::Cyrillic => pick(CYRILLIC_FAMILY, rng),
        Script::Han => LastName(ZH_CN).fake_with_rng(rng),
        Script::Japanese => LastName(JA_JP).fake_with_rng(rng),
        Script::Hangul => pick(HANGUL_FAMILY, rng),
        Script::Arabic => LastName(AR_SA).fake_with_rng(rng),
        Script::Greek => pick(GREEK_FAMILY, rng),
        Script::Devanagari => pick(DEVANAGARI_FAMILY, rng),
    }
}

/// ASCII given names come from the caller's filtered English list; this is only a fallback.
fn unreachable_ascii(rng: &mut FakeRng) -> String {
    FirstName(EN).fake_with_rng(rng)
}

/// A name written without spaces (`王小明`, `김민준`) of about `chars` characters: a family name
/// then given-name characters.
pub(crate) fn unspaced_name(script: Script, chars: usize, rng: &mut FakeRng) -> String {
    let mut name = family(script, rng);
    let mut given_part = given(script, rng);
    let want = chars.saturating_sub(name.chars().count()).max(1);
    while given_part.chars().count() < want {
        given_part.push_str(&given(script, rng));
    }
    name.extend(given_part.chars().take(want));
    name
}

// ---------------------------------------------------------------------------------------------------
// Places

/// What kind of place a location is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PlaceKind {
    /// A country.
    Country,
    /// A state, province or region.
    Region,
    /// Anything else: a city, town or district.
    City,
}

const COUNTRY_ALIASES: &[&str] = &[
    "usa",
    "us",
    "u.s.",
    "u.s.a.",
    "america",
    "uk",
    "u.k.",
    "britain",
    "great britain",
    "england",
    "scotland",
    "wales",
    "holland",
    "the netherlands",
    "deutschland",
    "españa",
    "italia",
    "sverige",
    "norge",
    "danmark",
    "suomi",
    "ísland",
    "österreich",
    "schweiz",
    "suisse",
    "polska",
    "česko",
    "magyarország",
    "türkiye",
    "россия",
    "україна",
    "беларусь",
    "中国",
    "日本",
    "한국",
    "대한민국",
    "ελλάδα",
    "भारत",
    "مصر",
    "السعودية",
    "المغرب",
    "việt nam",
    "vietnam",
    "czechia",
    "south korea",
];
const REGIONS: &[&str] = &[
    "ontario",
    "manitoba",
    "quebec",
    "british columbia",
    "alberta",
    "bavaria",
    "bayern",
    "saxony",
    "tuscany",
    "lombardy",
    "catalonia",
    "andalusia",
    "provence",
    "brittany",
    "normandy",
    "flanders",
    "wallonia",
    "scania",
    "lapland",
    "jutland",
    "yorkshire",
    "cornwall",
    "kent",
    "devon",
    "new south wales",
    "victoria",
    "queensland",
    "tasmania",
    "punjab",
    "kerala",
    "maharashtra",
    "bengal",
    "karnataka",
    "tamil nadu",
    "hokkaido",
    "kyushu",
    "okinawa",
    "siberia",
    "crimea",
    "anatolia",
    "transylvania",
    "silesia",
    "bohemia",
    "moravia",
];
const CITIES_ASCII: &[&str] = &[
    "Bergen",
    "Porto",
    "Leeds",
    "Lyon",
    "Ghent",
    "Utrecht",
    "Bristol",
    "Dublin",
    "Cork",
    "Austin",
    "Denver",
    "Portland",
    "Halifax",
    "Ottawa",
    "Perth",
    "Adelaide",
    "Wellington",
    "Nairobi",
    "Accra",
    "Lagos",
    "Pune",
    "Mysore",
    "Osaka",
    "Busan",
    "Hanoi",
    "Manila",
    "Lima",
    "Quito",
    "Rosario",
    "Tampere",
    "Aarhus",
    "Uppsala",
    "Graz",
    "Basel",
    "Brno",
    "Krakow",
    "Split",
    "Bologna",
    "Seville",
    "Valencia",
    "Toulouse",
    "Nantes",
    "Leipzig",
    "Bremen",
    "Galway",
];
const CITIES_MARKED: &[&str] = &[
    "Tromsø",
    "Malmö",
    "Göteborg",
    "Århus",
    "Ålesund",
    "Jyväskylä",
    "Reykjavík",
    "Húsavík",
    "Düsseldorf",
    "Köln",
    "München",
    "Nürnberg",
    "Zürich",
    "Genève",
    "Besançon",
    "Orléans",
    "Córdoba",
    "Málaga",
    "León",
    "Bogotá",
    "São Paulo",
    "Brasília",
    "Kraków",
    "Łódź",
    "Poznań",
    "Gdańsk",
    "Plzeň",
    "České Budějovice",
    "Pécs",
    "Győr",
    "Kecskemét",
    "İzmir",
    "Eskişehir",
    "Muğla",
    "Niš",
    "Timișoara",
];
const CITIES_VIETNAMESE: &[&str] = &[
    "Hà Nội",
    "Đà Nẵng",
    "Huế",
    "Hải Phòng",
    "Cần Thơ",
    "Bạc Liêu",
    "Đà Lạt",
    "Mỹ Tho",
    "Quy Nhơn",
    "Hội An",
];
const CITIES_CYRILLIC: &[&str] = &[
    "Москва",
    "Казань",
    "Самара",
    "Пермь",
    "Томск",
    "Омск",
    "Тверь",
    "Воронеж",
    "Новосибирск",
    "Екатеринбург",
    "Львов",
    "Одесса",
    "Харьков",
    "Минск",
    "София",
    "Пловдив",
    "Белград",
];
const CITIES_HAN: &[&str] = &[
    "北京", "上海", "广州", "深圳", "成都", "杭州", "南京", "武汉", "西安", "重庆", "苏州", "厦门",
    "台北", "台中",
];
const CITIES_JAPANESE: &[&str] = &[
    "東京",
    "大阪",
    "京都",
    "横浜",
    "札幌",
    "福岡",
    "神戸",
    "仙台",
    "名古屋",
    "広島",
    "那覇",
];
const CITIES_HANGUL: &[&str] = &[
    "서울", "부산", "인천", "대구", "대전", "광주", "수원", "울산",
];
const CITIES_ARABIC: &[&str] = &[
    "الرياض",
    "جدة",
    "الدمام",
    "القاهرة",
    "الإسكندرية",
    "عمّان",
    "بيروت",
    "الدار البيضاء",
    "تونس",
    "دبي",
];
const CITIES_GREEK: &[&str] = &[
    "Αθήνα",
    "Θεσσαλονίκη",
    "Πάτρα",
    "Ηράκλειο",
    "Λάρισα",
    "Βόλος",
];
const CITIES_DEVANAGARI: &[&str] = &["दिल्ली", "मुंबई", "जयपुर", "लखनऊ", "पुणे", "भोपाल", "पटना"];

const COUNTRIES_MARKED: &[&str] = &[
    "Österreich",
    "Česko",
    "Ísland",
    "Türkiye",
    "España",
    "Magyarország",
    "Føroyar",
    "México",
    "Perú",
    "Panamá",
];
const COUNTRIES_VIETNAMESE: &[&str] = &[
    "Việt Nam",
    "Nhật Bản",
    "Hàn Quốc",
    "Trung Quốc",
    "Ấn Độ",
    "Đức",
    "Hoa Kỳ",
];
const COUNTRIES_CYRILLIC: &[&str] = &[
    "Россия",
    "Украина",
    "Беларусь",
    "Казахстан",
    "Болгария",
    "Сербия",
    "Польша",
    "Германия",
    "Франция",
    "Италия",
];
const COUNTRIES_JAPANESE: &[&str] = &[
    "日本",
    "中国",
    "韓国",
    "フランス",
    "ドイツ",
    "イタリア",
    "カナダ",
];
const COUNTRIES_HANGUL: &[&str] = &["한국", "일본", "중국", "미국", "영국", "프랑스", "독일"];
const COUNTRIES_ARABIC: &[&str] = &["مصر", "الأردن", "لبنان", "المغرب", "تونس", "الكويت", "عُمان"];
const COUNTRIES_GREEK: &[&str] = &["Ελλάδα", "Κύπρος", "Ιταλία", "Γαλλία", "Γερμανία"];
const COUNTRIES_DEVANAGARI: &[&str] = &["भारत", "नेपाल", "श्रीलंका", "भूटान", "जापान"];

const REGIONS_ASCII: &[&str] = &[
    "Ontario",
    "Manitoba",
    "Bavaria",
    "Tuscany",
    "Catalonia",
    "Brittany",
    "Flanders",
    "Yorkshire",
    "Queensland",
    "Kerala",
    "Hokkaido",
    "Silesia",
    "Oregon",
    "Vermont",
];
const REGIONS_MARKED: &[&str] = &[
    "Québec",
    "Île-de-France",
    "Västergötland",
    "Thüringen",
    "Andalucía",
];
const REGIONS_CYRILLIC: &[&str] = &["Сибирь", "Подмосковье", "Урал", "Крым", "Кубань"];
const REGIONS_HAN: &[&str] = &["广东", "四川", "浙江", "江苏", "福建", "云南"];
const REGIONS_JAPANESE: &[&str] = &["北海道", "九州", "沖縄", "関西", "東北"];

/// Whether `real` (any case) names a country, a region, or (otherwise) a city.
pub(crate) fn place_kind(real: &str) -> PlaceKind {
    let lower = real.trim().trim_end_matches(['.', ',']).to_lowercase();
    let same = |list: &[&str]| list.iter().any(|c| c.to_lowercase() == lower);
    if same(EN::ADDRESS_COUNTRY)
        || same(ZH_CN::ADDRESS_COUNTRY)
        || same(TR_TR::ADDRESS_COUNTRY)
        || COUNTRY_ALIASES.contains(&lower.as_str())
        || same(COUNTRIES_MARKED)
        || same(COUNTRIES_VIETNAMESE)
        || same(COUNTRIES_CYRILLIC)
        || same(COUNTRIES_JAPANESE)
        || same(COUNTRIES_HANGUL)
        || same(COUNTRIES_ARABIC)
        || same(COUNTRIES_GREEK)
        || same(COUNTRIES_DEVANAGARI)
    {
        PlaceKind::Country
    } else if same(EN::ADDRESS_STATE)
        || REGIONS.contains(&lower.as_str())
        || same(REGIONS_MARKED)
        || same(REGIONS_CYRILLIC)
        || same(REGIONS_HAN)
        || same(REGIONS_JAPANESE)
    {
        PlaceKind::Region
    } else {
        PlaceKind::City
    }
}

/// A real place of `kind` written in `script`. Scripts without a list of regions fall back to
/// cities, which read as places just the same.
pub(crate) fn place(kind: PlaceKind, script: Script, rng: &mut FakeRng) -> String {
    let cities: &[&str] = match script {
        Script::Ascii => CITIES_ASCII,
        Script::LatinMarked => CITIES_MARKED,
        Script::Vietnamese => CITIES_VIETNAMESE,
        Script::Cyrillic => CITIES_CYRILLIC,
        Script::Han => CITIES_HAN,
        Script::Japanese => CITIES_JAPANESE,
        Script::Hangul => CITIES_HANGUL,
        Script::Arabic => CITIES_ARABIC,
        Script::Greek => CITIES_GREEK,
        Script::Devanagari => CITIES_DEVANAGARI,
    };
    let list: &[&str] = match (kind, script) {
        (PlaceKind::City, _) => cities,
        (PlaceKind::Country, Script::Ascii) => EN::ADDRESS_COUNTRY,
        (PlaceKind::Country, Script::LatinMarked) => COUNTRIES_MARKED,
        (PlaceKind::Country, Script::Vietnamese) => COUNTRIES_VIETNAMESE,
        (PlaceKind::Country, Script::Cyrillic) => COUNTRIES_CYRILLIC,
        (PlaceKind::Country, Script::Han) => ZH_CN::ADDRESS_COUNTRY,
        (PlaceKind::Country, Script::Japanese) => COUNTRIES_JAPANESE,
        (PlaceKind::Country, Script::Hangul) => COUNTRIES_HANGUL,
        (PlaceKind::Country, Script::Arabic) => COUNTRIES_ARABIC,
        (PlaceKind::Country, Script::Greek) => COUNTRIES_GREEK,
        (PlaceKind::Country, Script::Devanagari) => COUNTRIES_DEVANAGARI,
        (PlaceKind::Region, Script::Ascii) => REGIONS_ASCII,
        (PlaceKind::Region, Script::LatinMarked) => REGIONS_MARKED,
        (PlaceKind::Region, Script::Cyrillic) => REGIONS_CYRILLIC,
        (PlaceKind::Region, Script::Han) => REGIONS_HAN,
        (PlaceKind::Region, Script::Japanese) => REGIONS_JAPANESE,
        (PlaceKind::Region, _) => cities,
    };
    // Countries of one word for a one-word country ("Norway" → "Chile", not "Saint Kitts and Nevis").
    pick(list, rng)
}

/// An invented town once the lists run out in a crowded vault: a family name plus a town suffix,
/// in the same script where the locale has the parts.
pub(crate) fn invented_town(script: Script, rng: &mut FakeRng) -> String {
    match script {
        Script::Han => {
            let suffix = pick(ZH_CN::ADDRESS_CITY_SUFFIX, rng);
            format!("{}{}{suffix}", family(script, rng), given(script, rng))
        }
        Script::Ascii | Script::LatinMarked => {
            let suffix = pick(EN::ADDRESS_CITY_SUFFIX, rng);
            format!("{}{suffix}", family(Script::Ascii, rng))
        }
        _ => format!("{}{}", pick(place_list(script), rng), family(script, rng)),
    }
}

fn place_list(script: Script) -> &'static [&'static str] {
    match script {
        Script::Cyrillic => CITIES_CYRILLIC,
        Script::Vietnamese => CITIES_VIETNAMESE,
        Script::Japanese => CITIES_JAPANESE,
        Script::Hangul => CITIES_HANGUL,
        Script::Arabic => CITIES_ARABIC,
        Script::Greek => CITIES_GREEK,
        Script::Devanagari => CITIES_DEVANAGARI,
        _ => CITIES_ASCII,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_are_told_apart() {
        assert_eq!(script_of("Alice Jones"), Script::Ascii);
        assert_eq!(
            script_of("Søren Kierkegaard Jørgensen"),
            Script::LatinMarked
        );
        assert_eq!(script_of("Nguyễn Thị Minh Khai"), Script::Vietnamese);
        assert_eq!(script_of("Иван Петров"), Script::Cyrillic);
        assert_eq!(script_of("王小明"), Script::Han);
        assert_eq!(script_of("山田 はなこ"), Script::Japanese);
        assert_eq!(script_of("김민준"), Script::Hangul);
        assert_eq!(script_of("محمد العتيبي"), Script::Arabic);
        assert_eq!(script_of("Γιώργος"), Script::Greek);
        assert_eq!(script_of("अमित शर्मा"), Script::Devanagari);
        assert_eq!(script_of("Ümit Yılmaz"), Script::LatinMarked);
    }

    #[test]
    fn places_are_classified() {
        assert_eq!(place_kind("Norway"), PlaceKind::Country);
        assert_eq!(place_kind("россия"), PlaceKind::Country);
        assert_eq!(place_kind("the Netherlands"), PlaceKind::Country);
        assert_eq!(place_kind("Ontario"), PlaceKind::Region);
        assert_eq!(place_kind("California"), PlaceKind::Region);
        assert_eq!(place_kind("Tromsø"), PlaceKind::City);
        assert_eq!(place_kind("Reykjavík"), PlaceKind::City);
    }

    #[test]
    fn every_list_is_in_its_script() {
        for (script, lists) in [
            (
                Script::Cyrillic,
                [
                    CITIES_CYRILLIC,
                    COUNTRIES_CYRILLIC,
                    CYRILLIC_GIVEN,
                    CYRILLIC_FAMILY,
                ],
            ),
            (
                Script::Vietnamese,
                [
                    CITIES_VIETNAMESE,
                    COUNTRIES_VIETNAMESE,
                    CITIES_VIETNAMESE,
                    CITIES_VIETNAMESE,
                ],
            ),
            (
                Script::Hangul,
                [CITIES_HANGUL, COUNTRIES_HANGUL, HANGUL_GIVEN, HANGUL_FAMILY],
            ),
            (
                Script::Greek,
                [CITIES_GREEK, COUNTRIES_GREEK, GREEK_GIVEN, GREEK_FAMILY],
            ),
            (
                Script::Devanagari,
                [
                    CITIES_DEVANAGARI,
                    COUNTRIES_DEVANAGARI,
                    DEVANAGARI_GIVEN,
                    DEVANAGARI_FAMILY,
                ],
            ),
            (
                Script::LatinMarked,
                [
                    CITIES_MARKED,
                    COUNTRIES_MARKED,
                    REGIONS_MARKED,
                    LATIN_MARKED_FAMILY,
                ],
            ),
            (
                Script::Arabic,
                [
                    CITIES_ARABIC,
                    COUNTRIES_ARABIC,
                    CITIES_ARABIC,
                    CITIES_ARABIC,
                ],
            ),
        ] {
            for list in lists {
                for item in list {
                    assert_eq!(script_of(item), script, "{item}");
                }
            }
        }
        for item in CITIES_ASCII.iter().chain(REGIONS_ASCII) {
            assert_eq!(script_of(item), Script::Ascii, "{item}");
        }
        // Vietnamese name parts are Latin, most with Vietnamese marks; a whole name has one.
        for item in VIETNAMESE_FAMILY.iter().chain(VIETNAMESE_GIVEN) {
            assert!(
                matches!(
                    script_of(item),
                    Script::Vietnamese | Script::LatinMarked | Script::Ascii
                ),
                "{item}"
            );
        }
    }
}
