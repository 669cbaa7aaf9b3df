//! Feeds TOML to the service configuration loader and its validation
//! (`ServiceConfig::from_toml`, what `--config FILE` runs): arbitrary text,
//! and documents built from the real field names with arbitrary values, so
//! the fuzzer reaches validation and not only the TOML parser.
//!
//! Properties: loading never panics and refuses with a typed
//! `ConfigError`; and a configuration it accepts is one every part of the
//! service can honour: every duration is finite and positive, the poll
//! interval at least `MIN_POLL_INTERVAL`, every duration can be added to a
//! clock reading (the service sets deadlines with `Instant + duration`),
//! the sink's `PackLimits::new(max_pack_records, max_pack_payload_bytes)`
//! (built on every append) succeeds, and validating the accepted raw
//! configuration again accepts it.

#![no_main]

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use arbitrary::{Arbitrary, Unstructured};
use capcat_pack::PackLimits;
use capcat_service::config::MIN_POLL_INTERVAL;
use capcat_service::{ConfigError, ServiceConfig, ValidConfig};
use libfuzzer_sys::fuzz_target;

const FIELDS: [&str; 28] = [
    "spool_dir",
    "catalog_prefix",
    "store_id",
    "holder",
    "owns_spool",
    "poll_interval_s",
    "max_backoff_s",
    "lease_ttl_s",
    "publish_timeout_s",
    "close_flush_timeout_s",
    "catalog_connect_timeout_s",
    "catalog_request_timeout_s",
    "demand_publish_timeout_s",
    "demand_max_in_flight",
    "reconcile_on_start",
    "reconcile_interval_s",
    "status_interval_s",
    "max_index_attempts",
    "index_batch_budget_bytes",
    "max_packs_per_cycle",
    "max_pack_records",
    "max_pack_payload_bytes",
    "catalog_url",
    "s3_endpoint",
    "allow_insecure_http",
    "read_byte_limit",
    "read_request_limit",
    "unknown_field",
];

#[derive(Arbitrary, Debug)]
enum TomlValue {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    Scheme(bool, String),
}

fn document(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    let mut text = String::new();
    for _ in 0..u.int_in_range(0..=12)? {
        let field = FIELDS[u.choose_index(FIELDS.len())?];
        let value = match TomlValue::arbitrary(u)? {
            TomlValue::Int(v) => v.to_string(),
            // TOML spells the special floats nan, inf, -inf.
            TomlValue::Float(v) if v.is_nan() => "nan".to_owned(),
            TomlValue::Float(v) if v.is_infinite() => {
                if v > 0.0 { "inf" } else { "-inf" }.to_owned()
            }
            TomlValue::Float(v) => format!("{v:?}"),
            TomlValue::Bool(b) => b.to_string(),
            TomlValue::Str(s) => format!("{s:?}"),
            TomlValue::Scheme(https, rest) => {
                format!(
                    "{:?}",
                    format!("{}://{rest}", if https { "https" } else { "http" })
                )
            }
        };
        let _ = writeln!(text, "{field} = {value}");
    }
    Ok(text)
}

fn check(text: &str) {
    match ServiceConfig::from_toml(text) {
        Ok(valid) => check_valid(&valid),
        Err(ConfigError::Parse { .. }) => {}
        Err(refused) => {
            // Refused by validation: it parsed, and validating again refuses
            // the same way.
            let raw = ServiceConfig::parse_toml(text).expect("a refusal after parsing");
            // Compared as text: a refused NaN is not equal to itself.
            let again = raw.validate().err().map(|e| format!("{e:?}"));
            assert_eq!(again, Some(format!("{refused:?}")));
        }
    }
}

fn check_valid(cfg: &ValidConfig) {
    let now = Instant::now();
    let durations: [(&str, Duration); 8] = [
        ("poll_interval", cfg.poll_interval),
        ("max_backoff", cfg.max_backoff),
        ("lease_ttl", cfg.lease_ttl),
        ("close_flush_timeout", cfg.close_flush_timeout),
        ("catalog_connect_timeout", cfg.catalog_connect_timeout),
        ("catalog_request_timeout", cfg.catalog_request_timeout),
        ("demand_publish_timeout", cfg.demand_publish_timeout),
        ("status_interval", cfg.status_interval),
    ];
    let reconcile = cfg.reconcile_interval.map(|d| ("reconcile_interval", d));
    for (name, d) in durations.into_iter().chain(reconcile) {
        assert!(!d.is_zero(), "{name} is zero");
        assert!(
            now.checked_add(d).is_some(),
            "{name} = {d:?} cannot be added to a clock reading: a deadline of it panics"
        );
    }
    assert!(cfg.poll_interval >= MIN_POLL_INTERVAL);
    if let Err(e) = PackLimits::new(cfg.raw.max_pack_records, cfg.raw.max_pack_payload_bytes) {
        panic!("a valid configuration's pack limits are refused by the sink: {e}");
    }
    let again = cfg
        .raw
        .clone()
        .validate()
        .expect("a valid configuration stays valid");
    assert_eq!(again.raw, cfg.raw);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        if let Ok(text) = std::str::from_utf8(rest) {
            check(text);
        }
    } else if let Ok(text) = document(&mut Unstructured::new(rest)) {
        check(&text);
    }
});
