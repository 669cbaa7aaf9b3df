//! The conformance suite: every case is a generic function over
//! `impl PackStore`, run against LocalStore, the S3 test server and, when
//! `CAPCAT_S3_URL` is set, an external endpoint.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use capcat_s3::reconcile::{self, ForeignReason, ListLimits};
use capcat_s3::{
    ByteRange, CatalogPrefix, ErrorClass, ObjectChecksum, ObjectKey, PackKey, PackMetadata,
    PackStore, UserMetadata, crc64nvme, sha256,
};
use uuid::Uuid;

/// A store and a namespace no other test uses (keys and prefixes of a case
/// all start with it).
pub(crate) struct Fixture<S> {
    pub(crate) store: S,
    pub(crate) ns: String,
}

impl<S: PackStore> Fixture<S> {
    pub(crate) fn key(&self, name: &str) -> ObjectKey {
        ObjectKey::new(format!("{}/{name}", self.ns)).expect("valid test key")
    }

    pub(crate) fn catalog(&self, name: &str) -> CatalogPrefix {
        CatalogPrefix::new(format!("{}-{name}", self.ns)).expect("valid test prefix")
    }
}

/// Deterministic bytes: a test that fails prints the same data every run.
pub(crate) fn pattern(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect::<Vec<u8>>()
        .into()
}

/// A pack id derived from a test-local number.
pub(crate) fn pack_id(n: u128) -> Uuid {
    Uuid::from_u128(0x5eed_0000_0000_4000_8000_0000_0000_0000 | n)
}

pub(crate) fn pack_metadata(id: Uuid, body: &[u8], records: u64) -> PackMetadata {
    PackMetadata {
        format_version: 1,
        pack_id: id,
        sha256: sha256(body),
        crc64nvme: Some(crc64nvme(body)),
        record_count: records,
    }
}

pub(crate) async fn metadata_round_trips<S: PackStore>(f: &Fixture<S>) {
    let catalog = f.catalog("meta");
    let body = pattern(100_003, 1);
    let meta = pack_metadata(pack_id(1), &body, 4096);
    f.store
        .put_pack(&catalog, body.clone(), &meta)
        .await
        .expect("put pack");

    let key = PackKey::new(catalog, meta.pack_id).object_key();
    let head = f.store.head(&key).await.expect("head");
    assert_eq!(head.size, body.len() as u64);
    assert_eq!(head.pack_metadata(), Ok(meta));
    assert_eq!(head.metadata, meta.to_user_metadata());
    if let Some(checksum) = head.checksum {
        assert_eq!(
            checksum,
            ObjectChecksum::Crc64Nvme(crc64nvme(&body)),
            "the store's checksum is the declared one"
        );
    }
    assert_eq!(f.store.get(&key).await.expect("get"), body);

    // Arbitrary metadata, and none at all, read back unchanged too.
    let custom = UserMetadata::new(BTreeMap::from([
        ("owner".to_owned(), "team a / run 7".to_owned()),
        ("x-1".to_owned(), String::new()),
    ]))
    .expect("valid metadata");
    let other = f.key("custom.bin");
    let small = pattern(10, 2);
    f.store
        .put(&other, small.clone(), crc64nvme(&small), &custom)
        .await
        .expect("put custom");
    let head = f.store.head(&other).await.expect("head custom");
    // Some stores drop empty values; the non-empty one must survive exactly.
    assert_eq!(head.metadata.get("owner"), Some("team a / run 7"));
    assert!(
        head.pack_metadata().is_err(),
        "custom metadata is not a pack's"
    );

    let empty = f.key("empty.bin");
    f.store
        .put(
            &empty,
            Bytes::new(),
            crc64nvme(&[]),
            &UserMetadata::default(),
        )
        .await
        .expect("put empty");
    let head = f.store.head(&empty).await.expect("head empty");
    assert_eq!(head.size, 0);
    assert_eq!(f.store.get(&empty).await.expect("get empty"), Bytes::new());
}

