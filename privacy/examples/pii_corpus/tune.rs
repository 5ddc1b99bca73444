//! The tuning split's templates. Detector work may look at these and at what they generate.
//!
//! Document kinds: short English sentences, chat lines (`name: text`, lowercase, little punctuation),
//! e-mails ending in a multi-line signature block, letters with a multi-line recipient address, long
//! multi-sentence updates with names deep inside, support tickets, HR notes, CRM notes, and texts with
//! no personal data at all (ids, orders, dates, versions, amounts). Structured kinds too: forwarded and
//! replied-to mail with header blocks, shipping labels and packing slips (some in capitals), intake,
//! registration and HR forms (`Label: value`), CSV/TSV exports, `key=value` logs, tables, tracker
//! issues with reporter and assignee, and negatives of those kinds full of capitalised non-names. The held-out split's templates
//! (`heldout.rs`) are written separately, with other phrasing, layouts and document kinds.

use super::Template;
use super::doc::Doc;
use super::doc::kind::{ADDRESS as A, EMAIL as E, LOCATION as L, PERSON_NAME as P, PHONE as PH};
use super::long::{self, Layout};
use super::values::Gen;

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
    ("mailhead/forwarded-block", 6, mail_forward),
    ("mailhead/reply-attribution", 3, mail_reply),
    ("parcel/carrier-label", 4, shipping_label),
    ("parcel/slip-with-items", 2, packing_slip),
    ("fields/intake-registration", 4, intake_form),
    ("fields/employee-record", 2, hr_record),
    ("export/csv-tsv-rows", 3, csv_export),
    ("export/kv-log-lines", 2, kv_log),
    ("export/pipe-table-staff", 2, people_table),
    ("tracker/reporter-assignee", 3, tracker_issue),
    ("negative/robot-mail-head", 3, negative_header),
    ("negative/sku-catalogue", 2, negative_catalog),
    ("negative/asset-fields", 2, negative_form),
    ("negative/rota-table", 2, negative_schedule),
    ("negative/config-digests", 3, negative_digests),
    ("config/secret-among-digests", 3, secret_among_digests),
    ("sentence/lone-given", 3, lone_given),
    ("fields/label-parentheses", 2, label_parentheses),
    ("chat/typed-address", 2, chat_address),
    ("sales/region-acronyms", 2, region_acronyms),
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
    let layout = Layout {
        sentences: n,
        every: 6,
        brk: "\n\n",
        quiet: if long { n / 2 } else { 0 },
        rolls: 6,
        fillers: &fillers,
    };
    long::write(g, d, &layout, |g, d, i, roll| {
        match roll {
            0 => {
                d.ent(P, &people[i % 3].full())
                    .lit(" will take over the vendor calls while ");
                d.ent(P, &people[(i + 1) % 3].short()).lit(" is away.");
            }
            1 => {
                d.lit("Next week ")
                    .ent(P, &people[i % 3].short())
                    .lit(" flies to ");
                d.ent(L, &g.place()).lit(" to meet the distributor.");
            }
            2 if i > 1 => {
                d.lit("If anything urgent comes up, call ")
                    .ent(P, &people[i % 3].full());
                d.lit(" on ").ent(PH, &g.phone()).lit(".");
            }
            _ => return false,
        }
        true
    });
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

// ---------------------------------------------------------------------------------------------
// Structured kinds: mail header blocks, shipping labels, forms, tables, trackers, and negatives of
// the same kinds full of capitalised words that are not names (products, teams, departments, field
// labels, job titles, months, cities inside company names).

/// Product names (capitalised, not personal data).
const PRODUCTS: &[&str] = &[
    "Falcon Router X2",
    "Aurora Desk Lamp",
    "Pioneer Backpack",
    "Summit Trail Boots",
    "Nova Smart Plug",
    "Harbor Espresso Grinder",
    "Cedar Standing Desk",
    "Orion Noise-Cancelling Headset",
    "Juniper Yoga Mat",
    "Atlas Label Printer",
    "Willow Kettle",
    "Comet USB-C Dock",
    "Sierra Rain Jacket",
    "Beacon Smoke Alarm",
];

/// Teams, departments and cost centres.
const TEAMS: &[&str] = &[
    "Finance",
    "Accounts Payable",
    "Customer Success",
    "Platform Engineering",
    "Facilities",
    "Procurement",
    "Legal & Compliance",
    "Warehouse Operations",
    "Revenue Operations",
    "Talent Acquisition",
    "Clinical Services",
    "Quality Assurance",
    "Field Marketing",
    "Data Science",
];

