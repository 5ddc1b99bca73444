//! The held-out split's templates. Never tune the detector on these or on what they generate: they
//! exist so a score can be reported on text the detector was not fitted to.
//!
//! Written separately from `tune.rs`, with other phrasing and layouts and other document kinds:
//! exported chat logs with timestamps and IRC-style lines, voicemail transcripts, forwarded e-mails
//! with header blocks and one-line pipe-separated signatures, shipping labels in capitals, meeting
//! minutes with attendee lists, incident reports, clinic intake forms, classified ads, calendar
//! invitations, contact cards, and log lines, invoices and changelogs with no personal data.

use super::Template;
use super::doc::Doc;
use super::doc::kind::{ADDRESS as A, EMAIL as E, LOCATION as L, PERSON_NAME as P, PHONE as PH};
use super::long::{self, Layout};
use super::values::Gen;

/// (id, weight, template).
pub const TEMPLATES: &[(&str, u32, Template)] = &[
    ("prose/referral", 3, referral),
    ("prose/delivery", 3, delivery),
    ("prose/payment", 3, payment),
    ("prose/background-check", 2, background_check),
    ("prose/security", 2, security),
    ("prose/relocation", 4, relocation),
    ("prose/by-line", 3, by_line),
    ("prose/secret-leak", 2, secret_leak),
    ("chat/whatsapp", 5, whatsapp),
    ("chat/irc", 3, irc),
    ("voicemail/transcript", 3, voicemail),
    ("email/forwarded", 5, forwarded),
    ("email/pipe-signature", 5, pipe_signature),
    ("label/shipping", 4, shipping_label),
    ("minutes/meeting", 3, minutes),
    ("report/incident", 3, incident),
    ("form/intake", 3, intake),
    ("ad/classified", 3, classified),
    ("invite/calendar", 3, invite),
    ("card/contact", 3, contact_card),
    ("long/story", 5, story),
    ("prose/chargeback", 3, chargeback),
    ("prose/homepage", 3, homepage),
    ("report/firewall", 3, firewall),
    ("prose/config-leak", 3, config_leak),
    ("prose/ssn-verify", 3, ssn_verify),
    ("negative/logs", 4, logs),
    ("negative/invoice", 3, invoice),
    ("negative/changelog", 2, changelog),
];

fn referral(g: &mut Gen, d: &mut Doc) {
    let (a, b) = (g.person(), g.person());
    d.ent(P, &a.full()).lit(" recommended ").ent(P, &b.full());
    d.lit(" for the analyst role; reach her directly via ")
        .ent(E, &g.email(&b));
    d.lit(" or at ")
        .ent(PH, &g.phone())
        .lit(" (evenings are best).");
}

fn delivery(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    let a = g.address();
    d.lit("Courier could not deliver parcel ")
        .val(&g.order_no())
        .lit(" to ");
    d.ent(A, &a.inline())
        .lit(" because nobody answered; the recipient, ");
    d.ent(P, &p.full()).lit(", can rebook online.");
}

fn payment(g: &mut Gen, d: &mut Doc) {
    let p = g.person_with_initial();
    if g.chance(50) {
        d.lit("Declined: the Visa ending in ")
            .val(&g.digits(4))
            .lit(" was fine, but ");
        d.ent("CREDIT_CARD", &g.card())
            .lit(" belonging to ")
            .ent(P, &p.full());
        d.lit(" failed the fraud check.");
    } else {
        d.lit("Salary for ")
            .ent(P, &p.full())
            .lit(" now goes to ")
            .ent("IBAN", &g.iban());
        d.lit(" starting with the ")
            .val(&g.date())
            .lit(" payroll run.");
    }
}

fn background_check(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("Background check requested for candidate ")
        .ent(P, &p.full());
    d.lit(", social security number ")
        .ent("SSN", &g.ssn())
        .lit(", former resident of ");
    d.ent(L, &g.place()).lit(".");
}

fn security(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("Security alert: ")
        .ent(P, &p.short())
        .lit("'s account signed in from ");
    d.ent("IP_ADDRESS", &g.ip())
        .lit(" (")
        .ent(L, &g.city_country())
        .lit(") at ");
    d.val(&g.time())
        .lit("; if that was not you, reset your password.");
}

