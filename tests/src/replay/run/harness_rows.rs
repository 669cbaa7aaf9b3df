//! Rows the model gains without a statement of capcat-proto's: a foreign
//! writer's, and the index pass's folded descriptor writes.

use super::*;

impl Replay<'_> {
    /// Writes rows the model gained without a statement of capcat-proto's
    /// (a foreign writer, folded descriptor writes).
    pub(super) fn write_rows(
        &mut self,
        step: Option<&TraceStep>,
        table: &str,
        rows: &[Vec<String>],
    ) -> Result<(), ReplayError> {
        let Some(spec) = spec(table) else {
            return Err(ReplayError::Malformed {
                file: self.trace.name.clone(),
                what: format!("rows gained in unknown table {table}"),
            });
        };
        let fail = |this: &Self, sql: &str, message: String| ReplayError::Engine {
            trace: this.trace.name.clone(),
            step: step.map_or(0, |s| s.index),
            action: step.map_or_else(
                || "the model's initial rows".to_owned(),
                |s| s.action.clone(),
            ),
            sql: sql.to_owned(),
            message,
        };
        if spec.model == "capture_raw" {
            let descriptors: Vec<CaptureDescriptor> = rows
                .iter()
                .filter_map(|r| {
                    let pack = Uuid::parse_str(r.get(1)?).ok()?;
                    Some(placeholder_descriptor(
                        r.first()?,
                        pack,
                        r.get(2)?.parse().ok()?,
                    ))
                })
                .collect();
            let stmt = capcat_proto::index::sql::insert_descriptors(self.db.tables(), descriptors);
            self.db
                .run_proto(&stmt)
                .map_err(|e| fail(self, &stmt.sql, e))?;
        } else {
            let values: Vec<String> = rows
                .iter()
                .map(|r| {
                    let cells: Vec<String> = r
                        .iter()
                        .enumerate()
                        .map(|(i, v)| {
                            let v = if Some(i) == spec.time {
                                self.clock.to_real_ns(v.parse().unwrap_or(0)).to_string()
                            } else {
                                v.clone()
                            };
                            format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"))
                        })
                        .collect();
                    format!("({})", cells.join(", "))
                })
                .collect();
            let sql = format!(
                "INSERT INTO {} ({}) VALUES {}",
                self.db.real_name(spec.model),
                spec.columns.join(", "),
                values.join(", ")
            );
            self.db.run_sql(&sql).map_err(|e| fail(self, &sql, e))?;
        }
        if let Some(step) = step {
            self.refresh(step, spec.model)?;
        } else {
            let rows = self
                .db
                .read_table(spec)
                .map_err(|e| fail(self, "SELECT …", e))?;
            self.real.insert(spec.model, rows);
        }
        Ok(())
    }
}

/// A descriptor row for a pack the model says was described at
/// `index_version`: the model keeps only `(pack, index_version)` of it, so
/// every other field is a fixed placeholder (tenant `t`, which the model's
/// reader searches).
fn placeholder_descriptor(store: &str, pack: Uuid, index_version: u64) -> CaptureDescriptor {
    CaptureDescriptor {
        tenant_id: "t".to_owned(),
        experiment_id: "e".to_owned(),
        run_id: "r".to_owned(),
        capture_id: Uuid::from_u128(pack.as_u128() ^ 0xCA97_0000_0000_0000_0000_0000_0000_0000),
        locator: Locator {
            store_id: store.to_owned(),
            pack_id: pack,
            ..Locator::default()
        },
        index_version,
        tensor_name: "x".to_owned(),
        dtype: "float32".to_owned(),
        ..CaptureDescriptor::default()
    }
}
