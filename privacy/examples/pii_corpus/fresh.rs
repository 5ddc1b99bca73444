//! The `fresh` split: templates written blind, for the numbers we report last.
//!
//! The tuning and held-out splits have been looked at (the held-out one through summaries of its
//! errors), so a detector change can drift towards them. These templates were written without reading
//! either split's templates and without running the detector, as the texts real users send: Slack and
//! Discord threads, support chats, SMS, reviews, CVs and job applications, leases, guest lists, school
//! notices, claim narratives, itineraries, property listings, referral letters, sales call notes, bug
//! reports with configs and stack traces, JSON/YAML/CSV contact records, profile bios, obituaries and
//! local news, letters in British, Indian and Australian English, tax forms; and, with no personal
//! data, release notes, recipes, match reports, forecasts, product specs, timetables and OPC's own
//! operational messages.
//!
//! Values: names, places, streets and domains come from this file's own lists and from the held-out
//! half of the shared lists; every draw goes through [`Gen::own`], so nothing the tuning split can
//! draw is drawn here. Phone, card, IBAN, e-mail, URL, IP and key shapes are this split's own. The
//! labelling rules are those at the top of `pii_corpus.rs`; [`Doc`] keeps the offsets exact.

use fake::locales::{AR_SA, CY_GB, Data, EN, FA_IR, IT_IT, JA_JP, NL_NL, PT_PT, ZH_TW};

use super::Template;
use super::doc::Doc;
use super::doc::kind::{
    ADDRESS as ADDR, API_KEY as KEY, CREDIT_CARD as CARD, EMAIL as MAIL, IBAN, IP_ADDRESS as IP,
    LOCATION as LOC, PERSON_NAME as NAME, PHONE as TEL, SSN, URL as LINK,
};
use super::pools::{self, Culture};
use super::values::{Address, Gen, Person, PhoneShapes, iban_from, in_split, luhn};

/// (id, weight, template). Ids are this split's own (the tests check none is shared).
pub const TEMPLATES: &[(&str, u32, Template)] = &[
    ("slack-thread", 6, slack_thread),
    ("discord-lowercase", 5, discord_lowercase),
    ("support-chat-transcript", 6, support_chat),
    ("sms-thread", 5, sms_thread),
    ("customer-review", 4, customer_review),
    ("cv-header", 4, cv_header),
    ("job-application-letter", 3, job_application),
    ("lease-agreement", 3, lease_agreement),
    ("guest-list", 3, guest_list),
    ("school-notice", 3, school_notice),
    ("claim-narrative", 4, claim_narrative),
    ("travel-itinerary", 3, travel_itinerary),
    ("property-listing", 3, property_listing),
    ("medical-referral", 4, medical_referral),
    ("sales-call-notes", 4, sales_call_notes),
    ("bug-report-with-config", 4, bug_report),
    ("json-contact-record", 3, json_contact),
    ("yaml-contact-record", 2, yaml_contact),
    ("csv-rsvp-export", 3, csv_rsvp),
    ("profile-bio", 4, profile_bio),
    ("obituary", 2, obituary),
    ("local-news", 2, local_news),
    ("letter-indian-english", 3, letter_indian),
    ("letter-british-complaint", 3, letter_british),
    ("note-australian", 2, note_australian),
    ("tax-form-w9", 2, tax_form),
    ("payment-dispute-chat", 3, payment_dispute),
    ("wire-instructions", 2, wire_instructions),
    ("access-log-excerpt", 2, access_log),
    ("lost-and-found-post", 2, lost_and_found),
    ("military-care-package", 2, care_package),
    ("none/release-notes", 3, neg_release_notes),
    ("none/recipe", 2, neg_recipe),
    ("none/match-report", 2, neg_match_report),
    ("none/forecast", 2, neg_forecast),
    ("none/product-spec", 2, neg_product_spec),
    ("none/timetable", 1, neg_timetable),
    ("none/opc-ops", 2, neg_opc_ops),
];

// ---------------------------------------------------------------------------------------------
// Values of this split.
// ---------------------------------------------------------------------------------------------

/// Phone shapes (`N` 2–9, `#` a digit): the issue's classes, written for this split.
pub const PHONES: PhoneShapes = PhoneShapes {
    national: &[
        "(N##)-N##-####",
        "N## N##-####",
        "+1.N##.N##.####",
        "1-N##-N##-####",
        "+1 N##-N##-####",
    ],
    invalid_plan: &["1-N##-1##-####", "(N##) 1##.####", "+1 N##-0##-####"],
    intl_prefix: &[
        "011 52 55 #### ####",
        "00 61 4## ### ###",
        "001 (N##) N##-####",
        "00353 87 ### ####",
        "011-81-90-####-####",
        "0044 7### ### ###",
    ],
    extension: &[
        "N##-N##-#### Ext. ###",
        "(N##) N##-#### X##",
        "+44 1### ###### ext ###",
        "+1 N##.N##.#### x ####",
    ],
    local: &[
        "N##.####",
        "N# ## ###",
        "N### ###",
        "N#### ###",
        "N##-##-###",
    ],
    grouped: &[
        "+64 21 ### ####",
        "+27 71 ### ####",
        "+65 N### ####",
        "+63 917 ### ####",
        "+62 812-####-####",
        "+66 8# ### ####",
        "+92 300 #######",
        "+880 17## ######",
        "+30 69# ### ####",
        "+972 5#-###-####",
        "+420 6## ### ###",
        "+32 4## ## ## ##",
        "+41 7# ### ## ##",
        "+351 9## ### ###",
        "+54 9 11 ####-####",
        "+234 80# ### ####",
        "+251 9## ### ###",
        "+995 5## ## ## ##",
        "+380 6# ### ## ##",
        "0412 ### ###",
        "(02) #### ####",
        "021 ### ####",
    ],
};

/// Curated cultures this split adds (Latin script unless the name says otherwise).
const GREEK: Culture = Culture {
    given: &[
        "Eleftheria",
        "Stavros",
        "Panagiota",
        "Thanasis",
        "Chrysoula",
        "Kyriakos",
        "Vasiliki",
        "Spyridon",
        "Evangelia",
        "Theodoros",
        "Despoina",
        "Charalampos",
        "Ioanna",
        "Giannis",
        "Paraskevi",
        "Dimitris",
    ],
    family: &[
        "Papadopoulou",
        "Karamanlis",
        "Tsiolkas",
        "Oikonomou",
        "Vlachos",
        "Nikolaidis",
        "Chatzigeorgiou",
        "Zervas",
        "Konstantinidou",
        "Mavridis",
        "Antoniadou",
        "Kalogeropoulos",
        "Stamatiou",
        "Xenakis",
        "Lykourgos",
        "Triantafyllou",
    ],
    family_first: false,
};

const GREEK_SCRIPT: Culture = Culture {
    given: &[
        "Ελένη",
        "Γιώργος",
        "Κατερίνα",
        "Δημήτρης",
        "Σοφία",
        "Νίκος",
        "Αντώνης",
        "Βασιλική",
        "Χρήστος",
        "Ευαγγελία",
        "Σπύρος",
        "Αθηνά",
    ],
    family: &[
        "Παπαδάκης",
        "Οικονόμου",
        "Καραγιάννη",
        "Βλαχοπούλου",
        "Αλεξίου",
        "Μαυρίδης",
        "Ζαχαρίου",
        "Πετράκη",
        "Γεωργίου",
        "Λαμπράκης",
        "Σταυροπούλου",
        "Κωνσταντίνου",
    ],
    family_first: false,
};

const PERSIAN: Culture = Culture {
    given: &[
        "Shirin", "Dariush", "Parisa", "Kourosh", "Roya", "Behnam", "Laleh", "Farhad", "Nasrin",
        "Arash", "Golnaz", "Siavash", "Mahsa", "Kaveh", "Niloufar", "Babak",
    ],
    family: &[
        "Tehrani",
        "Ghorbani",
        "Mohammadzadeh",
        "Rahimi",
        "Esfahani",
        "Karimian",
        "Jafari",
        "Sadeghi",
        "Hosseinpour",
        "Shirazi",
        "Farahani",
        "Moradi",
        "Bagheri",
        "Amini",
        "Kashani",
        "Rostami",
    ],
    family_first: false,
};

const HEBREW: Culture = Culture {
    given: &[
        "Noa", "Yael", "Eitan", "Tamar", "Avner", "Shira", "Yonatan", "Michal", "Oren", "Liat",
        "Itai", "Hila", "Gilad", "Maayan", "Nadav", "Orly",
    ],
    family: &[
        "Ben-David",
        "Mizrahi",
        "Peretz",
        "Shapira",
        "Avraham",
        "Friedman",
        "Katz",
        "Biton",
        "Dahan",
        "Ohana",
        "Ben-Ami",
        "Rosenthal",
        "Levinson",
        "Azoulay",
        "Golan",
        "Segal",
    ],
    family_first: false,
};

const HEBREW_SCRIPT: Culture = Culture {
    given: &[
        "נועה",
        "אורי",
        "תמר",
        "איתן",
        "מיכל",
        "יונתן",
        "שירה",
        "עומר",
        "רונית",
        "דניאל",
    ],
    family: &[
        "כהן",
        "לוי",
        "מזרחי",
        "פרץ",
        "ביטון",
        "אברהם",
        "פרידמן",
        "שפירא",
        "אזולאי",
        "גולן",
    ],
    family_first: false,
};

const WEST_AFRICAN: Culture = Culture {
    given: &[
        "Chidinma",
        "Babatunde",
        "Folake",
        "Ikechukwu",
        "Yewande",
        "Chukwuemeka",
        "Kwabena",
        "Efua",
        "Yaw",
        "Adwoa",
        "Temitope",
        "Obinna",
        "Funmilayo",
        "Nnamdi",
        "Akosua",
        "Olumide",
    ],
    family: &[
        "Balogun",
        "Nwachukwu",
        "Oyelaran",
        "Chukwu",
        "Adebayo",
        "Owusu",
        "Olatunji",
        "Onyekachi",
        "Danjuma",
        "Ogunleye",
        "Amponsah",
        "Nwosu",
        "Bello",
        "Ansah",
        "Oduya",
        "Agyeman",
    ],
    family_first: false,
};

const THAI: Culture = Culture {
    given: &[
        "Somchai",
        "Niran",
        "Kanokwan",
        "Ploy",
        "Anan",
        "Siriporn",
        "Thanawat",
        "Chanida",
        "Wirat",
        "Pornthip",
        "Nattapong",
        "Supaporn",
        "Kittipong",
        "Ratana",
        "Pichai",
        "Duangjai",
    ],
    family: &[
        "Srisuk",
        "Wongsawat",
        "Chaiyaporn",
        "Rattanakul",
        "Boonmee",
        "Saetang",
        "Kittisak",
        "Phromma",
        "Suwannarat",
        "Jaidee",
        "Thongchai",
        "Sukprasert",
        "Charoenwong",
        "Inthanon",
        "Pholsena",
        "Kongsiri",
    ],
    family_first: false,
};

const THAI_SCRIPT: Culture = Culture {
    given: &["สมชาย", "สุดา", "วิชัย", "นภา", "อนุชา", "พรทิพย์", "ปิยะ", "กมล"],
    family: &[
        "ใจดี",
        "ศรีสุข",
        "วงศ์สวัสดิ์",
        "บุญมี",
        "แสงทอง",
        "รัตนกุล",
        "ทองดี",
        "สุขเจริญ",
    ],
    family_first: false,
};

const FILIPINO: Culture = Culture {
    given: &[
        "Maricel",
        "Jericho",
        "Rowena",
        "Bienvenido",
        "Lourdes",
        "Efren",
        "Marites",
        "Jomar",
        "Rodel",
        "Analyn",
        "Divina",
        "Arnel",
        "Rhea Mae",
        "Jun-Jun",
        "Ma. Cristina",
        "Ronaldo",
    ],
    family: &[
        "Bautista",
        "Macaraeg",
        "Dimaculangan",
        "Pangilinan",
        "Villanueva",
        "Soriano",
        "Manalo",
        "Tolentino",
        "Dizon",
        "Mangubat",
        "Evangelista",
        "Salonga",
        "Lacson",
        "Sarmiento",
        "Panganiban",
        "Cabrera",
    ],
    family_first: false,
};

const INDONESIAN: Culture = Culture {
    given: &[
        "Dewi", "Agus", "Wulan", "Bambang", "Sri", "Putu", "Rina", "Hendra", "Ayu", "Budi",
        "Indah", "Rudi", "Fitri", "Wayan", "Eka", "Dimas",
    ],
    family: &[
        "Wibowo",
        "Setiawan",
        "Kusuma",
        "Hartono",
        "Nugroho",
        "Pratama",
        "Siregar",
        "Sitompul",
        "Santoso",
        "Wijaya",
        "Halim",
        "Gunawan",
        "Lestari",
        "Susanto",
        "Hidayat",
        "Simanjuntak",
    ],
    family_first: false,
};

const CAUCASUS: Culture = Culture {
    given: &[
        "Nino",
        "Giorgi",
        "Levan",
        "Ketevan",
        "Davit",
        "Tamta",
        "Irakli",
        "Anahit",
        "Aram",
        "Hovhannes",
        "Siranush",
        "Armen",
        "Lusine",
        "Tigran",
        "Gayane",
        "Mzia",
    ],
    family: &[
        "Beridze",
        "Kapanadze",
        "Tsiklauri",
        "Gelashvili",
        "Lomidze",
        "Japaridze",
        "Petrosyan",
        "Hakobyan",
        "Grigoryan",
        "Sargsyan",
        "Avetisyan",
        "Harutyunyan",
        "Mkrtchyan",
        "Chkheidze",
        "Kvaratskhelia",
        "Abashidze",
    ],
    family_first: false,
};

