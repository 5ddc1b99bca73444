//! The tuning split's templates. Detector work may look at these and at what they generate.
//!
//! Document kinds: short English sentences, chat lines (`name: text`, lowercase, little punctuation),
//! e-mails ending in a multi-line signature block, letters with a multi-line recipient address, long
//! multi-sentence updates with names deep inside, support tickets, HR notes, CRM notes, and texts with
//! no personal data at all (ids, orders, dates, versions, amounts). The held-out split's templates
//! (`heldout.rs`) are written separately, with other phrasing, layouts and document kinds.

use super::doc::Doc;
use super::values::Gen;

const P: &str = "PERSON_NAME";
const A: &str = "ADDRESS";
const L: &str = "LOCATION";
const PH: &str = "PHONE";
const E: &str = "EMAIL";

type Template = fn(&mut Gen, &mut Doc);

/// (id, weight, template).
pub const TEMPLATES: &[(&str, u32, Template)] = &[
    ("sentence/intro", 3, intro),
    ("sentence/ship", 3, ship),
    ("sentence/card", 3, card),
    ("sentence/iban", 2, iban),
    ("sentence/ssn", 2, ssn),
    ("sentence/login", 2, login),
    ("sentence/call", 3, call),
    ("sentence/moved", 3, moved),
    ("sentence/lives", 3, lives),
    ("sentence/meeting", 2, meeting),
    ("sentence/cue-single", 3, cue_single),
    ("sentence/token", 2, token),
    ("sentence/profile", 2, profile),
    ("sentence/military", 2, military),
    ("sentence/intl-address", 3, intl_address),
    ("sentence/local-phone", 2, local_phone),
    ("chat/thread", 6, chat),
    ("email/signature", 7, email_signature),
    ("letter/postal", 4, letter),
    ("long/update", 5, long_update),
    ("sentence/card-on-file", 3, card_on_file),
    ("sentence/website", 3, website),
    ("sentence/server", 3, server),
    ("sentence/hardcoded-key", 3, hardcoded_key),
    ("sentence/tax-form", 2, tax_form),
    ("ticket/support", 4, ticket),
    ("note/hr", 3, hr_note),
    ("note/crm", 4, crm_note),
    ("negative/ops", 4, negative_ops),
    ("negative/release", 2, negative_release),
    ("negative/ids", 3, negative_ids),
];

fn intro(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("Hi, I'm ")
        .ent(P, &p.full())
        .lit(". You can reach me at ");
    d.ent(PH, &g.phone())
        .lit(" or ")
        .ent(E, &g.email(&p))
        .lit(".");
}

fn ship(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    let a = g.address();
    d.lit("Please ship the order to ")
        .ent(P, &p.full())
        .lit(", ");
    d.ent(A, &a.inline())
        .lit(". Order ")
        .val(&g.order_no())
        .lit(" is prepaid.");
}

fn card(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("My card number is ").ent("CREDIT_CARD", &g.card());
    d.lit(", expiry 09/27, name on card ")
        .ent(P, &p.full().to_uppercase())
        .lit(".");
}

fn iban(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("Wire the refund to IBAN ").ent("IBAN", &g.iban());
    d.lit(" (account holder: ")
        .ent(P, &p.full())
        .lit("), reference ")
        .val(&g.order_no())
        .lit(".");
}

fn ssn(g: &mut Gen, d: &mut Doc) {
    let p = g.person_with_initial();
    d.ent(P, &p.full()).lit("'s SSN is ").ent("SSN", &g.ssn());
    d.lit(", please update the HR record.");
}

fn login(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("We saw logins for ")
        .ent(P, &p.short())
        .lit(" from ")
        .ent("IP_ADDRESS", &g.ip());
    d.lit(" at ")
        .val(&format!("{:02}:{:02}", g.below(24), g.below(60)))
        .lit(" UTC, session ");
    d.val(&g.opc_id()).lit(".");
}

