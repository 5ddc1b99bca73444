//! Addresses as people write them: letters, e-mail signatures, shipping labels and chat, in many
//! countries, and prose with numbers that must stay unmasked. Each case runs the whole detector
//! (pattern tier, default threshold) and compares the `ADDRESS` spans.

use crate::EntityType;
use crate::detect::{DetectOptions, Detector, NerSlot};

fn addresses(text: &str) -> Vec<&str> {
    Detector::new(
        DetectOptions {
            types: vec![EntityType::Address],
            ..DetectOptions::default()
        },
        NerSlot::new(),
    )
    .detect(text)
    .into_iter()
    .map(|e| &text[e.start..e.end])
    .collect()
}

#[track_caller]
fn check(text: &str, want: &[&str]) {
    assert_eq!(addresses(text), want, "in {text:?}");
}

#[test]
fn us_signature_block_is_one_address() {
    check(
        "Best regards,\nJane Doe\nSenior Engineer, Acme Corp\n1200 Market Street\nSuite 1120\n\
         San Francisco, CA 94103\nUSA\nTel: +1 415 555 0100",
        &["1200 Market Street\nSuite 1120\nSan Francisco, CA 94103\nUSA"],
    );
    check(
        "-- \nTom Baker | Ops\n   77 Harbor Drive, Apt. 4C\n   Portland, OR 97209\n",
        &["77 Harbor Drive, Apt. 4C\n   Portland, OR 97209"],
    );
}

#[test]
fn uk_letter_head_with_a_city_line_between_street_and_postcode() {
    check(
        "Mr John Smith\n10 Downing Street\nLondon\nSW1A 2AA\nUnited Kingdom\n\nDear Sir,",
        &["10 Downing Street\nLondon\nSW1A 2AA\nUnited Kingdom"],
    );
    check(
        "Flat 3\n27 Rosebery Avenue\nManchester M14 5TX\nEngland",
        &["Flat 3\n27 Rosebery Avenue\nManchester M14 5TX\nEngland"],
    );
}

#[test]
fn a_leading_building_line_joins_the_street_below_it() {
    check(
        "Visit us:\nBuilding 7\n1 Infinite Loop\nCupertino, CA 95014",
        &["Building 7\n1 Infinite Loop\nCupertino, CA 95014"],
    );
    check(
        "Acme Inc.\n1200\nMarket Street\nSan Francisco, CA 94103",
        &["1200\nMarket Street\nSan Francisco, CA 94103"],
    );
    check(
        "Floor 3\n350 Fifth Avenue\nNew York, NY 10118",
        &["Floor 3\n350 Fifth Avenue\nNew York, NY 10118"],
    );
}

#[test]
fn unit_and_country_lines_join_only_next_to_an_address() {
    check("Suite 1120\nUSA", &[]);
    check("Meet in Room 12\nFrance won the match", &[]);
    check(
        "4500 Oak Boulevard\nSuite B\nAustin, Texas",
        &["4500 Oak Boulevard\nSuite B\nAustin, Texas"],
    );
    // A prose line after an address stays out.
    check("I live at 42 Elm Street\nSee you soon", &["42 Elm Street"]);
    // A blank line ends the address.
    check("Ship to 42 Elm Street\n\nFrance", &["42 Elm Street"]);
}

#[test]
fn french_order_and_postcode_before_city() {
    check(
        "Marie Dupont\n12 rue de la Paix\n75002 Paris\nFrance",
        &["12 rue de la Paix\n75002 Paris\nFrance"],
    );
    check(
        "Envoyez-le au 8, avenue des Champs-Élysées, 75008 Paris, merci",
        &["8, avenue des Champs-Élysées, 75008 Paris"],
    );
    check(
        "Bureau : 3 boulevard Saint-Michel, 13005 Marseille",
        &["3 boulevard Saint-Michel, 13005 Marseille"],
    );
}

