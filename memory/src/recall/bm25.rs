//! The BM25 index: tantivy in `<db>.index/`, English stemming, derived from `recall_messages`.
//!
//! Each document is one message: its `seq` (stored and fast, to join back to SQLite), namespace and
//! time (to filter), and its indexed text (see [`super::Message::indexed_text`]). Text is not stored
//! here: SQLite is the truth, hits are read back from it.
//!
//! Invariant: the indexer's cursor is the commit's payload, written atomically with the documents,
//! so after a crash the index resumes exactly where its last commit ended (rows after it are indexed
//! again; rows before it are never lost). A missing or unreadable index is rebuilt from the start.
//! On SQLite the cursor is the last `seq` indexed ([`Bm25::cursor`]); on PostgreSQL it is a position
//! in commit order (`super::tail`), kept as the payload's text ([`Bm25::payload`], [`Bm25::add_at`]).

use std::collections::HashSet;
use std::path::Path;

use tantivy::collector::TopDocs;
use tantivy::directory::MmapDirectory;
use tantivy::query::{BooleanQuery, Occur, Query, RangeQuery, TermQuery, TermSetQuery};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::TokenStream;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, Term, doc};

use super::{Message, RecallError};

/// Memory given to the index writer (tantivy's minimum is 15 MB).
const WRITER_HEAP: usize = 32 * 1024 * 1024;

/// English words that carry no meaning in a question ("when did X go…"): dropped from BM25 queries,
/// where they otherwise match half the corpus. Stemmed forms are compared.
const QUESTION_STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been",
    "before", "being", "but", "by", "can", "could", "did", "do", "does", "doing", "done", "during",
    "for", "from", "had", "has", "have", "having", "he", "her", "hers", "him", "his", "how", "i",
    "if", "in", "into", "is", "it", "its", "kind", "of", "on", "or", "other", "our", "she",
    "should", "so", "some", "than", "that", "the", "their", "them", "then", "there", "these",
    "they", "this", "those", "to", "type", "types", "up", "was", "we", "were", "what", "when",
    "where", "which", "while", "who", "whom", "whose", "why", "will", "with", "would", "you",
    "your", "likely",
];

/// Fields of the schema.
#[derive(Clone, Copy)]
struct Fields {
    seq: Field,
    namespace: Field,
    /// A stable 64-bit hash of the namespace, as a fast column: lets a search filter hits by
    /// namespace after an unfiltered (block-max WAND) search, see [`Bm25::search`].
    ns_hash: Field,
    time: Field,
    text: Field,
}