fn relocation(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    match g.below(4) {
        0 => {
            d.lit("After ten years in ")
                .ent(L, &g.place())
                .lit(", ")
                .ent(P, &p.full());
            d.lit(" has settled in ").ent(L, &g.place()).lit(".");
        }
        1 => {
            d.lit("Quick update: ")
                .ent(P, &p.short())
                .lit(" is working remotely from ");
            d.ent(L, &g.place()).lit(" until the visa comes through.");
        }
        2 => {
            d.lit("Our new hire grew up near ")
                .ent(L, &g.place())
                .lit(" and now commutes from ");
            d.ent(L, &g.place()).lit(".");
        }
        _ => {
            d.lit("The family relocated to ").ent(L, &g.city_country());
            d.lit(" in the spring, and the kids started school there.");
        }
    }
}

fn by_line(g: &mut Gen, d: &mut Doc) {
    let p = g.person_with_initial();
    match g.below(4) {
        0 => {
            d.lit("Reviewed by ")
                .ent(P, &p.full())
                .lit(", revision ")
                .val(&g.version())
                .lit(".");
        }
        1 => {
            d.lit("Signed off by ")
                .lit(p.honorific)
                .lit(" ")
                .ent(P, &p.family);
            d.lit(" after the second round.");
        }
        2 => {
            d.lit("Photo: ")
                .ent(P, &p.full())
                .lit(" for the newsletter.");
        }
        _ => {
            d.lit("Thank you, ")
                .ent(P, &p.given)
                .lit("! We received your deposit of ");
            d.val(&g.amount()).lit(".");
        }
    }
}

fn secret_leak(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("Heads up: ")
        .ent(P, &p.short())
        .lit(" pasted ")
        .ent("API_KEY", &g.api_key());
    d.lit(" into the public channel; revoke it and check ")
        .ent("URL", &g.url(&p))
        .lit(".");
}

/// An exported chat: `[date, time] Name: text`.
fn whatsapp(g: &mut Gen, d: &mut Doc) {
    let people: Vec<_> = (0..3).map(|_| g.person()).collect();
    let n = g.below(4) + 3;
    let day = g.below(28) + 1;
    for i in 0..n {
        if i > 0 {
            d.lit("\n");
        }
        let who = &people[i % 2];
        d.lit("[").val(&format!(
            "{day:02}/0{}/2024, {:02}:{:02}",
            g.below(9) + 1,
            g.below(24),
            g.below(60)
        ));
        d.lit("] ");
        if g.chance(50) {
            d.ent(P, &who.full());
        } else {
            d.ent(P, &who.short());
        }
        d.lit(": ");
        match g.below(8) {
            0 => {
                d.lit("running late, traffic near the station");
            }
            1 => {
                d.lit("pls forward to ")
                    .ent(P, &people[2].short().to_lowercase());
            }
            2 => {
                d.lit("landed in ").ent(L, &g.place()).lit(" 🎉");
            }
            3 => {
                d.lit("whats the address again");
            }
            4 => {
                d.ent(A, &g.address().inline());
            }
            5 => {
                d.lit("use this one instead ").ent(PH, &g.phone());
            }
            6 => {
                d.lit("👍");
            }
            _ => {
                d.lit("invoice ").val(&g.order_no()).lit(" paid");
            }
        }
    }
}

/// IRC-style lines: `<nick> text`, all lowercase.
fn irc(g: &mut Gen, d: &mut Doc) {
    let people: Vec<_> = (0..2).map(|_| g.person()).collect();
    let n = g.below(3) + 3;
    for i in 0..n {
        if i > 0 {
            d.lit("\n");
        }
        d.lit("<").ent(P, &people[i % 2].chat()).lit("> ");
        match g.below(6) {
            0 => {
                d.lit("anyone seen ")
                    .ent(P, &people[(i + 1) % 2].chat())
                    .lit(" today");
            }
            1 => {
                d.lit("deploy ").val(&g.version()).lit(" rolled back");
            }
            2 => {
                d.lit("i'm stuck in ")
                    .ent(L, &g.place().to_lowercase())
                    .lit(" airport");
            }
            3 => {
                d.lit("ping me on ")
                    .ent(PH, &g.phone())
                    .lit(" if prod breaks");
            }
            4 => {
                d.lit("back in 10");
            }
            _ => {
                let p = g.person();
                d.lit("who is ").ent(P, &p.full().to_lowercase());
            }
        }
    }
}

