//! `capcat sql`: every statement each protocol machine runs, in order.
//!
//! The machines are the real capcat-proto machines, driven here over a
//! canned catalog instead of a server: an empty catalog and one
//! uncontested publisher, the path a healthy service takes. A read is
//! answered with plausible rows built from the statement's own expected
//! columns and from what the machine wrote before it (the lease id it
//! inserted, the claim id, the publish id), and the answer is printed beside
//! the read, because what follows a read depends on it: other answers (a
//! held lease, a contested claim, a lost race) take other paths, described
//! in docs/protocol.md.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use capcat_proto::demand::{DemandEvent, ReadDemand, storage};
use capcat_proto::reader::{
    AdmittedPacks, GetByIds, PageSize, SearchFilter, SearchPage, SearchQuery,
};
use capcat_proto::schema::{EnsureSchema, drop_schema};
use capcat_proto::{
    ColumnType, Config, Expect, IndexPass, Input, Lease, LeaseClaim, Machine, Param, Release, Rows,
    Statement, Step, Tables, Value,
};
use uuid::Uuid;

/// An expiry far in the future (server nanoseconds), for canned leases.
const FAR_NS: u64 = 4_000_000_000_000_000_000;

/// The catalog the machines are walked over: it remembers what they wrote,
/// so the read that checks a write finds it.
#[derive(Debug, Default)]
struct CannedCatalog {
    /// The lease rows `lease.insert_claim` wrote: (term, lease_id, holder).
    lease: Option<(u64, Uuid, String)>,
    /// The claim id `allocate.insert_claim` wrote.
    claim_id: Option<Uuid>,
    /// The publish id the publish inserts carried.
    publish_id: Option<Uuid>,
}

fn param_uuid(stmt: &Statement, name: &str) -> Option<Uuid> {
    match stmt.params.get(name) {
        Some(Param::Uuid(id)) => Some(*id),
        _ => None,
    }
}

fn param_u64(stmt: &Statement, name: &str) -> Option<u64> {
    match stmt.params.get(name) {
        Some(Param::UInt64(v)) => Some(*v),
        _ => None,
    }
}

fn param_string(stmt: &Statement, name: &str) -> Option<String> {
    match stmt.params.get(name) {
        Some(Param::String(v)) => Some(v.clone()),
        _ => None,
    }
}

impl CannedCatalog {
    /// A catalog whose lease head is `lease` (for a renew or a release).
    fn holding(lease: &Lease) -> Self {
        Self {
            lease: Some((lease.term, lease.lease_id, lease.holder.clone())),
            ..Self::default()
        }
    }

    /// One row of `stmt`'s expected columns, each filled by name from what
    /// was written, or with a neutral value of its type.
    fn row(&self, stmt: &Statement) -> Vec<Value> {
        let Expect::Rows(columns) = &stmt.expect else {
            return Vec::new();
        };
        columns
            .iter()
            .map(|c| match (c.name, c.ty) {
                ("term", _) => Value::UInt64(self.lease.as_ref().map_or(1, |l| l.0)),
                ("lease_id", _) => Value::Uuid(self.lease.as_ref().map_or(Uuid::nil(), |l| l.1)),
                ("holder", _) => {
                    Value::String(self.lease.as_ref().map_or(String::new(), |l| l.2.clone()))
                }
                ("claim_id", _) => Value::Uuid(self.claim_id.unwrap_or_default()),
                ("publish_id", _) => Value::Uuid(self.publish_id.unwrap_or_default()),
                (name, ColumnType::UInt64) if name.ends_with("expires_at_ns") => {
                    Value::UInt64(FAR_NS)
                }
                ("head", _) => Value::UInt64(0),
                (_, ColumnType::UInt64) => Value::UInt64(1),
                (_, ColumnType::Int64) => Value::Int64(0),
                (_, ColumnType::String) => Value::String(String::new()),
                (_, ColumnType::Uuid) => Value::Uuid(Uuid::nil()),
                _ => Value::Null,
            })
            .collect()
    }

