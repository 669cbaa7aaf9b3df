//! What the kit asks a driver to start, and capcat-proto's own machine for
//! it: the reference every step of the driver is compared with.

use std::collections::BTreeSet;

use capcat_proto::reader::SearchQuery;
use capcat_proto::{
    Allocate, CaptureDescriptor, Config, IndexPass, Lease, LeaseClaim, PackRef, Publish, Release,
    Tables,
};
use serde_json::{Value as Json, json};
use uuid::Uuid;

use crate::descriptor::{descriptor_from, descriptor_json};
use crate::error::ConformError;
use crate::reference::{Allocating, Claim, Indexing, Publishing, Releasing};
use crate::wire::{
    config_from, config_json, field, lease_from, lease_json, str_field, u64_field, uuid_field,
    uuid_json,
};

/// A machine to start, with its constructor's arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// `LeaseClaim::acquire`.
    Acquire {
        /// Who claims.
        holder: String,
        /// The lease the caller already holds, if any.
        held: Option<Lease>,
        /// The lease id a fresh claim carries.
        fresh_lease_id: Uuid,
    },
    /// `LeaseClaim::renew`.
    Renew {
        /// The lease to renew.
        lease: Lease,
    },
    /// `Release::new`.
    Release {
        /// The lease to release.
        lease: Lease,
    },
    /// `Allocate::new`.
    Allocate {
        /// The claim id the allocation writes.
        claim_id: Uuid,
    },
    /// `Publish::new`.
    Publish {
        /// The lease published under.
        lease: Lease,
        /// The version.
        version: u64,
        /// The packs, in the order the `start` message lists them (a driver
        /// must treat them as a set: sorted, each once).
        packs: Vec<PackRef>,
        /// This attempt's id.
        publish_id: Uuid,
    },
    /// `SearchPage::new`.
    SearchPage {
        /// The query (boxed: it is the largest start by far).
        query: Box<SearchQuery>,
    },
    /// `GetByIds::new`.
    GetByIds {
        /// The tenant.
        tenant: String,
        /// The ids, in the order the `start` message lists them (a set).
        ids: Vec<Uuid>,
        /// The pinned version.
        pinned: u64,
    },
    /// `EnsureSchema::new`.
    EnsureSchema,
    /// `IndexPass::new`.
    IndexPass {
        /// The lease indexed under.
        lease: Lease,
        /// The descriptors of the batch.
        descriptors: Vec<CaptureDescriptor>,
        /// The seed of the attempts' claim and publish ids.
        id_seed: Uuid,
    },
}

/// Every machine name the protocol defines, in the order the kit runs them.
pub const MACHINES: [&str; 9] = [
    "acquire",
    "renew",
    "release",
    "allocate",
    "publish",
    "index_pass",
    "search_page",
    "get_by_ids",
    "ensure_schema",
];

