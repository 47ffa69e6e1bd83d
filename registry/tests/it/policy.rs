//! The signers policy: rules in one spelling cover every spelling, only at
//! `/` boundaries; the field's known bypasses stay closed; impossible rules
//! are refused when read, naming the rule; no-match is deny unless the
//! file says otherwise; a policy knows where it came from.

use crate::{read_policy, TempDir};
use tickbox_registry::policy::{
    Decision, NoMatch, Origin, Pattern, PatternError, Policy, PolicyError, Source,
};
use tickbox_registry::Reference;

/// A policy file with `body`, beside an allowed-signers file `allowed`,
/// read as `--signers` names it.
fn read(dir: &TempDir, body: &str) -> Result<Policy, PolicyError> {
    std::fs::write(dir.path("allowed"), "alice@example.com ssh-ed25519 AAAA\n").unwrap();
    let path = dir.path("signers.toml");
    std::fs::write(&path, body).unwrap();
    read_policy(Source {
        path,
        origin: Origin::Flag("--signers".into()),
    })
}

fn rules(patterns: &[&str]) -> String {
    patterns
        .iter()
        .map(|p| format!("[[require]]\nreferences = \"{p}\"\nallowed_signers = \"allowed\"\n\n"))
        .collect()
}

fn policy(patterns: &[&str]) -> (TempDir, Policy) {
    let dir = TempDir::new("policy");
    let p = read(&dir, &rules(patterns)).unwrap_or_else(|e| panic!("{patterns:?}: {e}"));
    (dir, p)
}

/// The index of the rule that applies to `reference`, or the no-match
/// setting.
fn decide(p: &Policy, reference: &str) -> Result<usize, NoMatch> {
    let r: Reference = reference.parse().unwrap_or_else(|e| panic!("{e}"));
    match p.decide(&r.name()) {
        Decision::Require(rule) => Ok(rule.index),
        Decision::NoMatch(m) => Err(m),
    }
}