const GEORGIAN_SCRIPT: Culture = Culture {
    given: &["ნინო", "გიორგი", "თამარ", "ლევან", "ქეთევან", "დავით"],
    family: &[
        "ბერიძე",
        "კაპანაძე",
        "წიკლაური",
        "გელაშვილი",
        "ლომიძე",
        "ჯაფარიძე",
    ],
    family_first: false,
};

const SOUTH_ASIAN: Culture = Culture {
    given: &[
        "Karthikeyan",
        "Meenakshi",
        "Senthil",
        "Thenmozhi",
        "Debashish",
        "Moumita",
        "Tanmoy",
        "Sharmila",
        "Chaminda",
        "Dilani",
        "Usman",
        "Ayesha",
        "Bilal",
        "Bishnu",
        "Sushila",
        "Anirban",
    ],
    family: &[
        "Ramaswamy",
        "Arumugam",
        "Chattopadhyay",
        "Bhattacharjee",
        "Sengupta",
        "Perera",
        "Jayasuriya",
        "Wickramasinghe",
        "Qureshi",
        "Chaudhry",
        "Siddiqui",
        "Shrestha",
        "Gurung",
        "Thapa",
        "Natarajan",
        "Ekanayake",
    ],
    family_first: false,
};

const DEVANAGARI: Culture = Culture {
    given: &[
        "अमित",
        "प्रिया",
        "राहुल",
        "सुनीता",
        "विकास",
        "अंजलि",
        "रोहन",
        "नेहा",
    ],
    family: &[
        "शर्मा",
        "वर्मा",
        "गुप्ता",
        "यादव",
        "मिश्रा",
        "जोशी",
        "पांडे",
        "चौहान",
    ],
    family_first: false,
};

const POLYNESIAN: Culture = Culture {
    given: &[
        "Aroha",
        "Tāne",
        "Mere",
        "Wiremu",
        "Hemi",
        "Ngaio",
        "Rāwiri",
        "Anahera",
        "Sione",
        "Losa",
        "Tevita",
        "Mele",
        "Manaia",
        "Kahurangi",
        "Keoni",
        "Moana",
    ],
    family: &[
        "Te Whata", "Ngata", "Parata", "Tuhiwai", "Horomona", "Tuilagi", "Faleolo", "Fifita",
        "Taufa", "Mahuika", "Te Rangi", "Tamihana", "Aumua", "Leota", "Pōmare", "Kealoha",
    ],
    family_first: false,
};

const ETHIOPIAN: Culture = Culture {
    given: &[
        "Abebe",
        "Tigist",
        "Mekdes",
        "Dawit",
        "Selamawit",
        "Yohannes",
        "Hirut",
        "Bethlehem",
        "Eyerusalem",
        "Kidist",
        "Fikru",
        "Meseret",
        "Henok",
        "Liya",
        "Biniam",
        "Saba",
    ],
    family: &[
        "Bekele",
        "Tesfaye",
        "Haile",
        "Girma",
        "Wondimu",
        "Alemu",
        "Gebremedhin",
        "Tadesse",
        "Kebede",
        "Mulugeta",
        "Assefa",
        "Demissie",
        "Woldemariam",
        "Negash",
        "Teshome",
        "Abera",
    ],
    family_first: false,
};

const IRISH: Culture = Culture {
    given: &[
        "Siobhán", "Niamh", "Pádraig", "Caoimhe", "Oisín", "Aoife", "Ciarán", "Róisín", "Tadhg",
        "Saoirse", "Eoghan", "Gráinne", "Cathal", "Clodagh", "Donncha", "Méabh",
    ],
    family: &[
        "Ó Súilleabháin",
        "Mac Giolla Phádraig",
        "O'Donnell",
        "Ní Bhriain",
        "McGettigan",
        "Ó Briain",
        "Mac Cárthaigh",
        "Nic Aodha",
        "Breathnach",
        "Ó Ceallaigh",
        "Fitzgerald",
        "Mulcahy",
        "Ní Mhurchú",
        "Cunningham",
        "Ó Dónaill",
        "MacNamara",
    ],
    family_first: false,
};

const CENTRAL_ASIAN: Culture = Culture {
    given: &[
        "Aigerim",
        "Nursultan",
        "Dilnoza",
        "Timur",
        "Madina",
        "Rustam",
        "Zarina",
        "Bakhyt",
        "Gulnara",
        "Azamat",
        "Saule",
        "Farrukh",
        "Nodira",
        "Daniyar",
        "Aizhan",
        "Jasur",
    ],
    family: &[
        "Nurlanov",
        "Abdullaeva",
        "Karimov",
        "Tokayeva",
        "Yusupov",
        "Seitkali",
        "Rakhimova",
        "Zhaksybekov",
        "Ermekova",
        "Tursunov",
        "Mukanova",
        "Alimov",
        "Saidova",
        "Beketov",
        "Umarova",
        "Kassymov",
    ],
    family_first: false,
};

const UKRAINIAN: Culture = Culture {
    given: &[
        "Олена",
        "Тарас",
        "Оксана",
        "Богдан",
        "Ірина",
        "Андрій",
        "Наталія",
        "Василь",
        "Соломія",
        "Остап",
    ],
    family: &[
        "Коваленко",
        "Шевчук",
        "Бондаренко",
        "Ткаченко",
        "Кравченко",
        "Мельник",
        "Олійник",
        "Поліщук",
        "Гнатюк",
        "Савчук",
    ],
    family_first: false,
};

/// Korean in Hangul: family name first, written together (`김민준`).
const HANGUL_FAMILY: &[&str] = &["김", "이", "박", "최", "정", "강", "조", "윤", "장", "임"];
const HANGUL_GIVEN: &[&str] = &[
    "민준", "서연", "지훈", "하은", "도윤", "수빈", "예준", "지아", "현우", "유나",
];