pub(crate) async fn range_reads<S: PackStore>(f: &Fixture<S>) {
    let key = f.key("range.bin");
    let body = pattern(70_000, 3);
    f.store
        .put(
            &key,
            body.clone(),
            crc64nvme(&body),
            &UserMetadata::default(),
        )
        .await
        .expect("put");
    let read = |start: u64, end: u64| {
        let key = key.clone();
        let store = &f.store;
        async move {
            store
                .get_range(&key, ByteRange::new(start, end).expect("valid range"))
                .await
        }
    };
    assert_eq!(read(0, 1).await.expect("first byte"), body.slice(0..1));
    assert_eq!(
        read(12_345, 54_321).await.expect("middle"),
        body.slice(12_345..54_321)
    );
    assert_eq!(
        read(69_999, 70_000).await.expect("last byte"),
        body.slice(69_999..)
    );
    assert_eq!(read(0, 70_000).await.expect("whole"), body);
    // Past the end: cut at the end.
    assert_eq!(
        read(69_000, 1 << 40).await.expect("past the end"),
        body.slice(69_000..)
    );
    // Starting at or past the end: not satisfiable.
    let error = read(70_000, 70_001).await.expect_err("starts at the end");
    assert_eq!(error.class(), ErrorClass::Other, "{error}");
    let error = f
        .store
        .get_range(&f.key("missing.bin"), ByteRange::new(0, 1).expect("valid"))
        .await
        .expect_err("missing key");
    assert_eq!(error.class(), ErrorClass::NotFound, "{error}");
}

pub(crate) async fn missing_keys_and_deletes<S: PackStore>(f: &Fixture<S>) {
    let key = f.key("gone.bin");
    let error = f.store.head(&key).await.expect_err("head of a missing key");
    assert_eq!(error.class(), ErrorClass::NotFound, "{error}");
    assert_eq!(error.key(), key.as_str());
    let error = f.store.get(&key).await.expect_err("get of a missing key");
    assert_eq!(error.class(), ErrorClass::NotFound, "{error}");
    f.store
        .delete(&key)
        .await
        .expect("deleting a missing key succeeds");

    let body = pattern(5, 4);
    f.store
        .put(
            &key,
            body.clone(),
            crc64nvme(&body),
            &UserMetadata::default(),
        )
        .await
        .expect("put");
    f.store.delete(&key).await.expect("delete");
    let error = f.store.head(&key).await.expect_err("head after delete");
    assert_eq!(error.class(), ErrorClass::NotFound, "{error}");
}

pub(crate) async fn overwrite_replaces_the_whole_object<S: PackStore>(f: &Fixture<S>) {
    let key = f.key("over.bin");
    let first = pattern(3_000, 5);
    let second = pattern(1_000, 6);
    let meta = |v: &str| {
        UserMetadata::new(BTreeMap::from([("v".to_owned(), v.to_owned())])).expect("valid")
    };
    f.store
        .put(&key, first.clone(), crc64nvme(&first), &meta("1"))
        .await
        .expect("first put");
    f.store
        .put(&key, second.clone(), crc64nvme(&second), &meta("2"))
        .await
        .expect("second put");
    assert_eq!(f.store.get(&key).await.expect("get"), second);
    let head = f.store.head(&key).await.expect("head");
    assert_eq!((head.size, head.metadata.get("v")), (1_000, Some("2")));
}

/// Lists every key under `prefix` with pages of `page_size`.
pub(crate) async fn list_all<S: PackStore>(
    store: &S,
    prefix: &str,
    page_size: u16,
) -> (Vec<String>, usize) {
    let mut keys = Vec::new();
    let mut token = None;
    for page_number in 1..=1000 {
        let page = store
            .list_page(prefix, token.as_ref(), page_size)
            .await
            .expect("list page");
        assert!(
            page.objects.len() <= usize::from(page_size),
            "a page holds at most page_size keys"
        );
        keys.extend(page.objects.into_iter().map(|o| o.key));
        match page.next {
            Some(next) => token = Some(next),
            None => return (keys, page_number),
        }
    }
    panic!("the listing of {prefix} did not end within 1000 pages");
}

pub(crate) async fn pagination_covers_every_key_once<S: PackStore>(f: &Fixture<S>) {
    let mut expected = BTreeSet::new();
    for i in 0..23 {
        let key = f.key(&format!("page/{i:03}.bin"));
        let body = pattern(i, 7);
        f.store
            .put(
                &key,
                body.clone(),
                crc64nvme(&body),
                &UserMetadata::default(),
            )
            .await
            .expect("put");
        expected.insert(key.as_str().to_owned());
    }
    // Keys that share the text prefix but not the listing prefix stay out.
    let outside = f.key("pages/000.bin");
    f.store
        .put(
            &outside,
            Bytes::new(),
            crc64nvme(&[]),
            &UserMetadata::default(),
        )
        .await
        .expect("put outside");

    let (keys, pages) = list_all(&f.store, &format!("{}/page/", f.ns), 5).await;
    assert_eq!(pages, 5, "23 keys in pages of 5");
    assert_eq!(keys.len(), 23, "no key twice: {keys:?}");
    assert!(
        keys.windows(2).all(|w| w[0] < w[1]),
        "in key order: {keys:?}"
    );
    assert_eq!(keys.into_iter().collect::<BTreeSet<_>>(), expected);

    let (keys, pages) = list_all(&f.store, &format!("{}/page/", f.ns), 1000).await;
    assert_eq!((keys.len(), pages), (23, 1));
    let (keys, _) = list_all(&f.store, &format!("{}/nothing/", f.ns), 10).await;
    assert!(keys.is_empty());
}