/// Subjects of mail threads: capitalised words, none of them a person.
const SUBJECTS: &[&str] = &[
    "Q3 Budget Review",
    "Vendor Onboarding Checklist",
    "Updated Pricing for Enterprise Tier",
    "Contract Renewal - Signature Needed",
    "Warehouse Move Timeline",
    "Board Pack Draft v2",
    "Security Awareness Training",
    "Holiday Rota for December",
    "Invoice Discrepancy",
    "Kickoff: Project Lighthouse",
    "Offsite Agenda (Lisbon Hotel Booking)",
    "Migration to New CRM",
    "Open Enrollment Reminder",
    "Travel Policy Update",
];

const WEEKDAYS: &[&str] = &["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"];

/// A display name as a mail client writes it: `Marta Lindqvist`, `"Lindqvist, Marta"`,
/// `MARTA LINDQVIST` (a few directories shout). The quotes are not part of the name.
fn display_name(g: &mut Gen, d: &mut Doc, p: &super::values::Person) {
    match g.below(6) {
        0 if !p.joined && !p.family_first => {
            d.lit("\"")
                .ent(P, &format!("{}, {}", p.family, p.given))
                .lit("\"");
        }
        1 => {
            d.ent(P, &p.full().to_uppercase());
        }
        _ => {
            d.ent(P, &p.full());
        }
    }
}

/// A header line's mailbox: display name and address, or the address alone.
fn mailbox(g: &mut Gen, d: &mut Doc, p: &super::values::Person) {
    if g.chance(15) {
        d.ent(E, &g.email(p));
        return;
    }
    display_name(g, d, p);
    d.lit(" <").ent(E, &g.email(p)).lit(">");
}

/// A forwarded or replied-to message: a separator, an Outlook or Gmail header block (From, Sent or
/// Date, To, Cc, Subject) and the quoted body, under a short note of the forwarder's.
fn mail_forward(g: &mut Gen, d: &mut Doc) {
    let (me, sender, to, cc) = (g.person(), g.person(), g.person(), g.person());
    match g.below(3) {
        0 => {
            d.lit("FYI, see below. ")
                .ent(P, &to.short())
                .lit(" can you take this one?\n\n");
        }
        1 => {
            d.lit("Forwarding for visibility.\n\n");
        }
        _ => {
            d.lit("Adding ").ent(P, &cc.short()).lit(" - thoughts?\n\n");
        }
    }
    d.lit(g.pick(&[
        "-----Original Message-----\n",
        "________________________________\n",
        "---------- Forwarded ----------\n",
        "Begin forwarded text:\n\n",
    ]));
    d.lit("From: ");
    mailbox(g, d, &sender);
    d.lit("\n");
    let day = g.pick(WEEKDAYS);
    if g.chance(50) {
        d.lit("Sent: ").val(&format!("{day}, {}", g.date()));
    } else {
        d.lit("Date: ")
            .val(&format!("{day}, {} at {}", g.date(), g.time()));
    }
    d.lit("\nTo: ");
    mailbox(g, d, &me);
    if g.chance(40) {
        d.lit("; ");
        mailbox(g, d, &to);
    }
    d.lit("\n");
    if g.chance(50) {
        d.lit("Cc: ");
        mailbox(g, d, &cc);
        d.lit("\n");
    }
    let subject = g.pick(SUBJECTS);
    let prefix = g.pick(&["", "RE: ", "Re: ", "FW: ", "Fwd: "]);
    d.lit("Subject: ").val(prefix).val(subject);
    if g.chance(40) {
        d.val(" - ").val(g.company());
    }
    d.lit("\n\n");
    match g.below(3) {
        0 => {
            d.lit("Hello all,\n\nThe numbers from ")
                .val(g.pick(TEAMS))
                .lit(" are attached. The ")
                .val(g.pick(PRODUCTS));
            d.lit(" line is still behind forecast for ")
                .val(g.pick(&["July", "August", "September", "October"]))
                .lit(".\n\n");
        }
        1 => {
            d.lit("Hi ")
                .ent(P, &me.short())
                .lit(",\n\nCould you confirm the ");
            d.val(g.pick(TEAMS))
                .lit(" headcount before Thursday? Invoice ")
                .val(&g.order_no())
                .lit(" is on hold until then.\n\n");
        }
        _ => {
            d.lit("Team,\n\nPlease review the attached ").val(g.pick(&[
                "Statement of Work",
                "Master Services Agreement",
                "Purchase Order",
            ]));
            d.lit(" from ")
                .val(g.company())
                .lit(" and send comments by end of day.\n\n");
        }
    }
    d.lit(g.pick(&["Thanks,\n", "Regards,\n", "Best,\n", "--\n"]))
        .ent(P, &sender.full());
    if g.chance(50) {
        d.lit("\n").val(g.job_title()).lit(" | ").val(g.company());
    }
}

