//! [`Catalog`]: a transport, the table names and the protocol configuration,
//! with one method per catalog operation.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use capcat_proto::reader::{GetByIds, Lookup, Page, SearchPage, SearchQuery};
use capcat_proto::schema::{EnsureOutcome, EnsureSchema};
use capcat_proto::{
    Allocate, CaptureDescriptor, Config, InOrder, IndexPass, IndexReport, PackRef, Publish,
    PublishOutcome, Tables,
};
use uuid::Uuid;

use crate::claim_id::ClaimIds;
use crate::drive::drive;
use crate::error::CatalogError;
use crate::jitter::Jitter;
use crate::lease::LeaseHandle;
use crate::transport::{Embedded, Http, HttpOptions, Transport};

/// A publish that won its version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Published {
    /// The version now visible.
    pub version: u64,
    /// The winning attempt's id.
    pub publish_id: Uuid,
}

/// The catalog under one prefix, over one transport. Cheap to clone (the
/// transport and the jitter source are shared).
#[derive(Clone, Debug)]
pub struct Catalog {
    transport: Arc<dyn Transport>,
    tables: Tables,
    config: Config,
    jitter: Arc<Jitter>,
    /// The claim id lease acquires present until one holds (shared by the
    /// clones of this catalog, which are one process's view of it).
    claim_ids: Arc<ClaimIds>,
    /// The design the publishing machines run as (feature `designs` only;
    /// the shipped design otherwise).
    #[cfg(feature = "designs")]
    design: capcat_proto::designs::Design,
}

impl Catalog {
    /// A catalog over `transport` under `tables`, with `config`; jitter is
    /// seeded from the operating system.
    pub fn new(transport: Arc<dyn Transport>, tables: Tables, config: Config) -> Self {
        Self {
            transport,
            tables,
            config,
            jitter: Arc::new(Jitter::from_os()),
            claim_ids: Arc::new(ClaimIds::default()),
            #[cfg(feature = "designs")]
            design: capcat_proto::designs::Design::Shipped,
        }
    }

    /// The embedded default: libchdb on `data_path`, objects under `prefix`,
    /// the default protocol configuration.
    pub fn embedded(data_path: impl AsRef<Path>, prefix: &str) -> Result<Self, CatalogError> {
        let tables = Tables::new(prefix)?;
        let transport = Embedded::open(data_path)?;
        Ok(Self::new(Arc::new(transport), tables, Config::default()))
    }

    /// A ClickHouse server at `url` (`http://host:port`), objects under
    /// `prefix`, the default protocol configuration.
    pub fn http(url: &str, prefix: &str, options: HttpOptions) -> Result<Self, CatalogError> {
        let tables = Tables::new(prefix)?;
        let transport = Http::new(url, options)?;
        Ok(Self::new(Arc::new(transport), tables, Config::default()))
    }

    /// The same catalog with another protocol configuration.
    pub fn with_config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// The same catalog drawing jitter from `seed` (reproducible runs).
    pub fn with_jitter_seed(mut self, seed: u64) -> Self {
        self.jitter = Arc::new(Jitter::from_seed(seed));
        self
    }

    /// The table names.
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The protocol configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The claim ids lease acquires present.
    pub(crate) fn claim_ids(&self) -> &ClaimIds {
        &self.claim_ids
    }

    /// The transport (demand storage and tests run their statements on it).
    pub fn transport(&self) -> &Arc<dyn Transport> {
        &self.transport
    }

    /// This catalog with its publishing machines (index passes, publishes)
    /// run as `design`: the stress harness and the live tests use it to
    /// show the real engine catching a rejected design.
    #[cfg(feature = "designs")]
    pub fn with_design(mut self, design: capcat_proto::designs::Design) -> Self {
        self.design = design;
        self
    }