#[test]
fn house_number_after_the_street() {
    check(
        "Hauptstraße 5, 10115 Berlin",
        &["Hauptstraße 5, 10115 Berlin"],
    );
    check(
        "Lieferadresse:\nMax Mustermann\nBerliner Straße 12a\n60311 Frankfurt am Main\nDeutschland",
        &["Berliner Straße 12a\n60311 Frankfurt am Main\nDeutschland"],
    );
    check(
        "Keizersgracht 123, 1015 CJ Amsterdam",
        &["Keizersgracht 123, 1015 CJ Amsterdam"],
    );
    check(
        "Calle de Alcalá 48, 28014 Madrid",
        &["Calle de Alcalá 48, 28014 Madrid"],
    );
    check("Via Roma 10, 00185 Roma", &["Via Roma 10, 00185 Roma"]);
    check(
        "Piazza Navona 45\n00186 Roma\nItalia",
        &["Piazza Navona 45\n00186 Roma\nItalia"],
    );
    check(
        "ul. Marszałkowska 10/12\n00-590 Warszawa\nPolska",
        &["ul. Marszałkowska 10/12\n00-590 Warszawa\nPolska"],
    );
    check(
        "Drottninggatan 53\n111 21 Stockholm\nSweden",
        &["Drottninggatan 53\n111 21 Stockholm\nSweden"],
    );
    check(
        "Andrássy út 60, 1062 Budapest",
        &["Andrássy út 60, 1062 Budapest"],
    );
    check(
        "Rua Augusta 100, 1100-053 Lisboa",
        &["Rua Augusta 100, 1100-053 Lisboa"],
    );
    check(
        "Bahnhofstrasse 1\nCH-8001 Zürich\nSchweiz",
        &["Bahnhofstrasse 1\nCH-8001 Zürich\nSchweiz"],
    );
}

#[test]
fn more_countries_and_layouts() {
    check(
        "Rue de la Loi 16, 1000 Bruxelles",
        &["Rue de la Loi 16, 1000 Bruxelles"],
    );
    check(
        "Vesterbrogade 12\n1620 København V\nDanmark",
        &["Vesterbrogade 12\n1620 København V\nDanmark"],
    );
    check(
        "Václavské náměstí 1\n110 00 Praha 1",
        &["Václavské náměstí 1\n110 00 Praha 1"],
    );
    check(
        "Stephansplatz 1, 1010 Wien",
        &["Stephansplatz 1, 1010 Wien"],
    );
    check(
        "Mannerheimintie 5, 00100 Helsinki",
        &["Mannerheimintie 5, 00100 Helsinki"],
    );
    check(
        "Level 5, 1 Martin Place\nSydney NSW 2000\nAustralia",
        &["Level 5, 1 Martin Place\nSydney NSW 2000\nAustralia"],
    );
    // A one-line signature with pipes.
    check(
        "Acme GmbH | Hauptstraße 5 | 10115 Berlin | +49 30 1234567",
        &["Hauptstraße 5 | 10115 Berlin"],
    );
    // CRLF line ends and indentation, as mail clients send them.
    check(
        "Regards,\r\n  Lena\r\n  Keizersgracht 123\r\n  1015 CJ Amsterdam\r\n",
        &["Keizersgracht 123\r\n  1015 CJ Amsterdam"],
    );
    // Two addresses in one letter stay two.
    check(
        "From: 12 Oak Lane, Leeds LS1 4AB\nTo: 9 Elm Road, York YO1 7HH",
        &["12 Oak Lane, Leeds LS1 4AB", "9 Elm Road, York YO1 7HH"],
    );
}