/// A reply with the attribution line a mail client adds (`On …, Name <address> wrote:`) and the
/// quoted text marked with `>`.
fn mail_reply(g: &mut Gen, d: &mut Doc) {
    let (me, them) = (g.person(), g.person());
    d.lit(g.pick(&["Sounds good, ", "Agreed, ", "Thanks "]))
        .ent(P, &them.short())
        .lit(". I'll loop in ")
        .val(g.pick(TEAMS))
        .lit(".\n\n");
    d.ent(P, &me.short()).lit("\n\n");
    d.lit("On ")
        .val(&format!("{}, {}", g.pick(WEEKDAYS), g.date()))
        .lit(" ");
    if g.chance(70) {
        d.ent(P, &them.full())
            .lit(" <")
            .ent(E, &g.email(&them))
            .lit("> wrote:\n");
    } else {
        d.ent(E, &g.email(&them)).lit(" wrote:\n");
    }
    d.lit("> Quick question on the ")
        .val(g.pick(PRODUCTS))
        .lit(" rollout:\n");
    d.lit("> do we still ship to ")
        .val(g.pick(&[
            "Retail Partners",
            "Enterprise Accounts",
            "EMEA Distributors",
        ]))
        .lit(" first?\n>\n> ")
        .ent(P, &them.given);
}

/// A shipping or packing label: sender and recipient blocks, some of it in capitals, with carrier
/// fields that are not personal data.
fn shipping_label(g: &mut Gen, d: &mut Doc) {
    let caps = g.chance(55);
    let up = |s: String| if caps { s.to_uppercase() } else { s };
    let (sender, to) = (g.person(), g.person());
    d.lit(if caps { "FROM:\n" } else { "Sender:\n" });
    if g.chance(50) {
        d.ent(P, &up(sender.full())).lit("\n");
    }
    d.val(&up(g.company().to_string())).lit("\n");
    let from = g.address();
    d.ent(A, &up(from.multiline())).lit("\n\n");
    d.lit(if caps { "SHIP TO:\n" } else { "Deliver to:\n" });
    d.ent(P, &up(to.full())).lit("\n");
    if g.chance(30) {
        d.lit(if caps { "C/O " } else { "c/o " })
            .val(&up(g.company().to_string()))
            .lit("\n");
    }
    let a = g.address();
    d.ent(A, &up(a.multiline())).lit("\n");
    if g.chance(50) {
        d.lit(if caps { "TEL " } else { "Phone: " })
            .ent(PH, &g.phone_plain())
            .lit("\n");
    }
    d.lit("\n");
    let service = g.pick(&[
        "PRIORITY OVERNIGHT",
        "GROUND",
        "EXPRESS SAVER",
        "2ND DAY AIR",
    ]);
    d.lit(if caps { "SERVICE: " } else { "Service: " })
        .val(service)
        .lit("\n");
    d.lit(if caps { "WEIGHT: " } else { "Weight: " })
        .val(&format!("{}.{} KG", g.below(30) + 1, g.below(10)))
        .lit(if caps {
            "   PKG 1 OF 1\n"
        } else {
            "  (1 of 1)\n"
        });
    d.lit(if caps { "TRACKING #: " } else { "Tracking: " })
        .val(&g.order_no());
    if g.chance(50) {
        d.lit(if caps { "\nREF: " } else { "\nRef: " })
            .val(&g.order_no());
    }
}

/// A packing slip: a table of items with product names, and the ship-to block.
fn packing_slip(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("PACKING SLIP  ").val(g.company()).lit("\n");
    d.lit("Order: ")
        .val(&g.order_no())
        .lit("   Date: ")
        .val(&g.date())
        .lit("\n\n");
    d.lit("Qty  SKU        Item\n");
    for _ in 0..g.below(3) + 1 {
        d.val(&format!(
            "{:<4} {}  {}\n",
            g.below(5) + 1,
            g.shape("AA-####"),
            g.pick(PRODUCTS)
        ));
    }
    d.lit("\nShip to: ").ent(P, &p.full()).lit("\n");
    d.ent(A, &g.address().multiline()).lit("\n");
    d.lit("Packed by: ")
        .val(g.pick(&["Station 4", "Line B", "Dock 2"]))
        .lit("  Checked: ")
        .ent(P, &g.person().given);
}