/// A voicemail transcript: lowercase, no punctuation.
fn voicemail(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("voicemail transcript: hi this is ")
        .ent(P, &p.full().to_lowercase());
    d.lit(" calling about the quote you sent ");
    if g.chance(50) {
        d.lit("i'm at the site in ")
            .ent(L, &g.place().to_lowercase())
            .lit(" all week ");
    }
    d.lit("please call me back on ").ent(PH, &g.phone());
    d.lit(" or try my colleague ")
        .ent(P, &g.person().given.to_lowercase())
        .lit(" thanks bye");
}

/// A forwarded e-mail with its header block.
fn forwarded(g: &mut Gen, d: &mut Doc) {
    let (from, to) = (g.person(), g.person());
    d.lit("---------- Forwarded message ---------\nFrom: ")
        .ent(P, &from.full());
    d.lit(" <")
        .ent(E, &g.email(&from))
        .lit(">\nDate: ")
        .val(&g.date());
    d.lit("\nSubject: Re: site visit\nTo: ")
        .ent(P, &to.full())
        .lit(" <");
    d.ent(E, &g.email(&to)).lit(">\n\n");
    d.lit("The visit is on for Thursday. Meet me at reception of ");
    d.ent(A, &g.address().inline())
        .lit(" and ask for ")
        .ent(P, &from.given)
        .lit(".");
}

/// An e-mail whose signature puts name and title on one line and the rest after pipes and dots.
fn pipe_signature(g: &mut Gen, d: &mut Doc) {
    let (to, from) = (g.person(), g.person_with_initial());
    d.lit("Hello ").ent(P, &to.given).lit(" -\n");
    d.lit("Following up on our call: the revised schedule is in the shared folder, item ");
    d.val(&g.ticket_id()).lit(".\n\n—\n");
    d.ent(P, &from.full())
        .lit(" | ")
        .val(g.job_title())
        .lit("\n")
        .val(g.company())
        .lit("\n");
    let a = g.address();
    if g.chance(50) {
        d.ent(A, &a.lines.join(" · ")).lit("\n");
    } else {
        d.ent(A, &a.multiline()).lit("\n");
    }
    let (o, m, f) = g.pick(&[
        ("Tel. ", "Mob. ", "Fax "),
        ("Direct: ", "Cell: ", "Fax: "),
        ("O ", "C ", "F "),
    ]);
    d.lit(o).ent(PH, &g.phone_plain());
    if g.chance(60) {
        d.lit("  |  ").lit(m).ent(PH, &g.phone_plain());
    }
    if g.chance(35) {
        d.lit("  |  ").lit(f).ent(PH, &g.phone_plain());
    }
    d.lit("\n").ent(E, &g.email(&from));
}

/// A shipping label in capitals.
fn shipping_label(g: &mut Gen, d: &mut Doc) {
    let (to, from) = (g.person(), g.person());
    d.lit("SHIP TO:\n")
        .ent(P, &to.full().to_uppercase())
        .lit("\n");
    d.ent(A, &g.address().multiline().to_uppercase()).lit("\n");
    d.lit("PHONE ")
        .ent(PH, &g.phone())
        .lit("\n\nRETURN TO:\n")
        .ent(P, &from.full().to_uppercase());
    d.lit("\n")
        .ent(A, &g.address().multiline().to_uppercase())
        .lit("\n");
    d.lit("WEIGHT 2.4 KG  REF ").val(&g.order_no());
}

fn minutes(g: &mut Gen, d: &mut Doc) {
    let people: Vec<_> = (0..4).map(|_| g.person()).collect();
    d.lit("Minutes, ")
        .val(&g.date())
        .lit("\nAttendees: ")
        .ent(P, &people[0].full());
    d.lit(", ")
        .ent(P, &people[1].full())
        .lit(", ")
        .ent(P, &people[2].full());
    d.lit(" (dialled in from ")
        .ent(L, &g.place())
        .lit(")\nApologies: ")
        .ent(P, &people[3].short());
    d.lit("\n\nActions:\n- ")
        .ent(P, &people[1].short())
        .lit(" to send the revised budget by ");
    d.val(&g.date())
        .lit("\n- ")
        .ent(P, &people[0].family)
        .lit(" to book the venue in ");
    d.ent(L, &g.place())
        .lit("\n- all: review ")
        .val(&g.ticket_id());
}