fn call(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    let cue = g.pick(&["Call", "Phone", "Ring", "Text", "WhatsApp"]);
    d.lit(cue)
        .lit(" ")
        .ent(P, &p.full())
        .lit(" on ")
        .ent(PH, &g.phone());
    d.lit(" before Friday about invoice ")
        .val(&g.order_no())
        .lit(".");
}

fn moved(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    let a = g.address();
    d.ent(P, &p.full())
        .lit(" moved to ")
        .ent(A, &a.inline())
        .lit(" last month; new mobile ");
    d.ent(PH, &g.phone()).lit(".");
}

fn lives(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    match g.below(4) {
        0 => {
            d.ent(P, &p.short()).lit(" lives in ").ent(L, &g.place());
            d.lit(" now, so expect replies in the morning.");
        }
        1 => {
            d.lit("My sister ")
                .ent(P, &p.given)
                .lit(" just moved to ")
                .ent(L, &g.place());
            d.lit(" for the new job.");
        }
        2 => {
            d.lit("She is based in ")
                .ent(L, &g.city_country())
                .lit(" and travels to ");
            d.ent(L, &g.place()).lit(" twice a year.");
        }
        _ => {
            d.lit("Originally from ")
                .ent(L, &g.place())
                .lit(", ")
                .ent(P, &p.full());
            d.lit(" joined us in ")
                .val(&format!("{}", 2015 + g.below(10)))
                .lit(".");
        }
    }
}

fn meeting(g: &mut Gen, d: &mut Doc) {
    let (a, b) = (g.person(), g.person_with_initial());
    d.lit("Meeting with ")
        .ent(P, &a.full())
        .lit(" and ")
        .ent(P, &b.full());
    d.lit(" moved to 3pm on March 14, room ")
        .val(&format!("{}", g.below(500) + 100))
        .lit(".");
}

fn cue_single(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    match g.below(4) {
        0 => {
            d.lit("Approved by ")
                .ent(P, &p.family)
                .lit(" on ")
                .val(&g.date())
                .lit(".");
        }
        1 => {
            d.lit("Message from ")
                .ent(P, &p.given)
                .lit(": the courier is late again.");
        }
        2 => {
            d.lit("Please ask ")
                .lit(p.honorific)
                .lit(" ")
                .ent(P, &p.family);
            d.lit(" to sign the form.");
        }
        _ => {
            d.lit("Dear ")
                .ent(P, &p.given)
                .lit(", your appointment is confirmed. Questions? Text ");
            d.ent(PH, &g.phone()).lit(".");
        }
    }
}

fn token(g: &mut Gen, d: &mut Doc) {
    d.lit("Use the token ").ent("API_KEY", &g.api_key());
    d.lit(" for the staging deploy of ")
        .val(&g.version())
        .lit(", then rotate it.");
}

fn profile(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("Her profile is at ")
        .ent("URL", &g.url(&p))
        .lit(" if you need the photo of ");
    d.ent(P, &p.full()).lit(".");
}

fn military(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    let a = g.military();
    d.lit("Care package for ")
        .lit(g.pick(&["SGT", "LT", "CPL", "PO2"]))
        .lit(" ");
    d.ent(P, &p.full())
        .lit(" goes to ")
        .ent(A, &a.inline())
        .lit(" this week.");
}

fn intl_address(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    let a = g.address();
    d.lit("The new office of ")
        .ent(P, &p.full())
        .lit(" is at ")
        .ent(A, &a.inline());
    d.lit("; parking is behind the building.");
}

fn local_phone(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    let cue = g.pick(&["tel", "ph", "cell", "office", "mobile", "fax"]);
    d.ent(P, &p.full())
        .lit(", ")
        .lit(cue)
        .lit(" ")
        .ent(PH, &g.phone_local());
    d.lit(", prefers calls after ")
        .val(&format!("{}", g.below(5) + 4))
        .lit(" pm.");
}

