//! A multi-line e-mail signature through the privacy gateway, over real sockets against the real `opc`
//! binary, its NER model and a recording scripted LLM: name, title, company, street, unit, city,
//! postcode, country, phone, fax and mobile on separate lines, as people paste them into a chat.
//!
//! No real value of the person (name, street, city, postcode, phones) reaches the LLM in any request,
//! and the user sees the answer with every value restored exactly. Titles and company names are not
//! personal data and are not asserted on. A Swedish block (house number after the street, postcode
//! before the city, `+46` numbers) and a US one (`Suite`, `City, ST ZIP`, `Office:`/`Fax:`/`Mobile:` on
//! one line, an extension) cover both address orders.
//!
//! The test needs the NER model (names come from it); it finds it in the cache as `opc models fetch`
//! puts it; when it is absent the test skips with one line, or fails under CI.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, Extras, KEY, KEY_VAR, TestOrg, Wire, marker};
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::wait::WAIT_LONG;
use opc_tests::web_chat;

const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";

const SWEDISH: &str = "Hi team, please send the signed renewal to our new office before Friday.

Best regards,
Marta K. Lindqvist
Head of Procurement
Nordhavn Logistics AB
Strandvägen 7A
Suite 1120
114 56 Stockholm
Sweden
Tel: +46 8 123 456 78
Fax: +46 8 123 456 79
Mobile: +46 70 123 45 67";

/// The Swedish block's personal values, and forms of them that must not leak either.
const SWEDISH_REALS: [&str; 10] = [
    "Marta",
    "Lindqvist",
    "Strandvägen",
    "114 56",
    "Stockholm",
    "+46 8 123 456 78",
    "123 456 78",
    "123 456 79",
    "70 123 45 67",
    "Suite 1120",
];

const AMERICAN: &str = "Can you confirm the shipment date?

Thanks,
Daniel R. Okafor
Senior Account Manager | Brightline Analytics Inc.
1200 Market Street, Suite 400
San Francisco, CA 94103
United States
Office: (415) 555-0132 | Fax: (415) 555-0100 x204 | Mobile: 415.555.0199";

const AMERICAN_REALS: [&str; 9] = [
    "Daniel",
    "Okafor",
    "1200 Market",
    "San Francisco",
    "94103",
    "555-0132",
    "555-0100",
    "x204",
    "555.0199",
];

/// The CEO answers by quoting the message as it saw it (the gateway restores it for the user).
fn script() -> Script {
    Script::new()
        .agent(marker("ceo"), vec![Step::text("Noted: {{input}}")])
        .fallback(vec![Step::text("Noted.")])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_line_signature_block_never_reaches_the_llm_and_comes_back_restored() {
    let Some(models) = opc_tests::example::models_root("privacy_signature") else {
        return;
    };
    let llm = ScriptedLlm::start(script()).await.unwrap();
    let org = TestOrg::with_extras(
        &llm.url(),
        Wire::Anthropic,
        Execution::default(),
        &Extras {
            framework: "  privacy:\n    nerWait: 60s\n",
            sections: WEB,
            ..Extras::default()
        },
    );
    let opc = OpcRun::start(
        &org.config_path(),
        &[(KEY_VAR, KEY), ("OPC_MODELS", models.to_str().unwrap())],
    );

    for (message, reals) in [
        (SWEDISH, &SWEDISH_REALS[..]),
        (AMERICAN, &AMERICAN_REALS[..]),
    ] {
        let before = llm.requests().len();
        let expected = format!("Noted: {message}");
        let (_, mut sse) = web_chat::start(&opc, message).await;
        sse.wait_for("message|edit", WAIT_LONG, |data| {
            data["text"].as_str() == Some(expected.as_str())
        })
        .await;
        let requests = llm.requests();
        assert!(requests.len() > before, "the message reached the LLM");
        for request in &requests[before..] {
            let body = request.body.to_string();
            for real in reals {
                assert!(!body.contains(real), "{real:?} reached the LLM: {body}");
            }
        }
    }
    assert_eq!(opc.stop().0, Some(0));
}
