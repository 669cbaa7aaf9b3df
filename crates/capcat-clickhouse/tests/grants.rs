//! The least-privilege catalog users of docs/security.md, on the real
//! engine. The GRANT statements are read from that page, so the page and
//! this test cannot drift apart: a grant the engine cannot parse, or the
//! removal of a SELECT, INSERT or CREATE TABLE grant, turns a test red.
//!
//! The embedded engine (libchdb 26.7) has no writable access storage
//! (`CREATE USER` fails) and no impersonation (`EXECUTE AS` needs
//! `access_control_improvements.allow_impersonate_user`, which libchdb
//! never applies). So:
//! - the users are declared in a `users.xml` that libchdb reads at boot,
//!   through the `config.xml` it finds in the process's working directory;
//!   each user carries its GRANT statements (`<grants><query>`, without the
//!   `TO` clause that file forbids), parsed and applied by the engine;
//! - a protocol statement runs *as* a user through SQL SECURITY DEFINER
//!   objects, so the engine checks that user's privileges on every table
//!   the statement reads or writes ([`AsUser`]): a SELECT runs inside a
//!   parameterized view whose definer is the user; an `INSERT ... SELECT`
//!   runs its SELECT as such a view, into a Null relay table whose
//!   materialized view (definer: the user) writes the catalog table;
//! - DDL has no definer: it runs as the engine's own user, and every
//!   report says which statements did.
//!
//! Without `CAPCAT_LIBCHDB` every test prints that it skipped and passes,
//! unless `CAPCAT_REQUIRE_ENGINES=1`, which fails it. The engine is opened
//! once per process (libchdb serves one data path per process); the tests
//! of this file share it and keep apart by catalog prefix, each prefix
//! granted to its own users.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use capcat_chdb::{ChdbError, Engine, Request};
use capcat_clickhouse::demand::{Admission, DemandPublisher, PublisherOptions};
use capcat_clickhouse::transport::{
    BoxFuture, Transport, decode_rows, failure_from_exception, request_for,
};
use capcat_clickhouse::{Catalog, unix_now_ms};
use capcat_proto::demand::{DEFAULT_READ_LIMIT, DemandEvent};
use capcat_proto::reader::{PageSize, SearchFilter, SearchQuery};
use capcat_proto::schema::EnsureOutcome;
use capcat_proto::{
    Config, Expect, Failure, IndexReport, Lease, Param, Rows, Statement, Tables, allocate, index,
    lease, publish,
};
use uuid::Uuid;

/// The page the grant statements are read from.
const SECURITY_MD: &str = include_str!("../../../docs/security.md");
/// The database every catalog of this test lives in (`<db>`).
const DB: &str = "capcat";
/// The harness's own database: the views and relay tables through which
/// statements run as a user. Every test user may read it (the relay's
/// materialized view reads its Null table as the user).
const RELAY_DB: &str = "capcat_grants_relay";
/// ClickHouse's ACCESS_DENIED.
const ACCESS_DENIED: u32 = 497;
const TENANT: &str = "acme";
const STORE: &str = "s";
const SHARD: &str = "shard-1";
/// The privileges whose removal a run can show (its SELECT and INSERT
/// statements run as the user; its DDL does not), each with the words of
/// the refusal that shows it. CREATE TABLE is needed only by the schema's
/// DDL now that no statement calls a table function (the descriptor rows
/// are the INSERT's data, not `format()` over a parameter), so a run
/// cannot show it.
const TESTABLE: [(&str, &str); 2] = [("SELECT", "grant SELECT"), ("INSERT", "grant INSERT")];

/// The statements a writer run must have sent as the writer, each at least
/// once and without failure.
const WRITER_STATEMENTS: [&str; 19] = [
    "schema.read_tables",
    "schema.read_columns",
    "schema.read_stamp",
    "schema.count_membership",
    "schema.stamp",
    "lease.read_head",
    "lease.insert_claim",
    "lease.read_claims",
    "lease.release",
    "allocate.read_head",
    "allocate.insert_claim",
    "allocate.read_claims",
    "index.read_committed",
    "index.insert_descriptors",
    "publish.insert_manifest",
    "publish.insert_commit_row",
    "publish.read_publish_ids",
    "index.insert_inventory",
    "demand.append",
];

/// The statements a reader run must have sent as the reader.
const READER_STATEMENTS: [&str; 5] = [
    "reader.pin_snapshot",
    "reader.search_page",
    "reader.get_by_ids",
    "reader.admitted_packs",
    "demand.read_events",
];

// ---------------------------------------------------------------------------
// The grant statements of docs/security.md.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Writer,
    Reader,
    Operator,
}

impl Role {
    const ALL: [Self; 3] = [Self::Writer, Self::Reader, Self::Operator];

    /// The grantee the page writes.
    fn grantee(self) -> &'static str {
        match self {
            Self::Writer => "capcat_writer",
            Self::Reader => "capcat_reader",
            Self::Operator => "capcat_operator",
        }
    }
}

