//! The dependency graphs between the modules of a crate, at every level of its module tree, read
//! from its source, and a check that fails on a cycle in any of them.
//!
//! Why: modules that depend on each other in a circle cannot be understood, tested or moved one at a
//! time (issue 23 found six of `opc-agents`' modules in one strongly connected set; issue 35 found
//! circles between the files of one directory module too). Nothing in the compiler forbids a cycle
//! between modules of one crate, so this check does: [`check`] over a crate's `src` directory fails
//! with each cycle named (`session -> tools -> session`, `detect::address -> detect::postal ->
//! detect::address`) and, for each edge of it, the file and path that make it.
//!
//! The levels: for every module `m` that has submodules (the crate root included) there is one graph,
//! whose nodes are `m`'s children, with an edge `a -> b` when anything under `a` (its file, its
//! submodules, its inline modules) refers to anything under `b`. So a cycle between two top-level
//! modules and one between two files of one directory module both fail. A reference to an ancestor or
//! a descendant makes no edge: a module's own file (`mod.rs`, `lib.rs`) declares and re-exports its
//! children, so it is the facade above its level, not a node in it.
//!
//! What counts as a reference from `a` to `b`:
//! - a `use` of a path that leads under `b` (grouped uses `use super::{b, c}` included), written from
//!   `crate::`, `super::`, `self::` or a child module's name;
//! - any `crate::` / `super::` / `self::` path in code (types, expressions, patterns, trait bounds,
//!   attributes), and the same paths in the token streams of macro calls and definitions
//!   (`format!("{}", crate::b::X)`), which the parser does not otherwise look into;
//! - a path through a re-export: `crate::X` or `super::X` where that module re-exports `X` from `b`
//!   (`pub use b::X`, or `pub use b::*` when `b` has an `X`) is a reference to `b`, and to the module
//!   it goes through;
//! - an intra-doc link in a doc comment: ``[`crate::b::X`]``, `[crate::b::X]`, `[text](crate::b::X)`,
//!   `[text][crate::b::X]` and a link definition `[text]: crate::b::X`. A link is a dependency of the
//!   documentation (rustdoc resolves it, the page points there), and the repository's before-stop
//!   hook, a text search, counts it too: the two agree. Name such things in words, or link downward.
//!   A link is taken as written, not followed through re-exports (the hook cannot see them either):
//!   ``[`crate::Engine`]`` names the crate's public face, above every level, not the module behind it.
//!
//! What does not count, on purpose:
//! - plain comments (`//`, `/* */`) and strings: the source is parsed with `syn`, so they can never
//!   be mistaken for paths;
//! - `#[cfg(test)]` items and modules: unit tests may reach across the crate to set things up, and
//!   they are not part of the shipped dependency structure;
//! - `src/bin/`, whose files are separate crates.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// Where an edge comes from: the first reference found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evidence {
    /// The file, relative to the `src` directory.
    pub file: PathBuf,
    /// The path as written (`crate::tools::ToolHost`).
    pub path: String,
    /// Whether it is an intra-doc link rather than code.
    pub in_doc: bool,
}

