//! Shards: one plan split over N processes (or machines) so that together
//! they run exactly the whole plan — nothing twice, nothing left out.
//!
//! Everything a run hands out is numbered, and shard K of N (0-based here,
//! `K+1/N` on the command line) takes the numbers n with n mod N = K:
//!
//! ```text
//!  open model   arrival n of the whole schedule   0 1 2 3 4 5 6 …
//!  closed model user n (its ramp-up offset kept)  A B C A B C A …  (N = 3)
//!  feeders      shared draw n (sequential, unique, circular)
//! ```
//!
//! Within a shard, worker w of W takes every W-th of the shard's numbers
//! (see [`Stride`]), so shards and workers are one partition. Budgets split
//! the same way: shard K of a `--requests R` run may send
//! [`Shard::share`]`(R)`, and the shares add up to R.

use std::fmt;

/// Shard `index` (0-based) of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Default for Shard {
    fn default() -> Shard {
        Shard::WHOLE
    }
}

impl fmt::Display for Shard {
    /// As on the command line: 1-based, `2/3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index + 1, self.count)
    }
}

/// The numbers one worker of one shard takes: `first`, `first + step`, …
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stride {
    pub first: u64,
    pub step: u64,
}

impl Stride {
    /// The `i`-th number of this stride.
    pub fn nth(self, i: u64) -> u64 {
        self.first + i * self.step
    }
}

impl Shard {
    /// The whole plan: one shard.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// `K/N` as written on the command line (K = 1…N).
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("`{text}` is not a shard; write K/N with 1 ≤ K ≤ N, e.g. 2/3");
        let (k, n) = text.trim().split_once('/').ok_or_else(bad)?;
        // `J+1/N`: a 0-based index, as Kubernetes' JOB_COMPLETION_INDEX
        // counts, written into the arguments of an Indexed Job's pods.
        let k: u32 = match k.split_once('+') {
            Some((j, one)) if one.trim() == "1" => j
                .trim()
                .parse::<u32>()
                .ok()
                .and_then(|j| j.checked_add(1))
                .ok_or_else(bad)?,
            _ => k.trim().parse().map_err(|_| bad())?,
        };
        let n: u32 = n.trim().parse().map_err(|_| bad())?;
        if n == 0 || k == 0 || k > n {
            return Err(bad());
        }
        Ok(Shard {
            index: k - 1,
            count: n,
        })
    }

    pub fn is_whole(self) -> bool {
        self.count <= 1
    }

    /// How many of the numbers 0…total−1 are this shard's: ⌊total/N⌋, one
    /// more for the first `total mod N` shards. The shares sum to `total`.
    pub fn share(self, total: u64) -> u64 {
        let n = self.count.max(1) as u64;
        total / n + u64::from((self.index as u64) < total % n)
    }

    /// Does number `n` belong to this shard?
    pub fn owns(self, n: u64) -> bool {
        n % self.count.max(1) as u64 == self.index as u64
    }

    /// The numbers worker `worker` of `workers` takes within this shard.
    pub fn stride(self, worker: usize, workers: usize) -> Stride {
        let n = self.count.max(1) as u64;
        Stride {
            first: self.index as u64 + n * worker as u64,
            step: n * workers.max(1) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_as_written() {
        assert_eq!(Shard::parse("1/3"), Ok(Shard { index: 0, count: 3 }));
        assert_eq!(Shard::parse(" 3/3 "), Ok(Shard { index: 2, count: 3 }));
        assert_eq!(Shard::parse("2/3").unwrap().to_string(), "2/3");
        assert_eq!(Shard::parse("0+1/3"), Ok(Shard { index: 0, count: 3 }));
        assert_eq!(Shard::parse("2+1/3"), Ok(Shard { index: 2, count: 3 }));
        for bad in [
            "0/3", "4/3", "1/0", "1", "a/b", "1/3/4", "-1/3", "3+1/3", "1+2/3", "$(X)+1/3",
        ] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn shares_of_ten_over_three() {
        let shares: Vec<u64> = (0..3)
            .map(|index| Shard { index, count: 3 }.share(10))
            .collect();
        assert_eq!(shares, [4, 3, 3]);
        assert_eq!(Shard::WHOLE.share(10), 10);
    }

    proptest! {
        /// Shards × workers partition the numbers exactly: each number is
        /// taken once, and a shard takes exactly its share.
        #[test]
        fn shards_and_workers_partition(count in 1u32..7, workers in 1usize..5, total in 0u64..200) {
            let mut taken = vec![0u32; total as usize];
            for index in 0..count {
                let shard = Shard { index, count };
                let mut mine = 0;
                for w in 0..workers {
                    let stride = shard.stride(w, workers);
                    let mut i = 0;
                    while stride.nth(i) < total {
                        let n = stride.nth(i);
                        prop_assert!(shard.owns(n));
                        taken[n as usize] += 1;
                        mine += 1;
                        i += 1;
                    }
                }
                prop_assert_eq!(mine, shard.share(total));
            }
            prop_assert!(taken.iter().all(|&t| t == 1));
        }
    }
}
