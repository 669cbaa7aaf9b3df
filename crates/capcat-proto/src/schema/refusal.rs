//! How a refusal reads to an operator.
//!
//! Every sentence states something the operator can check against the
//! server. A refusal that claims a difference the catalog does not have gets
//! worked around, and around is the path the guard exists to block.

use std::fmt;

use crate::schema::guard::{
    Diagnosis, Instruction, Refusal, SCHEMA_VERSION, StampSeen, UnstampedCatalog,
};

fn names<'a>(items: impl IntoIterator<Item = &'a String>) -> String {
    let quoted: Vec<String> = items.into_iter().map(|n| format!("`{n}`")).collect();
    quoted.join(", ")
}

fn stamp_words(stamp: StampSeen) -> &'static str {
    match stamp {
        StampSeen::Empty => {
            "its stamp table exists but holds no row (an install that stopped before stamping, \
             or a stamp that was cleared)"
        }
        StampSeen::Current => "it is stamped with this build's schema version",
    }
}

impl fmt::Display for UnstampedCatalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "it holds catalog objects but no `{}` table, so it was not created by this build's \
             ensure_schema, which creates that table before any other object and stamps schema \
             version {SCHEMA_VERSION}. What it holds: ",
            self.stamp_table
        )?;
        write!(f, "present: {}", names(&self.present))?;
        if !self.legacy_present.is_empty() {
            write!(
                f,
                "; objects of an earlier design: {}",
                names(&self.legacy_present)
            )?;
        }
        if self.missing.is_empty() {
            f.write_str("; absent: none")?;
        } else {
            write!(f, "; absent: {}", names(&self.missing))?;
        }
        let required = self.sort_key_required.join(", ");
        match &self.sort_key_found {
            None => write!(
                f,
                ". The descriptor table `{}` is absent, so its sort key cannot be compared \
                 (required: ({required}))",
                self.descriptor_table
            )?,
            Some(found) => {
                let found = found.join(", ");
                if self.sort_key_matches() {
                    write!(
                        f,
                        ". The descriptor sort key of `{}` is ({found}), which is the one \
                         required",
                        self.descriptor_table
                    )?;
                } else {
                    write!(
                        f,
                        ". The descriptor sort key of `{}` is ({found}) but this build requires \
                         ({required}): without pack identity in the key a merge may delete one of \
                         two rows describing a capture in two packs",
                        self.descriptor_table
                    )?;
                }
            }
        }
        f.write_str(". Membership tables: ")?;
        let membership: Vec<String> = self
            .membership_tables
            .iter()
            .map(|(name, here)| format!("`{name}` {}", if *here { "present" } else { "absent" }))
            .collect();
        f.write_str(&membership.join(", "))?;
        f.write_str(". publish_id: ")?;
        let columns: Vec<String> = self
            .publish_id
            .iter()
            .map(|(name, state)| match state {
                None => format!("`{name}` is absent"),
                Some(true) => format!("`{name}` carries it"),
                Some(false) => format!("`{name}` lacks it"),
            })
            .collect();
        f.write_str(&columns.join(", "))?;
        let not_wrong = self.not_wrong();
        if !not_wrong.is_empty() {
            write!(f, ". What is NOT wrong: {}", not_wrong.join("; "))?;
        }
        f.write_str(
            ". These probes compare object names, one sort key and the required columns; they \
             do not compare column types, view definitions, codecs or skip indices, so the \
             differences listed are not claimed to be all of them",
        )
    }
}

impl fmt::Display for Diagnosis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::WrongKind { objects } => {
                let items: Vec<String> = objects
                    .iter()
                    .map(|(name, w)| {
                        format!(
                            "`{name}` should be a {} but is a {}",
                            w.expected.keyword().to_lowercase(),
                            w.engine
                        )
                    })
                    .collect();
                write!(
                    f,
                    "objects stand under catalog names with the wrong kind: {}",
                    items.join("; ")
                )
            }
            Self::Leftovers { objects } => write!(
                f,
                "the catalog holds no table of this build, only {}, which are views or objects \
                 of an earlier design and hold no catalog rows; nothing survives to rebuild from",
                names(objects)
            ),
            Self::Unstamped(unstamped) => unstamped.fmt(f),
            Self::OtherVersion { found, required } => {
                let found: Vec<String> = found.iter().map(u64::to_string).collect();
                write!(
                    f,
                    "the catalog is stamped with schema version {} but this build reads only \
                     version {required}; CREATE TABLE IF NOT EXISTS would leave its tables in \
                     their old shape, so it is never upgraded in place",
                    found.join(" and ")
                )
            }
            Self::MissingTables {
                stamp,
                missing,
                holding,
            } => {
                write!(
                    f,
                    "{}, yet the tables {} are missing",
                    stamp_words(*stamp),
                    names(missing)
                )?;
                if holding.is_empty() {
                    f.write_str(", and rows are at stake in the tables that remain")
                } else {
                    let items: Vec<String> = holding
                        .iter()
                        .map(|(table, rows)| match rows {
                            Some(n) => format!("`{table}` holds {n} rows"),
                            None => format!("`{table}` does not say how many rows it holds"),
                        })
                        .collect();
                    write!(
                        f,
                        ", and rows are at stake: {} (an install stopped part way holds none, \
                         and is finished instead)",
                        items.join("; ")
                    )
                }
            }
            Self::MissingColumns { stamp, missing } => {
                let items: Vec<String> = missing
                    .iter()
                    .map(|(table, cols)| format!("`{table}` lacks {}", names(cols)))
                    .collect();
                write!(
                    f,
                    "{}, yet its tables are not in this build's shape: {}",
                    stamp_words(*stamp),
                    items.join("; ")
                )
            }
            Self::InventoryWithoutMembership {
                inventory,
                manifest,
                watermark,
                counts,
            } => write!(
                f,
                "`{inventory}` holds {} rows but no row of `{manifest}` pairs with a row of \
                 `{watermark}` on (index_version, publish_id) ({} effective membership rows): \
                 the reconciler would skip every inventoried pack as already committed, and \
                 none of them would ever become visible to a reader",
                counts.inventory_rows, counts.effective_membership_rows
            ),
            Self::MembershipUncounted => f.write_str(
                "the membership counts were not read, so the inventory cannot be checked \
                 against the manifest",
            ),
        }
    }
}

impl fmt::Display for Instruction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rebuild { drops, inventory } => write!(
                f,
                "To rebuild (the catalog is a projection over immutable packs, so nothing is \
                 migrated in place): drop every catalog object ({}) -- `{inventory}` included, \
                 because it is the replay guard and a surviving inventory makes the reconciler \
                 skip every pack it lists -- then run ensure_schema, acquire the publisher \
                 lease, and reconcile every pack in the object store",
                drops.join("; ")
            ),
            Self::DropAndRerun { drops } => write!(
                f,
                "Drop only these objects ({}) and run ensure_schema again; no rebuild is needed",
                drops.join("; ")
            ),
            Self::Rerun => f.write_str("Run ensure_schema again"),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "catalog `{}` refused: {}. {}.",
            self.prefix, self.diagnosis, self.instruction
        )
    }
}