/// The children of one module and the references between them. A node is named by its path from
/// the crate root (`tools`, `detect::address`).
#[derive(Clone, Debug, Default)]
pub struct ModuleGraph {
    /// Every child module.
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
                    let how = if e.in_doc { "links to" } else { "uses" };
                    let _ = writeln!(
                        out,
                        "  {} -> {}: {} {how} `{}`",
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

/// Every level of a crate's module tree.
#[derive(Clone, Debug, Default)]
pub struct CrateGraph {
    /// For each module with children, keyed by its path (`""` for the crate root, `detect::ner`),
    /// the graph among its children.
    pub levels: BTreeMap<String, ModuleGraph>,
}

impl CrateGraph {
    /// The graph among the crate root's children (the top-level modules).
    pub fn top(&self) -> ModuleGraph {
        self.levels.get("").cloned().unwrap_or_default()
    }

    /// The cycles of every level.
    pub fn cycles(&self) -> Vec<Cycle> {
        self.levels.values().flat_map(ModuleGraph::cycles).collect()
    }

    /// Every level's edges as `from -> to` lines, level by level.
    pub fn edge_lines(&self) -> Vec<String> {
        self.levels
            .values()
            .flat_map(ModuleGraph::edge_lines)
            .collect()
    }

    /// The report of every level's cycles (empty when there are none).
    pub fn describe(&self) -> String {
        self.levels
            .values()
            .map(|level| level.describe(&level.cycles()))
            .collect()
    }

    /// Records a reference from module `from` to module `to` (paths from the root) at the level of
    /// their nearest common ancestor; none when one contains the other.
    fn add(&mut self, from: &[String], to: &[String], evidence: impl FnOnce() -> Evidence) {
        let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
        if from.len() <= common || to.len() <= common {
            return;
        }
        let level = self.levels.entry(from[..common].join("::")).or_default();
        level
            .edges
            .entry((from[..=common].join("::"), to[..=common].join("::")))
            .or_insert_with(evidence);
    }
}

/// Read every level's graph of the crate whose sources are in `src`. An unreadable or unparsable
/// file is an error naming it.
pub fn crate_graph(src: &Path) -> Result<CrateGraph, String> {
    let mut files = Vec::new();
    collect_files(src, src, &mut files)?;
    files.sort();
    let mut sources = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(src.join(&file))
            .map_err(|e| format!("{}: cannot read: {e}", src.join(&file).display()))?;
        let ast = syn::parse_file(&text)
            .map_err(|e| format!("{}: cannot parse: {e}", src.join(&file).display()))?;
        sources.push((module_path_of(&file), file, ast));
    }
    // Files of modules declared under `#[cfg(test)]` (`#[cfg(test)] mod tests;`) are test code.
    let mut test_only = Vec::new();
    for (path, _, ast) in &sources {
        test_modules(&mut path.clone(), &ast.items, &mut test_only);
    }
    sources.retain(|(path, _, _)| !test_only.iter().any(|t| path.starts_with(t)));

    // Every module: the files', and the inline ones (outside tests).
    let mut modules = BTreeSet::new();
    for (path, _, ast) in &sources {
        modules.insert(path.clone());
        walk_items(&mut path.clone(), &ast.items, &mut |module, item| {
            if let syn::Item::Mod(m) = item {
                modules.insert(child(module, &m.ident.to_string()));
            }
        });
    }
    let mut graph = CrateGraph::default();
    for module in &modules {
        if let Some((_, parent)) = module.split_last() {
            graph
                .levels
                .entry(parent.join("::"))
                .or_default()
                .modules
                .insert(module.join("::"));
        }
    }

    // What each module defines and imports, to follow paths through re-exports.
    let mut scopes = Scopes {
        modules,
        scopes: HashMap::new(),
    };
    for (path, _, ast) in &sources {
        walk_items(&mut path.clone(), &ast.items, &mut |module, item| {
            scopes.declare(module, item)
        });
    }

    for (path, file, ast) in &sources {
        let mut refs = Refs {
            module: path.clone(),
            found: Vec::new(),
        };
        refs.visit_file(ast);
        for found in refs.found {
            let Some(absolute) = scopes.absolute(&found.module, &found.segments) else {
                continue;
            };
            let mut targets = Vec::new();
            // A doc link is followed as written: through the crate's facade it names the public
            // API, not the module behind the re-export.
            let depth = if found.in_doc { REEXPORT_CHAIN } else { 0 };
            scopes.resolve(&absolute, depth, &mut targets);
            for to in targets {
                graph.add(&found.module, &to, || Evidence {
                    file: file.clone(),
                    path: found.segments.join("::"),
                    in_doc: found.in_doc,
                });
            }
        }
    }
    Ok(graph)
}

/// The graph among the crate's top-level modules (one level of [`crate_graph`]).
pub fn module_graph(src: &Path) -> Result<ModuleGraph, String> {
    crate_graph(src).map(|graph| graph.top())
}

/// [`crate_graph`], failing when any level has a cycle: the error names each cycle and the
/// references behind it.
pub fn check(src: &Path) -> Result<CrateGraph, String> {
    let graph = crate_graph(src)?;
    if graph.cycles().is_empty() {
        Ok(graph)
    } else {
        Err(format!(
            "{}: modules depend on each other in a cycle\n{}",
            src.display(),
            graph.describe()
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

/// `module` with `name` appended.
fn child(module: &[String], name: &str) -> Vec<String> {
    let mut path = module.to_vec();
    path.push(name.to_string());
    path
}

/// Calls `f` with every item outside `#[cfg(test)]` and the module it is in, descending into inline
/// modules (`module` is the path of `items`' module, restored on return).
fn walk_items(
    module: &mut Vec<String>,
    items: &[syn::Item],
    f: &mut impl FnMut(&[String], &syn::Item),
) {
    for item in items {
        if is_cfg_test(item_attrs(item)) {
            continue;
        }
        f(module, item);
        if let syn::Item::Mod(m) = item
            && let Some((_, inner)) = &m.content
        {
            module.push(m.ident.to_string());
            walk_items(module, inner, f);
            module.pop();
        }
    }
}

/// Pushes to `out` the paths of the modules declared under `#[cfg(test)]` among `items` (those of
/// `module`) and their inline modules.
fn test_modules(module: &mut Vec<String>, items: &[syn::Item], out: &mut Vec<Vec<String>>) {
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        if is_cfg_test(&m.attrs) {
            out.push(child(module, &m.ident.to_string()));
        } else if let Some((_, inner)) = &m.content {
            module.push(m.ident.to_string());
            test_modules(module, inner, out);
            module.pop();
        }
    }
}

/// How many re-exports in a row a path is followed through (a bound against `use` loops).
const REEXPORT_CHAIN: usize = 8;

/// The names a module defines and imports.
#[derive(Debug, Default)]
struct Scope {
    /// Items defined in it (functions, types, traits, constants, macros…).
    defined: HashSet<String>,
    /// Names it imports, each with the absolute path it leads to (`X` → `[b, X]`).
    imported: HashMap<String, Vec<String>>,
    /// Modules it glob-imports (`use b::*` → `[b]`).
    globs: Vec<Vec<String>>,
}

/// Every module of a crate and its scope: what resolves a path to the modules it leads through.
struct Scopes {
    modules: BTreeSet<Vec<String>>,
    scopes: HashMap<Vec<String>, Scope>,
}

impl Scopes {
    /// Records what `item`, in `module`, defines or imports.
    fn declare(&mut self, module: &[String], item: &syn::Item) {
        let defined = match item {
            syn::Item::Const(i) => Some(&i.ident),
            syn::Item::Enum(i) => Some(&i.ident),
            syn::Item::Fn(i) => Some(&i.sig.ident),
            syn::Item::Macro(i) => i.ident.as_ref(),
            syn::Item::Static(i) => Some(&i.ident),
            syn::Item::Struct(i) => Some(&i.ident),
            syn::Item::Trait(i) => Some(&i.ident),
            syn::Item::TraitAlias(i) => Some(&i.ident),
            syn::Item::Type(i) => Some(&i.ident),
            syn::Item::Union(i) => Some(&i.ident),
            syn::Item::Use(u) => {
                let mut uses = Vec::new();
                use_paths(&u.tree, &mut Vec::new(), &mut uses);
                for (segments, bound) in uses {
                    let Some(target) = self.absolute(module, &segments) else {
                        continue;
                    };
                    let scope = self.scopes.entry(module.to_vec()).or_default();
                    match bound {
                        Some(name) if name != "_" => {
                            scope.imported.insert(name, target);
                        }
                        Some(_) => {}
                        None => scope.globs.push(target),
                    }
                }
                None
            }
            _ => None,
        };
        if let Some(ident) = defined {
            self.scopes
                .entry(module.to_vec())
                .or_default()
                .defined
                .insert(ident.to_string());
        }
    }

    /// The absolute path (from the crate root) that `segments`, written in `module`, names: through
    /// `crate`, `self`, `super`, or a child module's name. `None` for anything else (another crate,
    /// a local name).
    fn absolute(&self, module: &[String], segments: &[String]) -> Option<Vec<String>> {
        let first = segments.first()?;
        match first.as_str() {
            "crate" => Some(segments[1..].to_vec()),
            "self" | "super" => {
                let mut base = module.to_vec();
                let mut rest = segments;
                while let Some(step) = rest.first() {
                    match step.as_str() {
                        "self" => {}
                        "super" => {
                            base.pop()?;
                        }
                        _ => break,
                    }
                    rest = &rest[1..];
                }
                base.extend_from_slice(rest);
                Some(base)
            }
            name => {
                let mut path = child(module, name);
                self.modules.contains(&path).then(|| {
                    path.extend_from_slice(&segments[1..]);
                    path
                })
            }
        }
    }

    /// Pushes to `out` every module the absolute `path` leads through: the deepest module it names,
    /// and where a segment is a re-export, the module re-exporting it and then where the re-export
    /// leads. `depth` counts the re-exports followed, up to [`REEXPORT_CHAIN`].
    fn resolve(&self, path: &[String], depth: usize, out: &mut Vec<Vec<String>>) {
        let mut at: Vec<String> = Vec::new();
        for (i, segment) in path.iter().enumerate() {
            let next = child(&at, segment);
            if self.modules.contains(&next) {
                at = next;
                continue;
            }
            if depth < REEXPORT_CHAIN
                && let Some(scope) = self.scopes.get(&at)
            {
                if let Some(target) = scope.imported.get(segment) {
                    let through: Vec<String> =
                        target.iter().chain(&path[i + 1..]).cloned().collect();
                    out.push(at);
                    return self.resolve(&through, depth + 1, out);
                }
                if !scope.defined.contains(segment)
                    && let Some(glob) = scope.globs.iter().find(|g| self.provides(g, segment))
                {
                    let through: Vec<String> = glob.iter().chain(&path[i..]).cloned().collect();
                    out.push(at);
                    return self.resolve(&through, depth + 1, out);
                }
            }
            break;
        }
        out.push(at);
    }

    /// Whether `module` has something called `name`: a submodule, an item, or an import.
    fn provides(&self, module: &[String], name: &str) -> bool {
        self.modules.contains(&child(module, name))
            || self.scopes.get(module).is_some_and(|scope| {
                scope.defined.contains(name) || scope.imported.contains_key(name)
            })
    }
}

/// A path written in a file: the module it is written in, its segments, and whether it is a doc link.
struct Found {
    module: Vec<String>,
    segments: Vec<String>,
    in_doc: bool,
}

/// Collects every `crate::` / `super::` / `self::` path (and every `use` path) written in a file,
/// with the module it is written in.
struct Refs {
    module: Vec<String>,
    found: Vec<Found>,
}

impl Refs {
    fn record(&mut self, segments: Vec<String>, in_doc: bool) {
        if segments.len() > 1 {
            self.found.push(Found {
                module: self.module.clone(),
                segments,
                in_doc,
            });
        }
    }

    /// Paths in a macro's tokens: `crate`/`super`/`self` followed by `::ident` segments.
    fn scan_tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(g) => self.scan_tokens(g.stream()),
                TokenTree::Ident(id) if is_anchor(&id.to_string()) => {
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
                    self.record(segments, false);
                    i = j.max(i + 1);
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }

    /// The intra-doc links of one doc-comment line.
    fn scan_doc(&mut self, text: &str) {
        for link in doc_links(text) {
            let segments: Vec<String> = link.split("::").map(str::to_string).collect();
            if is_anchor(&segments[0]) {
                self.record(segments, true);
            }
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
        // Outer docs (`///` above `mod m`) are written in the parent; inner ones (`//!`) in `m`.
        for attr in &m.attrs {
            if matches!(attr.style, syn::AttrStyle::Outer) {
                self.visit_attribute(attr);
            }
        }
        if let Some((_, items)) = &m.content {
            self.module.push(m.ident.to_string());
            for attr in &m.attrs {
                if matches!(attr.style, syn::AttrStyle::Inner(_)) {
                    self.visit_attribute(attr);
                }
            }
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
        for attr in &u.attrs {
            self.visit_attribute(attr);
        }
        let mut uses = Vec::new();
        use_paths(&u.tree, &mut Vec::new(), &mut uses);
        for (segments, _) in uses {
            self.record(segments, false);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.first().is_some_and(|s| is_anchor(s)) {
            self.record(segments, false);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.scan_tokens(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
    }

    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        if !attr.path().is_ident("doc") {
            return syn::visit::visit_attribute(self, attr);
        }
        if let syn::Meta::NameValue(doc) = &attr.meta
            && let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(text),
                ..
            }) = &doc.value
        {
            self.scan_doc(&text.value());
        }
    }
}

/// Whether a path starting with `segment` is one inside the crate.
fn is_anchor(segment: &str) -> bool {
    matches!(segment, "crate" | "super" | "self")
}

/// The targets of the intra-doc links in `text` that look like paths: the label of every `[…]`
/// (``[`a::B`]``, `[a::B]`), the destination of `[…](…)`, the reference of `[…][…]`, and the
/// destination of a definition `[…]: …`. Backticks, a disambiguator (`fn@`) and a trailing `()` or
/// `!` are dropped.
fn doc_links(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else { break };
        targets.push(&after[..close]);
        let tail = &after[close + 1..];
        if let Some(destination) = tail.strip_prefix('(') {
            targets.push(destination.split(')').next().unwrap_or(""));
            rest = destination.split_once(')').map_or("", |(_, after)| after);
        } else if let Some(reference) = tail.strip_prefix('[') {
            targets.push(reference.split(']').next().unwrap_or(""));
            rest = reference.split_once(']').map_or("", |(_, after)| after);
        } else if let Some(definition) = tail.strip_prefix(':') {
            targets.push(definition.split_whitespace().next().unwrap_or(""));
            rest = "";
        } else {
            rest = tail;
        }
    }
    targets
        .into_iter()
        .filter_map(|target| {
            let target = target.trim().trim_matches('`');
            let target = target.split_once('@').map_or(target, |(_, path)| path);
            let end = target
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(target.len());
            let path = target[..end].trim_end_matches(':');
            (path.contains("::") && path.split("::").all(|s| !s.is_empty()))
                .then(|| path.to_string())
        })
        .collect()
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
            // `self::M`, a name `a` imports from `b`.
            (
                "use crate::b::N as M; fn f() -> u32 { self::M }",
                "a -> b -> a",
            ),
            // Intra-doc links, in each form.
            ("/// See [`crate::b::N`].\nfn f() {}", "a -> b -> a"),
            ("/// See [crate::b::g()].\nfn f() {}", "a -> b -> a"),
            (
                "/// See [the constant](crate::b::N).\nfn f() {}",
                "a -> b -> a",
            ),
            (
                "/// See [the constant][crate::b::N].\nfn f() {}",
                "a -> b -> a",
            ),
            (
                "/// See [n].\n///\n/// [n]: crate::b::N\nfn f() {}",
                "a -> b -> a",
            ),
            ("//! Module doc: [`fn@crate::b::g`].", "a -> b -> a"),
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
    fn a_doc_link_is_named_as_one() {
        let dir = tree(&[
            ("lib.rs", ROOT),
            ("a.rs", "use crate::b::X;\npub fn g() {}\n"),
            ("b.rs", "/// Called by [`crate::a::g`].\npub struct X;\n"),
            ("c.rs", "pub struct Thing;\n"),
        ]);
        let err = check(dir.path()).unwrap_err();
        assert!(err.contains("module cycle: a -> b -> a"), "{err}");
        assert!(err.contains("b -> a: b.rs links to `crate::a::g`"), "{err}");
    }

    /// Code through the root's re-export reaches `c`; a doc link to the same path names the crate's
    /// public face (the root), so it is no edge.
    #[test]
    fn a_doc_link_is_not_followed_through_a_reexport() {
        let files = |a: &'static str| {
            tree(&[
                ("lib.rs", ROOT),
                ("a.rs", a),
                ("b.rs", ""),
                ("c.rs", "pub struct Thing;\nfn f() { crate::a::g() }\n"),
            ])
        };
        let code = files("pub fn g() {}\nfn h(_: crate::Thing) {}\n");
        assert!(
            check(code.path())
                .unwrap_err()
                .contains("module cycle: a -> c -> a")
        );
        let doc = files("pub fn g() {}\n/// See [`crate::Thing`].\nfn h() {}\n");
        assert_eq!(check(doc.path()).unwrap().edge_lines(), ["c -> a"]);
    }

    #[test]
    fn comments_strings_and_test_code_do_not_count() {
        let dir = tree(&[
            ("lib.rs", ROOT),
            (
                "a.rs",
                "use crate::b::X;\npub fn g() {}\n\
                 /// See [`crate::b::X`], and `crate::c` (code, not a link).\npub fn h() {}\n",
            ),
            (
                "b.rs",
                "pub struct X;\n\
                 // use crate::a::g; and [`crate::a::g`]\n\
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
            graph.top().modules.iter().collect::<Vec<_>>(),
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

    /// The files of one directory module, `d`, in a circle: `d` itself is not in one with anything.
    #[test]
    fn a_cycle_between_the_files_of_a_directory_module_is_found() {
        let dir = tree(&[
            ("lib.rs", "mod d;\nmod e;\n"),
            ("d/mod.rs", "mod x;\nmod y;\npub use x::Z;\n"),
            ("d/x.rs", "pub struct Z;\npub fn f() { super::y::g() }\n"),
            // Through the parent's re-export: `super::Z` is `x::Z`.
            ("d/y.rs", "pub fn g() {}\nfn h(_: super::Z) {}\n"),
            ("e.rs", "use crate::d::Z;\n"),
        ]);
        let err = check(dir.path()).unwrap_err();
        assert!(
            err.contains("module cycle: d::x -> d::y -> d::x\n"),
            "{err}"
        );
        let y = Path::new("d").join("y.rs");
        assert!(
            err.contains(&format!("d::y -> d::x: {} uses `super::Z`", y.display())),
            "{err}"
        );
        let graph = crate_graph(dir.path()).unwrap();
        assert!(graph.top().cycles().is_empty());
        assert_eq!(graph.top().edge_lines(), ["e -> d"]);
    }

    /// Deeper levels count the references of everything under a child: `p::q`'s submodule reaching
    /// `p::r` is an edge `p::q -> p::r`; references up to an ancestor or down to a descendant are
    /// not edges.
    #[test]
    fn a_level_sees_what_lies_under_each_child() {
        let dir = tree(&[
            ("lib.rs", "mod p;\n"),
            ("p/mod.rs", "mod q;\nmod r;\nuse self::q::deep::F;\n"),
            ("p/q/mod.rs", "pub mod deep;\nuse super::super::p::G;\n"),
            (
                "p/q/deep.rs",
                "pub struct F;\nfn f() { crate::p::r::h() }\n",
            ),
            (
                "p/r.rs",
                "pub fn h() {}\n/// [`super::q::deep::F`]\npub struct R;\n",
            ),
        ]);
        let err = check(dir.path()).unwrap_err();
        assert!(
            err.contains("module cycle: p::q -> p::r -> p::q\n"),
            "{err}"
        );
        let graph = crate_graph(dir.path()).unwrap();
        assert_eq!(
            graph.edge_lines(),
            ["p::q -> p::r", "p::r -> p::q"],
            "no edge from p to its children, nor from p::q up to p"
        );
    }

    #[test]
    fn a_file_that_does_not_parse_is_an_error_naming_it() {
        let dir = tree(&[("lib.rs", "mod a;\n"), ("a.rs", "fn (")]);
        let err = module_graph(dir.path()).unwrap_err();
        assert!(err.contains("a.rs: cannot parse"), "{err}");
    }

    #[test]
    fn doc_links_are_read_in_every_form() {
        assert_eq!(
            doc_links(
                "[`crate::a::B`], [crate::a::c()], [text](super::d!), [t][self::e], \
                 [not a path], [`Vec`], [x](https://example.com/a::b)"
            ),
            ["crate::a::B", "crate::a::c", "super::d", "self::e"]
        );
        assert_eq!(doc_links("[n]: crate::a::N"), ["crate::a::N"]);
    }
}
