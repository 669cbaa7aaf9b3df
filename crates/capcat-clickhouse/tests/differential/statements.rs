//! The protocol's own statements on one state: every read the model
//! interprets, and the state's one write, each compared with what the
//! meanings predict. These run the statement text capcat-proto emits, with
//! only the server clock bound to the state's "now".

use std::collections::BTreeSet;

use capcat_clickhouse::Transport;
use capcat_proto::fragments::FENCE_MARGIN_PARAM;
use capcat_proto::fragments::meaning::{self, LeaseRow};
use capcat_proto::{
    Column, ColumnType, Config, Expect, Param, Rows, Settings, Statement, Tables, Value, allocate,
    index, lease, publish, reader,
};

use super::probe::{CLOCK_PARAM, bind_clock};
use super::state::{NOW_NS, State, Write, holder_of, under_settings};

/// `stmt` with its clock bound to [`NOW_NS`], under the state's settings.
fn at_now(state: &State, mut stmt: Statement, reads_clock: bool) -> Statement {
    stmt.sql = under_settings(&bind_clock(&stmt.sql, reads_clock), state);
    if reads_clock {
        stmt.params.insert(
            CLOCK_PARAM.to_owned(),
            Param::Int64(i64::try_from(NOW_NS).expect("2027 fits an Int64")),
        );
    }
    stmt
}

async fn run(transport: &dyn Transport, stmt: &Statement) -> Result<Rows, String> {
    transport
        .execute(stmt)
        .await
        .map_err(|f| format!("{}: {f}\n{}", stmt.name, stmt.sql))
}

/// Every row of `rows` (the answer to `what`) parsed by `parse`, sorted; an
/// unparseable row is an error, never dropped, so it cannot hide a
/// disagreement.
fn parsed<T: Ord>(
    what: &str,
    rows: &Rows,
    parse: impl Fn(&[Value]) -> Option<T>,
) -> Result<Vec<T>, String> {
    let mut out = rows
        .0
        .iter()
        .map(|r| parse(r).ok_or_else(|| format!("{what}: unexpected row {r:?}")))
        .collect::<Result<Vec<T>, String>>()?;
    out.sort();
    Ok(out)
}

/// The distinct ids of a one-UUID-column answer.
fn uuids(what: &str, rows: &Rows) -> Result<BTreeSet<uuid::Uuid>, String> {
    let ids = parsed(what, rows, |r| match r {
        [Value::Uuid(u)] => Some(*u),
        _ => None,
    })?;
    Ok(ids.into_iter().collect())
}

fn compare<T: PartialEq + std::fmt::Debug>(
    out: &mut Vec<String>,
    what: &str,
    engine: T,
    meaning: T,
) {
    if engine != meaning {
        out.push(format!("{what}: engine {engine:?}, meaning {meaning:?}"));
    }
}

