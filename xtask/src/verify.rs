//! Self-check of a published tree: every JSON document, checksum, zip and signature.

use std::collections::HashSet;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::manifest::{self, LoadedManifest};
use crate::package::{self, BINARY_MODE};
use crate::registry::{self, Discovery, Download, Platform, Versions};
use crate::sign;

/// What a successful verification covered.
#[derive(Debug, Clone, Default)]
pub struct Verified {
    /// `(version, platform)` pairs whose package was fully checked.
    pub packages: Vec<(String, Platform)>,
    /// Signatures checked with the advertised key.
    pub signatures: usize,
}

/// The release that was just written, checked more strictly than older versions in the tree.
#[derive(Debug, Clone)]
pub struct Expected<'a> {
    /// The version just published.
    pub version: &'a str,
    /// Its platforms.
    pub platforms: &'a [Platform],
    /// The advertised key id.
    pub key_id: &'a str,
    /// The repository manifest (the shipped copy must be byte-identical).
    pub manifest: &'a LoadedManifest,
}

struct Checker {
    root: PathBuf,
    problems: Vec<String>,
    verified_sigs: HashSet<(PathBuf, PathBuf, String)>,
    out: Verified,
}

impl Checker {
    fn problem(&mut self, p: String) {
        self.problems.push(p);
    }

    fn rel(&self, p: &Path) -> String {
        p.strip_prefix(&self.root)
            .unwrap_or(p)
            .display()
            .to_string()
    }

    fn json<T: for<'de> serde::Deserialize<'de>>(
        &mut self,
        rel: &Path,
        what: &'static str,
    ) -> Option<T> {
        match registry::read_json(&self.root.join(rel), what) {
            Ok(v) => Some(v),
            Err(e) => {
                self.problem(e.to_string());
                None
            }
        }
    }

    fn sha(&mut self, path: &Path) -> Option<String> {
        match package::sha256_file(path) {
            Ok(h) => Some(h),
            Err(e) => {
                self.problem(e.to_string());
                None
            }
        }
    }

    fn resolve(&mut self, doc: &Path, field: &str, url: &str) -> Option<PathBuf> {
        match registry::resolve_relative(doc, url) {
            Some(p) if self.root.join(&p).is_file() => Some(self.root.join(p)),
            Some(p) => {
                self.problem(format!(
                    "{}: {field} `{url}` points at {}, which does not exist",
                    doc.display(),
                    p.display()
                ));
                None
            }
            None => {
                self.problem(format!(
                    "{}: {field} `{url}` is not a relative URL inside the tree",
                    doc.display()
                ));
                None
            }
        }
    }

    fn check_zip(&mut self, zip_path: &Path, version: &str, platform: &Platform) {
        let expected = package::binary_name(version, platform);
        let result = File::open(zip_path)
            .map_err(|e| e.to_string())
            .and_then(|f| zip::ZipArchive::new(f).map_err(|e| e.to_string()))
            .and_then(|mut a| {
                let names: Vec<String> = a.file_names().map(str::to_owned).collect();
                if names != [expected.clone()] {
                    return Err(format!(
                        "holds {names:?}, expected exactly [\"{expected}\"]"
                    ));
                }
                let entry = a.by_index(0).map_err(|e| e.to_string())?;
                match entry.unix_mode() {
                    Some(m) if m & 0o777 == BINARY_MODE => Ok(()),
                    Some(m) => Err(format!(
                        "{expected} has mode {:o}, expected 755",
                        m & 0o7777
                    )),
                    None => Err(format!("{expected} has no unix mode, expected 755")),
                }
            });
        if let Err(e) = result {
            let rel = self.rel(zip_path);
            self.problem(format!("{rel}: {e}"));
        }
    }