/// An intake or registration form: `Label: value` lines, the value of a name field is a name.
fn intake_form(g: &mut Gen, d: &mut Doc) {
    let p = g.person_with_initial();
    let kind = g.below(3);
    d.lit(match kind {
        0 => "NEW PATIENT INTAKE\n",
        1 => "Visitor Registration\n",
        _ => "Course Enrolment Form\n",
    });
    let caps = g.chance(25);
    let name = if caps {
        p.full().to_uppercase()
    } else {
        p.full()
    };
    match g.below(3) {
        0 => {
            d.lit("Full Name: ").ent(P, &name).lit("\n");
        }
        1 => {
            d.lit("Last Name: ")
                .ent(P, &p.family)
                .lit("\nFirst Name: ")
                .ent(P, &p.given)
                .lit("\n");
        }
        _ => {
            d.lit("Name (as on ID): ").ent(P, &name).lit("\n");
        }
    }
    d.lit("Date of Birth: ").val(&g.date()).lit("\n");
    if g.chance(60) {
        d.lit("Home Address: ")
            .ent(A, &g.address().inline())
            .lit("\n");
    } else {
        d.lit("Address:\n")
            .ent(A, &g.address().multiline())
            .lit("\n");
    }
    d.lit("Mobile: ").ent(PH, &g.phone()).lit("\n");
    d.lit("E-mail: ").ent(E, &g.email(&p)).lit("\n");
    match kind {
        0 => {
            let doc = g.person();
            let kin = g.person();
            d.lit("Referring Physician: Dr. ")
                .ent(P, &doc.family)
                .lit("\n");
            d.lit("Insurance Provider: ")
                .val(g.pick(&[
                    "Meridian Insurance",
                    "Blue Harbor Health",
                    "Northstar Mutual",
                ]))
                .lit("\n");
            d.lit("Emergency Contact: ")
                .ent(P, &kin.full())
                .lit(" (")
                .val(g.pick(&["Spouse", "Mother", "Brother", "Friend"]))
                .lit(") ")
                .ent(PH, &g.phone_plain())
                .lit("\n");
            d.lit("Reason for Visit: ").val(g.pick(&[
                "Annual Physical",
                "Follow-Up",
                "Knee Pain",
                "Vaccination",
            ]));
        }
        1 => {
            let host = g.person();
            d.lit("Company: ").val(g.company()).lit("\n");
            d.lit("Host: ").ent(P, &host.full()).lit(", ");
            d.val(g.pick(TEAMS)).lit("\n");
            d.lit("Badge: ")
                .val(&format!("V-{}", g.below(9000) + 1000))
                .lit("   Parking: ");
            d.val(g.pick(&["Level 2", "Visitor Bay 7", "None"]));
        }
        _ => {
            d.lit("Programme: ")
                .val(g.pick(&[
                    "Advanced Excel",
                    "Project Management Essentials",
                    "Spanish B1",
                ]))
                .lit("\nStart: ");
            d.val(g.pick(&["September", "January", "April"]))
                .lit(" intake\nSponsor: ")
                .val(g.company());
        }
    }
}

/// An employee record from an HR system, field per line; titles and departments are not names.
fn hr_record(g: &mut Gen, d: &mut Doc) {
    let (p, mgr) = (g.person(), g.person());
    let sep = g.pick(&[": ", " : ", "\t"]);
    d.lit("EMPLOYEE RECORD\n");
    d.lit("Employee ID")
        .lit(sep)
        .val(&format!("E{}", g.digits(6)))
        .lit("\n");
    d.lit("Employee Name").lit(sep).ent(P, &p.full()).lit("\n");
    d.lit("Job Title").lit(sep).val(g.job_title()).lit("\n");
    d.lit("Department").lit(sep).val(g.pick(TEAMS)).lit("\n");
    d.lit("Reports To").lit(sep).ent(P, &mgr.full()).lit("\n");
    d.lit("Work Location")
        .lit(sep)
        .val(g.pick(&["Head Office", "Remote", "Building 4, Floor 2", "Plant 3"]))
        .lit("\n");
    d.lit("Start Date").lit(sep).val(&g.date()).lit("\n");
    d.lit("Home Address")
        .lit(sep)
        .ent(A, &g.address().inline())
        .lit("\n");
    d.lit("Personal Phone")
        .lit(sep)
        .ent(PH, &g.phone())
        .lit("\n");
    d.lit("Status")
        .lit(sep)
        .val(g.pick(&["Active", "On Leave", "Probation"]));
}