#[test]
fn canadian_japanese_and_russian_lines() {
    check(
        "123 Queen St W, Toronto, ON M5V 2T6",
        &["123 Queen St W, Toronto, ON M5V 2T6"],
    );
    check(
        "mail it to Toronto, ON M5V 2T6 today",
        &["Toronto, ON M5V 2T6"],
    );
    check(
        "Head office\n200 Bay Street\nToronto, ON M5J 2J2\nCanada",
        &["200 Bay Street\nToronto, ON M5J 2J2\nCanada"],
    );
    check(
        "1-1-2 Oshiage, Sumida-ku, Tokyo 131-0045",
        &["1-1-2 Oshiage, Sumida-ku, Tokyo 131-0045"],
    );
    check(
        "〒131-0045 東京都墨田区押上1-1-2",
        &["〒131-0045 東京都墨田区押上1-1-2"],
    );
    check(
        "ул. Тверская, д. 7, Москва 125009",
        &["ул. Тверская, д. 7, Москва 125009"],
    );
    check(
        "Адрес: 125009, г. Москва, ул. Тверская, д. 7",
        &["125009, г. Москва, ул. Тверская, д. 7"],
    );
}

#[test]
fn military_and_diplomatic_addresses() {
    check(
        "SGT Maria Lopez\nPSC 1234, Box 5678\nAPO AE 09012",
        &["PSC 1234, Box 5678\nAPO AE 09012"],
    );
    check(
        "Unit 1234 Box 5678\nDPO AP 96522-1234",
        &["Unit 1234 Box 5678\nDPO AP 96522-1234"],
    );
    check(
        "CMR 450 Box 123, APO AE 09081",
        &["CMR 450 Box 123, APO AE 09081"],
    );
    check(
        "PO2 Sam Lee\nUSS Nimitz (CVN 68)\nFPO AP 96620-2820",
        &["USS Nimitz (CVN 68)\nFPO AP 96620-2820"],
    );
    check(
        "HM3 Ana Ruiz, USNS Comfort, FPO AE 09587",
        &["USNS Comfort, FPO AE 09587"],
    );
    check("USCGC Healy\nFPO AP 96678", &["USCGC Healy\nFPO AP 96678"]);
    // A ship alone is a ship, not an address.
    check("We toured the USS Midway museum in 2019", &[]);
}

#[test]
fn labels_are_context_not_part_of_the_span() {
    check("NI number: QQ 12 34 56 C\nPostcode SW1A 1AA", &["SW1A 1AA"]);
    check(
        "Address: 221B Baker Street\nPostcode: NW1 6XE",
        &["221B Baker Street", "NW1 6XE"],
    );
}

#[test]
fn prose_numbers_stay_unmasked() {
    for t in [
        "Meet at 10 in room 204",
        "3 Main points to cover today",
        "version 12 of the Paris agreement",
        "Apple Park",
        "flight 1234 to Berlin",
        "pages 12-14",
        "On 12 March 2024 we paid $1,200.50 for 3 licences.",
        "In 2023 Paris hosted 10500 athletes.",
        "Order 123456 shipped on 2024-05-12",
        "We sold 10000 Units in 2024",
        "Python 3.12 via Docker 24 on Ubuntu 22.04",
        "see section 4.2, table 3 and Figure 7",
        "Gate 12 at Terminal 2, boarding 10:45",
        "Room 5\nLondon\nParis",
        "Chapter 12\nFrance",
        "the 2 Berlin offices and 3 Paris shops",
        "Top 10 Tokyo 2020 moments",
        "It costs EUR 1200 or USD 1300",
        "Release 2.3.1 fixed 14 bugs; PR 4521 merged",
        "Ticket 131-0045 is closed",
        "He scored 28014 Points",
        "call me at 555 0100",
        "Windows 11 Pro and iPhone 15 Plus",
        "the 1990 World Cup final",
        "Highway 61 Revisited and Route 66 Diner",
        "Via Rail 2024 annual report",
        "Boeing 747 to Paris, then 2 nights in Rome",
        "Studio 54 New York was open from 1977 to 1986",
        "Apt to fail: 3 of 4 builds",
        "Q3 2024 Revenue grew 12 Percent",
        "USS Enterprise (NCC 1701) in Star Trek",
    ] {
        check(t, &[]);
    }
}
