//! The dependency graph between a crate's top-level modules, read from its source, and a check that
//! fails on a cycle in it.
//!
//! Why: modules that depend on each other in a circle cannot be understood, tested or moved one at a
//! time (issue 23 found six of `opc-agents`' modules in one strongly connected set). Nothing in the
//! compiler forbids a cycle between modules of one crate, so this check does: [`check`] over a crate's
//! `src` directory fails with the cycle named (`session -> tools -> session`) and, for each edge of
//! it, the file and path that make it.
//!
//! What counts as a reference from module `a` to module `b` (both top-level modules of the crate):
//! - a `use` of `crate::b…` (grouped uses `use crate::{b, c}` included), and `super::…` / `self::…`
//!   paths that resolve to `b`;
//! - any path in code (types, expressions, patterns, trait bounds, attributes) that does;
//! - the same paths in the token streams of macro calls (`format!("{}", crate::b::X)`), which the
//!   parser does not otherwise look into;
//! - `crate::X` where `X` is something the crate root re-exports from `b` (`pub use b::X`).
//!
//! What does not count, on purpose:
//! - comments and doc comments (intra-doc links such as ``[`crate::b::X`]`` are documentation, not
//!   dependencies);
//! - `#[cfg(test)]` items and modules: unit tests may reach across the crate to set things up, and they
//!   are not part of the shipped dependency structure;
//! - the crate root (`lib.rs` / `main.rs`): it declares and re-exports every module, so it is the
//!   facade above the graph, not a node in it; references to items defined in the root are ignored;
//! - `src/bin/`, whose files are separate crates.
//!
//! The source is parsed with `syn`, so strings and comments can never be mistaken for paths.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// Where an edge comes from: the first reference found (file relative to `src`, and the path as
/// written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evidence {
    /// The file, relative to the `src` directory.
    pub file: PathBuf,
    /// The path as written (`crate::tools::ToolHost`).
    pub path: String,
}

/// A crate's top-level modules and the references between them.
#[derive(Clone, Debug, Default)]
pub struct ModuleGraph {
    /// Every top-level module.
    pub modules: BTreeSet<String>,
    /// `(from, to)` for every reference, with the first one found.
    pub edges: BTreeMap<(String, String), Evidence>,
}

impl ModuleGraph {
    /// The edges as `from -> to` lines, sorted.
    pub fn edge_lines(&self) -> Vec<String> {
        self.edges
            .keys()
            .map(|(from, to)| format!("{from} -> {to}"))
            .collect()
    }

    /// Every strongly connected set of more than one module, each as one shortest cycle through its
    /// first module (`["session", "tools", "session"]`), plus the whole set, in name order.
    pub fn cycles(&self) -> Vec<Cycle> {
        strongly_connected(self)
            .into_iter()
            .filter(|set| set.len() > 1)
            .map(|set| Cycle {
                path: shortest_cycle(self, &set),
                members: set,
            })
            .collect()
    }

    /// The report of `cycles`: each cycle, the reference behind each of its edges, and its set.
    pub fn describe(&self, cycles: &[Cycle]) -> String {
        let mut out = String::new();
        for cycle in cycles {
            let _ = writeln!(out, "module cycle: {}", cycle.path.join(" -> "));
            for pair in cycle.path.windows(2) {
                if let Some(e) = self.edges.get(&(pair[0].clone(), pair[1].clone())) {
                    let _ = writeln!(
                        out,
                        "  {} -> {}: {} uses `{}`",
                        pair[0],
                        pair[1],
                        e.file.display(),
                        e.path
                    );
                }
            }
            let members: Vec<&str> = cycle.members.iter().map(String::as_str).collect();
            let _ = writeln!(
                out,
                "  strongly connected: {{{}}} — make the references point one way",
                members.join(", ")
            );
        }
        out
    }
}

/// One cycle of modules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cycle {
    /// A shortest cycle, first module repeated at the end.
    pub path: Vec<String>,
    /// The whole strongly connected set it lies in.
    pub members: BTreeSet<String>,
}