/// One GRANT statement of the page, `<db>` and `<prefix>` unreplaced.
#[derive(Clone, Debug)]
struct DocGrant {
    role: Role,
    text: String,
}

impl DocGrant {
    /// The statement for the catalog `prefix`, granted to `grantee`.
    fn render(&self, prefix: &str, grantee: &str) -> String {
        let to = format!(" TO {}", self.role.grantee());
        let body = self
            .text
            .strip_suffix(&to)
            .unwrap_or_else(|| panic!("{:?} does not end with {to:?}", self.text));
        format!(
            "{} TO {grantee}",
            body.replace("<db>", DB).replace("<prefix>", prefix)
        )
    }

    /// The privileges it grants, as written.
    fn privileges(&self) -> Vec<String> {
        pairs(&self.text).into_iter().map(|(p, _)| p).collect()
    }

    /// The words of a refusal that shows it missing, when a run can show
    /// that: it grants nothing but [`TESTABLE`] privileges.
    fn refusals(&self) -> Option<Vec<&'static str>> {
        self.privileges()
            .iter()
            .map(|p| {
                TESTABLE
                    .iter()
                    .find(|(t, _)| t == p)
                    .map(|(_, words)| *words)
            })
            .collect()
    }

    fn testable(&self) -> bool {
        self.refusals().is_some()
    }
}

/// Every GRANT statement in the page's `sql` blocks, in page order.
fn doc_grants() -> Vec<DocGrant> {
    let mut out = Vec::new();
    let mut in_sql = false;
    for line in SECURITY_MD.lines().map(str::trim) {
        if line.starts_with("```") {
            in_sql = line == "```sql";
            continue;
        }
        if !in_sql || !line.starts_with("GRANT ") {
            continue;
        }
        let text = line
            .strip_suffix(';')
            .unwrap_or_else(|| panic!("docs/security.md: {line:?} does not end with ';'"));
        let role = Role::ALL
            .into_iter()
            .find(|r| text.ends_with(&format!(" TO {}", r.grantee())))
            .unwrap_or_else(|| panic!("docs/security.md: {line:?} grants to no known user"));
        out.push(DocGrant {
            role,
            text: text.to_owned(),
        });
    }
    for role in Role::ALL {
        assert!(
            out.iter().any(|g| g.role == role),
            "docs/security.md grants nothing to {}",
            role.grantee()
        );
    }
    out
}

/// `(privilege, target)` pairs of one `GRANT <privileges> ON <target> TO
/// <grantee>` statement, as written or as `SHOW GRANTS` prints it.
fn pairs(statement: &str) -> BTreeSet<(String, String)> {
    let body = statement
        .strip_prefix("GRANT ")
        .unwrap_or_else(|| panic!("{statement:?} is not a GRANT"));
    let (privileges, rest) = body
        .split_once(" ON ")
        .unwrap_or_else(|| panic!("{statement:?} has no ON"));
    let (target, _) = rest
        .rsplit_once(" TO ")
        .unwrap_or_else(|| panic!("{statement:?} has no TO"));
    privileges
        .split(", ")
        .map(|p| (p.to_owned(), target.to_owned()))
        .collect()
}

/// The harness's grant: the relay database, read by the relays'
/// materialized views as the user.
fn relay_grant(user: &str) -> String {
    format!("GRANT SELECT ON {RELAY_DB}.* TO {user}")
}

/// A user of this test: its name and its GRANT statements.
#[derive(Clone, Debug)]
struct TestUser {
    name: String,
    grants: Vec<String>,
}

/// A user named `name` holding `grants` for the catalog `prefix`, and the
/// harness's relay grant when `relay`.
fn test_user(name: String, prefix: &str, grants: &[&DocGrant], relay: bool) -> TestUser {
    let mut statements: Vec<String> = grants.iter().map(|g| g.render(prefix, &name)).collect();
    if relay {
        statements.push(relay_grant(&name));
    }
    TestUser {
        name,
        grants: statements,
    }
}

/// The catalog prefix of the test that removes the writer's grant `i`.
fn without_writer_grant(i: usize) -> String {
    format!("nw{i}")
}

/// The catalog prefix of the test that removes the reader's grant `i`.
fn without_reader_grant(i: usize) -> String {
    format!("nr{i}")
}