#[derive(Clone, Copy)]
enum Source {
    Fake(FakeLocale),
    Culture(&'static Culture),
    Hangul,
}

#[derive(Clone, Copy)]
enum FakeLocale {
    En,
    FaIr,
    ItIt,
    NlNl,
    PtPt,
    CyGb,
    ArSa,
    ZhTw,
    JaJp,
}

const NAMES: &[(Source, u32)] = &[
    (Source::Fake(FakeLocale::En), 18),
    (Source::Fake(FakeLocale::FaIr), 2),
    (Source::Fake(FakeLocale::ItIt), 2),
    (Source::Fake(FakeLocale::NlNl), 2),
    (Source::Fake(FakeLocale::PtPt), 1),
    (Source::Fake(FakeLocale::CyGb), 1),
    (Source::Fake(FakeLocale::ArSa), 1),
    (Source::Fake(FakeLocale::ZhTw), 1),
    (Source::Fake(FakeLocale::JaJp), 1),
    (Source::Culture(&pools::NORDIC), 2),
    (Source::Culture(&pools::SLAVIC), 2),
    (Source::Culture(&pools::HUNGARIAN), 1),
    (Source::Culture(&pools::INDIAN), 2),
    (Source::Culture(&pools::VIETNAMESE), 2),
    (Source::Culture(&pools::JAPANESE_LATIN), 1),
    (Source::Culture(&pools::CHINESE_LATIN), 1),
    (Source::Culture(&pools::ARABIC_LATIN), 1),
    (Source::Culture(&pools::HISPANIC), 2),
    (Source::Culture(&pools::AFRICAN), 1),
    (Source::Culture(&pools::KOREAN), 1),
    (Source::Culture(&GREEK), 2),
    (Source::Culture(&GREEK_SCRIPT), 1),
    (Source::Culture(&PERSIAN), 2),
    (Source::Culture(&HEBREW), 2),
    (Source::Culture(&HEBREW_SCRIPT), 1),
    (Source::Culture(&WEST_AFRICAN), 3),
    (Source::Culture(&THAI), 2),
    (Source::Culture(&THAI_SCRIPT), 1),
    (Source::Culture(&FILIPINO), 2),
    (Source::Culture(&INDONESIAN), 2),
    (Source::Culture(&CAUCASUS), 2),
    (Source::Culture(&GEORGIAN_SCRIPT), 1),
    (Source::Culture(&SOUTH_ASIAN), 3),
    (Source::Culture(&DEVANAGARI), 1),
    (Source::Culture(&POLYNESIAN), 2),
    (Source::Culture(&ETHIOPIAN), 2),
    (Source::Culture(&IRISH), 2),
    (Source::Culture(&CENTRAL_ASIAN), 2),
    (Source::Culture(&UKRAINIAN), 1),
    (Source::Hangul, 1),
];

fn weighted<T: Copy>(g: &mut Gen, items: &[(T, u32)]) -> T {
    let total: u32 = items.iter().map(|(_, w)| w).sum();
    let mut at = g.below(total as usize) as u32;
    for (item, w) in items {
        if at < *w {
            return *item;
        }
        at -= w;
    }
    items[0].0
}

/// A value of `items` in this split's share (the held-out half; never the tuning half), trimmed.
fn own(g: &mut Gen, items: &[&'static str]) -> &'static str {
    g.own(items).trim()
}

/// A pair whose first element is in this split's share.
fn own_pair(g: &mut Gen, items: &[(&'static str, &'static str)]) -> (&'static str, &'static str) {
    let split = g.split;
    let mine: Vec<(&str, &str)> = items
        .iter()
        .copied()
        .filter(|(a, _)| in_split(a, split))
        .collect();
    if mine.is_empty() {
        g.pick(items)
    } else {
        g.pick(&mine)
    }
}

fn fake_pair(g: &mut Gen, given: &[&'static str], family: &[&'static str]) -> (String, String) {
    (own(g, given).to_string(), own(g, family).to_string())
}

/// A person of this split's mix of locales, curated cultures and scripts.
pub fn person(g: &mut Gen) -> Person {
    let honorific = g.pick(&[
        "Mr.", "Ms.", "Dr.", "Mrs.", "Dr", "Mr", "Ms", "Mx.", "Prof.",
    ]);
    let source = weighted(g, NAMES);
    let plain = |given: String, family: String, family_first: bool, joined: bool| Person {
        given,
        family,
        family_first,
        joined,
        middle: None,
        honorific,
    };
    match source {
        Source::Fake(l) => {
            let (given, family) = match l {
                FakeLocale::En => fake_pair(g, EN::NAME_FIRST_NAME, EN::NAME_LAST_NAME),
                FakeLocale::FaIr => fake_pair(g, FA_IR::NAME_FIRST_NAME, FA_IR::NAME_LAST_NAME),
                FakeLocale::ItIt => fake_pair(g, IT_IT::NAME_FIRST_NAME, IT_IT::NAME_LAST_NAME),
                FakeLocale::NlNl => fake_pair(g, NL_NL::NAME_FIRST_NAME, NL_NL::NAME_LAST_NAME),
                FakeLocale::PtPt => fake_pair(g, PT_PT::NAME_FIRST_NAME, PT_PT::NAME_LAST_NAME),
                FakeLocale::CyGb => fake_pair(g, CY_GB::NAME_FIRST_NAME, CY_GB::NAME_LAST_NAME),
                FakeLocale::ArSa => fake_pair(g, AR_SA::NAME_FIRST_NAME, AR_SA::NAME_LAST_NAME),
                FakeLocale::ZhTw => fake_pair(g, ZH_TW::NAME_FIRST_NAME, ZH_TW::NAME_LAST_NAME),
                FakeLocale::JaJp => fake_pair(g, JA_JP::NAME_FIRST_NAME, JA_JP::NAME_LAST_NAME),
            };
            let cjk = matches!(l, FakeLocale::ZhTw | FakeLocale::JaJp);
            plain(given, family, cjk, cjk)
        }
        Source::Culture(c) => {
            let (given, family) = fake_pair(g, c.given, c.family);
            plain(given, family, c.family_first, false)
        }
        Source::Hangul => {
            let (given, family) = fake_pair(g, HANGUL_GIVEN, HANGUL_FAMILY);
            plain(given, family, true, true)
        }
    }
}

/// A person whose name is written in Latin letters (for e-mail local parts, handles, CSV exports).
fn latin_person(g: &mut Gen) -> Person {
    for _ in 0..32 {
        let p = g.person();
        if !ascii(&p.given).is_empty() && !ascii(&p.family).is_empty() {
            return p;
        }
    }
    g.person()
}

/// ASCII letters of a name for e-mail local parts and handles (macrons folded first).
fn ascii(s: &str) -> String {
    let folded: String = s
        .chars()
        .map(|c| match c {
            'ā' | 'Ā' => 'a',
            'ē' | 'Ē' => 'e',
            'ī' | 'Ī' => 'i',
            'ō' | 'Ō' => 'o',
            'ū' | 'Ū' => 'u',
            'ș' | 'Ș' => 's',
            'ț' | 'Ț' => 't',
            other => other,
        })
        .collect();
    Person::ascii(&folded)
}

/// The family name a cue takes (`Dr. Haile`); the whole name for names written together.
fn family(p: &Person) -> String {
    if p.joined { p.full() } else { p.family.clone() }
}

const DOMAINS: &[&str] = &[
    "gmx.at",
    "t-online.de",
    "btinternet.com",
    "bigpond.com",
    "xtra.co.nz",
    "sympatico.ca",
    "yahoo.co.in",
    "hotmail.co.uk",
    "laposte.net",
    "free.fr",
    "virgilio.it",
    "ziggo.nl",
    "sapo.pt",
    "uol.com.br",
    "163.com",
    "daum.net",
    "walla.co.il",
    "mweb.co.za",
    "protonmail.ch",
    "hey.com",
    "me.com",
    "aol.com",
    "mail.com",
    "harbourline.co.nz",
    "quillworks.dev",
    "bramblehealth.org",
    "tessellate.ai",
    "ridgeway-surveys.co.uk",
    "kauri-legal.nz",
    "saffronhr.in",
    "pelicanbay.travel",
    "ostrander.edu",
];

pub fn email(g: &mut Gen, p: &Person) -> String {
    let given = ascii(&p.given);
    let fam = ascii(&p.family).replace(' ', "");
    let (given, fam) = if given.is_empty() || fam.is_empty() {
        (
            g.pick(&["hello", "info", "me", "mail"]).to_string(),
            format!("{}", g.below(9000) + 1000),
        )
    } else {
        (given, fam)
    };
    let domain = own(g, DOMAINS);
    let first = given.chars().next().unwrap_or('q');
    let fam_first = fam.chars().next().unwrap_or('q');
    match g.below(7) {
        0 => format!("{given}{fam}{}@{domain}", g.below(90) + 10),
        1 => format!("{given}.{fam_first}@{domain}"),
        2 => format!("{fam}{given}@{domain}"),
        3 => format!("{given}-{fam}@{domain}"),
        4 => format!("{first}.{fam}@{domain}"),
        5 => {
            let cap = |s: &str| {
                let mut c = s.chars();
                c.next()
                    .map(|f| f.to_uppercase().chain(c).collect::<String>())
                    .unwrap_or_default()
            };
            format!("{}.{}@{domain}", cap(&given), cap(&fam))
        }
        _ => format!("{fam}.{given}{}@{domain}", g.below(9)),
    }
}

pub fn card(g: &mut Gen) -> String {
    let (prefix, len) = match g.below(5) {
        0 | 1 => ("4".to_string(), 16),
        2 => (format!("{}", 2221 + g.below(500)), 16),
        3 => ("36".to_string(), 14),
        _ => ("62".to_string(), 16),
    };
    let mut digits: Vec<u8> = prefix.bytes().map(|b| b - b'0').collect();
    while digits.len() < len - 1 {
        digits.push(g.below(10) as u8);
    }
    let check = (0..10u8)
        .find(|c| {
            let mut all = digits.clone();
            all.push(*c);
            luhn(&all)
        })
        .unwrap_or(0);
    digits.push(check);
    let s: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
    let sep = g.pick(&[" ", "-", "", " "]);
    if len == 14 {
        format!("{}{sep}{}{sep}{}", &s[..4], &s[4..10], &s[10..])
    } else {
        format!(
            "{}{sep}{}{sep}{}{sep}{}",
            &s[..4],
            &s[4..8],
            &s[8..12],
            &s[12..]
        )
    }
}

pub fn iban(g: &mut Gen) -> String {
    let (cc, shape) = g.pick(&[
        ("PT", "#####################"),
        ("IE", "AAAA##############"),
        ("DK", "##############"),
        ("FI", "##############"),
        ("LU", "###AAAA#########"),
        ("CZ", "####################"),
        ("GR", "#######################"),
        ("RO", "AAAA################"),
        ("HU", "########################"),
        ("IL", "###################"),
        ("AE", "###################"),
        ("LT", "################"),
        ("EE", "################"),
        ("SI", "###############"),
        ("HR", "#################"),
        ("IS", "######################"),
    ]);
    let bban = g.shape(shape);
    let compact = iban_from(cc, &bban);
    match g.below(3) {
        0 => compact,
        _ => compact
            .as_bytes()
            .chunks(4)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect::<Vec<_>>()
            .join(" "),
    }
}

pub fn ssn(g: &mut Gen) -> String {
    let mut area = g.below(898) + 1;
    if area == 666 {
        area = 665;
    }
    let group = g.below(99) + 1;
    let serial = g.below(9999) + 1;
    if g.chance(20) {
        format!("{area:03}{group:02}{serial:04}")
    } else {
        format!("{area:03}-{group:02}-{serial:04}")
    }
}

pub fn ip(g: &mut Gen) -> String {
    if g.chance(20) {
        let mut groups: Vec<String> = vec![
            g.pick(&["2600", "2a02", "2c0f", "2401", "2804"])
                .to_string(),
        ];
        for _ in 0..7 {
            groups.push(format!("{:x}", g.below(0xffff)));
        }
        return groups.join(":");
    }
    format!(
        "{}.{}.{}.{}",
        g.pick(&[
            "98", "66", "142", "176", "188", "212", "5", "78", "109", "201", "84", "95", "130",
            "193"
        ]),
        g.below(256),
        g.below(256),
        g.below(253) + 1
    )
}

pub fn url(g: &mut Gen, p: &Person) -> String {
    let given = ascii(&p.given);
    let fam = ascii(&p.family).replace(' ', "");
    let handle = if given.is_empty() {
        format!("user{}", g.digits(5))
    } else {
        format!("{given}{fam}")
    };
    match g.below(7) {
        0 => format!("https://www.instagram.com/{handle}/"),
        1 => format!("https://mastodon.social/@{handle}"),
        2 => format!("https://calendly.com/{given}-{fam}/30min"),
        3 => format!("https://{handle}.substack.com"),
        4 => format!("https://www.strava.com/athletes/{}", g.digits(8)),
        5 => format!("https://www.airbnb.com/users/show/{}", g.digits(9)),
        _ => format!(
            "https://patientportal.bramblehealth.org/chart/{}",
            g.digits(7)
        ),
    }
}

pub fn api_key(g: &mut Gen) -> String {
    let alnum = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let hex = b"0123456789abcdef";
    let draw = |g: &mut Gen, set: &[u8], n: usize| -> String {
        let mut s: String = (0..n)
            .map(|_| char::from(set[g.below(set.len())]))
            .collect();
        // A digit in the body, as real keys have.
        s.replace_range(1..2, &format!("{}", g.below(10)));
        s
    };
    match g.below(7) {
        0 => format!("github_pat_11{}_{}", draw(g, alnum, 20), draw(g, alnum, 30)),
        1 => format!("hf_{}", draw(g, alnum, 34)),
        2 => format!("AIza{}", draw(g, alnum, 35)),
        3 => format!("SG.{}.{}", draw(g, alnum, 22), draw(g, alnum, 43)),
        4 => format!("npm_{}", draw(g, alnum, 36)),
        5 => format!("dop_v1_{}", draw(g, hex, 64)),
        _ => format!("shpat_{}", draw(g, hex, 32)),
    }
}

/// Places named alone as someone's location.
const CITIES: &[&str] = &[
    "Trondheim",
    "Uppsala",
    "Tampere",
    "Odense",
    "Graz",
    "Bratislava",
    "Plovdiv",
    "Timișoara",
    "Lviv",
    "Tbilisi",
    "Yerevan",
    "Almaty",
    "Tashkent",
    "Kathmandu",
    "Colombo",
    "Dhaka",
    "Lahore",
    "Mysuru",
    "Jaipur",
    "Kolkata",
    "Chiang Mai",
    "Penang",
    "Cebu",
    "Yogyakarta",
    "Kaohsiung",
    "Fukuoka",
    "Sendai",
    "Daejeon",
    "Ulaanbaatar",
    "Darwin",
    "Cairns",
    "Dunedin",
    "Suva",
    "Valparaíso",
    "Cusco",
    "Medellín",
    "Guadalajara",
    "Oaxaca",
    "Porto Alegre",
    "Recife",
    "Mendoza",
    "Kigali",
    "Kampala",
    "Addis Ababa",
    "Dar es Salaam",
    "Windhoek",
    "Durban",
    "Dakar",
    "Kumasi",
    "Ibadan",
    "Tangier",
    "Muscat",
    "Haifa",
    "Nicosia",
    "Valletta",
    "Heraklion",
    "Bilbao",
    "Coimbra",
    "Nantes",
    "Leipzig",
    "Freiburg",
    "Leuven",
    "Aberdeen",
    "Cardiff",
    "Belfast",
    "Limerick",
    "Winnipeg",
    "Saskatoon",
    "Tulsa",
    "Asheville",
    "Missoula",
    "Honolulu",
];

const REGIONS: &[&str] = &[
    "Galicia",
    "the Basque Country",
    "Normandy",
    "Alsace",
    "Umbria",
    "Piedmont",
    "Tyrol",
    "Flanders",
    "Rajasthan",
    "Punjab",
    "Goa",
    "Sabah",
    "Bali",
    "Mindanao",
    "Okinawa",
    "Jeju",
    "Sichuan",
    "Yunnan",
    "Anatolia",
    "Wales",
    "County Kerry",
    "the Lake District",
    "Nova Scotia",
    "Manitoba",
    "the Yukon",
    "Alaska",
    "Montana",
    "Maine",
    "Western Australia",
    "Otago",
    "the Atacama",
    "Yucatán",
];

const COUNTRIES: &[&str] = &[
    "Armenia",
    "Uzbekistan",
    "Mongolia",
    "Nepal",
    "Sri Lanka",
    "Bangladesh",
    "Malaysia",
    "Singapore",
    "Cambodia",
    "Fiji",
    "Samoa",
    "Uruguay",
    "Paraguay",
    "Bolivia",
    "Costa Rica",
    "Guatemala",
    "Jamaica",
    "Rwanda",
    "Uganda",
    "Tanzania",
    "Ethiopia",
    "Senegal",
    "Namibia",
    "Tunisia",
    "Jordan",
    "Oman",
    "Cyprus",
    "Malta",
    "Slovenia",
    "Bulgaria",
    "Lithuania",
    "Luxembourg",
];

/// `City, Country` as one mention.
const CITY_COUNTRY: &[&str] = &[
    "Tbilisi, Georgia",
    "Kandy, Sri Lanka",
    "Arequipa, Peru",
    "Cuenca, Ecuador",
    "Hué, Vietnam",
    "Ipoh, Malaysia",
    "Pokhara, Nepal",
    "Stellenbosch, South Africa",
    "Rosario, Argentina",
    "Bursa, Türkiye",
    "Esbjerg, Denmark",
    "Lugano, Switzerland",
    "Ghent, Belgium",
    "Split, Croatia",
    "Tartu, Estonia",
    "Kaunas, Lithuania",
    "Whanganui, New Zealand",
    "Townsville, Australia",
    "Kelowna, Canada",
    "Zacatecas, Mexico",
];

pub fn place(g: &mut Gen) -> String {
    match g.below(12) {
        0..=5 => own(g, CITIES).to_string(),
        6 | 7 => own(g, REGIONS).to_string(),
        8 | 9 => own(g, COUNTRIES).to_string(),
        _ => own(g, CITY_COUNTRY).to_string(),
    }
}

/// A place as typed in a lowercase chat.
fn place_lower(g: &mut Gen) -> String {
    let p = place(g);
    p.trim_start_matches("the ").to_lowercase()
}

// Addresses: each country's order, with this split's own towns and streets.

const US_TOWNS: &[(&str, &str)] = &[
    ("Tulsa", "OK"),
    ("Sacramento", "CA"),
    ("Asheville", "NC"),
    ("Missoula", "MT"),
    ("Honolulu", "HI"),
    ("Anchorage", "AK"),
    ("Bangor", "ME"),
    ("Fargo", "ND"),
    ("Wichita", "KS"),
    ("Chattanooga", "TN"),
    ("Reno", "NV"),
    ("Eugene", "OR"),
    ("Ithaca", "NY"),
    ("Durham", "NC"),
    ("Athens", "GA"),
    ("Bozeman", "MT"),
    ("Provo", "UT"),
    ("Cedar Rapids", "IA"),
    ("Green Bay", "WI"),
    ("Baton Rouge", "LA"),
];
const US_STREETS: &[&str] = &[
    "Sycamore Drive",
    "Juniper Ct",
    "Old Mill Rd",
    "Harbor View Terrace",
    "Dogwood Trail",
    "Bayshore Pkwy",
    "Canyon Ridge Loop",
    "Kamehameha Hwy",
    "Prospect Hill Rd",
    "NE 45th St",
    "SW Alder St",
    "Martin Luther King Jr Way",
    "Cherry Blossom Cir",
    "Quail Run",
    "Tamarack Ln",
    "Foxhollow Road",
    "E Colfax Ave",
    "Poplar Bluff Dr",
    "Arrowhead Trl",
    "Founders Row",
];
const UK_TOWNS: &[(&str, &str)] = &[
    ("Harrogate", "HG"),
    ("Stroud", "GL"),
    ("Lewes", "BN"),
    ("Kendal", "LA"),
    ("Ely", "CB"),
    ("Truro", "TR"),
    ("Hexham", "NE"),
    ("Stamford", "PE"),
    ("Matlock", "DE"),
    ("Kingston upon Thames", "KT"),
    ("Aberystwyth", "SY"),
    ("Perth", "PH"),
];
const UK_STREETS: &[&str] = &[
    "Acacia Avenue",
    "Mill Lane",
    "Chapel Row",
    "Belvedere Gardens",
    "Kingfisher Close",
    "Orchard Mews",
    "St Aidan's Terrace",
    "Greyfriars Walk",
    "Coronation Crescent",
    "Marlborough Rise",
    "Ash Grove",
    "Tannery Yard",
];
const UK_HOUSES: &[&str] = &[
    "Rose Cottage",
    "The Old Forge",
    "Ivy House",
    "Hillside Barn",
    "2 Weavers Cottages",
    "The Granary",
];
const IE_TOWNS: &[(&str, &str)] = &[
    ("Co. Galway", "H91"),
    ("Co. Cork", "T12"),
    ("Co. Kilkenny", "R95"),
    ("Co. Sligo", "F91"),
    ("Co. Wexford", "Y35"),
];
const IE_STREETS: &[&str] = &[
    "The Maltings, Dock Road",
    "14 Bóthar na Trá",
    "Sráid an Mhuilinn",
    "3 Fairgreen Terrace",
    "Ard na Gréine",
    "22 Abbeygate Street",
];
const AU_TOWNS: &[(&str, &str)] = &[
    ("Wagga Wagga NSW", "2650"),
    ("Toowoomba QLD", "4350"),
    ("Ballarat VIC", "3350"),
    ("Fremantle WA", "6160"),
    ("Launceston TAS", "7250"),
    ("Mount Gambier SA", "5290"),
    ("Alice Springs NT", "0870"),
    ("Bathurst NSW", "2795"),
];
const AU_STREETS: &[&str] = &[
    "Banksia Crescent",
    "Wattle Street",
    "Jacaranda Pde",
    "Bottlebrush Way",
    "Koala Court",
    "Ironbark Rd",
    "Grevillea Close",
    "Boab Avenue",
];
const NZ_TOWNS: &[(&str, &str)] = &[
    ("Mount Eden, Auckland", "1024"),
    ("Te Aro, Wellington", "6011"),
    ("Riccarton, Christchurch", "8041"),
    ("Frankton, Hamilton", "3204"),
    ("Roslyn, Dunedin", "9010"),
];
const NZ_STREETS: &[&str] = &[
    "Kōwhai Street",
    "Pōhutukawa Drive",
    "Tōtara Avenue",
    "Rimu Road",
    "Mānuka Place",
];
const CA_TOWNS: &[(&str, &str)] = &[
    ("Montréal (Québec)", "H2J"),
    ("Gatineau (Québec)", "J8X"),
    ("Victoria BC", "V8W"),
    ("Saskatoon SK", "S7K"),
    ("Halifax NS", "B3H"),
    ("Winnipeg MB", "R3C"),
];
const CA_STREETS: &[&str] = &[
    "rue Saint-Denis",
    "boulevard René-Lévesque Ouest",
    "Fort Street",
    "Spadina Crescent E",
    "Barrington St",
    "Portage Ave",
];
const IN_TOWNS: &[(&str, &str)] = &[
    ("Noida, Uttar Pradesh", "201301"),
    ("Indiranagar, Bengaluru", "560038"),
    ("Jubilee Hills, Hyderabad", "500033"),
    ("Salt Lake, Kolkata", "700091"),
    ("Kothrud, Pune", "411038"),
    ("Anna Nagar, Chennai", "600040"),
    ("Vastrapur, Ahmedabad", "380015"),
];
const IN_STREETS: &[&str] = &[
    "2nd Cross, 5th Main",
    "Sector 62",
    "Road No. 36",
    "Karve Road",
    "Shanti Kunj Society",
    "100 Feet Road",
    "Ashok Vihar Lane",
];
const DE_TOWNS: &[(&str, &str)] = &[
    ("Stuttgart", "70"),
    ("Dresden", "01"),
    ("Münster", "48"),
    ("Freiburg im Breisgau", "79"),
    ("Rostock", "18"),
    ("Regensburg", "93"),
    ("Kassel", "34"),
];
const DE_STREETS: &[&str] = &[
    "Lindenstraße",
    "Am Kirchberg",
    "Schillerplatz",
    "Gartenweg",
    "Kastanienallee",
    "Zur Mühle",
    "Goethestr.",
    "Hafenstraße",
];
const FR_TOWNS: &[&str] = &[
    "Rennes",
    "Montpellier",
    "Grenoble",
    "Dijon",
    "Annecy",
    "Toulouse",
    "La Rochelle",
];
const FR_STREETS: &[&str] = &[
    "avenue Jean Jaurès",
    "rue des Tanneurs",
    "impasse des Lilas",
    "boulevard Gambetta",
    "chemin de la Fontaine",
    "place du Marché",
    "quai des Chartrons",
];
const ES_TOWNS: &[&str] = &[
    "Valencia",
    "Zaragoza",
    "Salamanca",
    "Málaga",
    "Valladolid",
    "Murcia",
];
const ES_STREETS: &[&str] = &[
    "C/ Mayor",
    "Avda. de la Constitución",
    "Calle San Vicente",
    "Paseo de Gracia",
    "Plaza del Pilar",
    "Ronda de Toledo",
];
const NL_TOWNS: &[&str] = &[
    "Utrecht",
    "Haarlem",
    "Groningen",
    "Leiden",
    "Delft",
    "Zwolle",
];
const NL_STREETS: &[&str] = &[
    "Oudegracht",
    "Prinsengracht",
    "Zijlweg",
    "Herestraat",
    "Oosterkade",
    "Lange Voorhout",
];
const BE_TOWNS: &[(&str, &str)] = &[
    ("1040 Etterbeek", "Rue de la Loi"),
    ("2000 Antwerpen", "Meir"),
    ("4000 Liège", "Rue Saint-Gilles"),
    ("3000 Leuven", "Naamsestraat"),
    ("8000 Brugge", "Langestraat"),
];
const CH_TOWNS: &[(&str, &str)] = &[
    ("CH-8001 Zürich", "Bahnhofstrasse"),
    ("1009 Pully", "Chemin des Vignes"),
    ("CH-3011 Bern", "Kramgasse"),
    ("6900 Lugano", "Via Nassa"),
    ("4051 Basel", "Spalenberg"),
];
const IT_TOWNS: &[(&str, &str)] = &[
    ("Napoli", "NA"),
    ("Torino", "TO"),
    ("Verona", "VR"),
    ("Perugia", "PG"),
    ("Bari", "BA"),
    ("Trieste", "TS"),
];
const IT_STREETS: &[&str] = &[
    "Via dei Mille",
    "Corso Vittorio Emanuele II",
    "Viale Mazzini",
    "Via Garibaldi",
    "Piazza delle Erbe",
    "Vicolo del Pozzo",
];
const PT_TOWNS: &[(&str, &str)] = &[
    ("Braga", "4700"),
    ("Aveiro", "3800"),
    ("Évora", "7000"),
    ("Setúbal", "2900"),
    ("Funchal", "9000"),
];
const PT_STREETS: &[&str] = &[
    "Rua das Flores",
    "Avenida da Liberdade",
    "Travessa do Carmo",
    "Rua de Santa Catarina",
];
const CZ_TOWNS: &[(&str, &str)] = &[
    ("Praha 10", "100 00"),
    ("Brno-střed", "602 00"),
    ("Olomouc", "779 00"),
    ("Plzeň", "301 00"),
];
const CZ_STREETS: &[&str] = &[
    "Vinohradská",
    "Masarykova",
    "Husova",
    "Nerudova",
    "Palackého",
];
const MX: &[(&str, &str)] = &[
    (
        "Av. Insurgentes Sur 1602, Piso 4\nCol. Crédito Constructor, Benito Juárez\n03940 Ciudad de México, CDMX",
        "Ciudad de México",
    ),
    (
        "Calle Hidalgo 215, Int. 3\nCol. Centro\n44100 Guadalajara, Jal.",
        "Guadalajara",
    ),
    (
        "Calle 60 No. 491-A x 57 y 59\nCentro\n97000 Mérida, Yuc.",
        "Mérida",
    ),
    (
        "Av. Constitución 908 Pte.\nCol. Centro\n64000 Monterrey, N.L.",
        "Monterrey",
    ),
];
const BR: &[(&str, &str)] = &[
    (
        "Rua Augusta, 1508, apto 92 – Consolação\nSão Paulo – SP\n01304-001",
        "São Paulo",
    ),
    (
        "Av. Sete de Setembro, 3220, bloco B, apto 1201\nCuritiba – PR\n80230-010",
        "Curitiba",
    ),
    (
        "Rua da Aurora, 295, sala 7\nBoa Vista, Recife – PE\n50050-000",
        "Recife",
    ),
];
const AR: &[(&str, &str)] = &[
    ("Av. Corrientes 1234, 5° B\nC1043AAZ CABA", "Buenos Aires"),
    ("Bv. Oroño 1450, piso 2\nS2000 Rosario, Santa Fe", "Rosario"),
    ("San Martín 876, dpto. 4\nM5500 Mendoza", "Mendoza"),
];
const ZA: &[(&str, &str)] = &[
    (
        "14 Jacaranda Street\nMenlo Park\nPretoria\n0081",
        "Pretoria",
    ),
    (
        "Unit 7, Seabreeze Villas\n22 Marine Drive\nSummerstrand\nGqeberha\n6001",
        "Gqeberha",
    ),
    ("3 Protea Road\nClaremont\nCape Town\n7708", "Cape Town"),
];
const KE_NG: &[(&str, &str)] = &[
    ("P.O. Box 30197-00100\nNairobi", "Nairobi"),
    (
        "Plot 12, Admiralty Way\nLekki Phase 1\nLagos 106104",
        "Lagos",
    ),
    (
        "House 5, Ngong Road, Kilimani\nP.O. Box 2151-00202\nNairobi",
        "Nairobi",
    ),
    ("No. 9 Awolowo Road\nIkoyi, Lagos", "Lagos"),
];
const ASIA: &[(&str, &str)] = &[
    (
        "Blk 123 Ang Mo Kio Ave 6, #08-1234\nSingapore 560123",
        "Singapore",
    ),
    (
        "Unit 12B, Tower 2, One Serendra\n11th Ave, Bonifacio Global City\nTaguig 1634, Metro Manila",
        "Taguig",
    ),
    (
        "Room 1203, No. 88 Jianguo Road\nChaoyang District, Beijing 100022",
        "Beijing",
    ),
    ("上海市浦东新区世纪大道100号 200120", "上海"),
    ("서울특별시 강남구 테헤란로 152, 12층 06236", "서울"),
    ("12F, 152 Teheran-ro, Gangnam-gu\nSeoul 06236", "Seoul"),
    ("〒530-0001 大阪府大阪市北区梅田3-1-1", "大阪"),
    (
        "Flat 301, 2-14-5 Nakameguro, Meguro-ku\nTokyo 153-0061",
        "Tokyo",
    ),
    (
        "88/12 Moo 3, Sukhumvit Soi 31\nKhlong Toei Nuea, Watthana\nBangkok 10110",
        "Bangkok",
    ),
    (
        "Jl. Kemang Raya No. 17\nBangka, Mampang Prapatan\nJakarta Selatan 12730",
        "Jakarta",
    ),
];
const EAST_EUROPE: &[(&str, &str)] = &[
    (
        "ул. Ленина, д. 15, кв. 42\nг. Екатеринбург, 620014",
        "Екатеринбург",
    ),
    ("ул. Пушкина, д. 8, кв. 3\nг. Казань, 420111", "Казань"),
    ("вул. Хрещатик, 22, кв. 17\nм. Київ, 01001", "Київ"),
    ("ul. Piotrkowska 104 m. 12\n90-004 Łódź", "Łódź"),
    ("Ερμού 25\n105 63 Αθήνα", "Αθήνα"),
    (
        "Tsimiski 45, 3rd floor\n546 23 Thessaloniki",
        "Thessaloniki",
    ),
    (
        "Rehov Dizengoff 120, Apt 7\nTel Aviv-Yafo 6433302",
        "Tel Aviv-Yafo",
    ),
    ("str. Memorandumului 28, ap. 5\n400114 Cluj", "Cluj"),
];

/// A postal address of this split's mix of countries and formats (7% military or diplomatic).
pub fn address(g: &mut Gen) -> Address {
    if g.chance(7) {
        return military(g);
    }
    civil_address(g)
}

/// A street with its number, for texts that name the street alone (`2903 Kamehameha Hwy`).
fn street(g: &mut Gen) -> String {
    match g.below(4) {
        0 | 1 => format!("{} {}", g.below(9800) + 12, own(g, US_STREETS)),
        2 => format!("{} {}", g.below(140) + 1, own(g, UK_STREETS)),
        _ => format!("{} {}", g.below(200) + 1, own(g, AU_STREETS)),
    }
}

/// A postal address where a military one would make no sense (a house for sale, a driveway).
fn civil_address(g: &mut Gen) -> Address {
    let with_country = g.chance(40);
    let mut lines: Vec<String> = Vec::new();
    let city: String;
    let country: &str;
    match g.below(26) {
        0..=5 => {
            let (town, st) = own_pair(g, US_TOWNS);
            let street = own(g, US_STREETS);
            let n = g.below(9800) + 12;
            let zip = format!("{:05}", g.below(98_000) + 1001);
            let zip = if g.chance(25) {
                format!("{zip}-{:04}", g.below(10_000))
            } else {
                zip
            };
            match g.below(5) {
                0 => {
                    lines.push(format!("PO Box {}", g.below(9000) + 10));
                    lines.push(format!("{town}, {st} {zip}"));
                }
                1 => {
                    // USPS style, all capitals, no punctuation.
                    lines.push(format!("{n} {street} APT {}", g.below(400) + 1).to_uppercase());
                    lines.push(format!("{town} {st} {zip}").to_uppercase());
                }
                2 => {
                    lines.push(format!("{n} {street}"));
                    lines.push(format!(
                        "Unit {}{}",
                        g.below(30) + 1,
                        g.pick(&["A", "B", ""])
                    ));
                    lines.push(format!("{town}, {st} {zip}"));
                }
                3 => {
                    lines.push(format!(
                        "Bldg {}, {n} {street}, Ste {}",
                        g.below(9) + 1,
                        g.below(900) + 100
                    ));
                    lines.push(format!("{town}, {st} {zip}"));
                }
                _ => {
                    lines.push(format!("{n} {street}"));
                    lines.push(format!("{town}, {st} {zip}"));
                }
            }
            city = town.to_string();
            country = g.pick(&["USA", "United States of America", "US"]);
        }
        6 | 7 => {
            let (town, area) = own_pair(g, UK_TOWNS);
            let street = own(g, UK_STREETS);
            let letters = b"ABDEFGHJLNPQRSTUWXYZ";
            let pc = format!(
                "{area}{} {}{}{}",
                g.below(15) + 1,
                g.below(10),
                char::from(letters[g.below(letters.len())]),
                char::from(letters[g.below(letters.len())])
            );
            match g.below(3) {
                0 => {
                    lines.push(own(g, UK_HOUSES).to_string());
                    lines.push(street.to_string());
                }
                1 => lines.push(format!(
                    "Flat {}, {} {street}",
                    g.below(12) + 1,
                    g.below(90) + 1
                )),
                _ => lines.push(format!("{} {street}", g.below(140) + 1)),
            }
            lines.push(town.to_string());
            lines.push(pc);
            city = town.to_string();
            country = g.pick(&["United Kingdom", "UK", "England", "Scotland", "Wales"]);
        }
        8 => {
            let (county, routing) = own_pair(g, IE_TOWNS);
            let street = own(g, IE_STREETS);
            lines.push(format!("Apartment {}", g.below(40) + 1));
            lines.push(street.to_string());
            lines.push(format!("{county}, {routing} {}", g.shape("A#A#")));
            city = county.to_string();
            country = "Ireland";
        }
        9 | 10 => {
            let (town, pc) = own_pair(g, AU_TOWNS);
            let street = own(g, AU_STREETS);
            if g.chance(50) {
                lines.push(format!(
                    "Unit {}/{} {street}",
                    g.below(20) + 1,
                    g.below(200) + 1
                ));
            } else if g.chance(30) {
                lines.push(format!("PO Box {}", g.below(900) + 11));
            } else {
                lines.push(format!("{} {street}", g.below(200) + 1));
            }
            lines.push(format!("{town} {pc}"));
            city = town.to_string();
            country = "Australia";
        }
        11 => {
            let (town, pc) = own_pair(g, NZ_TOWNS);
            let street = own(g, NZ_STREETS);
            lines.push(format!(
                "Flat {}, {} {street}",
                g.below(6) + 1,
                g.below(90) + 1
            ));
            lines.push(format!("{town} {pc}"));
            city = town.to_string();
            country = "New Zealand";
        }
        12 => {
            let (town, fsa) = own_pair(g, CA_TOWNS);
            let street = own(g, CA_STREETS);
            let l = b"ABCEGHJKLMNPRSTVWXYZ";
            let ldu = format!(
                "{}{}{}",
                g.below(10),
                char::from(l[g.below(l.len())]),
                g.below(10)
            );
            if street.starts_with("rue") || street.starts_with("boul") {
                lines.push(format!(
                    "{}, {street}, app. {}",
                    g.below(9000) + 100,
                    g.below(30) + 1
                ));
            } else {
                lines.push(format!(
                    "{}-{} {street}",
                    g.below(1500) + 101,
                    g.below(2000) + 100
                ));
            }
            lines.push(format!("{town}  {fsa} {ldu}"));
            city = town.to_string();
            country = "Canada";
        }
        13 | 14 => {
            let (town, pin) = own_pair(g, IN_TOWNS);
            let street = own(g, IN_STREETS);
            match g.below(3) {
                0 => lines.push(format!(
                    "{}-{}, {} Apartments",
                    g.pick(&["A", "B", "C", "D"]),
                    g.below(900) + 101,
                    g.pick(&[
                        "Shanti Kunj",
                        "Sai Ganga",
                        "Brigade Meadows",
                        "Godrej Garden"
                    ])
                )),
                1 => lines.push(format!("No. {}, {street}", g.below(80) + 1)),
                _ => lines.push(format!("Plot {}, {street}", g.below(300) + 1)),
            }
            if g.chance(50) {
                lines.push(format!("{town} - {pin}"));
            } else {
                lines.push(format!("{town} {pin}"));
            }
            city = town.to_string();
            country = "India";
        }
        15 => {
            let (town, pfx) = own_pair(g, DE_TOWNS);
            let street = own(g, DE_STREETS);
            if g.chance(25) {
                lines.push(format!("Hinterhaus, {}. OG", g.below(4) + 1));
            }
            lines.push(format!(
                "{street} {}{}",
                g.below(80) + 1,
                g.pick(&["", "", "a", "b"])
            ));
            lines.push(format!("{pfx}{:03} {town}", g.below(1000)));
            city = town.to_string();
            country = g.pick(&["Germany", "Deutschland"]);
        }
        16 => {
            let town = own(g, FR_TOWNS);
            let street = own(g, FR_STREETS);
            if g.chance(30) {
                lines.push(format!(
                    "Résidence Les Tilleuls, Bât. {}",
                    g.pick(&["A", "C", "D"])
                ));
            }
            lines.push(format!(
                "{}{} {street}",
                g.below(120) + 1,
                g.pick(&["", "", " ter"])
            ));
            lines.push(format!("{:02}{:03} {town}", g.below(95) + 1, g.below(1000)));
            city = town.to_string();
            country = "France";
        }
        17 => {
            let town = own(g, ES_TOWNS);
            let street = own(g, ES_STREETS);
            lines.push(format!(
                "{street}, {}, {}º {}",
                g.below(150) + 1,
                g.below(9) + 1,
                g.pick(&["A", "B", "izq.", "dcha."])
            ));
            lines.push(format!("{:05} {town}", g.below(50_000) + 1000));
            city = town.to_string();
            country = "España";
        }
        18 => {
            let town = own(g, NL_TOWNS);
            let street = own(g, NL_STREETS);
            lines.push(format!(
                "{street} {}{}",
                g.below(300) + 1,
                g.pick(&["", "bis", "-II", " A"])
            ));
            lines.push(format!("{} {town}", g.shape("N### AA")));
            city = town.to_string();
            country = "Nederland";
        }
        19 => {
            let (town, street) = if g.chance(50) {
                own_pair(g, BE_TOWNS)
            } else {
                own_pair(g, CH_TOWNS)
            };
            lines.push(format!(
                "{street} {}{}",
                g.below(150) + 1,
                g.pick(&["", " bte 3", "/2"])
            ));
            lines.push(town.to_string());
            city = town.to_string();
            country = g.pick(&["Belgique", "Schweiz", "Suisse", "Belgium"]);
        }
        20 => {
            let (town, prov) = own_pair(g, IT_TOWNS);
            let street = own(g, IT_STREETS);
            lines.push(format!(
                "{street} {}, int. {}",
                g.below(200) + 1,
                g.below(20) + 1
            ));
            lines.push(format!("{:05} {town} ({prov})", g.below(90_000) + 100));
            city = town.to_string();
            country = "Italia";
        }
        21 => {
            if g.chance(50) {
                let (town, pc) = own_pair(g, PT_TOWNS);
                let street = own(g, PT_STREETS);
                lines.push(format!(
                    "{street} {}, {}.º Esq.",
                    g.below(200) + 1,
                    g.below(6) + 1
                ));
                lines.push(format!("{pc}-{} {town}", g.digits(3)));
                city = town.to_string();
                country = "Portugal";
            } else {
                let (town, pc) = own_pair(g, CZ_TOWNS);
                let street = own(g, CZ_STREETS);
                lines.push(format!(
                    "{street} {}/{}",
                    g.below(2000) + 1,
                    g.below(90) + 1
                ));
                lines.push(format!("{pc} {town}"));
                city = town.to_string();
                country = "Česká republika";
            }
        }
        22 => {
            let (a, c) = if g.chance(50) {
                own_pair(g, MX)
            } else if g.chance(50) {
                own_pair(g, BR)
            } else {
                own_pair(g, AR)
            };
            lines.extend(a.lines().map(str::to_string));
            city = c.to_string();
            country = g.pick(&["México", "Brasil", "Argentina"]);
        }
        23 => {
            let (a, c) = if g.chance(50) {
                own_pair(g, ZA)
            } else {
                own_pair(g, KE_NG)
            };
            lines.extend(a.lines().map(str::to_string));
            city = c.to_string();
            country = g.pick(&["South Africa", "Kenya", "Nigeria"]);
        }
        24 => {
            let (a, c) = own_pair(g, ASIA);
            lines.extend(a.lines().map(str::to_string));
            city = c.to_string();
            country = "";
        }
        _ => {
            let (a, c) = own_pair(g, EAST_EUROPE);
            lines.extend(a.lines().map(str::to_string));
            city = c.to_string();
            country = "";
        }
    }
    // The country's name fits only where the pick matches; pairs with mixed countries go without.
    let fits = !country.is_empty()
        && !matches!(
            country,
            "México"
                | "Brasil"
                | "Argentina"
                | "South Africa"
                | "Kenya"
                | "Nigeria"
                | "Belgique"
                | "Schweiz"
                | "Suisse"
                | "Belgium"
        );
    if with_country && fits {
        lines.push(country.to_string());
    }
    Address { lines, city }
}

/// A US military or diplomatic address, or a ship's, in this split's own numbers and hulls.
fn military(g: &mut Gen) -> Address {
    let (post, code, zip) = match g.below(3) {
        0 => ("APO", "AE", format!("09{:03}", g.below(999))),
        1 => ("FPO", "AP", format!("96{:03}", g.below(999))),
        _ => ("DPO", "AA", format!("340{:02}", g.below(99))),
    };
    let mut lines = Vec::new();
    match g.below(4) {
        0 => lines.push(format!(
            "PSC {} Box {}",
            g.below(900) + 100,
            g.below(9000) + 10
        )),
        1 => {
            lines.push(format!("Unit {}", g.below(9000) + 1000));
            lines.push(format!("Box {}", g.below(900) + 10));
        }
        2 => lines.push(format!(
            "CMR {}, Box {}",
            g.below(500) + 400,
            g.below(5000) + 1000
        )),
        _ => {
            let ship = own(
                g,
                &[
                    "USS Carl Vinson (CVN 70)",
                    "USS Wasp (LHD 1)",
                    "USS Porter (DDG 78)",
                    "USNS Harvey Milk (T-AO 206)",
                    "USCGC Stratton (WMSL 752)",
                    "USS Mobile Bay (CG 53)",
                    "USS Tripoli (LHA 7)",
                    "USNS Robert E. Peary (T-AKE 5)",
                ],
            );
            lines.push(ship.to_string());
            lines.push(format!("FPO {code} {zip}"));
            return Address {
                lines,
                city: String::new(),
            };
        }
    }
    lines.push(format!("{post} {code} {zip}"));
    Address {
        lines,
        city: String::new(),
    }
}

fn company(g: &mut Gen) -> &'static str {
    own(
        g,
        &[
            "Halcyon Freight Pty Ltd",
            "Bramble Health",
            "Tessellate AI",
            "Quillworks",
            "Ridgeway Surveys Ltd",
            "Pelican Bay Travel",
            "Kauri Legal",
            "Saffron HR Services",
            "Ostrander College",
            "Marlowe & Finch LLP",
            "Cobalt Ridge Mining",
            "Hollowtree Games",
            "Aster Biologics",
            "Juniper Lane Bakery",
            "Northstar Roofing Co.",
            "Velvet Fern Florists",
        ],
    )
}

fn role(g: &mut Gen) -> &'static str {
    own(
        g,
        &[
            "Procurement Lead",
            "Site Reliability Engineer",
            "Practice Manager",
            "Claims Adjuster",
            "Leasing Consultant",
            "Junior Data Analyst",
            "Head of Partnerships",
            "Registered Nurse",
            "Sous Chef",
            "Operations Director, APAC",
            "Events Coordinator",
            "Year 4 Teacher",
        ],
    )
}

// ---------------------------------------------------------------------------------------------
// Small writers.
// ---------------------------------------------------------------------------------------------

/// The next message time of a thread: `minute` (of the day) moves on a little and is written
/// `3:17 PM`.
fn clock(g: &mut Gen, minute: &mut usize) -> String {
    *minute = (*minute + g.below(40) + 1) % (24 * 60);
    let (h, m) = (*minute / 60, *minute % 60);
    let h12 = if h % 12 == 0 { 12 } else { h % 12 };
    format!("{h12}:{m:02} {}", if h < 12 { "AM" } else { "PM" })
}

fn emoji(g: &mut Gen) -> &'static str {
    g.pick(&[
        " 🙏",
        " 👍",
        " 🎉",
        " :sweat_smile:",
        " :eyes:",
        "",
        " 😅",
        " 🙌",
        " :white_check_mark:",
    ])
}