fn incident(g: &mut Gen, d: &mut Doc) {
    let (rep, wit) = (g.person(), g.person_with_initial());
    d.lit("INCIDENT ")
        .val(&g.ticket_id())
        .lit("\nReported by: ")
        .ent(P, &rep.full());
    d.lit("\nWhere: ").ent(A, &g.address().inline());
    d.lit("\nWhat happened: a delivery van reversed into the gate. Witness ")
        .ent(P, &wit.full());
    d.lit(" can be contacted on ")
        .ent(PH, &g.phone())
        .lit(". No injuries.");
}

fn intake(g: &mut Gen, d: &mut Doc) {
    let (pat, kin) = (g.person(), g.person());
    d.lit("Patient name: ")
        .ent(P, &pat.full())
        .lit("\nHome address: ");
    d.ent(A, &g.address().inline())
        .lit("\nPhone (home): ")
        .ent(PH, &g.phone());
    d.lit("\nNext of kin: ")
        .ent(P, &kin.full())
        .lit(", ")
        .ent(PH, &g.phone());
    d.lit("\nReferred by: ")
        .lit(g.pick(&["Dr. ", "Dr ", "Prof. "]))
        .ent(P, &g.person().family);
    d.lit("\nVisit reason: follow-up, appointment ")
        .val(&g.ticket_id());
}

fn classified(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("FOR SALE: road bike, barely used, ")
        .val(&g.amount())
        .lit(" ono. Pick-up in ");
    d.ent(L, &g.place()).lit(". ");
    let cue = g.pick(&["Text", "Phone", "Whatsapp", "Ring"]);
    d.lit(cue)
        .lit(" ")
        .ent(PH, &g.phone())
        .lit(", ask for ")
        .ent(P, &p.given)
        .lit(".");
}

fn invite(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("Invitation: Quarterly review\nWhen: ")
        .val(&g.date())
        .lit(" ")
        .val(&g.time());
    d.lit("\nOrganizer: ")
        .ent(P, &p.full())
        .lit(" (")
        .ent(E, &g.email(&p))
        .lit(")\nWhere: ");
    if g.chance(50) {
        d.ent(A, &g.address().inline());
    } else {
        d.lit("Room ").val(&format!("{}", g.below(600) + 100));
    }
    d.lit("\nJoin by phone: ")
        .ent(PH, &g.phone())
        .lit(", PIN ")
        .val(&g.digits(6))
        .lit("#");
}

fn contact_card(g: &mut Gen, d: &mut Doc) {
    let p = g.person_with_initial();
    d.lit("Name: ")
        .ent(P, &p.full())
        .lit("\nOrganisation: ")
        .val(g.company());
    d.lit("\nWork: ")
        .ent(PH, &g.phone())
        .lit("\nHome: ")
        .ent(PH, &g.phone());
    d.lit("\nE-mail: ")
        .ent(E, &g.email(&p))
        .lit("\nAddress:\n")
        .ent(A, &g.address().multiline());
    if g.chance(40) {
        d.lit("\nWeb: ").ent("URL", &g.url(&p));
    }
    if g.chance(50) {
        d.lit("\nBank (IBAN): ").ent("IBAN", &g.iban());
    }
}

/// A long story with names and places deep inside.
fn story(g: &mut Gen, d: &mut Doc) {
    let filler = [
        "It had rained all morning, and the trains were running with long gaps.",
        "Nobody in the office expected the supplier to agree so quickly.",
        "The workshop ran over by an hour, but the feedback forms were glowing.",
        "Inventory counts matched the system for the first time this year.",
        "A small fix to the checkout page lifted conversion by a couple of points.",
        "The board asked for a short written summary instead of another deck.",
        "Customs held the shipment for two days over a missing certificate.",
        "By Wednesday the backlog had shrunk to a handful of edge cases.",
        "Everyone agreed the pilot should run for another quarter before a decision.",
        "The printer on the third floor jammed again, to nobody's surprise.",
        "Sales closed two mid-sized deals that had been stuck since spring.",
        "A power cut in the data centre was handled without anyone noticing.",
        "The translation agency delivered early and the copy read well.",
        "Staff turnout for the training sessions beat last year's by a wide margin.",
    ];
    let people: Vec<_> = (0..3).map(|_| g.person()).collect();
    // Half are long (20 to 45 sentences), names and places only in the last third.
    let long = g.chance(50);
    let n = if long {
        g.below(26) + 20
    } else {
        g.below(5) + 5
    };
    let layout = Layout {
        sentences: n,
        every: 5,
        brk: "\n",
        quiet: if long { 2 * n / 3 } else { 0 },
        rolls: 7,
        fillers: &filler,
    };
    long::write(g, d, &layout, |g, d, i, roll| {
        match roll {
            0 if i > 1 => {
                d.lit("Later that week ").ent(P, &people[i % 3].full());
                d.lit(" wrote from ")
                    .ent(L, &g.place())
                    .lit(" to say the samples had arrived.");
            }
            1 if i > 2 => {
                d.lit("In the end it was ")
                    .ent(P, &people[(i + 1) % 3].short());
                d.lit(" who found the missing pallet.");
            }
            2 => {
                d.lit("The contract was countersigned by ")
                    .ent(P, &people[i % 3].full());
                d.lit(", whose office line is ")
                    .ent(PH, &g.phone())
                    .lit(".");
            }
            _ => return false,
        }
        true
    });
}

