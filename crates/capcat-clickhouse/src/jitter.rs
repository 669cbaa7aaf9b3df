//! [`Jitter`]: the small random number generator behind `Step::Draw`.
//!
//! The protocol machines own no randomness (the model checker enumerates
//! every draw instead); the driver draws here. Jitter only spreads colliding
//! claimants apart, so a fast non-cryptographic generator is enough:
//! SplitMix64, seeded from the operating system (through a v4 UUID) or from
//! a caller's seed for reproducible runs.

use std::sync::{Mutex, PoisonError};

/// A thread-safe SplitMix64 generator.
#[derive(Debug)]
pub struct Jitter {
    state: Mutex<u64>,
}

impl Jitter {
    /// Seeded from the operating system's random source.
    pub fn from_os() -> Self {
        let bits = uuid::Uuid::new_v4().as_u128();
        // Fold the 122 random bits of a v4 UUID into one 64-bit seed.
        Self::from_seed((bits as u64) ^ ((bits >> 64) as u64))
    }

    /// Seeded with `seed` (reproducible draws).
    pub fn from_seed(seed: u64) -> Self {
        Self {
            state: Mutex::new(seed),
        }
    }

    fn next_u64(&self) -> u64 {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform draw in `0..below` (`below` 0 is treated as 1: the only
    /// value is 0). Multiply-shift maps 64 random bits onto the range; the
    /// bias is below 2^-58 for the windows the protocol asks for.
    pub fn below(&self, below: u64) -> u64 {
        let below = below.max(1);
        ((u128::from(self.next_u64()) * u128::from(below)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_stay_in_range_and_cover_it() {
        let jitter = Jitter::from_seed(7);
        let mut seen = [false; 9];
        for _ in 0..1000 {
            let v = jitter.below(9);
            assert!(v < 9);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|s| *s), "{seen:?}");
        assert_eq!(jitter.below(1), 0);
        assert_eq!(jitter.below(0), 0);
    }

    #[test]
    fn a_seed_reproduces_its_draws() {
        let a = Jitter::from_seed(42);
        let b = Jitter::from_seed(42);
        let xs: Vec<u64> = (0..16).map(|_| a.below(1000)).collect();
        let ys: Vec<u64> = (0..16).map(|_| b.below(1000)).collect();
        assert_eq!(xs, ys);
    }
}