    /// Drives a publishing machine (as the catalog's design, with the
    /// feature `designs`) and hands it back with its outcome, so the caller
    /// can read the lease it ended with.
    async fn run_publishing<M>(
        &self,
        operation: &'static str,
        machine: M,
    ) -> Result<(M::Outcome, M), CatalogError>
    where
        M: capcat_proto::Machine + Clone,
        M: PublishingMachine,
    {
        #[cfg(feature = "designs")]
        let mut machine = self
            .design
            .wrap(self.tables.clone(), self.config.clone(), machine);
        #[cfg(not(feature = "designs"))]
        let mut machine = machine;
        let outcome = drive(
            operation,
            &mut machine,
            self.transport.as_ref(),
            &self.jitter,
        )
        .await?;
        #[cfg(feature = "designs")]
        let machine = machine.into_inner();
        Ok((outcome, machine))
    }

    pub(crate) async fn run<M: capcat_proto::Machine>(
        &self,
        operation: &'static str,
        mut machine: M,
    ) -> Result<M::Outcome, CatalogError> {
        drive(
            operation,
            &mut machine,
            self.transport.as_ref(),
            &self.jitter,
        )
        .await
    }

    /// Creates the catalog, completes an unfinished install, or accepts a
    /// current one (reinstalling its views); refuses anything else with the
    /// guard's diagnosis and instruction ([`CatalogError::Schema`]).
    pub async fn ensure_schema(&self) -> Result<EnsureOutcome, CatalogError> {
        self.check_access().await?;
        let outcome = self
            .run("ensure_schema", EnsureSchema::new(self.tables.clone()))
            .await??;
        tracing::info!(
            prefix = self.tables.prefix(),
            %outcome,
            "catalog schema ensured"
        );
        Ok(outcome)
    }

    /// Whether the server accepts this catalog's transport: its
    /// certificate and the credentials, checked with `SELECT 1` and
    /// reported as [`CatalogError::Access`] naming what to fix. Also the
    /// first step of [`Catalog::ensure_schema`]; a reader that never
    /// ensures the schema calls it on its own.
    pub async fn check_access(&self) -> Result<(), CatalogError> {
        self.transport.check_access().await?;
        Ok(())
    }

    /// Drops every catalog object (`DROP ... IF EXISTS`, views first): a
    /// no-op per missing object, so it also cleans up a partial install.
    pub async fn drop_schema(&self) -> Result<(), CatalogError> {
        let drops = InOrder::new(capcat_proto::schema::drop_schema(&self.tables));
        self.run("drop_schema", drops)
            .await?
            .map_err(|failed| CatalogError::Drop {
                statement: failed.statement,
                failure: failed.failure,
            })?;
        tracing::info!(prefix = self.tables.prefix(), "catalog schema dropped");
        Ok(())
    }

    /// Takes the publisher lease as `holder` (a fresh lease id).
    pub async fn acquire_lease(&self, holder: &str) -> Result<LeaseHandle, CatalogError> {
        LeaseHandle::acquire(self.clone(), holder).await
    }

    /// Allocates one catalog version (sole claimant of it).
    pub async fn allocate_version(&self) -> Result<u64, CatalogError> {
        let machine = Allocate::new(self.tables.clone(), self.config.clone(), Uuid::new_v4());
        Ok(self.run("allocate_version", machine).await??)
    }

    /// Publishes `packs` as `version` under `lease` (renewing it first), with
    /// a fresh publish id. Anything but a won publish is an error saying what
    /// is known: [`CatalogError::LostRace`] (nothing visible; retry at a new
    /// version), [`CatalogError::LeaseLost`] (acquire again),
    /// [`CatalogError::Conflict`] (visible beside a foreign publish).
    pub async fn publish_snapshot(
        &self,
        lease: &mut LeaseHandle,
        version: u64,
        packs: BTreeSet<PackRef>,
    ) -> Result<Published, CatalogError> {
        let held = lease.begin_guarded_run()?;
        let machine = Publish::new(
            self.tables.clone(),
            self.config.clone(),
            held,
            version,
            packs,
            Uuid::new_v4(),
        );
        let (outcome, machine) = self.run_publishing("publish_snapshot", machine).await?;
        lease.update(machine.lease().clone());
        // The lease stopping the attempt converts to LeaseLost or Unsettled.
        let outcome = outcome?;
        match outcome {
            PublishOutcome::Won {
                version,
                publish_id,
            } => {
                tracing::info!(version, %publish_id, "snapshot published");
                Ok(Published {
                    version,
                    publish_id,
                })
            }
            PublishOutcome::LostRace(race) => Err(CatalogError::LostRace(race)),
            PublishOutcome::Conflict {
                version,
                publish_id,
                all_foreign,
                ..
            } => Err(CatalogError::Conflict {
                version,
                publish_id,
                all_foreign,
            }),
        }
    }

