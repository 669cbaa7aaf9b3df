//! Starting a service while a stopped or killed process's publisher lease
//! runs out.

use std::time::{Duration, Instant};

use capcat_proto::LeaseError;
use capcat_s3::PackStore;

use crate::{Catalog, Service, SpoolOwnership, StartError, ValidConfig};

/// How often a refused start is retried.
const RETRY: Duration = Duration::from_millis(500);

/// Starts the service; while the publisher lease is held by another holder
/// (a killed process's lease has not expired yet) or contested, retries
/// until `wait` has passed, calling `announce` with the first refusal.
/// Every other refusal returns at once: in particular
/// [`StartError::SpoolBusy`] (a live process owns the spool), which waiting
/// cannot cure. With `ownership` the spool's owner lock is taken once,
/// before the first attempt, so no retry sweeps the spool again.
///
/// # Errors
/// The last refusal once `wait` has passed, or any other [`StartError`].
pub async fn start_waiting_for_lease<S: PackStore + Clone + std::fmt::Debug + 'static>(
    cfg: ValidConfig,
    ownership: Option<SpoolOwnership>,
    store: S,
    catalog: Catalog,
    wait: Duration,
    mut announce: impl FnMut(&LeaseError),
) -> Result<Service<S>, StartError> {
    let until = Instant::now() + wait;
    let mut announced = false;
    // Bounded by `wait`: every retry sleeps RETRY.
    loop {
        let started = match &ownership {
            Some(owned) => {
                Service::start_owning(cfg.clone(), store.clone(), catalog.clone(), owned.clone())
                    .await
            }
            None => Service::start(cfg.clone(), store.clone(), catalog.clone()).await,
        };
        match started {
            // A live lease of another process (a stopped or killed one), or
            // every claim refused by another lease's live row (a killed
            // process's claim, or a rival's that lost its race): either
            // expires within one TTL, so both are waited out.
            Err(StartError::Lease(
                ref refusal @ (LeaseError::Held { .. } | LeaseError::Contested { .. }),
            )) if Instant::now() < until => {
                if !announced {
                    announce(refusal);
                    announced = true;
                }
                tokio::time::sleep(RETRY).await;
            }
            other => return other,
        }
    }
}