/// Writes the address in one line or across lines.
fn put_address(d: &mut Doc, a: &Address, multiline: bool) {
    if multiline {
        d.ent(ADDR, &a.multiline());
    } else {
        d.ent(ADDR, &a.inline());
    }
}

// ---------------------------------------------------------------------------------------------
// Templates with personal data.
// ---------------------------------------------------------------------------------------------

fn slack_thread(g: &mut Gen, d: &mut Doc) {
    let mut minute = g.below(14 * 60) + 7 * 60;
    let a = g.person();
    let b = latin_person(g);
    let c = g.person();
    d.ent(NAME, &a.full());
    d.lit(&format!("  {}\n", clock(g, &mut minute)));
    let opener = g.pick(&[
        "anyone know who owns the vendor onboarding for ",
        "quick q — who's handling the renewal with ",
        "heads up — who signs off the contract for ",
    ]);
    d.lit(opener);
    d.val(company(g));
    d.lit("?");
    d.lit(emoji(g));
    d.lit("\n\n");
    d.ent(NAME, &b.full());
    d.lit(&format!("  {}\n", clock(g, &mut minute)));
    d.lit("@");
    d.ent(NAME, &c.full());
    d.lit(" has it I think. ");
    match g.below(3) {
        0 => {
            d.lit("their contact there is ");
            d.ent(MAIL, &g.email(&b));
            d.lit(", or ping ");
            d.ent(NAME, &c.short());
            d.lit(" directly");
        }
        1 => {
            d.lit("she's out till Monday though, her cell is ");
            d.ent(TEL, &g.phone());
        }
        _ => {
            d.lit("he moved to ");
            d.ent(LOC, &place(g));
            d.lit(" last month so mind the timezone");
        }
    }
    d.lit(emoji(g));
    d.lit("\n\n");
    d.ent(NAME, &a.short());
    d.lit(&format!("  {}\n", clock(g, &mut minute)));
    d.lit(g.pick(&["ty!! ", "perfect, thanks ", "legend "]));
    d.lit("— tracking it in ");
    d.val(&g.ticket_id());
    d.lit(" (thread in ");
    d.val(&g.opc_id());
    d.lit(")");
}