/// Read the graph of the crate whose sources are in `src`. An unreadable or unparsable file is an
/// error naming it.
pub fn module_graph(src: &Path) -> Result<ModuleGraph, String> {
    let mut files = Vec::new();
    collect_files(src, src, &mut files)?;
    files.sort();
    let mut parsed = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(src.join(&file))
            .map_err(|e| format!("{}: cannot read: {e}", src.join(&file).display()))?;
        let ast = syn::parse_file(&text)
            .map_err(|e| format!("{}: cannot parse: {e}", src.join(&file).display()))?;
        parsed.push((module_path_of(&file), file, ast));
    }
    let mut graph = ModuleGraph::default();
    // Top-level modules: the files' first components, and inline modules of the root.
    for (path, _, ast) in &parsed {
        match path.first() {
            Some(top) => {
                graph.modules.insert(top.clone());
            }
            None => {
                for item in &ast.items {
                    if let syn::Item::Mod(m) = item
                        && !is_cfg_test(&m.attrs)
                    {
                        graph.modules.insert(m.ident.to_string());
                    }
                }
            }
        }
    }
    // What the root re-exports, by name: `crate::Engine` is a reference to `engine`.
    let mut reexports = HashMap::new();
    for (path, _, ast) in &parsed {
        if !path.is_empty() {
            continue;
        }
        for item in &ast.items {
            if let syn::Item::Use(u) = item
                && !is_cfg_test(&u.attrs)
            {
                let mut uses = Vec::new();
                use_paths(&u.tree, &mut Vec::new(), &mut uses);
                for (segments, name) in uses {
                    if let (Some(first), Some(name)) = (segments.first(), name)
                        && graph.modules.contains(first)
                    {
                        reexports.insert(name, first.clone());
                    }
                }
            }
        }
    }
    for (path, file, ast) in &parsed {
        let mut visitor = Refs {
            module: path.clone(),
            found: Vec::new(),
        };
        visitor.visit_file(ast);
        for (module, segments) in visitor.found {
            let Some(from) = module.first() else { continue };
            let Some(to) = resolve(&module, &segments, &graph.modules, &reexports) else {
                continue;
            };
            if *from == to {
                continue;
            }
            graph
                .edges
                .entry((from.clone(), to))
                .or_insert_with(|| Evidence {
                    file: file.clone(),
                    path: segments.join("::"),
                });
        }
    }
    Ok(graph)
}

/// [`module_graph`], failing when it has a cycle: the error names each cycle and the references
/// behind it.
pub fn check(src: &Path) -> Result<ModuleGraph, String> {
    let graph = module_graph(src)?;
    let cycles = graph.cycles();
    if cycles.is_empty() {
        Ok(graph)
    } else {
        Err(format!(
            "{}: the top-level modules depend on each other in a cycle\n{}",
            src.display(),
            graph.describe(&cycles)
        ))
    }
}

/// Every `.rs` file under `dir`, relative to `src`, except `src/bin/`.
fn collect_files(src: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("{}: cannot list: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: cannot list: {e}", dir.display()))?;
        let path = entry.path();
        let relative = path.strip_prefix(src).unwrap_or(&path).to_path_buf();
        if path.is_dir() {
            if relative != Path::new("bin") {
                collect_files(src, &path, out)?;
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(relative);
        }
    }
    Ok(())
}

/// The module a file defines: `tools/builtin.rs` → `[tools, builtin]`, `tools/mod.rs` → `[tools]`,
/// `lib.rs` / `main.rs` → `[]` (the root).
fn module_path_of(file: &Path) -> Vec<String> {
    let mut path: Vec<String> = file
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if path.last().is_some_and(|last| last == "mod") {
        path.pop();
    }
    if path.len() == 1 && (path[0] == "lib" || path[0] == "main") {
        path.clear();
    }
    path
}

/// The top-level module a path written in `module` refers to, if it is one of `modules` (directly, or
/// through a re-export of the root).
fn resolve(
    module: &[String],
    segments: &[String],
    modules: &BTreeSet<String>,
    reexports: &HashMap<String, String>,
) -> Option<String> {
    let first = segments.first()?;
    let absolute: Vec<String> = match first.as_str() {
        "crate" => segments[1..].to_vec(),
        "super" => {
            let mut base = module.to_vec();
            let mut rest = segments;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
            base.extend(rest.iter().cloned());
            base
        }
        "self" => module.iter().chain(&segments[1..]).cloned().collect(),
        // A plain path names a top-level module only in the root, which is not a node.
        _ => return None,
    };
    let top = absolute.first()?;
    if modules.contains(top) {
        Some(top.clone())
    } else {
        reexports.get(top).cloned()
    }
}

/// Collects every path (as segments) written in a file, with the module it is written in.
struct Refs {
    module: Vec<String>,
    found: Vec<(Vec<String>, Vec<String>)>,
}

impl Refs {
    fn record(&mut self, segments: Vec<String>) {
        if segments
            .first()
            .is_some_and(|s| s == "crate" || s == "super" || s == "self")
        {
            self.found.push((self.module.clone(), segments));
        }
    }

