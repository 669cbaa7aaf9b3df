//! Stateright models of the Capcat protocol over the real capcat-proto machines.

#![forbid(unsafe_code)]