impl Start {
    /// The machine's protocol name.
    pub fn machine(&self) -> &'static str {
        match self {
            Self::Acquire { .. } => "acquire",
            Self::Renew { .. } => "renew",
            Self::Release { .. } => "release",
            Self::Allocate { .. } => "allocate",
            Self::Publish { .. } => "publish",
            Self::IndexPass { .. } => "index_pass",
            Self::SearchPage { .. } => "search_page",
            Self::GetByIds { .. } => "get_by_ids",
            Self::EnsureSchema => "ensure_schema",
        }
    }

    /// The `args` object of a `start` message.
    pub fn args_json(&self) -> Json {
        match self {
            Self::Acquire {
                holder,
                held,
                fresh_lease_id,
            } => json!({
                "holder": holder,
                "held": held.as_ref().map(lease_json),
                "fresh_lease_id": uuid_json(*fresh_lease_id),
            }),
            Self::Renew { lease } | Self::Release { lease } => {
                json!({ "lease": lease_json(lease) })
            }
            Self::Allocate { claim_id } => json!({ "claim_id": uuid_json(*claim_id) }),
            Self::Publish {
                lease,
                version,
                packs,
                publish_id,
            } => json!({
                "lease": lease_json(lease),
                "version": version,
                "packs": packs.iter().map(|(s, p)| json!([s, uuid_json(*p)])).collect::<Vec<_>>(),
                "publish_id": uuid_json(*publish_id),
            }),
            Self::SearchPage { query } => json!({ "query": crate::reader::query_json(query) }),
            Self::EnsureSchema => json!({}),
            Self::GetByIds {
                tenant,
                ids,
                pinned,
            } => json!({
                "tenant": tenant,
                "ids": ids.iter().map(|id| uuid_json(*id)).collect::<Vec<_>>(),
                "pinned": pinned,
            }),
            Self::IndexPass {
                lease,
                descriptors,
                id_seed,
            } => json!({
                "lease": lease_json(lease),
                "descriptors": descriptors.iter().map(descriptor_json).collect::<Vec<_>>(),
                "id_seed": uuid_json(*id_seed),
            }),
        }
    }

    /// The start [`Start::args_json`] wrote for `machine`.
    pub fn from_json(machine: &str, args: &Json) -> Result<Self, ConformError> {
        let bad = |what: String| ConformError::BadMessage { what };
        Ok(match machine {
            "acquire" => Self::Acquire {
                holder: str_field(args, "holder")?.to_owned(),
                held: match field(args, "held")? {
                    Json::Null => None,
                    lease => Some(lease_from(lease)?),
                },
                fresh_lease_id: uuid_field(args, "fresh_lease_id")?,
            },
            "renew" => Self::Renew {
                lease: lease_from(field(args, "lease")?)?,
            },
            "release" => Self::Release {
                lease: lease_from(field(args, "lease")?)?,
            },
            "allocate" => Self::Allocate {
                claim_id: uuid_field(args, "claim_id")?,
            },
            "publish" => {
                let mut packs = Vec::new();
                let list = field(args, "packs")?
                    .as_array()
                    .ok_or_else(|| bad("`packs` is not a list".into()))?;
                for pair in list {
                    let (store, pack) = match pair.as_array().map(Vec::as_slice) {
                        Some([store, pack]) => (store, pack),
                        _ => return Err(bad(format!("a pack is not [store, id]: {pair}"))),
                    };
                    let store = store
                        .as_str()
                        .ok_or_else(|| bad(format!("a store id is not a string: {store}")))?;
                    let pack = uuid_field(&json!({ "id": pack }), "id")?;
                    packs.push((store.to_owned(), pack));
                }
                Self::Publish {
                    lease: lease_from(field(args, "lease")?)?,
                    version: u64_field(args, "version")?,
                    packs,
                    publish_id: uuid_field(args, "publish_id")?,
                }
            }
            "ensure_schema" => Self::EnsureSchema,
            "search_page" => Self::SearchPage {
                query: Box::new(crate::reader::query_from(field(args, "query")?)?),
            },
            "get_by_ids" => Self::GetByIds {
                tenant: str_field(args, "tenant")?.to_owned(),
                ids: crate::reader::ids_from(args)?.into_iter().collect(),
                pinned: u64_field(args, "pinned")?,
            },
            "index_pass" => Self::IndexPass {
                lease: lease_from(field(args, "lease")?)?,
                descriptors: field(args, "descriptors")?
                    .as_array()
                    .ok_or_else(|| bad("`descriptors` is not a list".into()))?
                    .iter()
                    .map(descriptor_from)
                    .collect::<Result<_, _>>()?,
                id_seed: uuid_field(args, "id_seed")?,
            },
            other => return Err(bad(format!("unknown machine `{other}`"))),
        })
    }

    /// capcat-proto's machine for this start.
    pub fn build(&self, tables: Tables, cfg: Config) -> Box<dyn Reference> {
        match self.clone() {
            Self::Acquire {
                holder,
                held,
                fresh_lease_id,
            } => Box::new(Claim(LeaseClaim::acquire(
                tables,
                cfg,
                holder,
                held,
                fresh_lease_id,
            ))),
            Self::Renew { lease } => Box::new(Claim(LeaseClaim::renew(tables, cfg, lease))),
            Self::Release { lease } => Box::new(Releasing(Release::new(tables, cfg, lease))),
            Self::Allocate { claim_id } => {
                Box::new(Allocating(Allocate::new(tables, cfg, claim_id)))
            }
            Self::Publish {
                lease,
                version,
                packs,
                publish_id,
            } => Box::new(Publishing(Publish::new(
                tables,
                cfg,
                lease,
                version,
                packs.into_iter().collect::<BTreeSet<_>>(),
                publish_id,
            ))),
            Self::SearchPage { query } => crate::reader::search(tables, *query),
            Self::EnsureSchema => crate::schema::ensure(tables),
            Self::GetByIds {
                tenant,
                ids,
                pinned,
            } => crate::reader::lookup(tables, &tenant, ids.into_iter().collect(), pinned),
            Self::IndexPass {
                lease,
                descriptors,
                id_seed,
            } => Box::new(Indexing(IndexPass::new(
                tables,
                cfg,
                lease,
                descriptors,
                id_seed,
            ))),
        }
    }
}

/// A `start` message: the session, the table prefix, the configuration
/// and the machine with its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Started {
    /// The session number.
    pub session: u64,
    /// The table prefix.
    pub tables: Tables,
    /// The protocol configuration.
    pub config: Config,
    /// The machine.
    pub start: Start,
}

impl Started {
    /// The `start` message.
    pub fn to_json(&self) -> Json {
        json!({ "start": {
            "session": self.session,
            "machine": self.start.machine(),
            "prefix": self.tables.prefix(),
            "config": config_json(&self.config),
            "args": self.start.args_json(),
        }})
    }

    /// The `start` message [`Started::to_json`] wrote (the `start` object).
    pub fn from_json(start: &Json) -> Result<Self, ConformError> {
        let prefix = str_field(start, "prefix")?;
        Ok(Self {
            session: u64_field(start, "session")?,
            tables: Tables::new(prefix).map_err(|e| ConformError::BadMessage {
                what: format!("prefix `{prefix}`: {e}"),
            })?,
            config: config_from(field(start, "config")?)?,
            start: Start::from_json(str_field(start, "machine")?, field(start, "args")?)?,
        })
    }
}

pub use crate::reference::{Ended, Reference};
