//! Capcat catalog adapter: runs capcat-proto statements over ClickHouse.

#![forbid(unsafe_code)]