/// Every user of this file, fixed at boot:
/// - `capcat_writer`, `capcat_reader`, `capcat_operator`: the page's
///   grants for the prefix `capcat`;
/// - `rd_writer`, `rd_reader`: the same for the prefix `rd`;
/// - `nw<i>_writer`, `nr<i>_reader`: the writer's (reader's) grants for the
///   prefix `nw<i>` (`nr<i>`) without its testable grant `i`.
///
/// No prefix is another's followed by `_`, so no user's wildcard reaches
/// another test's catalog.
fn test_users() -> Vec<TestUser> {
    let grants = doc_grants();
    let of = |role: Role| grants.iter().filter(|g| g.role == role).collect::<Vec<_>>();
    let (writer, reader, operator) = (of(Role::Writer), of(Role::Reader), of(Role::Operator));
    let mut users = vec![
        test_user("capcat_writer".to_owned(), "capcat", &writer, true),
        test_user("capcat_reader".to_owned(), "capcat", &reader, true),
        test_user("capcat_operator".to_owned(), "capcat", &operator, false),
        test_user("rd_writer".to_owned(), "rd", &writer, true),
        test_user("rd_reader".to_owned(), "rd", &reader, true),
    ];
    for (i, removed) in writer.iter().enumerate().filter(|(_, g)| g.testable()) {
        let prefix = without_writer_grant(i);
        let kept: Vec<&DocGrant> = writer
            .iter()
            .copied()
            .filter(|g| !std::ptr::eq(*g, *removed))
            .collect();
        users.push(test_user(format!("{prefix}_writer"), &prefix, &kept, true));
    }
    for (i, removed) in reader.iter().enumerate().filter(|(_, g)| g.testable()) {
        let prefix = without_reader_grant(i);
        let kept: Vec<&DocGrant> = reader
            .iter()
            .copied()
            .filter(|g| !std::ptr::eq(*g, *removed))
            .collect();
        users.push(test_user(format!("{prefix}_reader"), &prefix, &kept, true));
    }
    users
}

// ---------------------------------------------------------------------------
// The engine, booted with the users.

/// Makes libchdb read `users.xml` (next to it) as its users' directory.
const CONFIG_XML: &str = "<clickhouse>\n  <user_directories>\n    \
                          <users_xml><path>users.xml</path></users_xml>\n  \
                          </user_directories>\n</clickhouse>\n";

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The `users.xml` declaring `users` beside the engine's own `default`
/// (which keeps access management: it creates the definer objects).
fn users_xml(users: &[TestUser]) -> String {
    let mut xml = String::from(
        "<clickhouse>\n  <profiles><default/></profiles>\n  <quotas><default/></quotas>\n  \
         <users>\n    <default><password/><networks><ip>::/0</ip></networks>\
         <profile>default</profile><quota>default</quota>\
         <access_management>1</access_management></default>\n",
    );
    for user in users {
        let _ = write!(
            xml,
            "    <{0}><no_password/><networks><ip>::/0</ip></networks>\
             <profile>default</profile><quota>default</quota><grants>",
            user.name
        );
        for grant in &user.grants {
            let (body, _) = grant.rsplit_once(" TO ").expect("every grant has a TO");
            let _ = write!(xml, "<query>{}</query>", xml_escape(body));
        }
        let _ = writeln!(xml, "</grants></{}>", user.name);
    }
    xml.push_str("  </users>\n</clickhouse>\n");
    xml
}

/// The engine with every user of [`test_users`], or `None` (skipped) when
/// `CAPCAT_LIBCHDB` is not set.
fn engine_or_skip(test: &str) -> Option<Engine> {
    if std::env::var_os("CAPCAT_LIBCHDB").is_none() {
        assert!(
            std::env::var("CAPCAT_REQUIRE_ENGINES").as_deref() != Ok("1"),
            "{test}: CAPCAT_LIBCHDB is not set and CAPCAT_REQUIRE_ENGINES=1"
        );
        println!("{test}: skipped (CAPCAT_LIBCHDB is not set)");
        return None;
    }
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    Some(ENGINE.get_or_init(boot).clone())
}

fn boot() -> Engine {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("capcat-clickhouse-grants")
        .join(std::process::id().to_string());
    // A pid reused from an earlier run: start clean.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the engine's directory");
    std::fs::write(dir.join("config.xml"), CONFIG_XML).expect("write config.xml");
    std::fs::write(dir.join("users.xml"), users_xml(&test_users())).expect("write users.xml");
    // libchdb, like clickhouse-local, reads `config.xml` from the working
    // directory when it boots: the one way to hand it a configuration
    // through `Engine::open`, which passes nothing but the data path. A
    // grant it cannot parse makes it refuse to boot.
    std::env::set_current_dir(&dir).expect("enter the engine's directory");
    let engine = Engine::open(dir.join("data")).expect("open the engine with the test's users");
    for db in [DB, RELAY_DB] {
        engine
            .execute(&Request::new(format!("CREATE DATABASE IF NOT EXISTS {db}")))
            .unwrap_or_else(|e| panic!("create database {db}: {e}"));
    }
    engine
}

/// `sql` as the engine's own user, its TabSeparated output as text.
fn admin_sql(engine: &Engine, sql: &str, params: &[(&str, String)]) -> Result<String, ChdbError> {
    let request = params
        .iter()
        .fold(Request::new(sql).database(DB), |r, (n, v)| {
            r.param(*n, v.clone())
        });
    let out = engine.execute(&request)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

// ---------------------------------------------------------------------------
// Running statements as a user.

/// How a statement ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ran {
    /// Under the user's privileges (through definer objects).
    AsUser,
    /// As the engine's own user: DDL, or a transport without a user.
    AsEngine,
}