/// Runs every interpreted read on `state` and returns the disagreements.
pub async fn reads(
    transport: &dyn Transport,
    tables: &Tables,
    state: &State,
) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let t = tables;

    let head = run(transport, &at_now(state, lease::sql::read_head(t), true)).await?;
    let predicted: Vec<Vec<Value>> = meaning::read_head(&state.lease, NOW_NS)
        .iter()
        .map(meaning::HeadRow::values)
        .collect();
    compare(&mut out, "lease.read_head", head.0, predicted);

    // The read-back statement as a whole: its rows, as a multiset.
    let term = state.read_version;
    let lease = state
        .lease
        .first()
        .map_or_else(|| super::state::lease_ids()[0], |r| r.lease_id);
    let what = format!("lease.read_claims(term {term}, lease {lease})");
    let rows = run(
        transport,
        &at_now(state, lease::sql::read_claims(t, term, lease), true),
    )
    .await?;
    let engine = parsed(&what, &rows, |r| match r {
        [Value::Uuid(id), Value::UInt64(e)] => Some((*id, *e)),
        _ => None,
    })?;
    let mut predicted: Vec<(uuid::Uuid, u64)> =
        meaning::claim_read_back(&state.lease, term, lease, NOW_NS)
            .into_iter()
            .map(|r| (r.lease_id, r.expires_at_ns))
            .collect();
    predicted.sort_unstable();
    compare(&mut out, &what, engine, predicted);

    let head = run(
        transport,
        &at_now(state, allocate::sql::read_head(t), false),
    )
    .await?;
    compare(
        &mut out,
        "allocate.read_head",
        head.0,
        vec![vec![Value::UInt64(meaning::allocation_head(
            &state.claims,
            &state.watermark,
        ))]],
    );

    let v = state.read_version;
    let claims = run(
        transport,
        &at_now(state, allocate::sql::read_claims(t, v), false),
    )
    .await?;
    compare(
        &mut out,
        &format!("allocate.read_claims({v})"),
        uuids("allocate.read_claims", &claims)?,
        meaning::ids_at(&state.claims, v),
    );

    let ids = run(
        transport,
        &at_now(state, publish::sql::read_publish_ids(t, v), false),
    )
    .await?;
    compare(
        &mut out,
        &format!("publish.read_publish_ids({v})"),
        uuids("publish.read_publish_ids", &ids)?,
        meaning::ids_at(&state.watermark, v),
    );

    let asked: Vec<_> = state.asked.iter().cloned().collect();
    let committed = run(
        transport,
        &at_now(state, index::sql::read_committed(t, asked), false),
    )
    .await?;
    let engine: BTreeSet<_> = parsed("index.read_committed", &committed, |r| match r {
        [Value::String(s), Value::Uuid(p)] => Some((s.clone(), *p)),
        _ => None,
    })?
    .into_iter()
    .collect();
    compare(
        &mut out,
        "index.read_committed",
        engine,
        meaning::committed(state.inventory.iter().map(|(p, _, _)| p), &state.asked),
    );

    let pin = run(transport, &at_now(state, reader::pin_snapshot(t), false)).await?;
    compare(
        &mut out,
        "reader.pin_snapshot",
        pin.0,
        vec![vec![Value::UInt64(meaning::published_head(
            &state.watermark,
        ))]],
    );
    Ok(out)
}