/// A CSV or TSV export with a header line.
fn csv_export(g: &mut Gen, d: &mut Doc) {
    let tab = g.chance(35);
    let sep = if tab { "\t" } else { "," };
    let cols = [
        "id",
        "full_name",
        "email",
        "phone",
        "plan",
        "department",
        "joined",
    ];
    d.lit(&cols.join(sep)).lit("\n");
    for i in 0..g.below(4) + 2 {
        let p = g.person();
        d.val(&format!("{}", 1000 + i * 7 + g.below(7))).lit(sep);
        if tab || g.chance(60) {
            d.ent(P, &p.full());
        } else {
            d.lit("\"").ent(P, &p.full()).lit("\"");
        }
        d.lit(sep).ent(E, &g.email(&p)).lit(sep);
        d.ent(PH, &g.phone_plain()).lit(sep);
        d.val(g.pick(&["Pro", "Starter", "Enterprise", "Team"]))
            .lit(sep)
            .val(g.pick(TEAMS))
            .lit(sep)
            .val(&g.date());
        d.lit("\n");
    }
    if !tab && g.chance(50) {
        let p = g.person();
        d.lit("\nshipping_name,shipping_address\n");
        d.ent(P, &p.full())
            .lit(",\"")
            .ent(A, &g.address().inline())
            .lit("\"");
    }
}

/// Application log lines of `key=value` pairs.
fn kv_log(g: &mut Gen, d: &mut Doc) {
    for _ in 0..g.below(3) + 2 {
        let p = g.person();
        d.val(&format!(
            "2025-{:02}-{:02}T{:02}:{:02}:{:02}Z ",
            g.below(12) + 1,
            g.below(28) + 1,
            g.below(24),
            g.below(60),
            g.below(60)
        ));
        d.val(g.pick(&["INFO", "WARN", "DEBUG"])).lit(" ");
        match g.below(3) {
            0 => {
                d.lit("event=login user_name=\"")
                    .ent(P, &p.full())
                    .lit("\" src_ip=")
                    .ent("IP_ADDRESS", &g.ip());
            }
            1 => {
                d.lit("event=profile_update display_name='")
                    .ent(P, &p.full())
                    .lit("' field=shipping_address");
            }
            _ => {
                d.lit("service=Billing job=InvoiceRun region=EUWest status=OK duration_ms=")
                    .val(&format!("{}", g.below(900) + 20));
            }
        }
        d.lit(" req=").val(&g.shape("########")).lit("\n");
    }
}

/// A plain-text or Markdown table of people with roles, teams and offices.
fn people_table(g: &mut Gen, d: &mut Doc) {
    d.lit("| Name | Role | Team | Extension |\n|---|---|---|---|\n");
    for _ in 0..g.below(3) + 2 {
        let p = g.person();
        d.lit("| ")
            .ent(P, &p.full())
            .lit(" | ")
            .val(g.job_title())
            .lit(" | ")
            .val(g.pick(TEAMS))
            .lit(" | ");
        d.val(&format!("{}", g.below(900) + 100)).lit(" |\n");
    }
    d.lit("\nOn call this week: ")
        .ent(P, &g.person().given)
        .lit(".");
}

/// A tracker issue with reporter and assignee fields.
fn tracker_issue(g: &mut Gen, d: &mut Doc) {
    let (rep, asg) = (g.person(), g.person());
    d.val(&g.ticket_id())
        .lit(" ")
        .val(g.pick(&[
            "Export to PDF fails for Large Reports",
            "Login Page Times Out on Safari",
            "Duplicate Charges in Billing Dashboard",
            "Falcon Router X2 Firmware Bricks Devices",
        ]))
        .lit("\n");
    d.lit("Type: Bug    Priority: ")
        .val(g.pick(&["Blocker", "Major", "Minor"]))
        .lit("    Component: ");
    d.val(g.pick(&["Billing API", "Web Client", "Reporting", "Mobile App"]))
        .lit("\n");
    d.lit("Reporter: ").ent(P, &rep.full()).lit("\n");
    d.lit("Assignee: ");
    if g.chance(20) {
        d.lit("Unassigned\n");
    } else {
        d.ent(P, &asg.full()).lit("\n");
    }
    d.lit("Sprint: ")
        .val(g.pick(&["Orion 14", "Sprint 52", "Kestrel 3"]))
        .lit("   Fix Version: ")
        .val(&g.version())
        .lit("\n\n");
    d.lit("Comment (")
        .ent(P, &asg.given)
        .lit("): reproduced on staging with the ")
        .val(g.pick(TEAMS));
    d.lit(" test account; ")
        .val(&g.opc_id())
        .lit(" shows the same trace.");
}

