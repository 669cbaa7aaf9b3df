//! LocalStore behaviour beyond the shared conformance suite: what the
//! directory looks like after writes, and files it did not write.

use bytes::Bytes;
use capcat_s3::{
    ErrorClass, LocalStore, ObjectChecksum, ObjectKey, PackStore, UserMetadata, crc64nvme, sha256,
};

fn key(text: &str) -> ObjectKey {
    ObjectKey::new(text).expect("valid key")
}

async fn put(store: &LocalStore, k: &ObjectKey, body: &'static [u8]) {
    store
        .put(
            k,
            Bytes::from_static(body),
            crc64nvme(body),
            &UserMetadata::default(),
        )
        .await
        .expect("put");
}

/// Every file name under `dir`, recursively.
fn file_names(dir: &std::path::Path) -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            names.extend(file_names(&path));
        } else {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names
}

#[tokio::test]
async fn writes_leave_no_temporary_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = LocalStore::open(dir.path()).expect("open");
    for i in 0..5_u8 {
        let body = vec![i; 1000];
        let k = key(&format!("v1/c/{i}.pack"));
        store
            .put(
                &k,
                body.clone().into(),
                crc64nvme(&body),
                &UserMetadata::default(),
            )
            .await
            .expect("put");
    }
    let wrong = store
        .put(
            &key("v1/c/bad.pack"),
            Bytes::from_static(b"x"),
            0,
            &UserMetadata::default(),
        )
        .await
        .expect_err("wrong checksum");
    assert_eq!(wrong.class(), ErrorClass::ChecksumMismatch);
    let mut names = file_names(dir.path());
    names.sort();
    assert_eq!(names, ["0.pack", "1.pack", "2.pack", "3.pack", "4.pack"]);
}

#[tokio::test]
async fn a_crashed_writers_temporary_file_is_never_listed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = LocalStore::open(dir.path()).expect("open");
    put(&store, &key("v1/c/a.pack"), b"a").await;
    // What a writer killed between create and rename leaves behind.
    std::fs::write(dir.path().join("v1/c/.capcat-tmp.999.0"), b"half a pack").expect("write");
    let page = store.list_page("v1/", None, 100).await.expect("list");
    let keys: Vec<_> = page.objects.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(keys, ["v1/c/a.pack"]);
}

#[tokio::test]
async fn a_file_written_by_something_else_reads_as_a_raw_object() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = LocalStore::open(dir.path()).expect("open");
    std::fs::create_dir_all(dir.path().join("v1/c")).expect("mkdir");
    std::fs::write(dir.path().join("v1/c/readme.txt"), b"hello").expect("write");
    let k = key("v1/c/readme.txt");
    let head = store.head(&k).await.expect("head");
    assert_eq!(
        (head.size, head.metadata.entries().len(), head.checksum),
        (5, 0, None)
    );
    assert_eq!(
        store.get(&k).await.expect("get"),
        Bytes::from_static(b"hello")
    );
    let page = store.list_page("v1/c/", None, 10).await.expect("list");
    assert_eq!(page.objects[0].size, 5);
}

#[tokio::test]
async fn a_key_through_a_file_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = LocalStore::open(dir.path()).expect("open");
    put(&store, &key("v1/c"), b"a file where a directory would go").await;
    let error = store
        .put(
            &key("v1/c/x.pack"),
            Bytes::from_static(b"x"),
            crc64nvme(b"x"),
            &UserMetadata::default(),
        )
        .await
        .expect_err("cannot write under a file");
    assert_eq!(error.class(), ErrorClass::Other, "{error}");
    let error = store
        .head(&key("v1/c/x.pack"))
        .await
        .expect_err("no such object");
    assert_eq!(error.class(), ErrorClass::NotFound, "{error}");
    let error = store
        .head(&key("v1"))
        .await
        .expect_err("a directory is not an object");
    assert_eq!(error.class(), ErrorClass::NotFound, "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_of_one_key_never_tear_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = LocalStore::open(dir.path()).expect("open");
    let k = key("v1/c/race.pack");
    let bodies: Vec<Vec<u8>> = (0..8_u8).map(|i| vec![i; 256 * 1024]).collect();
    let mut tasks = Vec::new();
    for body in bodies.clone() {
        let (store, k) = (store.clone(), k.clone());
        tasks.push(tokio::spawn(async move {
            store
                .put(
                    &k,
                    body.clone().into(),
                    crc64nvme(&body),
                    &UserMetadata::default(),
                )
                .await
        }));
    }
    for task in tasks {
        task.await.expect("task").expect("put");
    }
    // One writer's whole object, verified against its own checksum.
    let read = store.get(&k).await.expect("get");
    assert!(
        bodies.iter().any(|b| b[..] == read[..]),
        "the object is one writer's whole body"
    );
}

#[tokio::test]
async fn an_object_written_with_a_sha256_is_still_verified_by_it() {
    // The envelope the store wrote before it declared CRC-64/NVME.
    let dir = tempfile::tempdir().expect("temp dir");
    let store = LocalStore::open(dir.path()).expect("open");
    let body = b"an older pack";
    let envelope = |digest: [u8; 32]| {
        let text = format!("sha256 {}\n", hex_lower(&digest));
        let mut file = b"CAPCAT-OBJECT-1\n".to_vec();
        file.extend((text.len() as u32).to_le_bytes());
        file.extend(text.as_bytes());
        file.extend(body);
        file
    };
    std::fs::create_dir_all(dir.path().join("v1/c")).expect("mkdir");
    std::fs::write(dir.path().join("v1/c/old.bin"), envelope(sha256(body))).expect("write");
    let k = key("v1/c/old.bin");
    let head = store.head(&k).await.expect("head");
    assert_eq!(head.checksum, Some(ObjectChecksum::Sha256(sha256(body))));
    assert_eq!(store.get(&k).await.expect("get"), Bytes::from_static(body));
    std::fs::write(dir.path().join("v1/c/old.bin"), envelope(sha256(b"other"))).expect("write");
    let error = store.get(&k).await.expect_err("a wrong sha256 is refused");
    assert_eq!(error.class(), ErrorClass::ChecksumMismatch, "{error}");
}

fn hex_lower(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