#[derive(Clone, Debug)]
struct Record {
    name: &'static str,
    ran: Ran,
    failure: Option<Failure>,
}

/// A [`Transport`] running every SELECT and `INSERT ... SELECT` under
/// `user`'s privileges, through SQL SECURITY DEFINER objects in
/// [`RELAY_DB`], and anything else (DDL) as the engine's own user; with no
/// user, everything as the engine's own user. Statements run in [`DB`].
#[derive(Debug)]
struct AsUser {
    engine: Engine,
    user: Option<String>,
    log: Mutex<Vec<Record>>,
}

/// Names the definer objects apart across every transport of the process.
static NEXT_OBJECT: AtomicU64 = AtomicU64::new(0);

impl AsUser {
    fn new(engine: &Engine, user: Option<&str>) -> Arc<Self> {
        Arc::new(Self {
            engine: engine.clone(),
            user: user.map(str::to_owned),
            log: Mutex::new(Vec::new()),
        })
    }

    fn records(&self) -> Vec<Record> {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The messages of the statements the server refused as ACCESS_DENIED.
    fn denials(&self) -> Vec<(&'static str, String)> {
        self.records()
            .into_iter()
            .filter_map(|r| match r.failure {
                Some(Failure::Server { code, message }) if code == ACCESS_DENIED => {
                    Some((r.name, message))
                }
                _ => None,
            })
            .collect()
    }

    /// Which statements ran how, and how they ended: one line per kind.
    fn report(&self) -> String {
        let mut seen: BTreeMap<(&'static str, Ran), (u32, BTreeSet<String>)> = BTreeMap::new();
        for r in self.records() {
            let entry = seen.entry((r.name, r.ran)).or_default();
            entry.0 += 1;
            entry.1.insert(match r.failure {
                None => "ok".to_owned(),
                Some(f) => format!("FAILED: {f}"),
            });
        }
        let who = self.user.as_deref().unwrap_or("the engine's own user");
        let mut out = format!("statements sent through the transport of {who}:\n");
        for ((name, ran), (n, endings)) in seen {
            let ran = match ran {
                Ran::AsUser => "as the user",
                Ran::AsEngine => "as the engine's own user",
            };
            let endings: Vec<String> = endings.into_iter().collect();
            let _ = writeln!(out, "  {name} x{n}, {ran}: {}", endings.join("; "));
        }
        out
    }

    /// Panics unless every statement of `expected` ran as the user, and
    /// succeeded, at least once.
    fn assert_ran_as_user(&self, expected: &[&str]) {
        let ok: BTreeSet<&str> = self
            .records()
            .iter()
            .filter(|r| r.ran == Ran::AsUser && r.failure.is_none())
            .map(|r| r.name)
            .collect();
        let missing: Vec<&&str> = expected.iter().filter(|n| !ok.contains(**n)).collect();
        assert!(
            missing.is_empty(),
            "never ran as the user: {missing:?}\n{}",
            self.report()
        );
    }

    async fn run(&self, request: Request) -> Result<Vec<u8>, Failure> {
        let engine = self.engine.clone();
        tokio::task::spawn_blocking(move || engine.execute(&request))
            .await
            .map_err(|join| Failure::Transport {
                message: format!("the blocking engine call did not complete: {join}"),
            })?
            .map_err(|error| match error {
                ChdbError::Query { code, message, .. } => {
                    failure_from_exception(Some(code), &message)
                }
                other => Failure::Transport {
                    message: other.to_string(),
                },
            })
    }

    /// Harness DDL, as the engine's own user.
    async fn admin(&self, sql: String) -> Result<(), Failure> {
        self.run(Request::new(sql).database(DB)).await.map(drop)
    }

    async fn plain(&self, stmt: &Statement) -> Result<Rows, Failure> {
        let request = request_for(stmt).map_err(|e| Failure::Malformed {
            message: e.to_string(),
        })?;
        let bytes = self.run(request.database(DB)).await?;
        decode(stmt, &bytes)
    }

    /// A SELECT as `user`: inside a parameterized view whose definer is
    /// `user`, called with the statement's own parameters.
    async fn select_as(&self, user: &str, stmt: &Statement) -> Result<Rows, Failure> {
        let view = format!(
            "{RELAY_DB}.q{}",
            NEXT_OBJECT.fetch_add(1, Ordering::Relaxed)
        );
        self.admin(format!(
            "CREATE VIEW {view} {} AS {}",
            definer(user),
            stmt.sql
        ))
        .await?;
        let outer = through(stmt, &stmt.sql, |call| {
            format!("SELECT * FROM {view}{call}")
        });
        let request = request_for(&outer).map_err(|e| Failure::Malformed {
            message: e.to_string(),
        })?;
        let result = match self.run(request.database(DB)).await {
            Ok(bytes) => decode(stmt, &bytes),
            Err(failure) => Err(failure),
        };
        let dropped = self.admin(format!("DROP VIEW {view}")).await;
        result.and_then(|rows| dropped.map(|()| rows))
    }

    /// An INSERT as `user`, into a Null relay shaped like its table whose
    /// materialized view (definer: `user`) writes the statement's columns
    /// into the table. `INSERT INTO t (cols) SELECT ...` runs its SELECT as
    /// a definer view too; `INSERT INTO t (cols) FORMAT RowBinary` sends
    /// its data to the relay unchanged.
    async fn insert_as(&self, user: &str, stmt: &Statement) -> Result<Rows, Failure> {
        let (table, columns, tail) = split_insert(&stmt.sql).ok_or_else(|| Failure::Malformed {
            message: format!(
                "{}: not of the form INSERT INTO t (columns) SELECT ... or FORMAT ...",
                stmt.name
            ),
        })?;
        let select = match &stmt.data {
            Some(_) => None,
            None => Some(aliased(tail, columns.split(", ").count()).ok_or_else(|| {
                Failure::Malformed {
                    message: format!("{}: cannot name the columns of {tail:?}", stmt.name),
                }
            })?),
        };
        let id = NEXT_OBJECT.fetch_add(1, Ordering::Relaxed);
        let (relay, writer, view) = (
            format!("{RELAY_DB}.r{id}"),
            format!("{RELAY_DB}.m{id}"),
            format!("{RELAY_DB}.q{id}"),
        );
        let definer = definer(user);
        self.admin(format!(
            "CREATE TABLE {relay} AS {DB}.{table} ENGINE = Null"
        ))
        .await?;
        let result = async {
            self.admin(format!(
                "CREATE MATERIALIZED VIEW {writer} TO {DB}.{table} {definer} \
                 AS SELECT {columns} FROM {relay}"
            ))
            .await?;
            let request = match (&select, &stmt.data) {
                (Some(select), _) => {
                    self.admin(format!("CREATE VIEW {view} {definer} AS {select}"))
                        .await?;
                    let outer = through(stmt, select, |call| {
                        format!("INSERT INTO {relay} ({columns}) SELECT * FROM {view}{call}")
                    });
                    request_for(&outer)
                }
                (None, data) => {
                    let mut relayed = stmt.clone();
                    relayed.sql = format!("INSERT INTO {relay} ({columns}) {tail}");
                    relayed.data.clone_from(data);
                    request_for(&relayed)
                }
            }
            .map_err(|e| Failure::Malformed {
                message: e.to_string(),
            })?;
            self.run(request.database(DB)).await.map(drop)
        }
        .await;
        let mut cleanup = Ok(());
        for sql in [
            format!("DROP VIEW IF EXISTS {writer}"),
            format!("DROP VIEW IF EXISTS {view}"),
            format!("DROP TABLE IF EXISTS {relay}"),
        ] {
            cleanup = cleanup.and(self.admin(sql).await);
        }
        result.and(cleanup).map(|()| Rows::empty())
    }
}

fn definer(user: &str) -> String {
    format!("DEFINER = {user} SQL SECURITY DEFINER")
}

/// `stmt`'s settings and expected rows with the SQL `outer(call)`, where
/// `call` passes every parameter `sql` names to a parameterized view
/// (`(name = {name:Type}, ...)`, or nothing), and those parameters bound.
fn through(stmt: &Statement, sql: &str, outer: impl FnOnce(&str) -> String) -> Statement {
    let params: BTreeMap<String, Param> = stmt
        .params
        .iter()
        .filter(|(name, _)| sql.contains(&format!("{{{name}:")))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let call = if params.is_empty() {
        String::new()
    } else {
        let args: Vec<String> = params
            .iter()
            .map(|(name, value)| format!("{name} = {{{name}:{}}}", value.clickhouse_type()))
            .collect();
        format!("({})", args.join(", "))
    };
    Statement {
        name: stmt.name,
        sql: outer(&call),
        params,
        settings: stmt.settings,
        expect: stmt.expect.clone(),
        data: None,
    }
}

/// `(table, columns, tail)` of `INSERT INTO table (columns) SELECT ...` or
/// `INSERT INTO table (columns) FORMAT ...`; the tail is the SELECT or the
/// FORMAT clause.
fn split_insert(sql: &str) -> Option<(&str, &str, &str)> {
    let rest = sql.strip_prefix("INSERT INTO ")?;
    let (table, rest) = rest.split_once(" (")?;
    let (columns, tail) = rest.split_once(") ")?;
    (tail.starts_with("SELECT ") || tail.starts_with("FORMAT ")).then_some((table, columns, tail))
}

/// `select` (`SELECT a, b FROM ...`) with its `width` top-level result
/// expressions named `c0`, `c1`, ...: a view stores its columns by name,
/// and the engine's name for an expression holding a scalar subquery
/// (`plus(ifNull(_subquery_1, 0), 1)`) does not survive the view being
/// analysed again. The INSERT takes the columns by position, so the names
/// change nothing else.
fn aliased(select: &str, width: usize) -> Option<String> {
    let list = select.strip_prefix("SELECT ")?;
    let (mut depth, mut quoted, mut escaped) = (0_i32, false, false);
    let mut items = Vec::new();
    let (mut start, mut end) = (0, list.len());
    for (at, c) in list.char_indices() {
        if quoted {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '\'' => quoted = false,
                _ => {}
            }
            continue;
        }
        match c {
            '\'' => quoted = true,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(list[start..at].trim());
                start = at + 1;
            }
            ' ' if depth == 0 && list[at..].starts_with(" FROM ") => {
                end = at;
                break;
            }
            _ => {}
        }
    }
    items.push(list[start..end].trim());
    (items.len() == width).then(|| {
        let named: Vec<String> = items
            .iter()
            .enumerate()
            .map(|(i, e)| format!("{e} AS c{i}"))
            .collect();
        format!("SELECT {}{}", named.join(", "), &list[end..])
    })
}