    /// Paths in a macro's tokens: `crate`/`super`/`self` followed by `::ident` segments.
    fn scan_tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(g) => self.scan_tokens(g.stream()),
                TokenTree::Ident(id) if ["crate", "super", "self"].contains(&&*id.to_string()) => {
                    let mut segments = vec![id.to_string()];
                    let mut j = i + 1;
                    loop {
                        match (trees.get(j), trees.get(j + 1), trees.get(j + 2)) {
                            (
                                Some(TokenTree::Punct(a)),
                                Some(TokenTree::Punct(b)),
                                Some(TokenTree::Ident(next)),
                            ) if a.as_char() == ':' && b.as_char() == ':' => {
                                segments.push(next.to_string());
                                j += 3;
                            }
                            _ => break,
                        }
                    }
                    if segments.len() > 1 {
                        self.record(segments);
                    }
                    i = j.max(i + 1);
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Refs {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if is_cfg_test(item_attrs(item)) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if let Some((_, items)) = &m.content {
            self.module.push(m.ident.to_string());
            for item in items {
                self.visit_item(item);
            }
            self.module.pop();
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Fn(f) => &f.attrs,
            syn::ImplItem::Const(c) => &c.attrs,
            syn::ImplItem::Type(t) => &t.attrs,
            _ => return syn::visit::visit_impl_item(self, item),
        };
        if !is_cfg_test(attrs) {
            syn::visit::visit_impl_item(self, item);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut uses = Vec::new();
        use_paths(&u.tree, &mut Vec::new(), &mut uses);
        for (segments, _) in uses {
            self.record(segments);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.record(path.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.scan_tokens(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
    }

    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        // Doc comments are attributes too: skip them (documentation, not dependencies).
        if !attr.path().is_ident("doc") {
            syn::visit::visit_attribute(self, attr);
        }
    }
}

/// Every path a use tree imports, as segments, with the name it binds (`None` for a glob).
fn use_paths(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut path = prefix.clone();
            // `use crate::tools::{self}` imports `crate::tools`.
            if name != "self" {
                path.push(name.clone());
            }
            let bound = if name == "self" {
                prefix.last().cloned()
            } else {
                Some(name)
            };
            out.push((path, bound));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push((path, Some(r.rename.to_string())));
        }
        syn::UseTree::Glob(_) => out.push((prefix.clone(), None)),
        syn::UseTree::Group(g) => {
            for tree in &g.items {
                use_paths(tree, prefix, out);
            }
        }
    }
}

/// Whether the attributes include `#[cfg(test)]`.
fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test")
    })
}

/// The outer attributes of an item.
fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// The strongly connected sets of the graph (Tarjan's algorithm), each in name order.
fn strongly_connected(graph: &ModuleGraph) -> Vec<BTreeSet<String>> {
    struct State<'g> {
        graph: &'g ModuleGraph,
        index: HashMap<&'g str, usize>,
        low: HashMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        sets: Vec<BTreeSet<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        let graph = s.graph;
        for (from, to) in graph.edges.keys() {
            if from != v {
                continue;
            }
            let w = to.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut set = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                set.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            s.sets.push(set);
        }
    }
    let mut state = State {
        graph,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        sets: Vec::new(),
    };
    for module in &graph.modules {
        if !state.index.contains_key(module.as_str()) {
            visit(&mut state, module);
        }
    }
    state.sets.sort();
    state.sets
}