/// A system notification's header block: no person in it, only teams, products and queues.
fn negative_header(g: &mut Gen, d: &mut Doc) {
    d.lit("From: ")
        .val(g.pick(&[
            "Billing Notifications",
            "IT Service Desk",
            "Facilities Team",
            "Payroll Bot",
        ]))
        .lit("\nTo: ");
    d.val(g.pick(TEAMS))
        .lit(" Distribution List\nSent: ")
        .val(&format!("{}, {}", g.pick(WEEKDAYS), g.date()));
    d.lit("\nSubject: ").val(g.pick(SUBJECTS)).lit("\n\n");
    d.lit("This is an automated message. Case ")
        .val(&g.ticket_id())
        .lit(" moved to ")
        .val(g.pick(&["In Progress", "Waiting for Vendor", "Resolved"]));
    d.lit(". Product: ")
        .val(g.pick(PRODUCTS))
        .lit(". Queue: ")
        .val(g.pick(TEAMS))
        .lit(".");
}

/// A product catalogue or inventory export: capitalised product and company names, some with a
/// city in them, none of it personal.
fn negative_catalog(g: &mut Gen, d: &mut Doc) {
    let caps = g.chance(40);
    let head = "SKU,Product,Supplier,Category,Warehouse,Stock";
    d.lit(&if caps {
        head.to_uppercase()
    } else {
        head.to_string()
    })
    .lit("\n");
    for _ in 0..g.below(4) + 2 {
        let row = format!(
            "{},{},{},{},{},{}",
            g.shape("AA-####"),
            g.pick(PRODUCTS),
            g.pick(&[
                "Denver Outdoor Supply",
                "Boston Electronics Co.",
                "Milano Design Srl",
                "Pacific Freight Partners",
                "Osaka Precision KK",
                "Berlin Hardware GmbH",
            ]),
            g.pick(&["Electronics", "Outdoor", "Home & Kitchen", "Office"]),
            g.pick(&["Main DC", "East Annex", "Hall C"]),
            g.below(500)
        );
        d.val(&if caps { row.to_uppercase() } else { row })
            .lit("\n");
    }
}

/// An asset or facilities record with label: value lines and no person in it.
fn negative_form(g: &mut Gen, d: &mut Doc) {
    d.lit("ASSET RECORD\nAsset Tag: ")
        .val(&g.shape("IT-#####"))
        .lit("\nModel: ");
    d.val(g.pick(&[
        "ThinkPad X1 Carbon",
        "MacBook Pro 14",
        "Dell Latitude 7440",
        "Surface Pro 9",
    ]))
    .lit("\nDepartment: ")
    .val(g.pick(TEAMS));
    d.lit("\nCost Centre: ")
        .val(&format!("CC-{}", g.below(900) + 100))
        .lit("\nLocation: ");
    d.val(g.pick(&[
        "Building 4, Floor 2",
        "Main Office, Room 310",
        "Storage Cage B",
    ]))
    .lit("\nStatus: ");
    d.val(g.pick(&["In Repair", "Deployed", "Retired", "Spare"]))
        .lit("\nWarranty Until: ")
        .val(&g.date());
    d.lit("\nNotes: ").val(g.pick(&[
        "Replaced Keyboard under Premier Support.",
        "Battery Health Below 80 Percent.",
        "Awaiting Windows Autopilot Enrollment.",
    ]));
}

/// A team schedule table: months, teams, rooms named after places, job titles, no person.
fn negative_schedule(g: &mut Gen, d: &mut Doc) {
    d.lit("Month\tTeam\tRoom\tLead Role\n");
    let months = ["January", "February", "March", "April", "May", "June"];
    let start = g.below(3);
    for m in &months[start..start + 3] {
        d.val(m)
            .lit("\t")
            .val(g.pick(TEAMS))
            .lit("\t")
            .val(g.pick(&[
                "Everest Room",
                "Sydney Boardroom",
                "Lakeview Suite",
                "Studio 2",
            ]));
        d.lit("\t").val(g.job_title()).lit("\n");
    }
    d.lit("Quarterly review with ")
        .val(g.company())
        .lit(" moved to ")
        .val(&g.date())
        .lit(".");
}