/// A chat thread: `name: text` lines, mostly lowercase and unpunctuated.
fn chat(g: &mut Gen, d: &mut Doc) {
    let people: Vec<_> = (0..3).map(|_| g.person()).collect();
    let lines = g.below(4) + 3;
    for i in 0..lines {
        if i > 0 {
            d.lit("\n");
        }
        let speaker = &people[i % 2];
        d.ent(P, &speaker.chat()).lit(": ");
        let other = &people[(i + 1) % 2];
        match g.below(9) {
            0 => {
                d.lit("are you coming");
            }
            1 => {
                d.lit("ask ")
                    .ent(P, &people[2].full().to_lowercase())
                    .lit(" she has the keys");
            }
            2 => {
                d.lit("my new number is ").ent(PH, &g.phone());
            }
            3 => {
                d.lit("im in ")
                    .ent(L, &g.place().to_lowercase())
                    .lit(" till friday");
            }
            4 => {
                d.lit("ok ").ent(P, &other.chat()).lit(" will do");
            }
            5 => {
                d.lit("the build ").val(&g.version()).lit(" is green");
            }
            6 => {
                d.lit("send it to ").ent(E, &g.email(other));
            }
            7 => {
                let a = g.address();
                d.lit("drop it at ").ent(A, &a.inline().to_lowercase());
            }
            _ => {
                d.lit("lol yes see you at ")
                    .val(&format!("{}", g.below(12) + 1));
            }
        }
    }
}

/// An e-mail with a signature block: name, title, company, street, unit, city, region, postcode,
/// country, labelled phones.
fn email_signature(g: &mut Gen, d: &mut Doc) {
    let (to, from) = (g.person(), g.person_with_initial());
    d.lit("Hi ").ent(P, &to.given).lit(",\n\n");
    d.lit("Thanks for the quick turnaround on ")
        .val(&g.order_no());
    d.lit(". I have attached the signed copy; let me know if anything is missing.\n\n");
    d.lit(g.pick(&["Best regards,", "Kind regards,", "Cheers,", "Thanks,"]))
        .lit("\n");
    d.ent(P, &from.full()).lit("\n");
    d.val(g.job_title()).lit("\n").val(g.company()).lit("\n");
    let a = g.address();
    d.ent(A, &a.multiline()).lit("\n");
    let labels = g.pick(&[
        ("T: ", "M: ", "F: "),
        ("Tel: ", "Mobile: ", "Fax: "),
        ("P ", "M ", "F "),
    ]);
    d.lit(labels.0).ent(PH, &g.phone_plain()).lit("\n");
    if g.chance(70) {
        d.lit(labels.1).ent(PH, &g.phone_plain()).lit("\n");
    }
    if g.chance(40) {
        d.lit(labels.2).ent(PH, &g.phone_plain()).lit("\n");
    }
    d.ent(E, &g.email(&from));
}

/// A letter: recipient block with a multi-line address, salutation, body, closing.
fn letter(g: &mut Gen, d: &mut Doc) {
    let (to, from) = (g.person(), g.person());
    d.lit(g.pick(&["Mr. ", "Ms. ", "Dr. ", ""]))
        .ent(P, &to.full())
        .lit("\n");
    if g.chance(30) {
        d.val(g.company()).lit("\n");
    }
    let a = g.address();
    d.ent(A, &a.multiline()).lit("\n\n");
    d.val(&g.date()).lit("\n\n");
    d.lit("Dear ")
        .lit(to.honorific)
        .lit(" ")
        .ent(P, &to.family)
        .lit(",\n\n");
    d.lit("We are writing to confirm that your policy ")
        .val(&g.order_no());
    d.lit(" has been renewed. The updated documents are enclosed.\n\n");
    d.lit("Yours sincerely,\n\n").ent(P, &from.full());
}