fn select(sql: String, columns: &[(&'static str, ColumnType)]) -> Statement {
    Statement {
        name: "test.read_back",
        sql,
        params: Default::default(),
        settings: Settings::default(),
        expect: Expect::Rows(
            columns
                .iter()
                .map(|(name, ty)| Column { name, ty: *ty })
                .collect(),
        ),
        data: None,
    }
}

/// Every row of `sql`, parsed by `parse` (an unparseable row is an error,
/// never dropped), sorted.
async fn table_rows<T: Ord>(
    transport: &dyn Transport,
    sql: String,
    columns: &[(&'static str, ColumnType)],
    parse: impl Fn(&[Value]) -> Option<T>,
) -> Result<Vec<T>, String> {
    let rows = run(transport, &select(sql.clone(), columns)).await?;
    parsed(&sql, &rows, parse)
}

async fn lease_rows(transport: &dyn Transport, t: &Tables) -> Result<Vec<LeaseRow>, String> {
    use ColumnType::{String as S, UInt64 as U, Uuid as Id};
    let sql = format!(
        "SELECT term, lease_id, holder, expires_at_ns FROM {}",
        t.publisher_lease()
    );
    let columns = [
        ("term", U),
        ("lease_id", Id),
        ("holder", S),
        ("expires_at_ns", U),
    ];
    table_rows(transport, sql, &columns, |r| match r {
        [
            Value::UInt64(term),
            Value::Uuid(id),
            Value::String(h),
            Value::UInt64(e),
        ] => Some(LeaseRow {
            term: *term,
            lease_id: *id,
            expires_at_ns: *e,
            holder: h.clone(),
        }),
        _ => None,
    })
    .await
}

async fn pair_rows(
    transport: &dyn Transport,
    table: String,
) -> Result<Vec<(u64, uuid::Uuid)>, String> {
    use ColumnType::{UInt64 as U, Uuid as Id};
    let sql = format!("SELECT index_version, publish_id FROM {table}");
    table_rows(
        transport,
        sql,
        &[("index_version", U), ("publish_id", Id)],
        |r| match r {
            [Value::UInt64(v), Value::Uuid(id)] => Some((*v, *id)),
            _ => None,
        },
    )
    .await
}

async fn manifest_rows(
    transport: &dyn Transport,
    t: &Tables,
) -> Result<Vec<(u64, uuid::Uuid, capcat_proto::PackRef)>, String> {
    use ColumnType::{String as S, UInt64 as U, Uuid as Id};
    let sql = format!(
        "SELECT index_version, publish_id, store_id, pack_id FROM {}",
        t.snapshot_manifest()
    );
    let columns = [
        ("index_version", U),
        ("publish_id", Id),
        ("store_id", S),
        ("pack_id", Id),
    ];
    table_rows(transport, sql, &columns, |r| match r {
        [
            Value::UInt64(v),
            Value::Uuid(id),
            Value::String(s),
            Value::Uuid(p),
        ] => Some((*v, *id, (s.clone(), *p))),
        _ => None,
    })
    .await
}

fn with_margin(mut stmt: Statement, margin: u64) -> Statement {
    // The statement text is the real one; the margin is data, bound like
    // every other parameter, so the state can sit on either side of it.
    stmt.params
        .insert(FENCE_MARGIN_PARAM.to_owned(), Param::UInt64(margin));
    stmt
}

/// Runs the state's write and compares the table it writes with the
/// meanings' prediction. Returns the disagreements.
pub async fn write(
    transport: &dyn Transport,
    tables: &Tables,
    state: &State,
) -> Result<Vec<String>, String> {
    let cfg = Config::default();
    let t = tables;
    let mut out = Vec::new();
    match &state.write {
        Write::Release { lease, margin } => {
            let held = state.held_lease(*lease);
            let holder = held.holder.clone();
            let stmt = with_margin(lease::sql::release(t, &cfg, &held), *margin);
            run(transport, &at_now(state, stmt, true)).await?;
            let mut predicted = state.lease.clone();
            if meaning::lease_fence(&state.lease, held.held_row(), NOW_NS, *margin) {
                predicted.push(LeaseRow {
                    term: meaning::release_term(&state.lease),
                    lease_id: *lease,
                    expires_at_ns: 0,
                    holder,
                });
            }
            predicted.sort();
            compare(
                &mut out,
                &format!("{:?}", state.write),
                lease_rows(transport, t).await?,
                predicted,
            );
        }
        Write::Claim { term, lease, ttl } => {
            let holder = holder_of(*lease);
            let stmt = lease::sql::insert_claim(t, *term, *lease, &holder, *ttl);
            run(transport, &at_now(state, stmt, true)).await?;
            let mut predicted = state.lease.clone();
            predicted.push(LeaseRow {
                term: *term,
                lease_id: *lease,
                expires_at_ns: meaning::claim_expiry(NOW_NS, *ttl),
                holder,
            });
            predicted.sort();
            compare(
                &mut out,
                &format!("{:?}", state.write),
                lease_rows(transport, t).await?,
                predicted,
            );
        }
        Write::Manifest {
            version,
            publish_id,
            lease,
            margin,
            packs,
        } => {
            let stmt = with_margin(
                publish::sql::insert_manifest(
                    t,
                    &cfg,
                    *version,
                    *publish_id,
                    &state.held_lease(*lease),
                    packs.clone(),
                ),
                *margin,
            );
            run(transport, &at_now(state, stmt, true)).await?;
            let mut predicted = state.manifest.clone();
            if meaning::version_barrier(&state.watermark, *version)
                && meaning::lease_fence(
                    &state.lease,
                    state.held_lease(*lease).held_row(),
                    NOW_NS,
                    *margin,
                )
            {
                predicted.extend(packs.iter().map(|p| (*version, *publish_id, p.clone())));
            }
            predicted.sort();
            compare(
                &mut out,
                &format!("{:?}", state.write),
                manifest_rows(transport, t).await?,
                predicted,
            );
        }
        Write::CommitRow {
            version,
            publish_id,
            lease,
            margin,
            manifest_packs,
        } => {
            let stmt = with_margin(
                publish::sql::insert_commit_row(
                    t,
                    &cfg,
                    *version,
                    *publish_id,
                    &state.held_lease(*lease),
                    *manifest_packs,
                ),
                *margin,
            );
            run(transport, &at_now(state, stmt, true)).await?;
            let mut predicted = state.watermark.clone();
            if meaning::version_barrier(&state.watermark, *version)
                && meaning::lease_fence(
                    &state.lease,
                    state.held_lease(*lease).held_row(),
                    NOW_NS,
                    *margin,
                )
                && meaning::manifest_complete(
                    &state.manifest,
                    *version,
                    *publish_id,
                    *manifest_packs,
                )
            {
                predicted.push((*version, *publish_id));
            }
            predicted.sort();
            compare(
                &mut out,
                &format!("{:?}", state.write),
                pair_rows(transport, t.index_watermark()).await?,
                predicted,
            );
        }
    }
    Ok(out)
}