/// The first 8 bytes of sha256(namespace): stable across runs and builds (it is stored).
fn ns_hash(namespace: &str) -> u64 {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(namespace.as_bytes());
    u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

/// Below this share of the index, a namespace filter goes into the query (the intersection is cheap
/// when the filter is small); above it, an unfiltered search for more hits is filtered afterwards.
const POST_FILTER_FROM: f64 = 0.05;

/// The tantivy index; the writer is used by one indexer at a time (the caller holds it behind a
/// mutex), the reader by any number of searches at once.
pub struct Bm25 {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    stop: HashSet<String>,
}

fn idx_err(e: impl std::fmt::Display) -> RecallError {
    RecallError::Index(e.to_string())
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let seq = b.add_u64_field("seq", INDEXED | STORED | FAST);
    let namespace = b.add_text_field("namespace", STRING);
    let ns_hash = b.add_u64_field("ns_hash", FAST);
    let time = b.add_i64_field("time", INDEXED | FAST);
    let text_opts = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("en_stem")
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let text = b.add_text_field("text", text_opts);
    (
        b.build(),
        Fields {
            seq,
            namespace,
            ns_hash,
            time,
            text,
        },
    )
}

impl Bm25 {
    /// Open the index in `dir`, creating it (or recreating it when its schema is not ours).
    pub fn open(dir: &Path) -> Result<Self, RecallError> {
        std::fs::create_dir_all(dir).map_err(|e| RecallError::Io {
            context: format!("creating the search index directory {}", dir.display()),
            source: e,
        })?;
        let (schema, fields) = schema();
        let mmap = MmapDirectory::open(dir).map_err(idx_err)?;
        let index = match Index::open_or_create(mmap, schema.clone()) {
            Ok(i) => i,
            Err(_) => {
                // A foreign or damaged index: it is derived, so rebuild it from SQLite.
                std::fs::remove_dir_all(dir).map_err(|e| RecallError::Io {
                    context: format!("removing the unreadable index {}", dir.display()),
                    source: e,
                })?;
                std::fs::create_dir_all(dir).map_err(|e| RecallError::Io {
                    context: format!("creating {}", dir.display()),
                    source: e,
                })?;
                Index::create_in_dir(dir, schema).map_err(idx_err)?
            }
        };
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(idx_err)?;
        let mut bm25 = Self {
            index,
            reader,
            fields,
            stop: HashSet::new(),
        };
        bm25.stop = QUESTION_STOP_WORDS
            .iter()
            .flat_map(|w| bm25.analyse(w))
            .collect();
        Ok(bm25)
    }

    /// The index's writer. One process at a time holds it (tantivy's lock file): the one that
    /// indexes. Searching never needs it, so `opc memory search` works beside `opc run`.
    /// A lock held elsewhere is [`RecallError::IndexBusy`]: not a fault, another process indexes.
    pub fn writer(&self) -> Result<IndexWriter, RecallError> {
        self.index
            .writer_with_num_threads(1, WRITER_HEAP)
            .map_err(|e| match e {
                tantivy::TantivyError::LockFailure(
                    tantivy::directory::error::LockError::LockBusy,
                    _,
                ) => RecallError::IndexBusy,
                other => idx_err(other),
            })
    }

    /// The last sequence number committed to the index (0 when none), and visible to searches from
    /// now on: the reader is brought up to the commit read here (the committing thread reloads it
    /// too, but only after its commit is already on disk, where another caller may read it first).
    pub fn cursor(&self) -> Result<i64, RecallError> {
        Ok(self
            .payload()?
            .and_then(|p| p.trim().parse::<i64>().ok())
            .unwrap_or(0))
    }

    /// The last commit's payload as written (`None` before the first commit), made visible to
    /// searches as [`Self::cursor`] does.
    pub fn payload(&self) -> Result<Option<String>, RecallError> {
        let metas = self.index.load_metas().map_err(idx_err)?;
        self.reader.reload().map_err(idx_err)?;
        Ok(metas.payload)
    }

    /// Add `messages` (in seq order) and commit with the last seq as the payload, then make them
    /// visible to searches. Documents already there (a resumed batch) are replaced, not doubled.
    pub fn add(&self, writer: &mut IndexWriter, messages: &[Message]) -> Result<(), RecallError> {
        let Some(last) = messages.last() else {
            return Ok(());
        };
        self.add_at(writer, messages, &last.seq.to_string())
    }

    /// Add `messages` (any order) and commit with `payload` (the cursor after them), then make them
    /// visible to searches. Documents already there (a resumed batch) are replaced, not doubled.
    pub fn add_at(
        &self,
        writer: &mut IndexWriter,
        messages: &[Message],
        payload: &str,
    ) -> Result<(), RecallError> {
        let f = self.fields;
        for m in messages {
            let seq = u64::try_from(m.seq).unwrap_or(0);
            writer.delete_term(Term::from_field_u64(f.seq, seq));
            writer
                .add_document(doc!(
                    f.seq => seq,
                    f.namespace => m.namespace.as_str(),
                    f.ns_hash => ns_hash(&m.namespace),
                    f.time => m.time_ms,
                    f.text => m.indexed_text(),
                ))
                .map_err(idx_err)?;
        }
        let mut commit = writer.prepare_commit().map_err(idx_err)?;
        commit.set_payload(payload);
        commit.commit().map_err(idx_err)?;
        self.reader.reload().map_err(idx_err)?;
        Ok(())
    }

    /// Replace the documents of `messages` (rewritten by an erasure) and commit, keeping the cursor:
    /// the rows after it are still to be indexed, and these are behind it already.
    pub fn replace(
        &self,
        writer: &mut IndexWriter,
        messages: &[Message],
    ) -> Result<(), RecallError> {
        if messages.is_empty() {
            return Ok(());
        }
        let f = self.fields;
        // Kept as written: on PostgreSQL the cursor is not a number.
        let cursor = self.payload()?.unwrap_or_default();
        for m in messages {
            let seq = u64::try_from(m.seq).unwrap_or(0);
            writer.delete_term(Term::from_field_u64(f.seq, seq));
            writer
                .add_document(doc!(
                    f.seq => seq,
                    f.namespace => m.namespace.as_str(),
                    f.ns_hash => ns_hash(&m.namespace),
                    f.time => m.time_ms,
                    f.text => m.indexed_text(),
                ))
                .map_err(idx_err)?;
        }
        let mut commit = writer.prepare_commit().map_err(idx_err)?;
        commit.set_payload(&cursor);
        commit.commit().map_err(idx_err)?;
        self.reader.reload().map_err(idx_err)?;
        Ok(())
    }

    /// Merge every segment into one and delete the files no longer used, so that deleted documents
    /// (and their terms) are gone from the directory, not only marked deleted. `writer` must not
    /// merge on its own ([`tantivy::indexer::NoMergePolicy`]), or a segment could be in two merges.
    pub fn compact(&self, writer: &mut IndexWriter) -> Result<(), RecallError> {
        let segments = self.index.searchable_segment_ids().map_err(idx_err)?;
        if !segments.is_empty() {
            writer.merge(&segments).wait().map_err(idx_err)?;
        }
        writer.garbage_collect_files().wait().map_err(idx_err)?;
        self.reader.reload().map_err(idx_err)?;
        Ok(())
    }

    /// The stemmed terms of `text`, as the index sees them.
    fn analyse(&self, text: &str) -> Vec<String> {
        let Ok(mut analyzer) = self.index.tokenizers().get("en_stem").ok_or(()) else {
            return Vec::new();
        };
        let mut stream = analyzer.token_stream(text);
        let mut out = Vec::new();
        while stream.advance() {
            out.push(stream.token().text.clone());
        }
        out
    }

    /// The best `limit` messages for `query` as (seq, BM25 score), best first, among `namespaces`
    /// within `[from, to]` ms. With `drop_stop_words`, question words are left out of the query
    /// (unless nothing else remains).
    pub fn search(
        &self,
        query: &str,
        namespaces: &[String],
        range: (i64, i64),
        limit: usize,
        drop_stop_words: bool,
    ) -> Result<Vec<(i64, f32)>, RecallError> {
        let f = self.fields;
        let mut terms = self.analyse(query);
        if drop_stop_words {
            let kept: Vec<String> = terms
                .iter()
                .filter(|t| !self.stop.contains(*t))
                .cloned()
                .collect();
            if !kept.is_empty() {
                terms = kept;
            }
        }
        terms.sort();
        terms.dedup();
        if terms.is_empty() || namespaces.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let words: Vec<(Occur, Box<dyn Query>)> = terms
            .iter()
            .map(|t| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(f.text, t),
                    IndexRecordOption::WithFreqs,
                ));
                (Occur::Should, q)
            })
            .collect();
        let searcher = self.reader.searcher();
        let words = BooleanQuery::new(words);
        let all_time = range == (i64::MIN, i64::MAX);
        let top = if self.allows_every_namespace(&searcher, namespaces)? && all_time {
            // A filter that lets every stored namespace through is left out: intersecting the words
            // with every document costs more than the search itself at 1M rows, and without it
            // tantivy skips blocks that cannot reach the top (block-max WAND).
            self.hits(&searcher, &words, limit, None)?
        } else {
            let share = self.share(&searcher, namespaces);
            let post = all_time && share >= POST_FILTER_FROM;
            // A large filter (a manager reading most of the org): search without it for enough hits
            // that `limit` of them pass it, then filter. Exact: every hit that passes outranks every
            // passing document beyond the window. When too few pass, search again with the filter.
            let wanted = ((limit as f64 / share.max(f64::MIN_POSITIVE)) * 2.0).ceil() as usize;
            let window = wanted.clamp(limit, limit.saturating_mul(40));
            let allowed: HashSet<u64> = namespaces.iter().map(|n| ns_hash(n)).collect();
            match post {
                true => match self.hits(&searcher, &words, window, Some(&allowed))? {
                    (hits, seen) if hits.len() >= limit || seen < window => (hits, seen),
                    _ => self.filtered(&searcher, words, namespaces, range, limit)?,
                },
                false => self.filtered(&searcher, words, namespaces, range, limit)?,
            }
        }
        .0;
        Ok(top.into_iter().take(limit).collect())
    }

    /// The words, with the namespace filter (and the time range, when bounded) in the query.
    fn filtered(
        &self,
        searcher: &tantivy::Searcher,
        words: BooleanQuery,
        namespaces: &[String],
        range: (i64, i64),
        limit: usize,
    ) -> Result<(Vec<(i64, f32)>, usize), RecallError> {
        let f = self.fields;
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![
            (Occur::Must, Box::new(words)),
            (
                Occur::Must,
                Box::new(TermSetQuery::new(
                    namespaces
                        .iter()
                        .map(|n| Term::from_field_text(f.namespace, n)),
                )),
            ),
        ];
        if range != (i64::MIN, i64::MAX) {
            clauses.push((
                Occur::Must,
                Box::new(RangeQuery::new(
                    std::ops::Bound::Included(Term::from_field_i64(f.time, range.0)),
                    std::ops::Bound::Included(Term::from_field_i64(f.time, range.1)),
                )),
            ));
        }
        self.hits(searcher, &BooleanQuery::new(clauses), limit, None)
    }

    /// The top `limit` of `query` as (seq, score), keeping only namespaces in `allowed` when given;
    /// and how many the query returned before that filter.
    fn hits(
        &self,
        searcher: &tantivy::Searcher,
        query: &dyn Query,
        limit: usize,
        allowed: Option<&HashSet<u64>>,
    ) -> Result<(Vec<(i64, f32)>, usize), RecallError> {
        let top = searcher
            .search(query, &TopDocs::with_limit(limit))
            .map_err(idx_err)?;
        let seen = top.len();
        // Seqs (and namespace hashes) from their fast columns: reading stored documents would
        // decompress a block each.
        let mut columns = std::collections::HashMap::new();
        let mut out = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let (seqs, hashes) = match columns.entry(addr.segment_ord) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let fast = searcher.segment_reader(addr.segment_ord).fast_fields();
                    e.insert((
                        fast.u64("seq").map_err(idx_err)?,
                        fast.u64("ns_hash").map_err(idx_err)?,
                    ))
                }
            };
            if let Some(allowed) = allowed
                && !hashes
                    .first(addr.doc_id)
                    .is_some_and(|h| allowed.contains(&h))
            {
                continue;
            }
            if let Some(seq) = seqs.first(addr.doc_id) {
                out.push((i64::try_from(seq).unwrap_or(0), score));
            }
        }
        Ok((out, seen))
    }

    /// The share of indexed documents in `namespaces` (deleted ones included: an estimate).
    fn share(&self, searcher: &tantivy::Searcher, namespaces: &[String]) -> f64 {
        let total = searcher.num_docs().max(1) as f64;
        let allowed: u64 = namespaces
            .iter()
            .filter_map(|n| {
                searcher
                    .doc_freq(&Term::from_field_text(self.fields.namespace, n))
                    .ok()
            })
            .sum();
        (allowed as f64 / total).min(1.0)
    }

    /// Whether `namespaces` holds every namespace stored in the index (so filtering by it is a no-op).
    fn allows_every_namespace(
        &self,
        searcher: &tantivy::Searcher,
        namespaces: &[String],
    ) -> Result<bool, RecallError> {
        for segment in searcher.segment_readers() {
            let inverted = segment
                .inverted_index(self.fields.namespace)
                .map_err(idx_err)?;
            let mut stream = inverted.terms().stream().map_err(idx_err)?;
            while stream.advance() {
                let stored = std::str::from_utf8(stream.key()).unwrap_or("");
                if !namespaces.iter().any(|n| n == stored) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
}