    /// The answer to `stmt` and how to describe it (`None` for statements
    /// that return nothing).
    fn answer(&mut self, stmt: &Statement) -> (Rows, Option<String>) {
        match stmt.name {
            "lease.insert_claim" => {
                if let (Some(term), Some(id)) =
                    (param_u64(stmt, "term"), param_uuid(stmt, "lease_id"))
                {
                    let holder = param_string(stmt, "holder").unwrap_or_default();
                    self.lease = Some((term, id, holder));
                }
            }
            "allocate.insert_claim" => self.claim_id = param_uuid(stmt, "claim_id"),
            "publish.insert_manifest" | "publish.insert_commit_row" => {
                self.publish_id = param_uuid(stmt, "publish_id");
            }
            _ => {}
        }
        if matches!(stmt.expect, Expect::Nothing) {
            return (Rows::empty(), None);
        }
        let one = |this: &Self, why: &str| {
            let row = this.row(stmt);
            let text = describe_row(stmt, &row);
            (Rows(vec![row]), Some(format!("{text} ({why})")))
        };
        match stmt.name {
            "lease.read_head" if self.lease.is_none() => (
                Rows::empty(),
                Some("no rows (nobody holds the lease)".to_owned()),
            ),
            "lease.read_head" => one(self, "our own lease is the live head"),
            "lease.read_claims" => one(self, "our claim is the only one at its term"),
            "allocate.read_head" => one(self, "no version allocated yet"),
            "allocate.read_claims" => one(self, "our claim is the only one for the version"),
            "publish.read_publish_ids" | "publish.read_highest_publish_ids" => {
                one(self, "our publish id stands: won")
            }
            "reader.pin_snapshot" => one(self, "the published head"),
            _ => (Rows::empty(), Some("no rows (an empty catalog)".to_owned())),
        }
    }
}

fn describe_row(stmt: &Statement, row: &[Value]) -> String {
    let Expect::Rows(columns) = &stmt.expect else {
        return String::new();
    };
    let cells: Vec<String> = columns
        .iter()
        .zip(row)
        .map(|(c, v)| match v {
            Value::UInt64(n) => format!("{} = {n}", c.name),
            Value::Int64(n) => format!("{} = {n}", c.name),
            Value::String(s) => format!("{} = {s:?}", c.name),
            Value::Uuid(u) => format!("{} = {u}", c.name),
            _ => format!("{} = NULL", c.name),
        })
        .collect();
    format!("one row: {}", cells.join(", "))
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push_str("...");
    out
}

/// Prints one statement: a comment naming it and its step, the bound values
/// and settings, the SQL, and the canned answer of a read.
fn print_statement(out: &mut String, n: usize, stmt: &Statement, answer: Option<&str>) {
    let _ = writeln!(out, "-- {n}. {}", stmt.name);
    for (name, value) in &stmt.params {
        let _ = writeln!(
            out,
            "--    {{{name}:{}}} = {}",
            value.clickhouse_type(),
            clip(&value.to_text(), 100)
        );
    }
    let mut settings = Vec::new();
    if stmt.settings.select_sequential_consistency {
        settings.push("select_sequential_consistency = 1".to_owned());
    }
    if let Some(s) = stmt.settings.max_execution_time_s {
        settings.push(format!("max_execution_time = {s}"));
    }
    if !settings.is_empty() {
        let _ = writeln!(out, "--    SETTINGS {}", settings.join(", "));
    }
    let _ = writeln!(out, "{};", stmt.sql);
    if let Some(answer) = answer {
        let _ = writeln!(
            out,
            "--    read; answered with {answer}: what follows depends on it"
        );
    }
    out.push('\n');
}

/// Drives `machine` over `catalog`, printing every statement it emits;
/// returns how many it emitted. Bounded: the machines terminate within
/// their attempt bounds whatever they are handed, and the walk stops at
/// 1,000 steps whatever happens.
fn walk<M>(out: &mut String, title: &str, mut machine: M, catalog: &mut CannedCatalog) -> usize
where
    M: Machine,
    M::Outcome: std::fmt::Debug,
{
    let _ = writeln!(out, "-- ==== {title} ====\n");
    let mut n = 0;
    for _ in 0..1000 {
        match machine.poll() {
            Step::Execute(stmt) => {
                n += 1;
                let (rows, answer) = catalog.answer(&stmt);
                print_statement(out, n, &stmt, answer.as_deref());
                machine.handle(Input::Rows(rows));
            }
            Step::Draw { below } => {
                let _ = writeln!(
                    out,
                    "--    (the driver draws a jitter in 0..{below}; drawn: 0)\n"
                );
                machine.handle(Input::Drawn(0));
            }
            Step::Done(outcome) => {
                let _ = writeln!(out, "-- outcome: {}\n", clip(&format!("{outcome:?}"), 200));
                return n;
            }
        }
    }
    let _ = writeln!(out, "-- (stopped after 1000 steps)\n");
    n
}