fn discord_lowercase(g: &mut Gen, d: &mut Doc) {
    let a = g.person();
    let b = g.person();
    let lines = g.below(3) + 3;
    let mut minute = g.below(24 * 60);
    for i in 0..lines {
        let who = if i % 2 == 0 { &a } else { &b };
        minute = (minute + g.below(9)) % (24 * 60);
        d.lit(&format!("[{:02}:{:02}] ", minute / 60, minute % 60));
        d.ent(NAME, &who.chat());
        d.lit(": ");
        match g.below(8) {
            0 => {
                d.lit("server ip is ");
                let ip = g.ip();
                let port = g.pick(&["25565", "27015", "7777"]);
                if ip.contains(':') {
                    d.lit("[");
                    d.ent(IP, &ip);
                    d.lit(&format!("]:{port}"));
                } else {
                    d.ent(IP, &ip);
                    d.lit(&format!(":{port}"));
                }
                d.lit(" pw in dms");
            }
            1 => {
                d.lit("brb moving house, new place is in ");
                d.ent(LOC, &place_lower(g));
            }
            2 => {
                d.lit("lol ");
                let o = g.person();
                d.ent(NAME, &o.full().to_lowercase());
                d.lit(" just rage quit again");
            }
            3 => {
                d.lit("gg wp ");
                d.lit(emoji(g));
            }
            4 => {
                d.lit("text me on ");
                d.ent(TEL, &g.phone_plain());
                d.lit(" if discord dies again");
            }
            5 => {
                d.lit("patch ");
                d.val(&g.version());
                d.lit(" broke my keybinds smh");
            }
            6 => {
                d.lit("im in ");
                d.ent(LOC, &place_lower(g));
                d.lit(" this weekend for the lan");
            }
            _ => {
                d.lit("anyone got the invite link? mine expired");
            }
        }
        d.lit("\n");
    }
}