fn decode(stmt: &Statement, bytes: &[u8]) -> Result<Rows, Failure> {
    match &stmt.expect {
        Expect::Nothing => Ok(Rows::empty()),
        Expect::Rows(columns) => decode_rows(columns, bytes),
    }
}

impl Transport for AsUser {
    fn execute<'a>(&'a self, stmt: &'a Statement) -> BoxFuture<'a, Result<Rows, Failure>> {
        Box::pin(async move {
            let (ran, result) = match self.user.as_deref() {
                Some(user) if stmt.sql.starts_with("SELECT ") => {
                    (Ran::AsUser, self.select_as(user, stmt).await)
                }
                Some(user) if stmt.sql.starts_with("INSERT INTO ") => {
                    (Ran::AsUser, self.insert_as(user, stmt).await)
                }
                _ => (Ran::AsEngine, self.plain(stmt).await),
            };
            self.log
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Record {
                    name: stmt.name,
                    ran,
                    failure: result.as_ref().err().cloned(),
                });
            result
        })
    }

    fn kind(&self) -> &'static str {
        "as-user"
    }
}

// ---------------------------------------------------------------------------
// The runs.

/// What a writer run published.
#[derive(Debug)]
struct Published {
    version: u64,
    pack: Uuid,
    ids: Vec<Uuid>,
}