// ---- Issue 38: classes the blind split's figures pointed at (credential-shaped values that are not
// credentials; lone given names; names in a label's parentheses; lowercase chat addresses; region
// acronyms). Each template mixes the class's negatives with its positives.

/// One line of a config, lock file, log or shell history holding a value shaped like a credential
/// that is not one: a digest, a commit, a UUID, a build id, a pagination or CSRF token, a signature,
/// a path or port after `-p`, a redacted value.
fn not_a_key_line(g: &mut Gen, d: &mut Doc) {
    match g.below(22) {
        0 => d.lit("checksum: sha256:").val(&g.hex(64)),
        1 => {
            let name = g.pick(&["left-pad", "lodash.merge", "@babel/core", "zod"]);
            d.lit("\"").val(name).lit("\": { \"integrity\": \"sha512-");
            d.val(&g.base64(86)).lit("==\" }")
        }
        2 => {
            let svc = g.pick(&["payments-api", "ledger", "report-worker"]);
            d.lit("image: ").val(svc).lit("@sha256:").val(&g.hex(64))
        }
        3 => d.lit("commit ").val(&g.hex(40)),
        4 => {
            let (a, b) = (g.hex(7), g.hex(7));
            d.lit("Merge: ").val(&a).lit(" ").val(&b)
        }
        5 => d.lit("cache_key: ").val(&g.hex(40)),
        6 => {
            let h = g.hex(64);
            d.lit("cache-key: node-modules-linux-").val(&h)
        }
        7 => d.lit("idempotency_key: ").val(&g.uuid()),
        8 => d.lit("\"request_id\": \"").val(&g.uuid()).lit("\""),
        9 => d
            .lit("\"next_page_token\": \"")
            .val(&g.base64(40))
            .lit("\""),
        10 => {
            let n = g.digits(4);
            d.lit("BUILD_ID=")
                .val(&format!("2026.{}.{}", g.below(12) + 1, n))
        }
        11 => d.lit("etag: \"").val(&g.hex(32)).lit("\""),
        12 => d.lit("X-Hub-Signature-256: sha256=").val(&g.hex(64)),
        13 => {
            let port = 8000 + g.below(999);
            d.lit("docker run -p ")
                .val(&format!("{port}:{port}"))
                .lit(" -v /srv/data:/data worker:");
            d.val(&g.version())
        }
        14 => d.lit("mkdir -p build/artifacts/").val(&g.hex(7)),
        15 => {
            let key = format!("{}-{}", g.pick(&["OPS", "PAY", "WEB"]), g.below(9000) + 100);
            d.lit("{\"key\": \"").val(&key).lit("\", \"fields\": {}}")
        }
        16 => d.lit("  - key: app.kubernetes.io/part-of"),
        17 => d.lit("token_endpoint: /oauth2/v1/token"),
        18 => {
            let acct = g.digits(12);
            d.lit("kms_key: arn:aws:kms:eu-west-1:")
                .val(&acct)
                .lit(":key/")
                .val(&g.uuid())
        }
        19 => d.lit(g.pick(&[
            "password: [REDACTED]",
            "api_key: \"********\"",
            "client_secret: ${VAULT_CLIENT_SECRET}",
        ])),
        20 => {
            let h = g.hex(64);
            d.lit("GET /exports/q3.csv?X-Amz-Expires=900&X-Amz-Signature=")
                .val(&h);
            d.lit(" proto=h2 status=").val("206")
        }
        _ => {
            let t = g.base64(32).replace(['+', '/'], "x");
            d.lit("<input type=\"hidden\" name=\"csrf_token\" value=\"")
                .val(&t)
                .lit("\">")
        }
    };
}

/// A config or shell excerpt full of credential-shaped values that are not credentials.
fn negative_digests(g: &mut Gen, d: &mut Doc) {
    d.lit(g.pick(&[
        "Pasting the relevant bits of the deploy config:\n",
        "From the lock file and the CI log:\n",
        "Attaching what the runner printed:\n",
    ]));
    for i in 0..g.below(3) + 3 {
        if i > 0 {
            d.lit("\n");
        }
        not_a_key_line(g, d);
    }
}