    fn check_sums(&mut self, sums: &Path, filename: &str, shasum: &str, manifest_name: &str) {
        let text = match fs::read_to_string(sums) {
            Ok(t) => t,
            Err(e) => return self.problem(format!("{}: {e}", self.rel(sums))),
        };
        let lines = match package::parse_sums(&text) {
            Ok(l) => l,
            Err(e) => return self.problem(format!("{}: {e}", self.rel(sums))),
        };
        let dir = sums.parent().unwrap_or(Path::new("."));
        for line in &lines {
            let f = dir.join(&line.name);
            if !f.is_file() {
                self.problem(format!(
                    "{}: lists {}, which is not next to it",
                    self.rel(sums),
                    line.name
                ));
                continue;
            }
            if let Some(actual) = self.sha(&f)
                && actual != line.sha256
            {
                self.problem(format!(
                    "{}: {} has sha256 {actual} but SHA256SUMS says {}",
                    self.rel(sums),
                    line.name,
                    line.sha256
                ));
            }
        }
        if !lines
            .iter()
            .any(|l| l.name == filename && l.sha256 == shasum)
        {
            self.problem(format!(
                "{}: no line `{shasum}  {filename}`",
                self.rel(sums)
            ));
        }
        if !lines.iter().any(|l| l.name == manifest_name) {
            self.problem(format!("{}: does not list {manifest_name}", self.rel(sums)));
        }
    }

    fn check_download(
        &mut self,
        namespace: &str,
        version: &str,
        protocols: &[String],
        platform: &Platform,
    ) -> Option<Download> {
        let doc_rel = registry::download_path(namespace, version, platform);
        let doc: Download = self.json(&doc_rel, "registry download document")?;
        let where_ = doc_rel.display().to_string();
        if doc.os != platform.os || doc.arch != platform.arch {
            self.problem(format!(
                "{where_}: os/arch {}/{} do not echo the path",
                doc.os, doc.arch
            ));
        }
        if doc.protocols != protocols {
            self.problem(format!(
                "{where_}: protocols {:?} differ from the versions document {protocols:?}",
                doc.protocols
            ));
        }
        let want_name = package::zip_name(version, platform);
        if doc.filename != want_name {
            self.problem(format!(
                "{where_}: filename `{}` should be `{want_name}`",
                doc.filename
            ));
        }
        if doc.shasum.len() != 64 || !doc.shasum.bytes().all(|b| b.is_ascii_hexdigit()) {
            self.problem(format!(
                "{where_}: shasum `{}` is not 64 hex digits",
                doc.shasum
            ));
        }
        let keys = &doc.signing_keys.gpg_public_keys;
        if keys.is_empty() {
            self.problem(format!("{where_}: signing_keys.gpg_public_keys is empty; Terraform refuses unsigned packages"));
        }
        for k in keys {
            if k.key_id.len() != 16 || !k.key_id.bytes().all(|b| b.is_ascii_hexdigit()) {
                self.problem(format!(
                    "{where_}: key_id `{}` is not 16 hex digits",
                    k.key_id
                ));
            }
            if !k
                .ascii_armor
                .starts_with("-----BEGIN PGP PUBLIC KEY BLOCK-----")
            {
                self.problem(format!(
                    "{where_}: ascii_armor is not an armored public key block"
                ));
            }
        }
        let zip = self.resolve(&doc_rel, "download_url", &doc.download_url);
        let sums = self.resolve(&doc_rel, "shasums_url", &doc.shasums_url);
        let sig = self.resolve(
            &doc_rel,
            "shasums_signature_url",
            &doc.shasums_signature_url,
        );
        if let Some(zip) = &zip {
            if zip
                .file_name()
                .is_some_and(|n| n.to_string_lossy() != doc.filename)
            {
                self.problem(format!(
                    "{where_}: download_url does not end in filename `{}`",
                    doc.filename
                ));
            }
            if let Some(actual) = self.sha(zip)
                && actual != doc.shasum
            {
                self.problem(format!(
                    "{where_}: shasum {} but {} hashes to {actual}",
                    doc.shasum,
                    self.rel(zip)
                ));
            }
            self.check_zip(zip, version, platform);
        }
        if let Some(sums) = &sums {
            self.check_sums(
                sums,
                &doc.filename,
                &doc.shasum,
                &package::manifest_name(version),
            );
        }
        if let (Some(sums), Some(sig)) = (&sums, &sig) {
            for k in keys {
                let cache_key = (sums.clone(), sig.clone(), k.ascii_armor.clone());
                if self.verified_sigs.contains(&cache_key) {
                    continue;
                }
                match sign::verify_with_armored_key(&k.ascii_armor, sig, sums) {
                    Ok(()) => {
                        self.verified_sigs.insert(cache_key);
                        self.out.signatures += 1;
                    }
                    Err(e) => self.problem(format!(
                        "{where_}: the signature {} does not verify with advertised key {}: {e}",
                        self.rel(sig),
                        k.key_id
                    )),
                }
            }
        }
        self.out
            .packages
            .push((version.to_owned(), platform.clone()));
        Some(doc)
    }
}