fn catalog(transport: &Arc<AsUser>, prefix: &str) -> Catalog {
    let transport: Arc<dyn Transport> = transport.clone();
    Catalog::new(
        transport,
        Tables::new(prefix).expect("a valid prefix"),
        Config::default(),
    )
}

/// What the storage service does to a catalog, once each: ensure the
/// schema of a new catalog and again of the current one, take the lease,
/// index a pack (descriptors, version, publish, inventory), read it back
/// as a reconcile does, append a demand event, release the lease.
async fn writer_run(catalog: &Catalog) -> Result<Published, String> {
    match catalog.ensure_schema().await {
        Ok(EnsureOutcome::Created) => {}
        other => return Err(format!("ensure_schema of a new catalog: {other:?}")),
    }
    // `current` only if the writer sees all its objects in system.tables
    // and system.columns, and the stamp.
    match catalog.ensure_schema().await {
        Ok(EnsureOutcome::Current { .. }) => {}
        other => return Err(format!("ensure_schema of the current catalog: {other:?}")),
    }
    let mut lease = catalog
        .acquire_lease("grants-writer")
        .await
        .map_err(|e| format!("acquire_lease: {e}"))?;
    let ids = support::capture_ids(3);
    let pack = Uuid::new_v4();
    let rows = support::pack_of(TENANT, &ids, 0, STORE, pack);
    let version = match catalog.index(&mut lease, rows).await {
        Ok(IndexReport::Indexed { version, .. }) => version,
        other => return Err(format!("index: {other:?}")),
    };
    match catalog.committed(STORE, &[pack]).await {
        Ok(held) if held == BTreeSet::from([pack]) => {}
        other => return Err(format!("committed (the reconcile read): {other:?}")),
    }
    let publisher = DemandPublisher::new(
        catalog.transport().clone(),
        catalog.tables().clone(),
        PublisherOptions::default(),
    )
    .map_err(|e| format!("demand publisher: {e}"))?;
    let admitted = publisher.publish(DemandEvent::writer_sealed(SHARD, 1, 1, 4096, unix_now_ms()));
    if admitted != Admission::Accepted || !publisher.drain(Duration::from_secs(60)).await {
        return Err(format!("demand event: {admitted:?}, not drained"));
    }
    let counters = publisher.counters();
    if counters.published != 1 {
        return Err(format!("demand event not published: {counters:?}"));
    }
    lease.release().await.map_err(|e| format!("release: {e}"))?;
    Ok(Published { version, pack, ids })
}