/// A shortest cycle through the first module of `set`, staying inside `set` (breadth-first).
fn shortest_cycle(graph: &ModuleGraph, set: &BTreeSet<String>) -> Vec<String> {
    let Some(start) = set.iter().next() else {
        return Vec::new();
    };
    let mut came_from: HashMap<&str, &str> = HashMap::new();
    let mut queue = VecDeque::from([start.as_str()]);
    while let Some(v) = queue.pop_front() {
        for (from, to) in graph.edges.keys() {
            if from != v || !set.contains(to) {
                continue;
            }
            if to == start {
                let mut path = vec![start.clone()];
                let mut at = v;
                while at != start {
                    path.push(at.to_string());
                    at = came_from[at];
                }
                path.push(start.clone());
                path.reverse();
                return path;
            }
            if !came_from.contains_key(to.as_str()) {
                came_from.insert(to, v);
                queue.push_back(to);
            }
        }
    }
    vec![start.clone()]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A crate source tree in a temporary directory: `(path, text)` per file.
    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    const ROOT: &str = "mod a;\nmod b;\nmod c;\npub use c::Thing;\n";

    #[test]
    fn a_cycle_is_found_and_named_with_its_references() {
        let dir = tree(&[
            ("lib.rs", ROOT),
            ("a.rs", "use crate::b::X;\npub fn g() {}\n"),
            // `b` reaches `a` only from a submodule, through `super::super`.
            ("b/mod.rs", "mod inner;\npub struct X;\n"),
            ("b/inner.rs", "pub fn f() { super::super::a::g() }\n"),
            ("c.rs", "pub struct Thing;\n"),
        ]);
        let err = check(dir.path()).unwrap_err();
        assert!(err.contains("module cycle: a -> b -> a"), "{err}");
        assert!(err.contains("a -> b: a.rs uses `crate::b::X`"), "{err}");
        assert!(
            err.contains(&format!(
                "b -> a: {} uses `super::super::a::g`",
                Path::new("b").join("inner.rs").display()
            )),
            "{err}"
        );
    }

    #[test]
    fn every_kind_of_reference_counts() {
        let cases = [
            // A grouped use.
            ("use crate::{b, c};", "a -> b -> a"),
            // A path in an expression.
            ("fn f() -> u32 { crate::b::N }", "a -> b -> a"),
            // A path inside a macro call.
            (
                "fn f() -> String { format!(\"{}\", crate::b::N) }",
                "a -> b -> a",
            ),
            // `crate::Thing`, re-exported by the root from `c` (and `c` uses `b`).
            ("fn f(_: crate::Thing) {}", "a -> c -> b -> a"),
            // `super::` from an inline submodule of `a`, up to the root and down to `b`.
            ("mod m { fn f() { super::super::b::g(); } }", "a -> b -> a"),
            // `self::` in the root's inline module is that module: `a` reaches `b` through it.
            (
                "use crate::b::N as M; fn f() -> u32 { self::M }",
                "a -> b -> a",
            ),
        ];
        for (code, cycle) in cases {
            let a = format!("{code}\npub fn back() {{}}\n");
            let dir = tree(&[
                ("lib.rs", ROOT),
                ("a.rs", &a),
                (
                    "b.rs",
                    "pub const N: u32 = 1;\npub fn g() { crate::a::back() }\n",
                ),
                ("c.rs", "pub struct Thing;\nuse crate::b::N;\n"),
            ]);
            let err = check(dir.path()).unwrap_err();
            assert!(
                err.contains(&format!("module cycle: {cycle}\n")),
                "{code}: {err}"
            );
        }
    }

    #[test]
    fn comments_strings_docs_and_test_code_do_not_count() {
        let dir = tree(&[
            ("lib.rs", ROOT),
            (
                "a.rs",
                "use crate::b::X;\npub fn g() {}\n\
                 /// See [`crate::b::X`].\npub fn h() {}\n",
            ),
            (
                "b.rs",
                "pub struct X;\n\
                 // use crate::a::g;\n\
                 /* crate::a::g() */\n\
                 pub const S: &str = \"crate::a::g\";\n\
                 #[cfg(test)]\nmod tests { use crate::a::g; }\n\
                 #[cfg(test)]\nfn helper() { crate::a::g() }\n",
            ),
            ("c.rs", "pub struct Thing;\n"),
        ]);
        let graph = check(dir.path()).unwrap();
        assert_eq!(graph.edge_lines(), ["a -> b"]);
        assert_eq!(
            graph.modules.iter().collect::<Vec<_>>(),
            ["a", "b", "c"].iter().collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_longer_cycle_is_reported_whole() {
        let dir = tree(&[
            ("lib.rs", ROOT),
            ("a.rs", "use crate::b::X;\n"),
            ("b.rs", "pub struct X;\nuse crate::c::Thing;\n"),
            ("c.rs", "pub struct Thing;\nfn f() { crate::a::g() }\n"),
        ]);
        let graph = module_graph(dir.path()).unwrap();
        let cycles = graph.cycles();
        assert_eq!(cycles.len(), 1);
        assert_eq!(cycles[0].path, ["a", "b", "c", "a"]);
    }

    #[test]
    fn a_file_that_does_not_parse_is_an_error_naming_it() {
        let dir = tree(&[("lib.rs", "mod a;\n"), ("a.rs", "fn (")]);
        let err = module_graph(dir.path()).unwrap_err();
        assert!(err.contains("a.rs: cannot parse"), "{err}");
    }
}
