//! The uploader: sealed packs from the spool to the store, each verified by
//! a HEAD and owed to the catalog before its spool file goes.
//!
//! Two kinds of work alternate here: CPU (reading a spool file back and
//! verifying every digest, then describing its records for the catalog)
//! and the store's IO (the PUT, which on a local store is a write and two
//! fsyncs). They overlap: while one pack's PUT is in flight, the next pack
//! is read and verified and this pack's records are described, each on a
//! blocking thread. The order in which packs become owed, are set aside or
//! leave the spool is still the listing's, one pack at a time; only the
//! reading ahead is concurrent.
//!
//! Bounded: at most two packs are in memory at once, the one uploading and
//! the one read ahead.

use std::time::{Duration, Instant};

use capcat_pack::PackReader;
use capcat_s3::{PackKey, PackMetadata, PackStore};
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::cycle::blocking;
use crate::descriptors::descriptors_of;
use crate::error::CycleError;
use crate::service::{Inner, Owed};
use crate::spool::{ReadyPack, SpoolError};

/// A spool file read back and opened, or why it will not be uploaded.
enum ReadBack {
    /// Removed since the listing (another cycle or a flush raced us).
    Gone,
    /// Not a valid pack, or not the pack its name says: set aside, with the
    /// reason.
    Refused(String),
    /// Opened with every check that needs no digest from outside.
    Verified(PackReader),
}

/// A read-back running on a blocking thread, with the time it took.
type Reading = JoinHandle<Result<(ReadBack, Duration), SpoolError>>;

/// Reads `ready` back from the spool and verifies it, on a blocking thread
/// started now.
///
/// A format-2 pack carries its own digest over the header, so every byte is
/// checked. A format-1 file (spooled by a build before format 2, before an
/// upgrade) has no such digest: its descriptor and payloads are verified,
/// but its header padding and JSON spacing are trusted as they stand on
/// this local disk, and the digest the catalog records for it is computed
/// here, from these bytes.
fn read_back(ready: &ReadyPack) -> Reading {
    let path = ready.path.clone();
    let pack_id = ready.pack_id;
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((ReadBack::Gone, started.elapsed()));
            }
            Err(source) => {
                return Err(SpoolError::Io {
                    op: "read",
                    path,
                    source,
                });
            }
        };
        let read = match PackReader::from_bytes(bytes) {
            Ok(pack) if pack.pack_id() == pack_id => ReadBack::Verified(pack),
            Ok(pack) => ReadBack::Refused(format!(
                "the spool file names pack {pack_id} but holds pack {}",
                pack.pack_id()
            )),
            Err(error) => ReadBack::Refused(format!("the spool file is not a valid pack: {error}")),
        };
        Ok((read, started.elapsed()))
    })
}

