//! The bounded output buffer: the first and the last bytes of a stream, and how many fell between.
//!
//! Why head and tail: a build's first lines say what ran and its last lines say how it ended; the
//! middle of 5 MB of output is what a model can spare. Memory stays at `head + tail` whatever the
//! command prints.

use std::collections::VecDeque;

/// Keeps `head` first bytes and `tail` last bytes of everything pushed.
pub(crate) struct HeadTail {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl HeadTail {
    pub(crate) fn new(head_cap: usize, tail_cap: usize) -> HeadTail {
        HeadTail {
            head_cap,
            tail_cap,
            head: Vec::with_capacity(head_cap.min(64 * 1024)),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.head_cap - self.head.len();
        if room > 0 {
            let take = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_cap..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    /// The text (lossy UTF-8) and the number of bytes left out. A character cut at the edge of the
    /// head or the tail is dropped whole and counted as omitted.
    pub(crate) fn finish(self) -> (String, u64) {
        let dropped = self.total - self.head.len() as u64 - self.tail.len() as u64;
        let tail: Vec<u8> = self.tail.into();
        if dropped == 0 {
            let mut all = self.head;
            all.extend_from_slice(&tail);
            return (String::from_utf8_lossy(&all).into_owned(), 0);
        }
        let head_end = utf8_end(&self.head);
        let tail_start = utf8_start(&tail);
        let omitted = dropped + (self.head.len() - head_end) as u64 + tail_start as u64;
        let text = format!(
            "{}\n… {omitted} bytes omitted …\n{}",
            String::from_utf8_lossy(&self.head[..head_end]),
            String::from_utf8_lossy(&tail[tail_start..]),
        );
        (text, omitted)
    }
}

/// The length of `bytes` without a trailing, incomplete UTF-8 sequence.
fn utf8_end(bytes: &[u8]) -> usize {
    // A sequence is at most 4 bytes: look back at most 3 for its lead byte.
    for back in 1..=3.min(bytes.len()) {
        let b = bytes[bytes.len() - back];
        if b & 0xC0 == 0x80 {
            continue; // continuation byte
        }
        let need = match b {
            0xF0..=0xF7 => 4,
            0xE0..=0xEF => 3,
            0xC0..=0xDF => 2,
            _ => 1,
        };
        return if need > back {
            bytes.len() - back
        } else {
            bytes.len()
        };
    }
    bytes.len()
}

/// How many leading continuation bytes `bytes` starts with (the rest of a character cut off).
fn utf8_start(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|b| *b & 0xC0 == 0x80)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole() {
        let mut buf = HeadTail::new(4, 4);
        buf.push(b"abc");
        buf.push(b"def");
        assert_eq!(buf.finish(), ("abcdef".to_string(), 0));
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_counts_the_middle() {
        let mut buf = HeadTail::new(3, 3);
        for chunk in [&b"012"[..], b"3456", b"7", b"89ab"] {
            buf.push(chunk);
        }
        let (text, omitted) = buf.finish();
        assert_eq!(omitted, 6);
        assert_eq!(text, "012\n… 6 bytes omitted …\n9ab");
    }

    #[test]
    fn a_character_cut_at_an_edge_is_dropped_whole() {
        let mut buf = HeadTail::new(4, 2);
        buf.push("abcé-xyzé".as_bytes()); // é is 2 bytes: cut in the head, whole in the tail
        let (text, omitted) = buf.finish();
        assert_eq!(text, "abc\n… 6 bytes omitted …\né");
        assert_eq!(omitted, 6);
    }
}