pub(crate) async fn wrong_checksum_is_refused<S: PackStore>(f: &Fixture<S>) {
    let catalog = f.catalog("sum");
    let body = pattern(64 * 1024, 8);
    let mut meta = pack_metadata(pack_id(2), &body, 1);
    // The pack changed after it was sealed: its bytes no longer match the
    // CRC-64/NVME it declares.
    meta.crc64nvme = Some(crc64nvme(b"some other bytes"));
    let error = f
        .store
        .put_pack(&catalog, body, &meta)
        .await
        .expect_err("a wrong checksum is refused");
    assert_eq!(error.class(), ErrorClass::ChecksumMismatch, "{error}");

    // Whatever the store left behind, it never reads back as a valid pack.
    let key = PackKey::new(catalog, meta.pack_id).object_key();
    match f.store.head(&key).await {
        Err(error) => assert_eq!(error.class(), ErrorClass::NotFound, "{error}"),
        Ok(head) => assert!(
            head.pack_metadata().is_err(),
            "a refused PUT left a valid-looking pack: {head:?}"
        ),
    }
}

/// Corrupts the stored bytes of the object at the given key.
pub(crate) async fn corrupted_bytes_fail_the_get<S: PackStore>(
    f: &Fixture<S>,
    corrupt: impl FnOnce(&ObjectKey),
) {
    let catalog = f.catalog("rot");
    let body = pattern(10_000, 9);
    let meta = pack_metadata(pack_id(3), &body, 2);
    f.store.put_pack(&catalog, body, &meta).await.expect("put");
    let key = PackKey::new(catalog, meta.pack_id).object_key();
    corrupt(&key);
    let error = f
        .store
        .get(&key)
        .await
        .expect_err("corrupted bytes are refused");
    assert_eq!(error.class(), ErrorClass::ChecksumMismatch, "{error}");
}