/// A long update with names, places and numbers deep inside.
fn long_update(g: &mut Gen, d: &mut Doc) {
    let fillers = [
        "The quarterly numbers came in slightly above plan, mostly thanks to renewals.",
        "We also closed the migration of the reporting pipeline, which had been dragging on.",
        "Two vendors asked for extensions, and we agreed to give them until the end of the month.",
        "Attendance at the all-hands was good and the Q&A ran long.",
        "The new onboarding checklist cut the average setup time by almost a day.",
        "Legal reviewed the template and asked for two small wording changes.",
        "Budget for the offsite is approved, although travel has to be booked by Friday.",
        "Support volume was flat week over week, with most questions about the new export.",
        "The design team shared three options for the landing page and we picked the simplest.",
        "Security finished the annual review without any major findings.",
        "We are still waiting for the signed statement of work from the agency.",
        "Hiring is on track: two offers went out and one was accepted.",
        "The warehouse move is scheduled for the second half of next month.",
        "Please keep an eye on the shared calendar, since several reviews moved.",
        "Finance wants the forecast updated before the board pack goes out.",
    ];
    // A third are long (15 to 40 sentences) with the personal data in the second half, so the
    // detector's windowing over long inputs is exercised.
    let long = g.chance(35);
    let n = if long {
        g.below(26) + 15
    } else {
        g.below(4) + 4
    };
    let people: Vec<_> = (0..3).map(|_| g.person()).collect();
    for i in 0..n {
        if i > 0 {
            d.lit(if i % 6 == 0 { "\n\n" } else { " " });
        }
        let roll = if long && i < n / 2 { 9 } else { g.below(6) };
        match (i, roll) {
            (_, 0) => {
                d.ent(P, &people[i % 3].full())
                    .lit(" will take over the vendor calls while ");
                d.ent(P, &people[(i + 1) % 3].short()).lit(" is away.");
            }
            (_, 1) => {
                d.lit("Next week ")
                    .ent(P, &people[i % 3].short())
                    .lit(" flies to ");
                d.ent(L, &g.place()).lit(" to meet the distributor.");
            }
            (_, 2) if i > 1 => {
                d.lit("If anything urgent comes up, call ")
                    .ent(P, &people[i % 3].full());
                d.lit(" on ").ent(PH, &g.phone()).lit(".");
            }
            _ => {
                d.lit(g.pick(&fillers));
            }
        }
    }
}

fn ticket(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("Ticket ")
        .val(&format!("#{}", g.below(900_000) + 100_000));
    d.lit(" | Priority: ")
        .lit(g.pick(&["High", "Low", "Normal"]))
        .lit("\n");
    d.lit("Customer: ").ent(P, &p.full()).lit("\n");
    d.lit("Contact: ")
        .ent(E, &g.email(&p))
        .lit(" / ")
        .ent(PH, &g.phone())
        .lit("\n");
    d.lit("Issue: cannot log in since the update to ")
        .val(&format!("v{}.{}", g.below(5) + 1, g.below(20)));
    d.lit("; last seen from ")
        .ent("IP_ADDRESS", &g.ip())
        .lit(".\n");
    if g.chance(50) {
        d.lit("Billing address: ")
            .ent(A, &g.address().inline())
            .lit("\n");
    }
    d.lit("Agent: ").ent(P, &g.person().short());
}

fn hr_note(g: &mut Gen, d: &mut Doc) {
    let p = g.person_with_initial();
    d.lit("HR note ")
        .val(&g.date())
        .lit(": employee ")
        .ent(P, &p.full());
    d.lit(" (SSN ")
        .ent("SSN", &g.ssn())
        .lit(") relocated to ")
        .ent(L, &g.place())
        .lit(".\n");
    d.lit("New home address:\n")
        .ent(A, &g.address().multiline())
        .lit("\n");
    d.lit("Salary account: ")
        .ent("IBAN", &g.iban())
        .lit(". Manager: ");
    let m = g.person();
    d.lit(m.honorific).lit(" ").ent(P, &m.family).lit(".");
}