/// Every statement of every machine, as `capcat sql` prints it, and the
/// number of statements per machine.
pub(crate) fn render(tables: &Tables, protocol: &Config) -> (String, BTreeMap<String, usize>) {
    let mut out = String::new();
    let mut counts = BTreeMap::new();
    let _ = writeln!(
        out,
        "-- Every statement the Capcat protocol machines run for prefix {:?}, in order,\n\
         -- on the path a healthy service takes: an empty catalog, one uncontested\n\
         -- publisher. Values travel as ClickHouse query parameters ({{name:Type}}),\n\
         -- shown above each statement with the example values used here. Reads are\n\
         -- answered with the canned rows shown; other answers (a held lease, a\n\
         -- contested claim, a lost race) take other paths: see docs/protocol.md.\n",
        tables.prefix()
    );
    let holder = "capcat-service".to_owned();
    let lease_id = Uuid::from_u128(0x1111_1111_1111_4111_8111_1111_1111_1111);
    let lease = Lease {
        lease_id,
        holder: holder.clone(),
        term: 1,
        expires_at_ns: FAR_NS,
        unsettled_until_ns: 0,
    };
    let mut count = |title: &str, n: usize| {
        counts.insert(title.to_owned(), n);
    };

    let title = "schema.ensure: create the catalog (at service start)";
    let n = walk(
        &mut out,
        title,
        EnsureSchema::new(tables.clone()),
        &mut CannedCatalog::default(),
    );
    count(title, n);

    let title = "lease.acquire: take the publisher lease (at service start)";
    let acquire = LeaseClaim::acquire(
        tables.clone(),
        protocol.clone(),
        holder.clone(),
        None,
        lease_id,
    );
    let n = walk(&mut out, title, acquire, &mut CannedCatalog::default());
    count(title, n);

    let title = "lease.renew: keep the lease (every TTL/3)";
    let renew = LeaseClaim::renew(tables.clone(), protocol.clone(), lease.clone());
    let n = walk(&mut out, title, renew, &mut CannedCatalog::holding(&lease));
    count(title, n);

    let title = "index pass: descriptors, allocate, publish, inventory (per batch of packs)";
    let descriptor = capcat_proto::CaptureDescriptor {
        tenant_id: "demo".into(),
        experiment_id: "qwen2.5-0.5b".into(),
        run_id: "run-0001".into(),
        capture_id: Uuid::from_u128(0x2222_2222_2222_4222_8222_2222_2222_2222),
        tensor_name: "model.layers.0.mlp.down_proj".into(),
        dtype: "BF16".into(),
        shape: vec![2, 896],
        locator: capcat_proto::descriptor::Locator {
            store_id: "local".into(),
            pack_id: Uuid::from_u128(0x5555_5555_5555_4555_8555_5555_5555_5555),
            payload_offset: 4096,
            payload_length: 3584,
            payload_sha256: "0".repeat(64),
        },
        ..Default::default()
    };
    let pass = IndexPass::new(
        tables.clone(),
        protocol.clone(),
        lease.clone(),
        vec![descriptor],
        Uuid::from_u128(0x3333_3333_3333_4333_8333_3333_3333_3333),
    );
    let n = walk(&mut out, title, pass, &mut CannedCatalog::holding(&lease));
    count(title, n);

    let title = "reader.search: one page of a search";
    let page = PageSize::new(100).map_err(|e| e.to_string());
    match page.and_then(|page_size| {
        SearchPage::new(
            tables.clone(),
            SearchQuery {
                filter: SearchFilter {
                    tenant_id: "demo".into(),
                    run_id: Some("run-0001".into()),
                    tensor_name_prefix: Some("model.layers.3.".into()),
                    ..SearchFilter::default()
                },
                cursor: None,
                page_size,
            },
        )
        .map_err(|e| e.to_string())
    }) {
        Ok(search) => {
            let n = walk(&mut out, title, search, &mut CannedCatalog::default());
            count(title, n);
        }
        Err(e) => {
            let _ = writeln!(out, "-- {title}: {e}\n");
        }
    }

    let title = "reader.get_by_ids: look captures up at a pinned version";
    let ids = BTreeSet::from([Uuid::from_u128(0x2222_2222_2222_4222_8222_2222_2222_2222)]);
    match GetByIds::new(tables.clone(), "demo", ids, 1) {
        Ok(get) => {
            let n = walk(&mut out, title, get, &mut CannedCatalog::default());
            count(title, n);
        }
        Err(e) => {
            let _ = writeln!(out, "-- {title}: {e}\n");
        }
    }

    let title = "reader.admitted_packs: every pack the published head admits (capcat verify)";
    let admitted = AdmittedPacks::new(tables.clone(), capcat_proto::reader::ADMITTED_PAGE);
    let n = walk(&mut out, title, admitted, &mut CannedCatalog::default());
    count(title, n);

    let title = "demand.append: one demand event (on seal, publish, scan)";
    let _ = writeln!(out, "-- ==== {title} ====\n");
    let append = storage::append(
        tables,
        &DemandEvent::scan("shard", 0, 0, None),
        Uuid::from_u128(0x4444_4444_4444_4444_8444_4444_4444_4444),
    );
    print_statement(&mut out, 1, &append, None);
    count(title, 1);

    let title = "demand.read: read and fold the demand events (capcat status)";
    let read = ReadDemand::new(
        tables.clone(),
        None,
        capcat_proto::demand::DEFAULT_READ_LIMIT,
    );
    let n = walk(&mut out, title, read, &mut CannedCatalog::default());
    count(title, n);

    let title = "lease.release: give the lease up (at close)";
    let release = Release::new(tables.clone(), protocol.clone(), lease.clone());
    let n = walk(
        &mut out,
        title,
        release,
        &mut CannedCatalog::holding(&lease),
    );
    count(title, n);

    let title = "schema.drop: capcat schema drop";
    let _ = writeln!(out, "-- ==== {title} ====\n");
    let drops = drop_schema(tables);
    for (i, stmt) in drops.iter().enumerate() {
        print_statement(&mut out, i + 1, stmt, None);
    }
    count(title, drops.len());
    (out, counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered() -> (String, BTreeMap<String, usize>) {
        let tables = Tables::new("cc").expect("valid prefix");
        render(&tables, &Config::default())
    }

    /// The statement names in the order the output shows them, per machine.
    fn names(text: &str) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut machine = String::new();
        for line in text.lines() {
            if let Some(title) = line.strip_prefix("-- ==== ") {
                machine = title.split(':').next().unwrap_or_default().to_owned();
            } else if let Some(rest) = line.strip_prefix("-- ")
                && let Some((n, name)) = rest.split_once(". ")
                && n.parse::<usize>().is_ok()
            {
                out.entry(machine.clone())
                    .or_default()
                    .push(name.to_owned());
            }
        }
        out
    }

    #[test]
    fn every_machine_prints_every_statement_of_its_healthy_path() {
        let (text, _) = rendered();
        let names = names(&text);
        let expect = |machine: &str, statements: &[&str]| {
            assert_eq!(
                names.get(machine).map(Vec::as_slice).unwrap_or_default(),
                statements,
                "{machine}\n{text}"
            );
        };
        expect(
            "lease.acquire",
            &["lease.read_head", "lease.insert_claim", "lease.read_claims"],
        );
        expect(
            "lease.renew",
            &["lease.read_head", "lease.insert_claim", "lease.read_claims"],
        );
        expect(
            "index pass",
            &[
                "index.read_committed",
                "allocate.read_head",
                "allocate.insert_claim",
                "allocate.read_claims",
                "index.insert_descriptors",
                // The pass renews the lease before the fenced publish.
                "lease.read_head",
                "lease.insert_claim",
                "lease.read_claims",
                "publish.insert_manifest",
                "publish.insert_commit_row",
                "publish.read_publish_ids",
                "index.insert_inventory",
            ],
        );
        expect(
            "reader.search",
            &["reader.pin_snapshot", "reader.search_page"],
        );
        expect(
            "reader.admitted_packs",
            &["reader.pin_snapshot", "reader.admitted_packs"],
        );
        expect("lease.release", &["lease.release"]);
        // The schema is created whole on an empty catalog, the stamp last.
        let schema = names.get("schema.ensure").expect("schema walked");
        assert!(schema.len() > 8, "{schema:?}");
        assert!(schema.iter().any(|n| n == "schema.create_capture_raw"));
        assert_eq!(
            schema
                .iter()
                .filter(|n| n.starts_with("schema.create_"))
                .count(),
            names["schema.drop"].len(),
            "every object created is one dropped"
        );
        assert!(
            names["demand.read"]
                .iter()
                .any(|n| n.starts_with("demand.read"))
        );
        // Every walk ended with its outcome, and the guarded publish
        // statements carry the fence text verbatim.
        assert_eq!(
            text.matches("-- outcome: Ok(").count(),
            9,
            "every machine walked to a successful outcome\n{text}"
        );
        let fence = capcat_proto::fragments::lease_fence(&Tables::new("cc").expect("prefix"));
        assert_eq!(
            text.matches(&fence).count(),
            3,
            "manifest, commit row, release"
        );
        assert!(text.contains("read; answered with no rows (nobody holds the lease)"));
    }
}
