//! The committed CRDs (`deploy/crds.yaml`) must be exactly what the code
//! generates, and `sless-operator crds` must print them.

use std::path::PathBuf;
use std::process::Command;

const REGENERATE: &str =
    "regenerate with: cargo run -q -p sless-operator -- crds > deploy/crds.yaml";

fn committed() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds.yaml");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}; {REGENERATE}", path.display()))
}

#[test]
fn deploy_crds_yaml_matches_the_code() {
    let generated = sless_operator::kube::crd::all_crds_yaml().unwrap();
    assert!(
        committed() == generated,
        "deploy/crds.yaml differs from the CRDs in operator/src/kube/crd.rs; {REGENERATE}"
    );
}

#[test]
fn crds_subcommand_prints_every_crd() {
    let out = Command::new(env!("CARGO_BIN_EXE_sless-operator"))
        .arg("crds")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text, committed(), "{REGENERATE}");
    let docs: Vec<serde_json::Value> = text
        .split("\n---\n")
        .map(|d| d.trim_start_matches("---\n"))
        .filter(|d| d.contains("kind:"))
        .map(|d| serde_yaml::from_str(d).unwrap())
        .collect();
    let names: Vec<&str> = docs
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "functions.sless.kube5s.ru",
            "triggers.sless.kube5s.ru",
            "functionjobs.sless.kube5s.ru",
            "services.sless.kube5s.ru"
        ]
    );
    for d in &docs {
        assert_eq!(d["kind"], "CustomResourceDefinition");
        let v = &d["spec"]["versions"][0];
        assert_eq!(v["name"], "v1alpha1");
        assert!(v["subresources"]["status"].is_object());
        let cols: Vec<&str> = v["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert!(cols.contains(&"Phase") && cols.contains(&"Age"), "{cols:?}");
        assert!(
            !d["spec"]["names"]["shortNames"]
                .as_array()
                .unwrap()
                .is_empty()
        );
    }
}
