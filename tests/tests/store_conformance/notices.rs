//! Notices to conversations: undelivered until marked once — also when several gateways (nodes)
//! race to mark one — and kept in the conversation's record after delivery. What
//! `store/notices.rs` promises, on every backend.

use crate::conformance;

conformance! {
    /// Notices stay undelivered until marked, are marked once, and stay in their conversation's
    /// record once delivered.
    async fn notices_stay_undelivered_until_marked_once(b: &Backend) {
        let s = &*b.store;
        assert!(s.undelivered_notices().await.unwrap().is_empty(), "{}", b.name);
        s.add_notice("c", None, "first").await.unwrap();
        s.add_notice("d", None, "second").await.unwrap();
        let pending = s.undelivered_notices().await.unwrap();
        let texts: Vec<&str> = pending.iter().map(|n| n.text.as_str()).collect();
        assert_eq!(texts, ["first", "second"], "{}", b.name);
        assert_eq!(pending[0].conversation_id, "c", "{}", b.name);
        assert!(pending[0].created_at > 0, "{}", b.name);
        assert!(s.mark_notice_delivered(pending[0].id).await.unwrap(), "{}", b.name);
        assert!(!s.mark_notice_delivered(pending[0].id).await.unwrap(), "{}: marked twice", b.name);
        assert!(!s.mark_notice_delivered(9_999_999).await.unwrap(), "{}: no such notice", b.name);
        let left = s.undelivered_notices().await.unwrap();
        assert_eq!(left, vec![pending[1].clone()], "{}", b.name);
        // Delivered notices are still part of the conversation's record.
        assert_eq!(s.notices("c").await.unwrap(), ["first"], "{}", b.name);
        assert!(s.notices("nobody").await.unwrap().is_empty(), "{}", b.name);
    }
}

conformance! {
    /// A notice may name its task; a conversation's notices read back oldest first, delivered or not.
    async fn a_conversations_notices_read_back_in_order(b: &Backend) {
        let s = &*b.store;
        let r = super::harness::root(s, "c", "go").await;
        for text in ["one", "two", "three"] {
            s.add_notice("c", Some(r), text).await.unwrap();
        }
        let first = s.undelivered_notices().await.unwrap()[0].id;
        s.mark_notice_delivered(first).await.unwrap();
        assert_eq!(s.notices("c").await.unwrap(), ["one", "two", "three"], "{}", b.name);
        let left: Vec<_> = s.undelivered_notices().await.unwrap().into_iter().map(|n| n.text).collect();
        assert_eq!(left, ["two", "three"], "{}", b.name);
    }
}

conformance! {
    /// Several gateways (each on its own connection) race to mark one notice delivered: exactly one
    /// is told it was first, so the notice is posted once.
    async fn racing_marks_deliver_a_notice_once(b: &Backend) {
        for round in 0..4 {
            let text = format!("notice {round}");
            b.store.add_notice("c", None, &text).await.unwrap();
            let id = b
                .store
                .undelivered_notices()
                .await
                .unwrap()
                .into_iter()
                .find(|n| n.text == text)
                .unwrap()
                .id;
            let mut racers = Vec::new();
            for _ in 0..8 {
                let store = b.store.clone();
                racers.push(tokio::spawn(async move { store.mark_notice_delivered(id).await.unwrap() }));
            }
            let mut first = 0;
            for racer in racers {
                first += usize::from(racer.await.unwrap());
            }
            assert_eq!(first, 1, "{}: round {round}", b.name);
            assert!(b.store.undelivered_notices().await.unwrap().is_empty(), "{}: round {round}", b.name);
        }
    }
}
