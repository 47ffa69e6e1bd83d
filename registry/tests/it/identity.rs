//! Every spelling of one registry is one identity; odd spellings are
//! refused, never compared as typed; what is dialed stays right.

use tickbox_registry::reference::{Authority, Host};
use tickbox_registry::{Reference, RegistryId};

fn reference(s: &str) -> Reference {
    s.parse()
        .unwrap_or_else(|e| panic!("{s} should parse: {e}"))
}

fn id(s: &str) -> RegistryId {
    reference(s).registry()
}

#[test]
fn every_spelling_of_a_loopback_registry_is_one_identity_and_other_ports_are_others() {
    let spellings = [
        "oci://localhost:5000/t/c:v1",
        "oci://LOCALHOST:5000/t/c:v1",
        "oci://LocalHost:05000/t/c:v1",
        "oci://127.0.0.1:5000/t/c:v1",
        "oci://127.0.0.2:5000/t/c:v1",
        "oci://[::1]:5000/t/c:v1",
        "oci://[0:0:0:0:0:0:0:1]:5000/t/c:v1",
    ];
    let one = id(spellings[0]);
    assert_eq!(one.as_str(), "localhost:5000");
    for s in spellings {
        assert_eq!(id(s), one, "{s}");
        // The same repository and tag: equal references, whatever the spelling.
        assert_eq!(reference(s), reference(spellings[0]), "{s}");
        assert_eq!(reference(s).name().to_string(), "oci://localhost:5000/t/c");
    }
    // Controls: another port, or the default port, is another registry; a
    // name under .localhost is a name (a resolver may send it elsewhere).
    assert_ne!(id("oci://localhost:5001/t/c:v1"), one);
    assert_ne!(id("oci://registry.localhost:5000/t/c:v1"), one);
    assert!(!reference("oci://registry.localhost:5000/t/c:v1").is_loopback());
    assert_ne!(id("oci://127.0.0.1/t/c:v1"), one);
    assert_ne!(
        reference("oci://localhost:5000/t/c:v2"),
        reference(spellings[0])
    );
}

#[test]
fn the_default_port_in_any_spelling_is_no_port_and_names_are_lowercased() {
    for s in [
        "oci://registry.example.com/org/app:v1",
        "oci://Registry.Example.COM/org/app:v1",
        "oci://registry.example.com:443/org/app:v1",
        "oci://registry.example.com:0443/org/app:v1",
        "oci://REGISTRY.EXAMPLE.COM:00443/org/app:v1",
    ] {
        let r = reference(s);
        assert_eq!(r.registry().as_str(), "registry.example.com", "{s}");
        // What a person reads is the canonical spelling, and it dials 443.
        assert_eq!(r.to_string(), "oci://registry.example.com/org/app:v1");
        assert_eq!(r.authority().port(), 443);
        assert_eq!(r.authority().written_port(), None);
    }
    // Control: another port is kept, and another host is another registry.
    let other = reference("oci://registry.example.com:8443/org/app:v1");
    assert_eq!(other.registry().as_str(), "registry.example.com:8443");
    assert_eq!(
        other.to_string(),
        "oci://registry.example.com:8443/org/app:v1"
    );
    assert_ne!(
        id("oci://registry.example.com.evil.com/org/app:v1"),
        id("oci://registry.example.com/org/app:v1")
    );
}

#[test]
fn a_loopback_reference_prints_and_dials_the_address_it_was_given() {
    // The identity is `localhost`; the address dialed is the one written
    // (a registry listening on 127.0.0.1 only is reached), canonically.
    let r = reference("oci://127.0.0.1:05000/t/c:v1");
    assert_eq!(r.to_string(), "oci://127.0.0.1:5000/t/c:v1");
    assert_eq!(r.authority().host().dial(), "127.0.0.1");
    assert_eq!(r.authority().port(), 5000);
    assert!(r.is_loopback());
    let v6 = reference("oci://[0::1]:5000/t/c:v1");
    assert_eq!(v6.to_string(), "oci://[::1]:5000/t/c:v1");
    assert_eq!(v6.authority().host().dial(), "::1");
    let name = reference("oci://LOCALHOST:5000/t/c:v1");
    assert_eq!(name.authority().host(), &Host::Name("localhost".into()));
    // Control: a name that is not loopback is not.
    assert!(!reference("oci://localhost.example.com/t/c:v1").is_loopback());
}

#[test]
fn odd_spellings_are_refused_naming_the_rule_and_the_plain_forms_parse() {
    for (bad, rule) in [
        ("oci://127.000.000.001:5000/t/c:v1", "without leading zeros"),
        ("oci://0177.0.0.1:5000/t/c:v1", "without leading zeros"),
        ("oci://127.1:5000/t/c:v1", "four decimal numbers"),
        ("oci://2130706433:5000/t/c:v1", "four decimal numbers"),
        ("oci://0x7f.0.0.1:5000/t/c:v1", "four decimal numbers"),
        ("oci://0x7f000001/t/c:v1", "four decimal numbers"),
        ("oci://256.0.0.1/t/c:v1", "four decimal numbers"),
        ("oci://localhost./t/c:v1", "host"),
        ("oci://local_host/t/c:v1", "host"),
        ("oci://[::ffff:127.0.0.1]/t/c:v1", "IPv6"),
        ("oci://[::1%25lo]/t/c:v1", "IPv6"),
        ("oci://::1/t/c:v1", "host"),
        ("oci://0.0.0.0:5000/t/c:v1", "0.0.0.0"),
        ("oci://[::]:5000/t/c:v1", "0.0.0.0"),
        ("oci://localhost:+5000/t/c:v1", "port"),
        ("oci://localhost:0/t/c:v1", "port"),
        ("oci://localhost:65536/t/c:v1", "port"),
        ("oci://localhost:/t/c:v1", "port"),
        ("oci://rêgistry.example/t/c:v1", "host"),
    ] {
        let e = bad.parse::<Reference>().unwrap_err().to_string();
        assert!(e.contains(rule), "{bad}: {e}");
        assert!(e.contains("is not a Tick reference"), "{bad}: {e}");
    }
    // Positive controls: the one spelling of each parses.
    for good in [
        "oci://127.0.0.1:5000/t/c:v1",
        "oci://10.0.0.1/t/c:v1",
        "oci://[::1]:5000/t/c:v1",
        "oci://[2001:db8::1]/t/c:v1",
        "oci://xn--rgistry-bva.example/t/c:v1",
    ] {
        reference(good);
    }
    assert_eq!(
        Authority::parse("[2001:DB8:0:0::1]:443")
            .unwrap()
            .to_string(),
        "[2001:db8::1]"
    );
}
