//! The catalog schema: the DDL of every object under a prefix, the guard
//! that decides whether an existing catalog is ours, and `drop_schema`.
//!
//! One ordered table of objects ([`CatalogObject::ALL`]) drives creation,
//! the stamp, the guard's expectations and the teardown, so none of them can
//! list an object the others forget. The guard refuses, never migrates, and
//! says what it found: see [`judge`] and [`EnsureSchema`].

mod ddl;
mod ensure;
mod error;
mod guard;
mod objects;
mod probe;
mod refusal;

pub use ddl::SERVER_NOW_DEFAULT;
pub use ensure::{EnsureOutcome, EnsureSchema};
pub use error::SchemaError;
pub use guard::{
    Diagnosis, Instruction, MembershipCounts, Observed, ObservedObject, Refusal, SCHEMA_VERSION,
    StampSeen, StampState, UnstampedCatalog, Verdict, WrongKind, judge, parse_sort_key,
};
pub use objects::{
    CatalogObject, LegacyObject, ObjectKind, create_schema, drop_schema, objects_by_name,
    probed_names,
};
pub use probe::{
    check_access, count_membership, parse_columns, parse_membership, parse_stamp, parse_tables,
    read_columns, read_stamp, read_tables, stamp_statement,
};