    /// One index pass: descriptors, then allocate and publish (retrying a
    /// lost race at a new version, bounded), then the inventory.
    pub async fn index(
        &self,
        lease: &mut LeaseHandle,
        descriptors: Vec<CaptureDescriptor>,
    ) -> Result<IndexReport, CatalogError> {
        let held = lease.begin_guarded_run()?;
        let machine = IndexPass::new(
            self.tables.clone(),
            self.config.clone(),
            held,
            descriptors,
            Uuid::new_v4(),
        );
        let (outcome, machine) = self.run_publishing("index", machine).await?;
        lease.update(machine.lease().clone());
        let report = outcome?;
        tracing::info!(?report, "index pass finished");
        Ok(report)
    }

    /// The published head: what a new read pins.
    pub async fn pin(&self) -> Result<u64, CatalogError> {
        let machine = capcat_proto::reader::PinSnapshot::new(self.tables.clone());
        Ok(self.run("pin", machine).await??)
    }

    /// Every pack admitted at the published head, which it pins: the list a
    /// store scrub checks against the objects (`capcat verify`). Read in
    /// pages of [`capcat_proto::reader::ADMITTED_PAGE`] packs.
    pub async fn admitted_packs(&self) -> Result<capcat_proto::reader::Admitted, CatalogError> {
        let machine = capcat_proto::reader::AdmittedPacks::new(
            self.tables.clone(),
            capcat_proto::reader::ADMITTED_PAGE,
        );
        Ok(self.run("admitted_packs", machine).await??)
    }

    /// One page of a search. The first page (no cursor) pins the head; a
    /// cursor carries its pinned version, so every page reads the same snapshot.
    pub async fn search(&self, query: SearchQuery) -> Result<Page, CatalogError> {
        let machine = SearchPage::new(self.tables.clone(), query)?;
        Ok(self.run("search", machine).await??)
    }

    /// The captures of `tenant` among `ids` at the pinned version `pinned`, and which ids
    /// did not resolve there.
    pub async fn get_by_ids(
        &self,
        tenant: &str,
        ids: BTreeSet<Uuid>,
        pinned: u64,
    ) -> Result<Lookup, CatalogError> {
        let machine = GetByIds::new(self.tables.clone(), tenant, ids, pinned)?;
        Ok(self.run("get_by_ids", machine).await??)
    }

    /// Like [`Catalog::get_by_ids`], but every id must resolve: a pinned
    /// selection with captures that no longer resolve is
    /// [`capcat_proto::reader::ReaderError::Unresolved`], never a shorter
    /// answer.
    pub async fn resolve(
        &self,
        tenant: &str,
        ids: BTreeSet<Uuid>,
        pinned: u64,
    ) -> Result<BTreeMap<Uuid, CaptureDescriptor>, CatalogError> {
        Ok(self.get_by_ids(tenant, ids, pinned).await?.resolve()?)
    }
}

/// The machines [`Catalog::run_publishing`] drives: with the feature
/// `designs` they must be ones a design can wrap.
#[cfg(feature = "designs")]
trait PublishingMachine: capcat_proto::designs::Designable {}
#[cfg(feature = "designs")]
impl<M: capcat_proto::designs::Designable> PublishingMachine for M {}
#[cfg(not(feature = "designs"))]
trait PublishingMachine {}
#[cfg(not(feature = "designs"))]
impl<M> PublishingMachine for M {}
