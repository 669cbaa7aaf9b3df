//! The `capcat` command-line tool.

#![forbid(unsafe_code)]

fn main() {
    println!("capcat: not yet implemented");
}