pub(crate) async fn listing_skips_and_counts_foreign_keys<S: PackStore>(f: &Fixture<S>) {
    let catalog = f.catalog("rec");
    let list_prefix = catalog.list_prefix();
    let raw = |key: String| ObjectKey::new(key).expect("valid key");
    let put_raw = |key: ObjectKey, metadata: UserMetadata| {
        let store = &f.store;
        async move {
            store
                .put(&key, pattern(3, 10), crc64nvme(&pattern(3, 10)), &metadata)
                .await
                .expect("put raw")
        }
    };

    // Two real packs, one committed and one not.
    let mut packs = Vec::new();
    for n in [10, 11] {
        let body = pattern(1_000 + n as usize, 11);
        let meta = pack_metadata(pack_id(n), &body, 3);
        f.store
            .put_pack(&catalog, body, &meta)
            .await
            .expect("put pack");
        packs.push(meta);
    }
    // Keys that are not `v1/<prefix>/<canonical uuid>.pack`.
    let id = pack_id(12).hyphenated().to_string();
    let foreign_keys = [
        format!("{list_prefix}notes.txt"),
        format!("{list_prefix}{}.pack", id.to_uppercase()),
        format!("{list_prefix}{}.pack", pack_id(12).simple()),
        format!("{list_prefix}sub/{id}.pack"),
        format!("{list_prefix}{id}.pack.partial"),
        format!("{list_prefix}not-a-uuid.pack"),
    ];
    for key in &foreign_keys {
        put_raw(raw(key.clone()), UserMetadata::default()).await;
    }
    // A well-named key without pack metadata, and one whose metadata names
    // another pack: they list as packs, and HEAD shows them foreign.
    let bare = PackKey::new(catalog.clone(), pack_id(13));
    put_raw(bare.object_key(), UserMetadata::default()).await;
    let liar = PackKey::new(catalog.clone(), pack_id(14));
    put_raw(
        liar.object_key(),
        pack_metadata(pack_id(99), &pattern(3, 10), 1).to_user_metadata(),
    )
    .await;
    // Another catalog whose name extends this one's: never listed here.
    let neighbour = CatalogPrefix::new(format!("{catalog}x")).expect("valid");
    put_raw(
        PackKey::new(neighbour, pack_id(15)).object_key(),
        UserMetadata::default(),
    )
    .await;

    let listing = reconcile::list_catalog_packs(
        &f.store,
        &catalog,
        ListLimits {
            page_size: 3,
            max_pages: 100,
        },
    )
    .await
    .expect("foreign keys never fail the listing");
    let listed: Vec<Uuid> = listing.packs.iter().map(|p| p.key.pack_id()).collect();
    assert_eq!(
        listed,
        vec![pack_id(10), pack_id(11), pack_id(13), pack_id(14)]
    );
    assert_eq!(listing.foreign.count, foreign_keys.len() as u64);
    let mut seen: Vec<String> = listing
        .foreign
        .examples
        .iter()
        .map(|o| o.key.clone())
        .collect();
    seen.sort();
    let mut want = foreign_keys.to_vec();
    want.sort();
    assert_eq!(seen, want);
    assert!(
        listing
            .foreign
            .examples
            .iter()
            .all(|o| o.reason == ForeignReason::NotAPackKey)
    );
    assert_eq!(listing.pages, 4, "10 keys in pages of 3: {listing:?}");

    // Pack 10 is committed; HEAD the rest.
    let uncommitted: Vec<_> = listing
        .packs
        .into_iter()
        .filter(|p| p.key.pack_id() != pack_id(10))
        .collect();
    let sweep = reconcile::head_packs(&f.store, &uncommitted).await;
    assert!(sweep.errors.is_empty(), "{:?}", sweep.errors);
    assert!(sweep.gone.is_empty());
    assert_eq!(sweep.verified.len(), 1);
    assert_eq!(sweep.verified[0].metadata, packs[1]);
    assert_eq!(sweep.foreign.count, 2);
    assert!(
        matches!(
            sweep.foreign.examples[0].reason,
            ForeignReason::NoPackMetadata(_)
        ),
        "{sweep:?}"
    );
    assert_eq!(
        sweep.foreign.examples[1].reason,
        ForeignReason::PackIdMismatch {
            metadata_pack_id: pack_id(99)
        }
    );

    // A pack deleted between listing and HEAD is gone, not an error.
    f.store
        .delete(&PackKey::new(catalog, pack_id(11)).object_key())
        .await
        .expect("delete");
    let sweep = reconcile::head_packs(&f.store, &uncommitted[..1]).await;
    assert_eq!(sweep.gone.len(), 1);
    assert!(sweep.errors.is_empty() && sweep.verified.is_empty() && sweep.foreign.count == 0);
}

/// A pack stored before the store declared CRC-64/NVME: format version 1,
/// its whole-object SHA-256 as `capcat-sha256`, no `capcat-crc64nvme`. It
/// is still a pack: its metadata reads back, the reconciler verifies it
/// rather than skipping it as foreign, and a whole GET returns its bytes.
pub(crate) async fn a_version_1_pack_without_a_crc_is_still_a_pack<S: PackStore>(f: &Fixture<S>) {
    let catalog = f.catalog("old");
    let body = pattern(5_000, 12);
    let meta = PackMetadata {
        crc64nvme: None,
        ..pack_metadata(pack_id(20), &body, 2)
    };
    f.store
        .put_pack(&catalog, body.clone(), &meta)
        .await
        .expect("put an older pack");
    let key = PackKey::new(catalog.clone(), meta.pack_id);
    let head = f.store.head(&key.object_key()).await.expect("head");
    assert_eq!(head.metadata.get(capcat_s3::metadata::CRC64NVME), None);
    assert_eq!(head.pack_metadata(), Ok(meta));
    let listing = reconcile::list_catalog_packs(&f.store, &catalog, ListLimits::default())
        .await
        .expect("list");
    let sweep = reconcile::head_packs(&f.store, &listing.packs).await;
    assert_eq!(sweep.foreign.count, 0, "{:?}", sweep.foreign);
    assert_eq!(sweep.verified.len(), 1);
    assert_eq!(sweep.verified[0].metadata, meta);
    assert_eq!(f.store.get(&key.object_key()).await.expect("get"), body);
}