fn support_chat(g: &mut Gen, d: &mut Doc) {
    let agent = g.person();
    let cust = latin_person(g);
    let mut secs = g.below(20 * 3600) + 3600;
    let mut t = |g: &mut Gen| {
        secs += g.below(90) + 5;
        format!(
            "[{:02}:{:02}:{:02}] ",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        )
    };
    d.lit("Chat transcript — ");
    d.val(&g.date());
    d.lit("\n");
    d.lit(&t(g));
    d.ent(NAME, &agent.short());
    d.lit(g.pick(&[
        " (Support): Hi there, you're chatting with ",
        " (Agent): Welcome! My name is ",
    ]));
    d.ent(NAME, &agent.short());
    d.lit(". How can I help today?\n");
    d.lit(&t(g));
    d.lit("Visitor: hi, my parcel never arrived, order ");
    d.val(&g.order_no());
    d.lit("\n");
    d.lit(&t(g));
    d.ent(NAME, &agent.short());
    d.lit(": Sorry about that! Can I get the name on the account and the delivery address?\n");
    d.lit(&t(g));
    d.lit("Visitor: ");
    d.ent(NAME, &cust.full());
    d.lit(", ");
    let a = g.address();
    put_address(d, &a, false);
    d.lit("\n");
    d.lit(&t(g));
    d.ent(NAME, &agent.short());
    d.lit(": Thanks ");
    d.ent(NAME, &cust.given);
    d.lit(". And the best number or email to reach you?\n");
    d.lit(&t(g));
    d.lit("Visitor: ");
    if g.chance(50) {
        d.ent(MAIL, &g.email(&cust));
    } else {
        d.ent(TEL, &g.phone());
    }
    d.lit(g.pick(&[" works", "", " is best after 5"]));
    d.lit("\n");
    d.lit(&t(g));
    d.ent(NAME, &agent.short());
    d.lit(": I've opened case ");
    d.val(&g.ticket_id());
    d.lit(" and requested a reshipment. Anything else?");
}

fn sms_thread(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    match g.below(5) {
        0 => {
            d.lit("hey its ");
            d.ent(NAME, &p.chat());
            d.lit(" — new number, save this one: ");
            d.ent(TEL, &g.phone_plain());
        }
        1 => {
            d.lit("Your courier ");
            d.ent(NAME, &p.short());
            d.lit(" is 3 stops away. Parcel ");
            d.val(&g.order_no());
            d.lit(" to ");
            d.ent(ADDR, &street(g));
            d.lit(". Reply STOP to opt out");
        }
        2 => {
            d.lit("running late!! can u grab the keys from ");
            d.ent(NAME, &p.chat());
            d.lit("? shes at ");
            let a = g.address();
            put_address(d, &a, false);
        }
        3 => {
            d.lit("Mum landed in ");
            d.ent(LOC, &place(g));
            d.lit(" safe x call her on ");
            d.ent(TEL, &g.phone_plain());
            d.lit(" when u get a sec");
        }
        _ => {
            d.lit("Reminder: appt w/ ");
            d.lit(p.honorific);
            d.lit(" ");
            d.ent(NAME, &family(&p));
            d.lit(" tmrw ");
            d.val(&g.time());
            d.lit(". To reschedule call ");
            d.ent(TEL, &g.phone());
        }
    }
}

fn customer_review(g: &mut Gen, d: &mut Doc) {
    let host = g.person();
    let stars = g.below(3) + 3;
    d.lit(&"★".repeat(stars));
    d.lit(&"☆".repeat(5 - stars));
    d.lit("  ");
    d.lit(g.pick(&[
        "Lovely little flat, would book again\n",
        "Mixed feelings about this stay\n",
        "Spotless and quiet\n",
    ]));
    d.lit("We drove up from ");
    d.ent(LOC, &place(g));
    d.lit(" with two kids and ");
    d.ent(NAME, &host.short());
    d.lit(g.pick(&[
        " met us at the door with fresh bread. ",
        " left a detailed guide to the area. ",
        " was slow to reply but sorted the heating. ",
    ]));
    if g.chance(50) {
        d.lit("Wifi dropped a couple of times (");
        d.val(&format!("{} Mbps", g.below(90) + 10));
        d.lit(" when it worked). ");
    }
    if g.chance(40) {
        d.lit("Booked via ");
        d.ent(LINK, &g.url(&host));
        d.lit(". ");
    }
    d.lit("Paid ");
    d.val(&g.amount());
    d.lit(" for ");
    d.val(&format!("{}", g.below(6) + 2));
    d.lit(" nights.\n— ");
    let r = latin_person(g);
    let initial = r.family.chars().next().unwrap_or('K');
    d.ent(NAME, &format!("{} {initial}.", r.given));
    d.lit(", ");
    d.val(&g.date());
}

fn cv_header(g: &mut Gen, d: &mut Doc) {
    let p = latin_person(g);
    let caps = g.chance(40);
    d.ent(
        NAME,
        &if caps {
            p.full().to_uppercase()
        } else {
            p.full()
        },
    );
    d.lit("\n");
    d.val(role(g));
    d.lit("\n");
    let a = g.address();
    put_address(d, &a, g.chance(50));
    d.lit("\n");
    d.ent(TEL, &g.phone_plain());
    d.lit(" · ");
    d.ent(MAIL, &g.email(&p));
    if g.chance(60) {
        d.lit(" · ");
        d.ent(LINK, &g.url(&p));
    }
    d.lit("\n\nPROFILE\n");
    d.lit("Detail-minded professional with ");
    d.val(&format!("{}", g.below(15) + 2));
    d.lit(" years across logistics and healthcare. Fluent in three languages.\n\nEXPERIENCE\n");
    d.val(company(g));
    d.lit(" — ");
    d.val(role(g));
    d.lit(&format!(" ({}–present)\n", 2018 + g.below(6)));
    d.lit("• Cut invoice disputes by ");
    d.val(&format!("{}%", g.below(40) + 10));
    d.lit("\n• Rolled out ");
    d.val(&format!("SAP S/4HANA {}", g.version()));
    d.lit(" to four depots\n\nREFERENCES\nOn request, or contact ");
    let r = g.person();
    d.ent(NAME, &r.full());
    d.lit(" (former manager), ");
    d.ent(TEL, &g.phone());
}

fn job_application(g: &mut Gen, d: &mut Doc) {
    let me = latin_person(g);
    let hm = g.person();
    d.lit("Subject: Application – ");
    d.val(role(g));
    d.lit(" (ref ");
    d.val(&g.order_no());
    d.lit(")\n\nDear ");
    if g.chance(50) {
        d.lit(hm.honorific);
        d.lit(" ");
        d.ent(NAME, &family(&hm));
    } else {
        d.ent(NAME, &hm.full());
    }
    d.lit(",\n\nI am writing to apply for the role advertised on your careers page. I currently live in ");
    d.ent(LOC, &place(g));
    d.lit(" and would be happy to relocate to ");
    d.ent(LOC, &place(g));
    d.lit(" by ");
    d.val(&g.date());
    d.lit(". My CV is attached");
    if g.chance(50) {
        d.lit(" and my portfolio is at ");
        d.ent(LINK, &g.url(&me));
    }
    d.lit(".\n\nI am available for interview any weekday; the quickest way to reach me is ");
    d.ent(TEL, &g.phone());
    d.lit(" or ");
    d.ent(MAIL, &g.email(&me));
    d.lit(".\n\nWith thanks for your time,\n");
    d.ent(NAME, &me.full());
    if g.chance(40) {
        d.lit("\n");
        let a = g.address();
        put_address(d, &a, true);
    }
}

fn lease_agreement(g: &mut Gen, d: &mut Doc) {
    let landlord = g.person();
    let tenant = g.person_with_initial();
    let a = g.address();
    d.lit("RESIDENTIAL TENANCY AGREEMENT\n\n1. PARTIES. This agreement is made on ");
    d.val(&g.date());
    d.lit(" between ");
    d.ent(NAME, &landlord.full());
    d.lit(" (the \"Landlord\") and ");
    d.ent(NAME, &tenant.full());
    d.lit(" (the \"Tenant\").\n2. PREMISES. The Landlord lets to the Tenant the dwelling at ");
    put_address(d, &a, g.chance(40));
    d.lit(", together with parking bay ");
    d.val(&format!("{}", g.below(90) + 1));
    d.lit(".\n3. RENT. ");
    d.val(&g.amount());
    d.lit(" per calendar month, paid by standing order to account ");
    d.ent(IBAN, &g.iban());
    d.lit(" no later than the 3rd day of each month.\n4. BOND. A bond of ");
    d.val(&g.amount());
    d.lit(" is lodged under reference ");
    d.val(&g.ticket_id());
    d.lit(".\n5. NOTICES may be served on the Landlord at ");
    d.ent(MAIL, &g.email(&landlord));
    d.lit(" or by phone on ");
    d.ent(TEL, &g.phone());
    d.lit(".");
}

fn guest_list(g: &mut Gen, d: &mut Doc) {
    d.lit(g.pick(&[
        "WEDDING GUESTS — final seating (v",
        "Rehearsal dinner list (draft ",
    ]));
    d.val(&format!("{}", g.below(9) + 2));
    d.lit(")\n");
    let tables = g.below(2) + 2;
    for t in 0..tables {
        d.lit(&format!("Table {}: ", t + 1));
        let n = g.below(3) + 2;
        for i in 0..n {
            if i > 0 {
                d.lit(", ");
            }
            let p = g.person();
            d.ent(NAME, &p.full());
            match g.below(5) {
                0 => {
                    d.lit(" (+1)");
                }
                1 => {
                    d.lit(" (vegan)");
                }
                2 => {
                    d.lit(" — flying in from ");
                    d.ent(LOC, &place(g));
                }
                _ => {}
            }
        }
        d.lit("\n");
    }
    d.lit("Invites still to post: ");
    let p = g.person();
    d.ent(NAME, &p.full());
    d.lit("\n");
    let a = g.address();
    put_address(d, &a, true);
    d.lit("\nRSVP deadline ");
    d.val(&g.date());
}

fn school_notice(g: &mut Gen, d: &mut Doc) {
    let head = g.person();
    let teacher = g.person();
    d.lit("Dear Parents and Carers,\n\nA reminder that Year ");
    d.val(&format!("{}", g.below(6) + 1));
    d.lit(" swimming moves to Thursdays from ");
    d.val(&g.date());
    d.lit(". Kits must be labelled. ");
    d.lit(teacher.honorific);
    d.lit(" ");
    d.ent(NAME, &family(&teacher));
    d.lit(g.pick(&[" will lead the sessions while ", " is covering, as "]));
    let away = g.person();
    d.lit(away.honorific);
    d.lit(" ");
    d.ent(NAME, &family(&away));
    d.lit(" is on leave.\n\nThe uniform shop is open ");
    d.val(&g.time());
    d.lit("–");
    d.val(&g.time());
    d.lit(". Questions about fees (");
    d.val(&g.amount());
    d.lit(" per term) go to the office on ");
    d.ent(TEL, &g.phone());
    d.lit(".\n\nKind regards,\n");
    d.ent(NAME, &head.full());
    d.lit("\nHeadteacher");
}

