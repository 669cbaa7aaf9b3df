//! `capcat verify`: the store checked against the catalog, like `git fsck`
//! or `restic check`.
//!
//! The catalog's published head is pinned and every pack it admits there
//! is listed (`reader.admitted_packs`). Each pack of this store is then
//! checked: its object must exist and carry its pack metadata (HEAD), and
//! with `--read-data` its bytes are read whole and opened as a pack, which
//! checks the pack digest and every record's payload digest. Objects in
//! the store that no published version admits are reported as orphaned:
//! `capcat reconcile` indexes them (a running service's freshly uploaded
//! packs are orphaned until its next index pass, so they are reported
//! without failing the check).
//!
//! Exit status: non-zero when a pack is missing or corrupt, and when the
//! catalog admits no pack of this store (a check of nothing is not a
//! pass). Nothing is written to the catalog or the store.

use std::collections::BTreeSet;
use std::fmt;

use capcat_pack::PackReader;
use capcat_s3::reconcile::{ListLimits, list_catalog_packs};
use capcat_s3::{AnyStore, CatalogPrefix, ErrorClass, PackKey, PackStore, StoreError};
use uuid::Uuid;

use crate::commands::{config, open_catalog, read_error};
use crate::{CliError, Common};
use capcat_targets::Access;

/// What is wrong with one admitted pack.
#[derive(Debug)]
enum Problem {
    /// The object is not in the store.
    Missing { pack_id: Uuid },
    /// The object is there but is not the pack the catalog admitted.
    Corrupt { pack_id: Uuid, reason: String },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing { pack_id } => write!(
                f,
                "missing {pack_id}: admitted by the catalog, not in the store"
            ),
            Self::Corrupt { pack_id, reason } => write!(f, "corrupt {pack_id}: {reason}"),
        }
    }
}

/// The problem a store error on one object is, or the error itself when
/// the store cannot answer at all (then nothing can be concluded about any
/// pack, and the check stops).
fn classify(pack_id: Uuid, error: StoreError) -> Result<Problem, CliError> {
    match error.class() {
        ErrorClass::NotFound => Ok(Problem::Missing { pack_id }),
        ErrorClass::Transient | ErrorClass::Auth => Err(CliError::Store(error)),
        _ => Ok(Problem::Corrupt {
            pack_id,
            reason: error.to_string(),
        }),
    }
}

/// Checks one admitted pack; `None` when it is sound.
async fn check_pack(
    store: &AnyStore,
    prefix: &CatalogPrefix,
    pack_id: Uuid,
    read_data: bool,
) -> Result<Option<Problem>, CliError> {
    let corrupt = |reason: String| Ok(Some(Problem::Corrupt { pack_id, reason }));
    let key = PackKey::new(prefix.clone(), pack_id).object_key();
    let head = match store.head(&key).await {
        Ok(head) => head,
        Err(error) => return classify(pack_id, error).map(Some),
    };
    let metadata = match head.pack_metadata() {
        Ok(metadata) => metadata,
        Err(error) => return corrupt(format!("its pack metadata is unreadable: {error}")),
    };
    if metadata.pack_id != pack_id {
        return corrupt(format!("its metadata names pack {}", metadata.pack_id));
    }
    if !read_data {
        return Ok(None);
    }
    let bytes = match store.get(&key).await {
        Ok(bytes) => bytes,
        Err(error) => return classify(pack_id, error).map(Some),
    };
    if bytes.len() as u64 != head.size {
        return corrupt(format!(
            "{} bytes read, {} listed by HEAD",
            bytes.len(),
            head.size
        ));
    }
    match PackReader::from_bytes(bytes) {
        Err(error) => corrupt(format!("not a valid pack: {error}")),
        Ok(pack) if pack.pack_id() != pack_id => {
            corrupt(format!("the bytes hold pack {}", pack.pack_id()))
        }
        Ok(pack) if pack.pack_sha256().0 != metadata.sha256 => corrupt(format!(
            "pack digest {} differs from the metadata's {}",
            hex::encode(pack.pack_sha256().0),
            hex::encode(metadata.sha256)
        )),
        Ok(_) => Ok(None),
    }
}

/// `capcat verify [--read-data]`.
pub(crate) async fn verify(common: &Common, read_data: bool) -> Result<(), CliError> {
    let (cfg, target, store_target) = config(common)?;
    let catalog = open_catalog(&cfg, &target, Access::ReadOnly).await?;
    let store = store_target.open(Access::ReadOnly, &cfg)?;
    let admitted = catalog
        .admitted_packs()
        .await
        .map_err(read_error(cfg.tables.prefix()))?;
    let store_id = &cfg.raw.store_id;
    let here: Vec<Uuid> = admitted
        .packs
        .iter()
        .filter(|(store, _)| store == store_id)
        .map(|(_, pack_id)| *pack_id)
        .collect();
    let elsewhere = admitted.packs.len() - here.len();
    println!(
        "catalog: {} pack(s) admitted at version {}: {} in store {store_id:?}{}",
        admitted.packs.len(),
        admitted.pinned,
        here.len(),
        if elsewhere == 0 {
            String::new()
        } else {
            format!(", {elsewhere} in other stores (not checked here)")
        }
    );
    let bar = crate::progress::bar(here.len() as u64, "verify");
    let (mut missing, mut corrupt) = (0_usize, 0_usize);
    for pack_id in &here {
        let problem = check_pack(&store, &cfg.prefix, *pack_id, read_data).await;
        match problem {
            Ok(None) => {}
            Ok(Some(problem)) => {
                match problem {
                    Problem::Missing { .. } => missing += 1,
                    Problem::Corrupt { .. } => corrupt += 1,
                }
                bar.suspend(|| println!("{problem}"));
            }
            Err(error) => {
                bar.finish_and_clear();
                return Err(error);
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let listing = list_catalog_packs(&store, &cfg.prefix, ListLimits::default()).await?;
    let admitted_here: BTreeSet<Uuid> = here.iter().copied().collect();
    let mut orphaned = 0_usize;
    for listed in &listing.packs {
        let pack_id = listed.key.pack_id();
        if !admitted_here.contains(&pack_id) {
            orphaned += 1;
            println!(
                "orphaned {pack_id}: in the store, admitted by no published version \
                 (`capcat reconcile` indexes it)"
            );
        }
    }
    println!(
        "checked {} pack(s) ({}): {missing} missing, {corrupt} corrupt; {orphaned} orphaned, \
         {} foreign object(s) under the prefix",
        here.len(),
        if read_data {
            "every byte read"
        } else {
            "existence and metadata; --read-data reads every byte"
        },
        listing.foreign.count
    );
    if missing + corrupt > 0 {
        return Err(CliError::StoreDamaged { missing, corrupt });
    }
    if here.is_empty() {
        return Err(CliError::NothingVerified {
            pinned: admitted.pinned,
            store_id: store_id.clone(),
        });
    }
    Ok(())
}