impl<S: PackStore + Clone + 'static> Inner<S> {
    /// Uploads the `listed` packs in order, reading each one back while the
    /// one before it uploads. Returns how many were dealt with (uploaded,
    /// set aside or found gone) and the first failure, which stops the rest:
    /// they stay in the spool for the next cycle.
    pub(crate) async fn upload_listed(
        &self,
        listed: &[ReadyPack],
    ) -> (usize, Result<(), CycleError>) {
        let mut ahead: Option<Reading> = listed.first().map(read_back);
        for (position, ready) in listed.iter().enumerate() {
            // The read-back of this pack started one iteration ago (or
            // above, for the first); the next one starts before this one
            // uploads, so it runs during the PUT.
            let Some(reading) = ahead.take() else {
                unreachable!("a read-back is started for every listed pack")
            };
            ahead = listed.get(position + 1).map(read_back);
            let outcome = match reading.await {
                Ok(Ok((read, took))) => {
                    self.add_time(took, |t| &mut t.read_verify_us);
                    self.upload_one(ready, read).await
                }
                Ok(Err(error)) => Err(error.into()),
                Err(join) => Err(CycleError::from(join)),
            };
            if let Err(error) = outcome {
                // A read-back still running finishes on its thread and is
                // dropped: it only read a file.
                return (position, Err(error));
            }
        }
        (listed.len(), Ok(()))
    }

    /// Uploads one pack read back from the spool, verifies it by HEAD (size,
    /// pack digest and CRC-64/NVME metadata), records it as owed, and only
    /// then removes it from the spool.
    async fn upload_one(&self, ready: &ReadyPack, read: ReadBack) -> Result<(), CycleError> {
        let pack_id = ready.pack_id;
        let pack = match read {
            ReadBack::Gone => return Ok(()),
            ReadBack::Refused(reason) => {
                self.set_aside_file(pack_id, reason);
                return Ok(());
            }
            ReadBack::Verified(pack) => pack,
        };
        let metadata = PackMetadata {
            format_version: pack.format_version(),
            pack_id,
            sha256: pack.pack_sha256().0,
            crc64nvme: Some(pack.crc64nvme()),
            record_count: pack.len() as u64,
        };
        let body = pack.bytes().clone();
        let size = body.len() as u64;
        // The catalog rows need only the verified pack, not the upload: they
        // are computed while the PUT is in flight, and used only once the
        // HEAD has verified it.
        let store_id = self.cfg.raw.store_id.clone();
        let describing = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            (descriptors_of(&pack, &store_id), started.elapsed())
        });
        tracing::debug!(%pack_id, size, "uploading");
        let uploading = Instant::now();
        self.store
            .put_pack(&self.cfg.prefix, body, &metadata)
            .await?;
        self.add_stage_time(uploading, |t| &mut t.upload_us);
        let key = PackKey::new(self.cfg.prefix.clone(), pack_id).object_key();
        let heading = Instant::now();
        let head = self.store.head(&key).await?;
        self.add_stage_time(heading, |t| &mut t.head_verify_us);
        let stored = head
            .pack_metadata()
            .map_err(|e| CycleError::UploadNotVerified {
                pack_id,
                detail: format!("HEAD metadata unreadable: {e}"),
            })?;
        if head.size != size
            || stored.sha256 != metadata.sha256
            || stored.crc64nvme != metadata.crc64nvme
            || stored.pack_id != pack_id
        {
            return Err(CycleError::UploadNotVerified {
                pack_id,
                detail: format!(
                    "HEAD says {} bytes, pack digest {}, crc64nvme {:016x?}; sealed {size} bytes, \
                     pack digest {}, crc64nvme {:016x?}",
                    head.size,
                    hex::encode(stored.sha256),
                    stored.crc64nvme,
                    hex::encode(metadata.sha256),
                    metadata.crc64nvme
                ),
            });
        }
        let (described, took) = describing.await.map_err(CycleError::from)?;
        self.add_time(took, |t| &mut t.describe_us);
        let descriptors = match described {
            Ok(d) => d,
            Err(error) => {
                self.set_aside_file(pack_id, format!("its records cannot be described: {error}"));
                return Ok(());
            }
        };
        {
            // Owed before the spool file goes: there is no moment at which
            // the pack is in neither place.
            let mut state = self.lock_state();
            state.owed.insert(
                pack_id,
                Owed {
                    descriptors,
                    refusals: 0,
                },
            );
            state.snapshot.uploaded += 1;
        }
        let spool = self.spool.clone();
        blocking(move || spool.remove_ready(pack_id)).await??;
        tracing::info!(%pack_id, size, path = %ready.path.display(), "uploaded and verified; removed from the spool");
        Ok(())
    }

    /// A spool file that is not a valid pack is renamed `.rejected` beside
    /// the spool (never deleted) and set aside.
    fn set_aside_file(&self, pack_id: Uuid, reason: String) {
        let from = self.spool.ready_path(pack_id);
        let to = from.with_extension("rejected");
        if let Err(error) = std::fs::rename(&from, &to) {
            tracing::warn!(%error, path = %from.display(), "could not rename a rejected spool file");
        }
        self.lock_state().set_aside(pack_id, reason);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::SystemTime;

    use bytes::Bytes;
    use capcat_pack::{CaptureIdentity, Dtype, PackLimits, PackWriter, RecordMetadata};

    use super::*;
    use crate::spool::Spool;

    /// A sealed pack of two small f32 records.
    fn sealed(pack_id: Uuid) -> Vec<u8> {
        let limits = PackLimits::new(2, 1 << 20).expect("limits");
        let mut writer = PackWriter::new(pack_id, limits);
        for i in 0..2_u64 {
            let metadata = RecordMetadata {
                identity: CaptureIdentity {
                    tenant_id: "t".to_owned(),
                    experiment_id: "e".to_owned(),
                    run_id: "r".to_owned(),
                    captured_at_ns: i,
                    capture_id: Uuid::from_u128(u128::from(i) + 1),
                },
                model: "m".to_owned(),
                module_path: "layers.0".to_owned(),
                hook: "forward".to_owned(),
                step: i,
                tensor_name: "layers.0.out".to_owned(),
                dtype: Dtype::F32,
                shape: vec![2],
                tags: BTreeMap::new(),
            };
            let payload = Bytes::from([1.5_f32, -0.0].map(f32::to_le_bytes).concat());
            writer.append(metadata, payload).expect("append");
        }
        writer.seal().expect("seal").bytes.to_vec()
    }

    fn ready(spool: &Spool, pack_id: Uuid) -> ReadyPack {
        ReadyPack {
            pack_id,
            path: spool.ready_path(pack_id),
            sealed_at: SystemTime::UNIX_EPOCH,
        }
    }

    async fn outcome(ready: &ReadyPack) -> ReadBack {
        let (read, _took) = read_back(ready)
            .await
            .expect("the read-back thread completes")
            .expect("no IO error but NotFound");
        read
    }

    #[tokio::test]
    async fn a_spool_file_reads_back_verified_refused_or_gone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spool = Spool::open(dir.path()).expect("spool");
        let (own, other, garbage, missing) = (
            Uuid::from_u128(11),
            Uuid::from_u128(12),
            Uuid::from_u128(13),
            Uuid::from_u128(14),
        );

        spool.write_sealed(own, &sealed(own)).expect("write");
        match outcome(&ready(&spool, own)).await {
            ReadBack::Verified(pack) => assert_eq!((pack.pack_id(), pack.len()), (own, 2)),
            ReadBack::Gone => panic!("a pack under its own name read back as gone"),
            ReadBack::Refused(why) => panic!("a pack under its own name refused: {why}"),
        }

        // Another pack's bytes under this name: never uploaded as this pack.
        spool.write_sealed(other, &sealed(own)).expect("write");
        match outcome(&ready(&spool, other)).await {
            ReadBack::Refused(why) => assert!(why.contains("holds pack"), "{why}"),
            ReadBack::Gone | ReadBack::Verified(_) => panic!("a misnamed pack was not refused"),
        }

        // A torn or foreign file.
        let mut bytes = sealed(garbage);
        bytes.truncate(bytes.len() / 2);
        spool.write_sealed(garbage, &bytes).expect("write");
        match outcome(&ready(&spool, garbage)).await {
            ReadBack::Refused(why) => assert!(why.contains("not a valid pack"), "{why}"),
            ReadBack::Gone | ReadBack::Verified(_) => panic!("half a pack was not refused"),
        }

        // Removed since the listing (a flush or another cycle took it):
        // not an error, and nothing to set aside.
        assert!(matches!(
            outcome(&ready(&spool, missing)).await,
            ReadBack::Gone
        ));
    }
}