/// What a reader does: pin, search, get by ids, list the admitted packs
/// (`capcat verify`), read the demand (`capcat status`).
async fn reader_run(catalog: &Catalog, published: &Published) -> Result<(), String> {
    let pinned = catalog.pin().await.map_err(|e| format!("pin: {e}"))?;
    if pinned != published.version {
        return Err(format!("pinned {pinned}, published {}", published.version));
    }
    let query = SearchQuery {
        filter: SearchFilter {
            tenant_id: TENANT.to_owned(),
            ..SearchFilter::default()
        },
        cursor: None,
        page_size: PageSize::new(10).expect("a valid page size"),
    };
    let page = catalog
        .search(query)
        .await
        .map_err(|e| format!("search: {e}"))?;
    let found: BTreeSet<Uuid> = page.records.iter().map(|r| r.capture_id).collect();
    let ids: BTreeSet<Uuid> = published.ids.iter().copied().collect();
    if found != ids {
        return Err(format!("search found {found:?}, published {ids:?}"));
    }
    let lookup = catalog
        .get_by_ids(TENANT, ids.clone(), pinned)
        .await
        .map_err(|e| format!("get_by_ids: {e}"))?;
    if !lookup.missing.is_empty() || lookup.records.len() != ids.len() {
        return Err(format!("get_by_ids: {lookup:?}"));
    }
    let admitted = catalog
        .admitted_packs()
        .await
        .map_err(|e| format!("admitted_packs: {e}"))?;
    if admitted.packs != [(STORE.to_owned(), published.pack)] {
        return Err(format!("admitted_packs: {admitted:?}"));
    }
    let demand = catalog
        .read_folded_demand(DEFAULT_READ_LIMIT)
        .await
        .map_err(|e| format!("read_folded_demand: {e}"))?;
    if !demand.folded.shards.contains_key(SHARD) {
        return Err(format!("read_folded_demand: {demand:?}"));
    }
    catalog
        .demand_report()
        .await
        .map_err(|e| format!("demand_report: {e}"))?;
    Ok(())
}

/// Every INSERT the writer sends, for the catalog `tables`.
fn writer_inserts(tables: &Tables) -> Vec<Statement> {
    let cfg = Config::default();
    let id = Uuid::new_v4();
    let pack = Uuid::new_v4();
    let held = Lease {
        lease_id: id,
        holder: "grants-reader".to_owned(),
        term: 1,
        expires_at_ns: u64::MAX / 2,
        unsettled_until_ns: 0,
    };
    let packs = vec![(STORE.to_owned(), pack)];
    let rows = support::pack_of(TENANT, &support::capture_ids(1), 0, STORE, pack);
    vec![
        capcat_proto::schema::stamp_statement(tables),
        lease::sql::insert_claim(tables, 9, id, "grants-reader", 1_000_000_000),
        lease::sql::release(tables, &cfg, &held),
        allocate::sql::insert_claim(tables, 9, id),
        index::sql::insert_descriptors(tables, rows),
        publish::sql::insert_manifest(tables, &cfg, 9, id, &held, packs.clone()),
        publish::sql::insert_commit_row(tables, &cfg, 9, id, &held, 1),
        index::sql::commit_packs(tables, 9, id, packs).expect("a version above zero"),
        capcat_proto::demand::storage::append(
            tables,
            &DemandEvent::writer_sealed(SHARD, 1, 2, 1, 1),
            id,
        ),
    ]
}