fn claim_narrative(g: &mut Gen, d: &mut Doc) {
    let ins = g.person_with_initial();
    let other = g.person();
    d.lit("CLAIM ");
    d.val(&g.ticket_id());
    d.lit(" — statement of loss\nPolicyholder: ");
    d.ent(NAME, &ins.full());
    d.lit("   SSN: ");
    d.ent(SSN, &g.ssn());
    d.lit("\nDate of loss: ");
    d.val(&g.date());
    d.lit("\n\nOn the above date at approximately ");
    d.val(&g.time());
    d.lit(" the insured was reversing out of the driveway at ");
    let a = civil_address(g);
    put_address(d, &a, false);
    d.lit(" when a delivery van driven by ");
    d.ent(NAME, &other.full());
    d.lit(" struck the rear bumper. ");
    d.ent(NAME, &family(&other));
    d.lit(g.pick(&[
        " admitted fault at the scene and gave the number ",
        " declined to exchange insurer details but gave a mobile, ",
    ]));
    d.ent(TEL, &g.phone_plain());
    d.lit(". A witness, ");
    let w = g.person();
    d.ent(NAME, &w.full());
    d.lit(", who was visiting from ");
    d.ent(LOC, &place(g));
    d.lit(", took photos. Estimated repair ");
    d.val(&g.amount());
    d.lit(". Police reference ");
    d.val(&g.order_no());
    d.lit(".");
}

fn travel_itinerary(g: &mut Gen, d: &mut Doc) {
    let p = latin_person(g);
    d.lit("BOOKING CONFIRMED  ·  Ref ");
    d.val(&g.shape("AAAAAA"));
    d.lit("\nPassenger: ");
    let airline = format!(
        "{}/{}",
        ascii(&p.family).to_uppercase(),
        ascii(&p.given).to_uppercase()
    );
    d.ent(NAME, &airline);
    d.lit(" ");
    d.lit(g.pick(&["MR", "MS", "MRS", "MSTR"]));
    d.lit("\n\n");
    d.val(&g.date());
    d.lit("  ");
    d.val(&g.shape("AA ###"));
    d.lit("  dep ");
    d.val(&g.time());
    d.lit("  seat ");
    d.val(&g.shape("##A"));
    d.lit("\nTraveller is flying home to ");
    d.ent(LOC, &place(g));
    d.lit(" via a 2-night stopover.\n\nBilling contact: ");
    d.ent(MAIL, &g.email(&p));
    d.lit(" / ");
    d.ent(TEL, &g.phone());
    d.lit("\nCard charged: ");
    let card = g.card();
    if g.chance(50) {
        d.ent(CARD, &card);
    } else {
        d.lit("•••• ");
        d.val(&card[card.len() - 4..]);
    }
    d.lit("\nTotal ");
    d.val(&g.amount());
    d.lit(" incl. taxes");
}

fn property_listing(g: &mut Gen, d: &mut Doc) {
    let agent = g.person();
    let beds = g.below(4) + 1;
    d.lit(&format!("{beds}-bed "));
    d.lit(g.pick(&["townhouse", "apartment", "bungalow", "cottage"]));
    d.lit(" · ");
    d.val(&g.amount());
    d.lit("\n");
    let a = civil_address(g);
    put_address(d, &a, g.chance(50));
    d.lit("\n\nSun-drenched living with north-facing deck, ");
    d.val(&format!("{} m²", g.below(150) + 45));
    d.lit(" on title, EPC rating ");
    d.lit(g.pick(&["B", "C", "D"]));
    d.lit(". Walk to cafés and the station.\n\nOpen home ");
    d.val(&g.date());
    d.lit(" ");
    d.val(&g.time());
    d.lit(". Enquiries: ");
    d.ent(NAME, &agent.full());
    d.lit(" on ");
    d.ent(TEL, &g.phone_plain());
    if g.chance(50) {
        d.lit(" or ");
        d.ent(MAIL, &g.email(&agent));
    }
    d.lit("\nListing ID ");
    d.val(&g.digits(8));
}

fn medical_referral(g: &mut Gen, d: &mut Doc) {
    let to = g.person();
    let pt = g.person();
    let gp = g.person();
    d.val(company(g));
    d.lit(" Medical Practice\n\n");
    d.val(&g.date());
    d.lit("\n\nDear Dr ");
    d.ent(NAME, &family(&to));
    d.lit(",\n\nRe: ");
    d.ent(NAME, &pt.full());
    d.lit(", DOB ");
    d.val(&format!(
        "{:02}/{:02}/19{}",
        g.below(28) + 1,
        g.below(12) + 1,
        g.below(60) + 30
    ));
    d.lit("\n");
    let a = g.address();
    put_address(d, &a, true);
    d.lit("\nTel ");
    d.ent(TEL, &g.phone());
    d.lit("\n\nThank you for seeing this ");
    d.val(&format!("{}", g.below(60) + 20));
    d.lit("-year-old with a six-week history of exertional chest tightness. ");
    d.ent(NAME, &pt.short());
    d.lit(g.pick(&[" recently returned from ", " spent the winter in "]));
    d.ent(LOC, &place(g));
    d.lit(". ECG today showed sinus rhythm, rate ");
    d.val(&format!("{}", g.below(40) + 60));
    d.lit(
        ". Current medication: ramipril 5 mg, atorvastatin 20 mg.\n\nResults are on the portal: ",
    );
    d.ent(
        LINK,
        &format!(
            "https://patientportal.bramblehealth.org/chart/{}",
            g.digits(7)
        ),
    );
    d.lit("\n\nYours sincerely,\n\nDr ");
    d.ent(NAME, &gp.full());
    d.lit("\nGeneral Practitioner");
}

fn sales_call_notes(g: &mut Gen, d: &mut Doc) {
    let p = g.person_with_initial();
    d.lit("Call notes ");
    d.val(&g.date());
    d.lit(" (");
    d.val(&format!("{} min", g.below(50) + 10));
    d.lit(")\n- spoke w/ ");
    d.ent(NAME, &p.full());
    d.lit(", ");
    d.val(role(g));
    d.lit(" @ ");
    d.val(company(g));
    d.lit("\n- based in ");
    d.ent(LOC, &place(g));
    d.lit(", team of ~");
    d.val(&format!("{}", g.below(200) + 5));
    d.lit("\n- budget approx ");
    d.val(&g.amount());
    d.lit(", decision by Q");
    d.val(&format!("{}", g.below(4) + 1));
    d.lit("\n- wants pilot on ");
    d.val(&g.version());
    d.lit("; concerned about SSO\n- NEXT: send deck to ");
    d.ent(MAIL, &g.email(&p));
    d.lit(", follow up ");
    d.ent(TEL, &g.phone());
    d.lit("\n- ");
    let o = g.person();
    d.ent(NAME, &o.short());
    d.lit(" (their IT) joins next call");
}

fn bug_report(g: &mut Gen, d: &mut Doc) {
    let p = latin_person(g);
    d.lit("### Bug: sync job crashes after upgrading to ");
    d.val(&g.version());
    d.lit(
        "\n\n**Steps**: run `sync --full` with the config below.\n\n```yaml\nsmtp:\n  host: smtp.",
    );
    d.val(own(g, DOMAINS));
    d.lit("\n  user: ");
    d.ent(MAIL, &g.email(&p));
    d.lit("\n  api_key: ");
    d.ent(KEY, &g.api_key());
    d.lit("\nallow_from:\n  - ");
    d.ent(IP, &g.ip());
    d.lit("\nretries: ");
    d.val(&format!("{}", g.below(5) + 1));
    d.lit("\n```\n\n**Trace**\n```\nERROR [worker-");
    d.val(&format!("{}", g.below(8)));
    d.lit("] ContactSync.push failed for contact_name=\"");
    d.ent(NAME, &p.full());
    d.lit("\" phone=\"");
    d.ent(TEL, &g.phone_plain());
    d.lit("\"\n  at sync::push (src/push.rs:");
    d.val(&format!("{}", g.below(400) + 10));
    d.lit(")\n  at sync::run (src/main.rs:");
    d.val(&format!("{}", g.below(200) + 10));
    d.lit(")\n```\nOS: Ubuntu 24.04, rustc ");
    d.val(&format!("1.{}.0", g.below(10) + 80));
}

fn json_contact(g: &mut Gen, d: &mut Doc) {
    let p = latin_person(g);
    let a = g.address();
    d.lit("{\n  \"id\": \"");
    d.val(&g.opc_id());
    d.lit("\",\n  \"customer\": {\n    \"full_name\": \"");
    d.ent(NAME, &p.full());
    d.lit("\",\n    \"email\": \"");
    d.ent(MAIL, &g.email(&p));
    d.lit("\",\n    \"phone\": \"");
    d.ent(TEL, &g.phone_plain());
    d.lit("\",\n    \"shipping\": {\n      \"line1\": \"");
    d.ent(ADDR, &a.lines[0]);
    d.lit("\"");
    if a.lines.len() > 1 {
        d.lit(",\n      \"line2\": \"");
        d.ent(ADDR, &a.lines[1..].join(", "));
        d.lit("\"");
    }
    d.lit("\n    }\n  },\n  \"total\": \"");
    d.val(&g.amount());
    d.lit("\",\n  \"created\": \"");
    d.val(&g.date());
    d.lit("\",\n  \"client_ip\": \"");
    d.ent(IP, &g.ip());
    d.lit("\"\n}");
}

fn yaml_contact(g: &mut Gen, d: &mut Doc) {
    let p = latin_person(g);
    d.lit("# on-call roster, rev ");
    d.val(&g.version());
    d.lit("\nprimary:\n  name: ");
    d.ent(NAME, &p.full());
    d.lit("\n  pager: \"");
    d.ent(TEL, &g.phone());
    d.lit("\"\n  email: ");
    d.ent(MAIL, &g.email(&p));
    d.lit("\n  timezone: UTC+12\nsecondary:\n  name: ");
    let q = g.person();
    d.ent(NAME, &q.full());
    d.lit("\n  location: ");
    d.ent(LOC, &place(g));
    d.lit("\nescalation_webhook_token: ");
    d.ent(KEY, &g.api_key());
    d.lit("\n");
}

fn csv_rsvp(g: &mut Gen, d: &mut Doc) {
    d.lit("attendee_name,email,mobile,home_city,ticket_type\n");
    let rows = g.below(3) + 3;
    for _ in 0..rows {
        let p = latin_person(g);
        d.ent(NAME, &p.full());
        d.lit(",");
        d.ent(MAIL, &g.email(&p));
        d.lit(",");
        if g.chance(70) {
            d.ent(TEL, &g.phone_plain());
        }
        d.lit(",");
        let c = place(g);
        if c.contains(',') {
            d.lit("\"");
            d.ent(LOC, &c);
            d.lit("\"");
        } else {
            d.ent(LOC, &c);
        }
        d.lit(",");
        d.lit(g.pick(&["GA", "VIP", "Early Bird", "Speaker"]));
        d.lit("\n");
    }
}

fn profile_bio(g: &mut Gen, d: &mut Doc) {
    let p = latin_person(g);
    d.lit(g.pick(&["Hi, I'm ", "👋 Hey! ", "About me — "]));
    d.ent(NAME, &p.full());
    d.lit(". ");
    d.val(role(g));
    d.lit(" based in ");
    d.ent(LOC, &place(g));
    d.lit(", originally from ");
    d.ent(LOC, &place(g));
    d.lit(" (ex-");
    d.val(company(g));
    d.lit(g.pick(&[
        "). I write about supply chains, climbing and bad puns. ",
        "). Mentor, marathon plodder, sourdough evangelist. ",
        "). Open to advisory roles. ",
    ]));
    d.lit("\n📫 ");
    d.ent(MAIL, &g.email(&p));
    d.lit(" · 🔗 ");
    d.ent(LINK, &g.url(&p));
}

fn obituary(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    let k1 = g.person();
    let k2 = g.person();
    d.ent(NAME, &p.full().to_uppercase());
    d.lit("\n");
    d.ent(NAME, &p.full());
    d.lit(&format!(", {}, ", g.below(30) + 65));
    d.lit("of ");
    d.ent(LOC, &place(g));
    d.lit(", died peacefully on ");
    d.val(&g.date());
    d.lit(". Born in ");
    d.ent(LOC, &place(g));
    d.lit(", ");
    d.ent(NAME, &p.short());
    d.lit(" taught piano for four decades. Survived by daughter ");
    d.ent(NAME, &k1.full());
    d.lit(" and grandson ");
    d.ent(NAME, &k2.short());
    d.lit(". Donations in lieu of flowers. Condolences may be sent to ");
    let a = g.address();
    put_address(d, &a, false);
    d.lit(".");
}

fn local_news(g: &mut Gen, d: &mut Doc) {
    let r = g.person();
    let off = g.person();
    d.lit("Residents evacuated after fire at takeaway\n\nFirefighters were called to a blaze at a kebab shop on ");
    d.ent(ADDR, &street(g));
    d.lit(" shortly after ");
    d.val(&g.time());
    d.lit(" on ");
    d.val(&g.date());
    d.lit(". ");
    d.ent(NAME, &r.full());
    d.lit(&format!(
        ", {}, who lives in the flat above, said: ",
        g.below(50) + 20
    ));
    d.lit("\"We smelled smoke and just ran.\" ");
    d.lit(g.pick(&["Station Commander ", "Inspector ", "Watch Manager "]));
    d.ent(NAME, &off.full());
    d.lit(" said the cause was under investigation. ");
    d.ent(NAME, &family(&r));
    d.lit(" is staying with relatives in ");
    d.ent(LOC, &place(g));
    d.lit(". Anyone with information should call ");
    d.ent(TEL, &g.phone());
    d.lit(", quoting incident ");
    d.val(&g.ticket_id());
    d.lit(".");
}

