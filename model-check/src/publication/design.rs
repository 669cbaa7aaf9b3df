//! The designs the publication model runs: capcat-proto's one list of
//! designs ([`capcat_proto::designs::Design`]), the shipped one and every
//! rejected one. Their names are the spec's too: `names::publication::VARIANTS`
//! lists them for the spec checker, and a test below keeps the two equal.

pub use capcat_proto::designs::Design;

#[cfg(test)]
mod tests {
    use super::Design;
    use crate::names::publication as n;

    #[test]
    fn the_model_runs_exactly_the_designs_the_spec_names_in_its_order() {
        let names: Vec<&str> = Design::ALL.iter().map(|d| d.name()).collect();
        assert_eq!(names, n::VARIANTS);
    }
}