fn ok<T, E: std::fmt::Display>(what: &str, r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

// ---------------------------------------------------------------------------
// The tests.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_grant_statement_parses_and_applies_as_written() {
    let test = "every_grant_statement_parses_and_applies_as_written";
    let Some(engine) = engine_or_skip(test) else {
        return;
    };
    for grant in doc_grants() {
        let statement = grant.render("capcat", grant.role.grantee());
        let formatted = ok(
            "formatQuery",
            admin_sql(
                &engine,
                "SELECT formatQuery({q:String})",
                &[("q", Param::String(statement.clone()).to_text())],
            ),
        );
        assert_eq!(
            formatted.trim_end(),
            statement,
            "ClickHouse reads the statement otherwise than it is written"
        );
        println!("{test}: parses: {statement}");
    }
    for user in test_users()
        .iter()
        .filter(|u| u.name.starts_with("capcat_"))
    {
        let shown = ok(
            "SHOW GRANTS",
            admin_sql(&engine, &format!("SHOW GRANTS FOR {}", user.name), &[]),
        );
        let held: BTreeSet<(String, String)> = shown.lines().flat_map(pairs).collect();
        let granted: BTreeSet<(String, String)> =
            user.grants.iter().flat_map(|g| pairs(g)).collect();
        assert_eq!(
            held, granted,
            "{}: SHOW GRANTS lists other privileges than granted:\n{shown}",
            user.name
        );
        println!("{test}: SHOW GRANTS FOR {}:\n{shown}", user.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writers_grants_run_every_statement_of_the_storage_service() {
    let test = "the_writers_grants_run_every_statement_of_the_storage_service";
    let Some(engine) = engine_or_skip(test) else {
        return;
    };
    let writer = AsUser::new(&engine, Some("capcat_writer"));
    let run = writer_run(&catalog(&writer, "capcat")).await;
    println!("{test}: {}", writer.report());
    if let Err(e) = run {
        panic!("the writer run failed: {e}\n{}", writer.report());
    }
    assert!(writer.denials().is_empty(), "{}", writer.report());
    writer.assert_ran_as_user(&WRITER_STATEMENTS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readers_grant_runs_its_reads_and_refuses_every_write() {
    let test = "the_readers_grant_runs_its_reads_and_refuses_every_write";
    let Some(engine) = engine_or_skip(test) else {
        return;
    };
    let writer = AsUser::new(&engine, Some("rd_writer"));
    let published = writer_run(&catalog(&writer, "rd"))
        .await
        .unwrap_or_else(|e| panic!("the writer run failed: {e}\n{}", writer.report()));

    let reader = AsUser::new(&engine, Some("rd_reader"));
    let run = reader_run(&catalog(&reader, "rd"), &published).await;
    println!("{test}: {}", reader.report());
    if let Err(e) = run {
        panic!("the reader run failed: {e}\n{}", reader.report());
    }
    assert!(reader.denials().is_empty(), "{}", reader.report());
    reader.assert_ran_as_user(&READER_STATEMENTS);

    // Every INSERT the writer sends is refused to the reader.
    let tables = Tables::new("rd").expect("a valid prefix");
    for stmt in writer_inserts(&tables) {
        match reader.execute(&stmt).await {
            Err(Failure::Server { code, message }) if code == ACCESS_DENIED => {
                println!("{test}: {} refused: {message}", stmt.name);
            }
            other => panic!("{}: the reader was not refused: {other:?}", stmt.name),
        }
    }
    // So is the lease, through the real machine.
    let refused = catalog(&reader, "rd").acquire_lease("grants-reader").await;
    assert!(refused.is_err(), "the reader took the lease");
    assert!(
        reader
            .denials()
            .iter()
            .any(|(n, _)| *n == "lease.insert_claim"),
        "{}",
        reader.report()
    );

    // The grant ends at the prefix: another catalog is refused, but one
    // whose prefix is `rd_...` is inside `rd_*` (docs/security.md).
    let engine_user = AsUser::new(&engine, None);
    for prefix in ["rdother", "rd_x"] {
        ok(prefix, catalog(&engine_user, prefix).ensure_schema().await);
    }
    let before = reader.denials().len();
    assert!(
        catalog(&reader, "rdother").pin().await.is_err(),
        "the reader read another catalog"
    );
    assert_eq!(reader.denials().len(), before + 1, "{}", reader.report());
    assert_eq!(
        ok("pin rd_x", catalog(&reader, "rd_x").pin().await),
        0,
        "rd_* covers the catalog rd_x"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_any_grant_a_run_exercises_is_refused() {
    let test = "removing_any_grant_a_run_exercises_is_refused";
    let Some(engine) = engine_or_skip(test) else {
        return;
    };
    let grants = doc_grants();
    let of = |role: Role| grants.iter().filter(|g| g.role == role).collect::<Vec<_>>();
    let mut tested = 0;
    for (i, removed) in of(Role::Writer).into_iter().enumerate() {
        if !removed.testable() {
            println!("{test}: not testable in process (DDL): {}", removed.text);
            continue;
        }
        let prefix = without_writer_grant(i);
        let writer = AsUser::new(&engine, Some(&format!("{prefix}_writer")));
        let run = writer_run(&catalog(&writer, &prefix)).await;
        assert_refused(test, removed, run.map(drop), &writer);
        tested += 1;
    }
    for (i, removed) in of(Role::Reader).into_iter().enumerate() {
        if !removed.testable() {
            println!("{test}: not testable in process: {}", removed.text);
            continue;
        }
        let prefix = without_reader_grant(i);
        let published = ok(
            "publish as the engine's own user",
            writer_run(&catalog(&AsUser::new(&engine, None), &prefix)).await,
        );
        let reader = AsUser::new(&engine, Some(&format!("{prefix}_reader")));
        let run = reader_run(&catalog(&reader, &prefix), &published).await;
        assert_refused(test, removed, run, &reader);
        tested += 1;
    }
    assert!(tested >= 3, "only {tested} grants could be removed");
}

/// `run` failed, and the server refused a statement for lack of a
/// privilege `removed` grants.
fn assert_refused(test: &str, removed: &DocGrant, run: Result<(), String>, transport: &AsUser) {
    let Err(error) = run else {
        panic!(
            "without `{}` the run still succeeded\n{}",
            removed.text,
            transport.report()
        );
    };
    let denials = transport.denials();
    let words = removed
        .refusals()
        .expect("only testable grants are removed");
    let named = denials
        .iter()
        .find(|(_, message)| words.iter().any(|w| message.contains(w)));
    match named {
        Some((statement, message)) => {
            println!(
                "{test}: without `{}`: {statement} refused: {message}",
                removed.text
            );
        }
        None => panic!(
            "without `{}` the run failed ({error}), but not for that privilege: {denials:?}\n{}",
            removed.text,
            transport.report()
        ),
    }
}