fn crm_note(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("Account: ").val(g.company()).lit("\n");
    d.lit("Contact: ")
        .ent(P, &p.full())
        .lit(", ")
        .val(g.job_title())
        .lit("\n");
    d.lit("Called ")
        .ent(PH, &g.phone())
        .lit(" on ")
        .val(&g.date());
    d.lit(", left a voicemail. ");
    d.ent(P, &p.given)
        .lit(" is travelling to ")
        .ent(L, &g.place());
    d.lit(" next week; follow up after that.\nNext step: send the renewal quote for ");
    d.val(&g.amount()).lit(".");
}

fn negative_ops(g: &mut Gen, d: &mut Doc) {
    d.lit("Conversation ")
        .val(&format!("web:{:016x}", g.below(usize::MAX)));
    d.lit(" was escalated at ")
        .val(&g.time())
        .lit("; task ")
        .val(&g.ticket_id());
    d.lit(" is waiting on approval ").val(&g.opc_id()).lit(".");
}

fn negative_release(g: &mut Gen, d: &mut Doc) {
    d.lit("Release ")
        .val(&format!("{}.{}.{}", g.below(9), g.below(20), g.below(30)));
    d.lit(" fixes 37 bugs and cuts p99 latency from 840 ms to 210 ms; build ");
    d.val(&g.ticket_id())
        .lit(" shipped on ")
        .val(&g.date())
        .lit(".");
}

fn negative_ids(g: &mut Gen, d: &mut Doc) {
    d.lit("Order ")
        .val(&g.order_no())
        .lit(" shipped on ")
        .val(&g.date());
    d.lit(" for ")
        .val(&g.amount())
        .lit("; the Slack user ")
        .val(&format!("slack:U{}", g.shape("0##AAN#AA")));
    d.lit(" asked about tracking ").val(&g.order_no()).lit(".");
}

fn card_on_file(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("The card on file ends in ")
        .val(&g.digits(4))
        .lit(", so ")
        .ent(P, &p.short());
    d.lit(" read out the new one, ")
        .ent("CREDIT_CARD", &g.card())
        .lit(", and we charged ");
    d.val(&g.amount()).lit(" to it.");
}

fn website(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("Portfolio of ")
        .ent(P, &p.full())
        .lit(": ")
        .ent("URL", &g.url(&p));
    d.lit(" (updated ")
        .val(&g.date())
        .lit("). Contact via ")
        .ent(E, &g.email(&p))
        .lit(".");
}

fn server(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("Server ")
        .ent("IP_ADDRESS", &g.ip())
        .lit(" returned 503 for 12 minutes after ");
    d.ent(P, &p.short())
        .lit(" pushed ")
        .val(&g.version())
        .lit("; details at ");
    d.ent("URL", &g.url(&p)).lit(".");
}

fn hardcoded_key(g: &mut Gen, d: &mut Doc) {
    let line = g.below(300) + 1;
    match g.below(3) {
        0 => {
            d.lit("Found ")
                .ent("API_KEY", &g.api_key())
                .lit(" hard-coded in config.yaml at line ");
            d.val(&line.to_string()).lit(".");
        }
        1 => {
            d.lit("export SERVICE_TOKEN=").ent("API_KEY", &g.api_key());
        }
        _ => {
            d.lit("Replace the old key ").ent("API_KEY", &g.api_key());
            d.lit(" in the CI settings before ").val(&g.date()).lit(".");
        }
    }
}

fn tax_form(g: &mut Gen, d: &mut Doc) {
    let p = g.person_with_initial();
    d.lit("Tax form W-4 for ")
        .ent(P, &p.full())
        .lit(" lists SSN ")
        .ent("SSN", &g.ssn());
    d.lit(" and a home address of ")
        .ent(A, &g.us_address().inline())
        .lit(".");
}
