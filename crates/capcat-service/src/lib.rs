//! Capcat storage service: spool -> store -> catalog.

#![forbid(unsafe_code)]