/// Verifies the whole provider tree of `namespace` under `root` (every version it lists),
/// and the just-published release in `expected` strictly. Returns every problem at once.
pub fn verify_tree(root: &Path, namespace: &str, expected: &Expected<'_>) -> Result<Verified> {
    let mut c = Checker {
        root: root.to_path_buf(),
        problems: Vec::new(),
        verified_sigs: HashSet::new(),
        out: Verified::default(),
    };
    if let Some(d) = c.json::<Discovery>(
        Path::new(registry::DISCOVERY_PATH),
        "service discovery document",
    ) && d != registry::discovery()
    {
        c.problem(format!(
            "{}: providers.v1 is `{}`, expected `{}`",
            registry::DISCOVERY_PATH,
            d.providers_v1,
            registry::PROVIDERS_BASE
        ));
    }
    let versions_rel = registry::versions_path(namespace);
    let versions: Versions = c
        .json(&versions_rel, "registry versions document")
        .unwrap_or_default();
    let mut seen = HashSet::new();
    for entry in &versions.versions {
        if !seen.insert(entry.version.clone()) {
            c.problem(format!(
                "{}: version {} is listed twice",
                versions_rel.display(),
                entry.version
            ));
        }
        if entry.platforms.is_empty() {
            c.problem(format!(
                "{}: version {} has no platforms",
                versions_rel.display(),
                entry.version
            ));
        }
        for p in &entry.protocols {
            if !matches!(manifest::protocol_major(p), Some(5 | 6)) {
                c.problem(format!(
                    "{}: version {} has protocol `{p}`",
                    versions_rel.display(),
                    entry.version
                ));
            }
        }
        for platform in &entry.platforms {
            let doc = c.check_download(namespace, &entry.version, &entry.protocols, platform);
            if entry.version == expected.version
                && let Some(doc) = doc
                && !doc
                    .signing_keys
                    .gpg_public_keys
                    .iter()
                    .any(|k| k.key_id == expected.key_id)
            {
                c.problem(format!(
                    "version {}: key {} is not advertised for {platform}",
                    entry.version, expected.key_id
                ));
            }
        }
    }
    match versions
        .versions
        .iter()
        .find(|v| v.version == expected.version)
    {
        None => c.problem(format!(
            "{}: the published version {} is missing",
            versions_rel.display(),
            expected.version
        )),
        Some(entry) => {
            let mut want: Vec<Platform> = expected.platforms.to_vec();
            want.sort();
            let mut have = entry.platforms.clone();
            have.sort();
            if want != have {
                c.problem(format!(
                    "version {}: platforms {have:?}, expected {want:?}",
                    expected.version
                ));
            }
            if entry.protocols != expected.manifest.manifest.metadata.protocol_versions {
                c.problem(format!(
                    "version {}: protocols {:?} differ from {} {:?}",
                    expected.version,
                    entry.protocols,
                    expected.manifest.path.display(),
                    expected.manifest.manifest.metadata.protocol_versions
                ));
            }
            let copy = root
                .join(registry::version_dir(namespace, expected.version))
                .join(package::manifest_name(expected.version));
            match fs::read(&copy) {
                Ok(bytes) if bytes == expected.manifest.bytes => {}
                Ok(_) => c.problem(format!(
                    "{}: differs from {}",
                    c.rel(&copy),
                    expected.manifest.path.display()
                )),
                Err(e) => c.problem(format!("{}: {e}", c.rel(&copy))),
            }
        }
    }
    if c.problems.is_empty() {
        Ok(c.out)
    } else {
        Err(Error::Verification {
            problems: c.problems,
        })
    }
}

/// Checks that every zip of the release sits in the packed filesystem-mirror layout
/// `MIRROR/HOST/NS/sless/` with the same contents.
pub fn verify_mirror(mirror_dir: &Path, zips: &[PathBuf]) -> Result<()> {
    let mut problems = Vec::new();
    for zip in zips {
        let Some(name) = zip.file_name() else {
            continue;
        };
        let copy = mirror_dir.join(name);
        match (package::sha256_file(zip), package::sha256_file(&copy)) {
            (Ok(a), Ok(b)) if a == b => {}
            (Ok(_), Ok(_)) => {
                problems.push(format!("{} differs from the released zip", copy.display()))
            }
            (Err(e), _) | (_, Err(e)) => problems.push(e.to_string()),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::Verification { problems })
    }
}
