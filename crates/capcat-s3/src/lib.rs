//! Capcat object-store adapter: S3 via aws-sdk-s3 and a local-directory store.

#![forbid(unsafe_code)]
