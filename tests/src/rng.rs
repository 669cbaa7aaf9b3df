//! [`Rng`]: the seeded generator every stress decision draws from.
//!
//! The stress is reproducible as far as thread scheduling allows: every
//! choice the harness makes (stalls, releases, crashes, pack ids, pauses)
//! comes from one seed. SplitMix64 is enough: the draws only need to be
//! spread, not unpredictable.

/// A SplitMix64 generator. Each task owns one (forked from the run's seed),
/// so no draw depends on which task ran first.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform draw in `0..below` (0 when `below` is 0 or 1).
    pub fn below(&mut self, below: u64) -> u64 {
        let below = below.max(1);
        ((u128::from(self.next_u64()) * u128::from(below)) >> 64) as u64
    }

    /// A uniform draw in `low..=high` (`low` when `high < low`).
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high.saturating_sub(low) + 1)
    }

    /// True with probability `per_mille / 1000`.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// An independent generator for stream `stream` (a task, an
    /// incarnation), derived from this one's seed without advancing it, so
    /// adding a task never shifts the draws of the others.
    pub fn fork(&self, stream: u64) -> Self {
        let mut seeded = Self::new(self.state ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03));
        // One draw decorrelates streams whose seeds differ in few bits.
        let _ = seeded.next_u64();
        seeded
    }

    /// A UUID made of 128 drawn bits (reproducible pack and capture ids).
    pub fn uuid(&mut self) -> uuid::Uuid {
        let high = u128::from(self.next_u64());
        let low = u128::from(self.next_u64());
        uuid::Uuid::from_u128((high << 64) | low)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_reproduces_its_draws_and_forks_differ() {
        let mut a = Rng::new(9);
        let mut b = Rng::new(9);
        let xs: Vec<u64> = (0..8).map(|_| a.below(1000)).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.below(1000)).collect();
        assert_eq!(xs, ys);
        let mut f1 = a.fork(1);
        let mut f2 = a.fork(2);
        assert_ne!(f1.next_u64(), f2.next_u64());
        for _ in 0..100 {
            let v = a.between(3, 5);
            assert!((3..=5).contains(&v), "{v}");
        }
        assert!(!a.chance(0));
        assert!(a.chance(1000));
    }
}