#[test]
fn a_rule_in_one_spelling_covers_every_spelling_of_its_registry() {
    let rule_spellings = [
        "oci://localhost:5000/ticks/*",
        "oci://LOCALHOST:5000/ticks/*",
        "oci://127.0.0.1:05000/ticks/*",
        "oci://[::1]:5000/ticks/*",
    ];
    let reference_spellings = [
        "oci://localhost:5000/ticks/counter:v1",
        "oci://LOCALHOST:5000/ticks/counter:v1",
        "oci://LocalHost:005000/ticks/counter:v1",
        "oci://127.0.0.1:5000/ticks/counter:v1",
        "oci://[::1]:5000/ticks/counter:v1",
        "oci://[0:0::1]:5000/ticks/counter@sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    ];
    for rule in rule_spellings {
        let (_dir, p) = policy(&[rule]);
        for r in reference_spellings {
            assert_eq!(decide(&p, r), Ok(1), "{rule} should cover {r}");
        }
        // Controls: another port and the default port are other registries.
        assert_eq!(
            decide(&p, "oci://localhost:5001/ticks/counter:v1"),
            Err(NoMatch::Deny)
        );
        assert_eq!(
            decide(&p, "oci://localhost/ticks/counter:v1"),
            Err(NoMatch::Deny)
        );
    }
    // The default port: `:443`, `:0443`, uppercase and loopback addresses.
    let (_dir, p) = policy(&["oci://localhost/ticks/*"]);
    for r in [
        "oci://localhost/ticks/c:v1",
        "oci://localhost:443/ticks/c:v1",
        "oci://localhost:0443/ticks/c:v1",
        "oci://LOCALHOST:443/ticks/c:v1",
        "oci://127.0.0.1/ticks/c:v1",
        "oci://[::1]:443/ticks/c:v1",
    ] {
        assert_eq!(decide(&p, r), Ok(1), "{r}");
    }
    assert_eq!(
        decide(&p, "oci://localhost:8443/ticks/c:v1"),
        Err(NoMatch::Deny)
    );
}

#[test]
fn a_star_covers_whole_path_components_and_an_exact_rule_one_repository() {
    let (_dir, under) = policy(&["oci://r.example/org/app/*"]);
    for r in [
        "oci://r.example/org/app/x:v1",
        "oci://r.example/org/app/x/y:v1",
    ] {
        assert_eq!(decide(&under, r), Ok(1), "{r}");
    }
    for r in [
        "oci://r.example/org/app-evil:v1",
        "oci://r.example/org/app-evil/x:v1",
        "oci://r.example/org/application:v1",
        "oci://r.example/org/apps/x:v1",
        "oci://r.example/org/app:v1",
        "oci://r.example/other/org/app/x:v1",
    ] {
        assert_eq!(decide(&under, r), Err(NoMatch::Deny), "{r}");
    }
    let (_dir, exact) = policy(&["oci://r.example/org/app"]);
    assert_eq!(decide(&exact, "oci://r.example/org/app:v1"), Ok(1));
    for r in [
        "oci://r.example/org/app/x:v1",
        "oci://r.example/org/app-evil:v1",
        "oci://r.example/org/ap:v1",
    ] {
        assert_eq!(decide(&exact, r), Err(NoMatch::Deny), "{r}");
    }
    let (_dir, whole) = policy(&["oci://r.example/*"]);
    assert_eq!(decide(&whole, "oci://r.example/a:v1"), Ok(1));
    assert_eq!(decide(&whole, "oci://r.example/a/b/c:v1"), Ok(1));
    assert_eq!(
        decide(&whole, "oci://r.example.net/a:v1"),
        Err(NoMatch::Deny)
    );
}

#[test]
fn the_most_specific_rule_applies_whatever_the_order() {
    let (_dir, p) = policy(&[
        "oci://h.example/org/*",
        "oci://h.example/org/app",
        "oci://h.example/*",
        "oci://h.example/org/app/*",
    ]);
    assert_eq!(decide(&p, "oci://h.example/org/app:v1"), Ok(2));
    assert_eq!(decide(&p, "oci://h.example/org/app/x:v1"), Ok(4));
    assert_eq!(decide(&p, "oci://h.example/org/other:v1"), Ok(1));
    assert_eq!(decide(&p, "oci://h.example/top:v1"), Ok(3));
}

/// oras-go #1388: an uppercase host missed its scope and fell through to
/// the default. Here the rule covers the uppercase spelling; with
/// `no_match = "allow"`, falling through would have let it run.
#[test]
fn field_precedent_oras_go_1388_an_uppercase_host_does_not_fall_through() {
    let dir = TempDir::new("oras");
    let p = read(
        &dir,
        &format!(
            "no_match = \"allow\"\n{}",
            rules(&["oci://registry.example.com/*"])
        ),
    )
    .unwrap();
    assert_eq!(
        decide(&p, "oci://registry.example.com/app:v1"),
        Ok(1),
        "control"
    );
    assert_eq!(decide(&p, "oci://REGISTRY.EXAMPLE.COM/app:v1"), Ok(1));
    assert_eq!(decide(&p, "oci://Registry.Example.Com:443/app:v1"), Ok(1));
    assert_eq!(
        decide(&p, "oci://other.example.com/app:v1"),
        Err(NoMatch::Allow)
    );
}

/// Portieris v0.14.2: `*.trusted.example.com/myorg/*` was satisfied by
/// `attacker.com/x.trusted.example.com/…`. A host wildcard is refused; a
/// host is matched whole, never inside a path.
#[test]
fn field_precedent_portieris_a_host_glob_is_refused_and_a_host_never_matches_in_a_path() {
    let dir = TempDir::new("portieris");
    let e = read(&dir, &rules(&["oci://*.trusted.example.com/myorg/*"]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("rule 1") && e.contains("no wildcard"), "{e}");
    let (_dir, p) = policy(&["oci://trusted.example.com/myorg/*"]);
    assert_eq!(
        decide(&p, "oci://trusted.example.com/myorg/app:v1"),
        Ok(1),
        "control"
    );
    assert_eq!(
        decide(&p, "oci://attacker.com/x.trusted.example.com/myorg/app:v1"),
        Err(NoMatch::Deny)
    );
}

/// gatekeeper-library #538: the prefix `ubuntu` admitted
/// `ubuntumyusername/…`.
#[test]
fn field_precedent_gatekeeper_538_a_prefix_stops_at_a_component() {
    let dir = TempDir::new("gatekeeper");
    let e = read(&dir, &rules(&["oci://docker.io/ubuntu*"]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("rule 1") && e.contains("whole path components"),
        "{e}"
    );
    let (_dir, p) = policy(&["oci://docker.io/ubuntu/*", "oci://docker.io/library/ubuntu"]);
    assert_eq!(
        decide(&p, "oci://docker.io/ubuntu/base:v1"),
        Ok(1),
        "control"
    );
    assert_eq!(
        decide(&p, "oci://docker.io/library/ubuntu:v1"),
        Ok(2),
        "control"
    );
    assert_eq!(
        decide(&p, "oci://docker.io/ubuntumyusername/x:v1"),
        Err(NoMatch::Deny)
    );
    assert_eq!(
        decide(&p, "oci://docker.io/library/ubuntumyusername:v1"),
        Err(NoMatch::Deny)
    );
}

/// kubescape #90: `docker.io` matched `docker.io.evil.com`.
#[test]
fn field_precedent_kubescape_90_a_registry_is_matched_whole() {
    let dir = TempDir::new("kubescape");
    let e = read(&dir, &rules(&["oci://docker.io*"]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("rule 1"), "{e}");
    let (_dir, p) = policy(&["oci://docker.io/*"]);
    assert_eq!(
        decide(&p, "oci://docker.io/library/app:v1"),
        Ok(1),
        "control"
    );
    assert_eq!(
        decide(&p, "oci://docker.io.evil.com/library/app:v1"),
        Err(NoMatch::Deny)
    );
    assert_eq!(
        decide(&p, "oci://docker.io:5000/library/app:v1"),
        Err(NoMatch::Deny)
    );
}

#[test]
fn each_impossible_rule_is_refused_when_read_naming_it() {
    let good = "oci://r.example/ok/*";
    for (bad, why) in [
        ("oci://r.example/org/app:v1", PatternError::Tag),
        (
            "oci://r.example/org/app@sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            PatternError::Digest,
        ),
        ("oci://r.example/org/app/", PatternError::TrailingSlash),
        ("OCI://r.example/org/app", PatternError::Scheme),
        ("oci://r.example/Org/App", PatternError::Uppercase),
        ("", PatternError::Empty),
        ("oci://r.example/org/*/app", PatternError::Star),
        ("oci://r.example/org/app*", PatternError::Star),
        ("oci://r.example", PatternError::NoRepository),
        ("oci://r.example/", PatternError::NoRepository),
        ("oci://r.example/a//b", PatternError::Repository),
        ("oci://r.example//*", PatternError::Repository),
        ("oci://*.example/a/*", PatternError::HostWildcard),
        (
            "oci://127.000.000.001/a/*",
            PatternError::Registry(tickbox_registry::reference::Rule::Ipv4),
        ),
    ] {
        assert_eq!(bad.parse::<Pattern>(), Err(why.clone()), "{bad:?}");
        // In a file, as its second rule: the error names that rule.
        let dir = TempDir::new("impossible");
        let e = read(&dir, &rules(&[good, bad])).unwrap_err();
        assert!(matches!(e, PolicyError::Rule { .. }), "{bad:?}: {e:?}");
        let e = e.to_string();
        assert!(
            e.contains(&format!("rule 2 (references = \"{bad}\")")) && e.contains(&why.to_string()),
            "{bad:?}: {e}"
        );
        assert!(!e.contains('\n'), "one line: {e}");
        // Positive control: the file without it reads.
        assert!(read(&dir, &rules(&[good])).is_ok());
    }
    // A missing allowed-signers file, and one pattern twice in two spellings.
    let dir = TempDir::new("impossible");
    let e = read(
        &dir,
        "[[require]]\nreferences = \"oci://r.example/a/*\"\nallowed_signers = \"nowhere\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("rule 1") && e.contains("nowhere") && e.contains("not a readable file"),
        "{e}"
    );
    let e = read(
        &dir,
        &rules(&["oci://localhost/a/*", "oci://127.0.0.1:443/a/*"]),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("rule 2") && e.contains("repeats rule 1") && e.contains("oci://localhost/a/*"),
        "{e}"
    );
    // Not the policy's TOML: an unknown setting or key.
    let e = read(&dir, "no_match = \"maybe\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("maybe") || e.contains("variant"), "{e}");
    let e = read(
        &dir,
        "[[require]]\nreference = \"oci://r.example/a/*\"\nallowed_signers = \"allowed\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("reference"), "{e}");
    // A hostile pattern is named escaped.
    let e = read(&dir, &rules(&["oci://r.example/\\u001b]2;x\\u0007"]))
        .unwrap_err()
        .to_string();
    assert!(!e.contains('\u{1b}') && e.contains("rule 1"), "{e:?}");
}

#[test]
fn no_match_is_deny_by_default_and_what_the_file_says_otherwise() {
    let covered = "oci://r.example/ok/x:v1";
    let outside = "oci://other.example/x:v1";
    for (setting, expected) in [
        ("", NoMatch::Deny),
        ("no_match = \"deny\"\n", NoMatch::Deny),
        ("no_match = \"warn\"\n", NoMatch::Warn),
        ("no_match = \"allow\"\n", NoMatch::Allow),
    ] {
        let dir = TempDir::new("nomatch");
        let p = read(
            &dir,
            &format!("{setting}{}", rules(&["oci://r.example/ok/*"])),
        )
        .unwrap();
        assert_eq!(p.no_match(), expected);
        assert_eq!(decide(&p, outside), Err(expected), "{setting:?}");
        // Control: a covered Tick needs its signers whatever the setting.
        assert_eq!(decide(&p, covered), Ok(1), "{setting:?}");
    }
    // A policy without rules denies everything.
    let dir = TempDir::new("nomatch");
    let empty = read(&dir, "").unwrap();
    assert_eq!(decide(&empty, covered), Err(NoMatch::Deny));
}

#[test]
fn a_policy_knows_where_it_came_from_and_resolves_signers_beside_itself() {
    let dir = TempDir::new("origin");
    std::fs::create_dir_all(dir.path("keys")).unwrap();
    std::fs::write(dir.path("keys/team"), "a@b ssh-ed25519 AAAA\n").unwrap();
    let path = dir.path("signers.toml");
    std::fs::write(
        &path,
        "[[require]]\nreferences = \"oci://r.example/*\"\nallowed_signers = \"keys/team\"\n",
    )
    .unwrap();
    for origin in [
        Origin::Flag("--signers".into()),
        Origin::Environment("TICKBOX_SIGNERS".into()),
        Origin::DefaultPath,
    ] {
        let p = read_policy(Source {
            path: path.clone(),
            origin: origin.clone(),
        })
        .unwrap();
        assert_eq!(p.source().origin, origin);
        assert_eq!(p.source().path, path);
        let shown = p.source().to_string();
        assert!(shown.contains(&path.display().to_string()), "{shown}");
        let said = match &origin {
            Origin::Flag(_) => "the flag --signers",
            Origin::Environment(_) => "the environment variable TICKBOX_SIGNERS",
            Origin::DefaultPath => "the default path",
        };
        assert!(shown.contains(said), "{shown}");
        assert_eq!(p.rules()[0].allowed_signers, dir.path("keys/team"));
    }
    // A file that is not there is an error naming it.
    let e = read_policy(Source {
        path: dir.path("none.toml"),
        origin: Origin::Environment("TICKBOX_SIGNERS".into()),
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("none.toml"), "{e}");
}