/// Real secrets with no vendor prefix, and vendor keys, among lines that only look like them.
fn secret_among_digests(g: &mut Gen, d: &mut Doc) {
    d.lit("Someone committed this by mistake, rotate it:\n");
    not_a_key_line(g, d);
    d.lit("\n");
    match g.below(8) {
        0 => {
            let s = g.secret_body(32);
            d.lit("client_secret: ").ent("API_KEY", &s)
        }
        1 => {
            let k = g.aws_key_id();
            d.lit("AWS_ACCESS_KEY_ID=").ent("API_KEY", &k)
        }
        2 => {
            let s = g.secret_body(40);
            d.lit("Authorization: Bearer ").ent("API_KEY", &s)
        }
        3 => {
            let h = g.hex(32);
            d.lit("\"api_key\": \"").ent("API_KEY", &h).lit("\"")
        }
        4 => {
            let u = g.uuid();
            d.lit("SNYK_TOKEN=").ent("API_KEY", &u)
        }
        5 => {
            let k = g.api_key();
            d.lit("export STRIPE_KEY=").ent("API_KEY", &k)
        }
        6 => {
            let s = g.secret_body(28);
            d.lit("deploy --token ").ent("API_KEY", &s)
        }
        _ => {
            let s = g.secret_body(14);
            d.lit("mysql -u app -p ").ent("API_KEY", &s)
        }
    };
    d.lit("\n");
    not_a_key_line(g, d);
}

/// Given names alone at the start of a sentence, with no cue word before them.
fn lone_given(g: &mut Gen, d: &mut Doc) {
    let (a, b) = (g.person(), g.person());
    d.ent(P, &a.short());
    d.lit(g.pick(&[
        " signed off on the budget yesterday. ",
        " will cover the front desk until noon. ",
        " has the spare badge for the lab. ",
        " said the quote looks fine to her. ",
    ]));
    d.ent(P, &b.short());
    d.lit(g.pick(&[
        " can take over once the audit wraps up.",
        " was out sick, so the review slipped to ",
        " already booked the van for ",
    ]));
    if !d.text.ends_with('.') {
        d.val(&g.date()).lit(".");
    }
}

/// A label followed by a name in parentheses (`Owner (Maria Lopez)`), among labels whose
/// parentheses hold no name (`Status (internal)`).
fn label_parentheses(g: &mut Gen, d: &mut Doc) {
    let (a, b) = (g.person(), g.person_with_initial());
    d.lit("Workstream: ").val(g.pick(TEAMS)).lit("\n");
    d.lit(g.pick(&["Owner (", "Lead (", "Approver ("]))
        .ent(P, &a.full())
        .lit(")\n");
    d.lit("Status (internal): ")
        .val(g.pick(&["On Track", "At Risk", "Blocked"]))
        .lit("\n");
    d.lit(g.pick(&["Backup owner (", "Reviewer (", "Point of contact ("]))
        .ent(P, &b.full())
        .lit("): ");
    d.val(g.pick(&["confirmed", "pending", "n/a"]))
        .lit("\nBudget (EUR): ")
        .val(&format!("{}", g.below(90_000) + 1000));
}

/// A lowercase chat where someone types a whole address, ending in its city, region and postcode.
fn chat_address(g: &mut Gen, d: &mut Doc) {
    let (a, b) = (g.person(), g.person());
    let addr = g.address();
    d.ent(P, &a.chat())
        .lit(": whats the address for saturday\n");
    d.ent(P, &b.chat());
    d.lit(g.pick(&[": its ", ": come to ", ": we moved, new place is "]));
    d.ent(A, &addr.inline().to_lowercase());
    d.lit(g.pick(&[
        " see u there",
        " text when ur outside",
        " ring the bell twice",
    ]));
    if g.chance(50) {
        d.lit("\n").ent(P, &a.chat()).lit(": cool thx");
    }
}

/// Region and business acronyms (`EMEA`, `APAC`, `DACH`) in a sales update: never a person or a
/// place someone is in.
fn region_acronyms(g: &mut Gen, d: &mut Doc) {
    let regions = [
        "EMEA", "APAC", "LATAM", "DACH", "ANZ", "MENA", "NORAM", "CEE", "APJ",
    ];
    let (r1, r2, r3) = (g.pick(&regions), g.pick(&regions), g.pick(&regions));
    d.val(r1)
        .lit(" bookings were up ")
        .val(&format!("{}%", g.below(30) + 1));
    d.lit(" quarter on quarter, ").val(r2).lit(" flat.\n");
    if g.chance(50) {
        let p = g.person();
        d.lit("Questions on the ")
            .val(r3)
            .lit(" pipeline go to ")
            .ent(P, &p.full())
            .lit(".");
    } else {
        d.val(r3)
            .lit(" and ")
            .val(g.pick(&["GTM", "SMB", "QBR", "ARR", "OKR"]))
            .lit(" numbers follow in the deck.");
    }
}