fn letter_indian(g: &mut Gen, d: &mut Doc) {
    let me = g.person();
    let father = g.person();
    d.lit("To,\nThe Branch Manager,\n");
    d.val(company(g));
    d.lit(" Bank\n\nSubject: Request for updation of mobile number\n\nRespected Sir/Madam,\n\nI, ");
    d.ent(NAME, &me.full());
    d.lit(g.pick(&[", S/o ", ", D/o ", ", W/o "]));
    d.ent(NAME, &father.full());
    d.lit(", residing at ");
    let a = g.address();
    put_address(d, &a, false);
    d.lit(", am holding savings account ");
    d.ent(IBAN, &g.iban());
    d.lit(" in your esteemed branch. Kindly update my registered mobile to ");
    d.ent(TEL, &g.phone());
    d.lit(" as the old SIM has been discontinued. Kindly do the needful at the earliest.\n\nThanking you,\nYours faithfully,\n");
    d.ent(NAME, &me.full());
    d.lit("\nDate: ");
    d.val(&g.date());
    d.lit("\nPlace: ");
    d.ent(LOC, &place(g));
}

fn letter_british(g: &mut Gen, d: &mut Doc) {
    let me = g.person_with_initial();
    let a = g.address();
    put_address(d, &a, true);
    d.lit("\n\n");
    d.val(&g.date());
    d.lit("\n\nDear Sir or Madam,\n\nI am writing to complain, for the third time, about the bin collection. Despite my calls on ");
    d.val(&g.date());
    d.lit(" and ");
    d.val(&g.date());
    d.lit(", the recycling has not been emptied since ");
    d.val(&g.date());
    d.lit(". My neighbour, ");
    let n = g.person();
    d.lit(n.honorific);
    d.lit(" ");
    d.ent(NAME, &family(&n));
    d.lit(", has had the same trouble.\n\nI should be grateful for a reply by post or to ");
    d.ent(MAIL, &g.email(&me));
    d.lit(". My daytime number is ");
    d.ent(TEL, &g.phone());
    d.lit(".\n\nYours faithfully,\n\n");
    d.ent(NAME, &me.full());
}

fn note_australian(g: &mut Gen, d: &mut Doc) {
    let me = g.person();
    let mate = g.person();
    d.lit("G'day ");
    d.ent(NAME, &mate.short());
    d.lit(",\n\nReckon we'll head up to ");
    d.ent(LOC, &place(g));
    d.lit(" over the long weekend — arvo on Friday if the ute behaves. Can you feed the chooks? Spare key's under the pot at ");
    let a = g.address();
    put_address(d, &a, false);
    d.lit(". If anything's crook ring my mobile ");
    d.ent(TEL, &g.phone_plain());
    d.lit(".\n\nCheers,\n");
    d.ent(NAME, &me.short());
}

fn tax_form(g: &mut Gen, d: &mut Doc) {
    let p = g.person_with_initial();
    let a = g.us_address();
    d.lit("Form W-9 (Rev. ");
    d.val(&format!("{}", 2018 + g.below(7)));
    d.lit(")  Request for Taxpayer Identification Number\n1 Name (as shown on your income tax return): ");
    d.ent(NAME, &p.full());
    d.lit("\n2 Business name/disregarded entity name, if different: ");
    d.val(company(g));
    d.lit("\n5 Address (number, street, and apt. or suite no.): ");
    d.ent(ADDR, &a.lines[0]);
    d.lit("\n6 City, state, and ZIP code: ");
    d.ent(ADDR, &a.lines[a.lines.len() - 1]);
    d.lit("\nPart I  Social security number: ");
    d.ent(SSN, &g.ssn());
    d.lit("\nSignature ______  Date ");
    d.val(&g.date());
}

fn payment_dispute(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("me: hi i was charged twice for order ");
    d.val(&g.order_no());
    d.lit("\nme: card is ");
    d.ent(CARD, &g.card());
    d.lit(" exp ");
    d.val(&format!("{:02}/{}", g.below(12) + 1, 26 + g.below(5)));
    d.lit("\nbot: I can help with that. For security, please never share your full card number here.\nme: oh sorry. it was ");
    d.val(&g.amount());
    d.lit(" both times, name on card ");
    d.ent(NAME, &p.full().to_uppercase());
    d.lit("\nbot: Thanks, I've flagged conversation ");
    d.val(&g.opc_id());
    d.lit(" for a refund review.");
}

fn wire_instructions(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("Hi,\n\nPlease wire the deposit (");
    d.val(&g.amount());
    d.lit(") to:\nBeneficiary: ");
    d.ent(NAME, &p.full());
    d.lit("\nIBAN: ");
    d.ent(IBAN, &g.iban());
    d.lit("\nBIC: ");
    d.val(&g.shape("AAAAAAA#"));
    d.lit("\nReference: ");
    d.val(&g.order_no());
    d.lit("\n\nIf your bank needs a US account instead, my SSN for the W-9 is ");
    d.ent(SSN, &g.ssn());
    d.lit(". Thanks!\n");
    d.ent(NAME, &p.short());
}

fn access_log(g: &mut Gen, d: &mut Doc) {
    let n = g.below(3) + 2;
    for _ in 0..n {
        d.ent(IP, &g.ip());
        d.lit(&format!(
            " - - [{:02}/Mar/2025:{:02}:{:02}:{:02} +0000] \"{} ",
            g.below(28) + 1,
            g.below(24),
            g.below(60),
            g.below(60),
            g.pick(&["GET", "POST"])
        ));
        d.lit(g.pick(&[
            "/api/v2/orders",
            "/login",
            "/static/app.js",
            "/account/settings",
        ]));
        d.lit(&format!(
            " HTTP/1.1\" {} {}",
            g.pick(&["200", "302", "401", "500"]),
            g.below(90_000)
        ));
        if g.chance(40) {
            d.lit(" user=");
            let p = latin_person(g);
            d.ent(MAIL, &g.email(&p));
        }
        d.lit("\n");
    }
}

fn lost_and_found(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit(g.pick(&["FOUND: ", "Found this morning — "]));
    d.lit("brown leather wallet near the bus shelter. Has a library card for ");
    d.ent(NAME, &p.full());
    d.lit(" and a bank card ending ");
    d.val(&g.digits(4));
    d.lit(". If it's yours (or you know ");
    d.ent(NAME, &p.short());
    d.lit("), message me or call ");
    d.ent(TEL, &g.phone_local());
    d.lit(". Handing it to the station on ");
    d.val(&g.date());
    d.lit(" otherwise.");
}

fn care_package(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("Care package #");
    d.val(&format!("{}", g.below(20) + 1));
    d.lit(" is packed! Customs form done (CN22, ");
    d.val(&format!("{} kg", g.below(5) + 1));
    d.lit("). Shipping to:\n\n");
    d.lit(g.pick(&["SGT ", "LCpl ", "PO2 ", "CPT ", ""]));
    d.ent(NAME, &p.full().to_uppercase());
    d.lit("\n");
    let a = military(g);
    put_address(d, &a, true);
    d.lit("\n\nIf it bounces, the unit admin is ");
    let q = g.person();
    d.ent(NAME, &q.full());
    d.lit(", ");
    d.ent(TEL, &g.phone());
    d.lit(".");
}

// ---------------------------------------------------------------------------------------------
// Texts with no personal data.
// ---------------------------------------------------------------------------------------------

fn neg_release_notes(g: &mut Gen, d: &mut Doc) {
    d.lit("## ");
    d.val(&g.version());
    d.lit(" — ");
    d.val(&g.date());
    d.lit("\n\n### Added\n- Norwegian and Brazilian Portuguese translations\n- `--dry-run` for Export Wizard (");
    d.val(&g.ticket_id());
    d.lit(")\n### Fixed\n- PDF Renderer no longer drops pages past ");
    d.val(&format!("{}", g.below(900) + 100));
    d.lit("\n- Memory use during Bulk Import down ");
    d.val(&format!("{}%", g.below(60) + 10));
    d.lit("\n### Security\n- Bumped OpenSSL to ");
    d.val(&format!("3.{}.{}", g.below(4), g.below(15)));
    d.lit(" (CVE-");
    d.val(&format!("{}-{}", 2023 + g.below(3), g.below(90_000) + 1000));
    d.lit(")\n\nThanks to everyone who filed issues on the Community Forum.");
}

fn neg_recipe(g: &mut Gen, d: &mut Doc) {
    let dish = g.pick(&[
        "Shakshuka",
        "Lemon Drizzle Traybake",
        "Dal Tadka",
        "Miso Glazed Aubergine",
    ]);
    d.lit(dish);
    d.lit(" (serves ");
    d.val(&format!("{}", g.below(6) + 2));
    d.lit(")\n\nIngredients\n- ");
    d.val(&format!("{} g", g.below(400) + 100));
    d.lit(" plain flour or red lentils\n- 2 tbsp olive oil\n- 1 tsp Maldon salt\n- ");
    d.val(&format!("{} ml", g.below(300) + 100));
    d.lit(" stock\n\nMethod\n1. Heat the oven to ");
    d.val(&format!("{}°C", g.below(60) + 160));
    d.lit(" (Gas Mark ");
    d.val(&format!("{}", g.below(5) + 3));
    d.lit(").\n2. Simmer for ");
    d.val(&format!("{} minutes", g.below(30) + 10));
    d.lit(", stirring now and then.\n3. Finish with Greek yoghurt and a pinch of Aleppo pepper.\nPer serving: ");
    d.val(&format!("{} kcal", g.below(400) + 200));
}

fn neg_match_report(g: &mut Gen, d: &mut Doc) {
    let teams = [
        "Riverside Rovers",
        "Northgate Athletic",
        "Harbour City FC",
        "Old Boys RFC",
        "Thunder Netball",
        "Eastside Wanderers",
    ];
    let a = g.pick(&teams);
    let b = g.pick(&teams);
    d.lit("Division Two — Round ");
    d.val(&format!("{}", g.below(20) + 1));
    d.lit("\n");
    d.val(a);
    d.lit(" ");
    d.val(&format!("{}–{}", g.below(5), g.below(5)));
    d.lit(" ");
    d.val(b);
    d.lit("\nAttendance ");
    d.val(&format!("{}", g.below(20_000) + 800));
    d.lit(". Possession ");
    d.val(&format!("{}%", g.below(40) + 30));
    d.lit(". Kick-off delayed to ");
    d.val(&g.time());
    d.lit(" after a floodlight fault. The Cup replay is on ");
    d.val(&g.date());
    d.lit("; tickets ");
    d.val(&g.amount());
    d.lit(" from the Club Shop.");
}

fn neg_forecast(g: &mut Gen, d: &mut Doc) {
    d.lit(g.pick(&["Thursday", "Weekend outlook", "Tomorrow"]));
    d.lit(": highs of ");
    d.val(&format!("{}°C", g.below(25) + 5));
    d.lit(", lows near ");
    d.val(&format!("{}°C", g.below(10)));
    d.lit(". Winds NW ");
    d.val(&format!("{} km/h", g.below(40) + 5));
    d.lit(" gusting ");
    d.val(&format!("{}", g.below(40) + 45));
    d.lit(". UV index ");
    d.val(&format!("{}", g.below(11) + 1));
    d.lit(", pollen High. Coastal areas: swell ");
    d.val(&format!("{}.{} m", g.below(3) + 1, g.below(10)));
    d.lit(". Issued ");
    d.val(&g.time());
    d.lit(" by the Met Desk, bulletin ");
    d.val(&g.ticket_id());
}

fn neg_product_spec(g: &mut Gen, d: &mut Doc) {
    d.lit("Model ");
    d.val(&g.shape("AA-###"));
    d.lit(" Cordless Drill Driver\nVoltage: 18 V  |  Chuck: 13 mm  |  Torque: ");
    d.val(&format!("{} Nm", g.below(60) + 40));
    d.lit("\nBattery: Li-Ion ");
    d.val(&format!("{}.0 Ah", g.below(4) + 2));
    d.lit("\nFirmware ");
    d.val(&g.version());
    d.lit("\n");
    d.val(&g.non_pii());
    d.lit("\nWarranty: 3 years (register within 30 days). RRP ");
    d.val(&g.amount());
}

fn neg_timetable(g: &mut Gen, d: &mut Doc) {
    d.lit("Route ");
    d.val(&format!("{}", g.below(90) + 10));
    d.lit(" — Weekday service (effective ");
    d.val(&g.date());
    d.lit(")\nInterchange   ");
    for _ in 0..4 {
        d.val(&format!("{:02}:{:02} ", g.below(18) + 5, g.below(60)));
    }
    d.lit("\nHospital Main Gate   ");
    for _ in 0..4 {
        d.val(&format!("{:02}:{:02} ", g.below(18) + 5, g.below(60)));
    }
    d.lit("\nFares: Adult ");
    d.val(&g.amount());
    d.lit(", Concession half price. Real-time info: text the stop code to the Transit Line.");
}

fn neg_opc_ops(g: &mut Gen, d: &mut Doc) {
    match g.below(3) {
        0 => {
            d.lit("Approval requested for conversation ");
            d.val(&g.opc_id());
            d.lit(": CFO agent wants to spend ");
            d.val(&g.amount());
            d.lit(" on the Q");
            d.val(&format!("{}", g.below(4) + 1));
            d.lit(" Marketing Plan. Task ");
            d.val(&g.ticket_id());
            d.lit(" queued at ");
            d.val(&g.time());
        }
        1 => {
            d.lit("Delegation chain: CEO → Head of Engineering → Release Manager (");
            d.val(&g.opc_id());
            d.lit(", ");
            d.val(&g.opc_id());
            d.lit("). Ledger total ");
            d.val(&g.amount());
            d.lit(", ");
            d.val(&format!("{}", g.below(90_000) + 1000));
            d.lit(" tokens, model ");
            d.val(&g.version());
        }
        _ => {
            d.lit("Nightly digest ");
            d.val(&g.date());
            d.lit(": ");
            d.val(&format!("{}", g.below(500)));
            d.lit(" conversations, ");
            d.val(&format!("{}", g.below(50)));
            d.lit(" approvals, p95 latency ");
            d.val(&format!("{} ms", g.below(900) + 100));
            d.lit(". Busiest channel ");
            d.val(&g.opc_id());
            d.lit(".");
        }
    }
}