fn logs(g: &mut Gen, d: &mut Doc) {
    let n = g.below(3) + 2;
    for i in 0..n {
        if i > 0 {
            d.lit("\n");
        }
        d.val(&format!(
            "2025-0{}-{:02}T{:02}:{:02}:{:02}Z",
            g.below(9) + 1,
            g.below(28) + 1,
            g.below(24),
            g.below(60),
            g.below(60)
        ));
        d.lit(" INFO routed ")
            .val(&g.opc_id())
            .lit(" to agent cfo in ");
        d.val(&format!("{} ms", g.below(900) + 10))
            .lit(" (retries=")
            .val(&format!("{}", g.below(4)));
        d.lit(")");
    }
}

fn invoice(g: &mut Gen, d: &mut Doc) {
    d.lit("Invoice ")
        .val(&g.order_no())
        .lit("\nItem: ")
        .val(&g.non_pii())
        .lit(" x ");
    d.val(&format!("{}", g.below(20) + 1))
        .lit("\nSubtotal: ")
        .val(&g.amount());
    d.lit("\nVAT 20%\nDue: ")
        .val(&g.date())
        .lit("\nPayment reference: ")
        .val(&g.order_no());
}

fn changelog(g: &mut Gen, d: &mut Doc) {
    d.lit("## ")
        .val(&g.version())
        .lit("\n- bump tokio to ")
        .val(&format!("1.{}.{}", g.below(50), g.below(9)));
    d.lit("\n- fix retry storm when ")
        .val(&g.opc_id())
        .lit(" times out\n- docs: clarify port ");
    d.val(&format!("{}", g.below(60000) + 1024));
}

fn chargeback(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("Chargeback filed on ")
        .val(&g.date())
        .lit(" by ")
        .ent(P, &p.full());
    d.lit(" for ")
        .val(&g.amount())
        .lit("; disputed card: ")
        .ent("CREDIT_CARD", &g.card());
}

fn homepage(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("You can find ")
        .ent(P, &p.short())
        .lit(" online at ")
        .ent("URL", &g.url(&p));
    d.lit(", or write to ")
        .ent(E, &g.email(&p))
        .lit(" for a CV.");
}

fn firewall(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("fw-edge ")
        .val(&g.time())
        .lit(" DENY src=")
        .ent("IP_ADDRESS", &g.ip());
    d.lit(" dst=")
        .ent("IP_ADDRESS", &g.ip())
        .lit(" port=")
        .val(&format!("{}", g.below(60_000) + 1024));
    d.lit(" user=")
        .ent(P, &p.chat())
        .lit(" after 5 failed logins");
}

fn config_leak(g: &mut Gen, d: &mut Doc) {
    if g.chance(50) {
        d.lit("providers:\n  openai:\n    api_key: \"")
            .ent("API_KEY", &g.api_key());
        d.lit("\"\n    timeout: ")
            .val(&format!("{}s", g.below(60) + 5));
    } else {
        d.lit("The leaked credential (")
            .ent("API_KEY", &g.api_key());
        d.lit(") was revoked ")
            .val(&g.time())
            .lit(" after the scanner flagged it.");
    }
}

fn ssn_verify(g: &mut Gen, d: &mut Doc) {
    let p = g.person();
    d.lit("To verify your identity, ")
        .ent(P, &p.given)
        .lit(", we matched SSN ");
    d.ent("SSN", &g.ssn())
        .lit(" against the application dated ")
        .val(&g.date())
        .lit(".");
}
