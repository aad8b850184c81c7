//! The block service's counters: requests completed, modelled seek distance, busy time, and
//! response times (mean, p99).
//!
//! # Design
//!
//! Everything is a fixed-size counter, so the memory never grows with the number of
//! requests (the structure is about 9 KiB, allocated wherever the kernel puts it; no
//! heap). A response time is `finish - arrival`, so it includes the time queued.
//!
//! The mean is exact (the sum is kept in 128 bits). Percentiles come from a
//! [`Histogram`] of log-linear buckets: values below 32 ns have a bucket each; above, each
//! power of two is split into 32 equal buckets, so a bucket is at most 1/32 of its lower
//! bound wide. A percentile is reported as the upper end of the bucket holding the
//! nearest-rank sample, capped at the largest value seen. It is therefore **approximate,
//! never below the exact nearest-rank value and at most 3.125 % (1/32) above it**. Values
//! from 2^40 ns (about 18 minutes) on share the last bucket; a percentile falling there is
//! reported as the largest value seen.

use crate::model::Timing;
use crate::queue::QueuedRequest;

/// Each power of two of the histogram is split into 2^`SUB_BUCKET_BITS` buckets.
pub const SUB_BUCKET_BITS: u32 = 5;

/// Values from 2^`HISTOGRAM_LIMIT_BITS` ns on share the histogram's last bucket.
pub const HISTOGRAM_LIMIT_BITS: u32 = 40;

/// Buckets per power of two, and the count of exact buckets below the first split one.
const SUB_BUCKETS: usize = 1 << SUB_BUCKET_BITS;

/// Buckets in a [`Histogram`]: 32 exact ones, then 32 for each power of two from 2^5 to 2^39.
pub const HISTOGRAM_BUCKETS: usize = SUB_BUCKETS + (HISTOGRAM_LIMIT_BITS - SUB_BUCKET_BITS) as usize * SUB_BUCKETS;

/// A fixed-size log-linear histogram of `u64` values (see the module's design note).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    counts: [u64; HISTOGRAM_BUCKETS],
    samples: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

impl Histogram {
    /// An empty histogram.
    pub const fn new() -> Histogram {
        Histogram { counts: [0; HISTOGRAM_BUCKETS], samples: 0, max: 0 }
    }

    /// The bucket `value` is counted in.
    pub fn bucket(value: u64) -> usize {
        if value < SUB_BUCKETS as u64 {
            return value as usize;
        }
        let exponent = u64::BITS - 1 - value.leading_zeros();
        if exponent >= HISTOGRAM_LIMIT_BITS {
            return HISTOGRAM_BUCKETS - 1;
        }
        // value >> shift is in [32, 64): its low five bits pick the bucket in this power of two.
        let shift = exponent - SUB_BUCKET_BITS;
        SUB_BUCKETS + shift as usize * SUB_BUCKETS + ((value >> shift) as usize - SUB_BUCKETS)
    }

    /// The smallest and largest value counted in `bucket` (the last bucket also holds
    /// every larger value).
    pub fn bucket_range(bucket: usize) -> (u64, u64) {
        if bucket < SUB_BUCKETS {
            return (bucket as u64, bucket as u64);
        }
        let shift = ((bucket - SUB_BUCKETS) / SUB_BUCKETS) as u32;
        let lower = ((SUB_BUCKETS + (bucket - SUB_BUCKETS) % SUB_BUCKETS) as u64) << shift;
        (lower, lower + (1 << shift) - 1)
    }

    /// Counts `value`.
    pub fn record(&mut self, value: u64) {
        self.counts[Histogram::bucket(value)] += 1;
        self.samples += 1;
        self.max = self.max.max(value);
    }

    /// Values counted.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The largest value counted (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The `numerator / denominator` quantile (e.g. 99/100), by nearest rank: at least the
    /// exact value and at most 1/32 above it (see the module's design note). `None` when
    /// empty or when the fraction is not in (0, 1].
    pub fn quantile(&self, numerator: u64, denominator: u64) -> Option<u64> {
        if self.samples == 0 || numerator == 0 || numerator > denominator {
            return None;
        }
        // Nearest rank: the ⌈samples × fraction⌉-th smallest value.
        let rank = (u128::from(self.samples) * u128::from(numerator)).div_ceil(u128::from(denominator)) as u64;
        let mut seen = 0;
        for (bucket, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                let upper = if bucket == HISTOGRAM_BUCKETS - 1 { u64::MAX } else { Histogram::bucket_range(bucket).1 };
                return Some(upper.min(self.max));
            }
        }
        Some(self.max)
    }
}

/// The block service's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    completed: u64,
    writes: u64,
    blocks: u64,
    seek_cylinders: u64,
    busy_ns: u64,
    response_sum_ns: u128,
    responses: Histogram,
}

impl Stats {
    /// No request counted yet.
    pub const fn new() -> Stats {
        Stats { completed: 0, writes: 0, blocks: 0, seek_cylinders: 0, busy_ns: 0, response_sum_ns: 0, responses: Histogram::new() }
    }

    /// Counts `request`, completed as `timing` says.
    pub fn record(&mut self, request: &QueuedRequest, timing: &Timing) {
        self.completed += 1;
        self.writes += u64::from(request.write);
        self.blocks = self.blocks.saturating_add(u64::from(request.blocks));
        self.seek_cylinders = self.seek_cylinders.saturating_add(u64::from(timing.cylinder_distance));
        self.busy_ns = self.busy_ns.saturating_add(timing.service_ns());
        let response_ns = timing.finish_ns.saturating_sub(request.arrival_ns);
        self.response_sum_ns += u128::from(response_ns);
        self.responses.record(response_ns);
    }

    /// Requests completed.
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// Of which writes.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// Blocks transferred.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// Cylinders the arm moved, in total (the model's `cylinder_distance`).
    pub fn seek_cylinders(&self) -> u64 {
        self.seek_cylinders
    }

    /// Time the disk spent serving requests, ns.
    pub fn busy_ns(&self) -> u64 {
        self.busy_ns
    }

    /// Mean response time (`finish - arrival`), ns, exact (rounded down); `None` before
    /// the first request.
    pub fn mean_response_ns(&self) -> Option<u64> {
        (self.completed > 0).then(|| u64::try_from(self.response_sum_ns / u128::from(self.completed)).unwrap_or(u64::MAX))
    }

    /// The 99th-percentile response time, ns: approximate, at least the exact value and at
    /// most 1/32 above it; `None` before the first request.
    pub fn p99_response_ns(&self) -> Option<u64> {
        self.responses.quantile(99, 100)
    }

    /// The longest response time, ns, exact (0 before the first request).
    pub fn max_response_ns(&self) -> u64 {
        self.responses.max()
    }

    /// The response-time histogram, for other quantiles.
    pub fn responses(&self) -> &Histogram {
        &self.responses
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use std::vec::Vec;

    use super::*;

    #[test]
    fn buckets_cover_every_value_with_bounded_width() {
        assert_eq!(HISTOGRAM_BUCKETS, 1152);
        assert_eq!(Histogram::bucket(31), 31);
        assert_eq!(Histogram::bucket_range(31), (31, 31));
        // 32..63 still one value per bucket; from 64 on two, from 128 on four, …
        assert_eq!(Histogram::bucket(32), 32);
        assert_eq!(Histogram::bucket(63), 63);
        assert_eq!(Histogram::bucket(64), 64);
        assert_eq!(Histogram::bucket_range(64), (64, 65));
        assert_eq!(Histogram::bucket(65), 64);
        assert_eq!(Histogram::bucket(66), 65);
        // 15,200,733 = 2^23 × 1.81…: shift 18, bucket 32 + 18 × 32 + (15,200,733 >> 18) - 32
        // = 576 + 57 = 633, which holds 57 × 2^18 = 14,942,208 to 58 × 2^18 - 1 = 15,204,351.
        assert_eq!(Histogram::bucket(15_200_733), 633);
        assert_eq!(Histogram::bucket_range(633), (14_942_208, 15_204_351));
        assert_eq!(Histogram::bucket((1 << 40) - 1), HISTOGRAM_BUCKETS - 1);
        assert_eq!(Histogram::bucket(1 << 40), HISTOGRAM_BUCKETS - 1);
        assert_eq!(Histogram::bucket(u64::MAX), HISTOGRAM_BUCKETS - 1);
        let mut value = 1_u64;
        while value < 1 << 40 {
            for probe in [value - 1, value, value + 1, value + value / 3].into_iter().filter(|&probe| probe < 1 << 40) {
                let (lower, upper) = Histogram::bucket_range(Histogram::bucket(probe));
                assert!(lower <= probe && probe <= upper, "{probe} outside {lower}..={upper}");
                assert!((upper - lower) * 32 <= lower, "bucket {lower}..={upper} wider than 1/32");
            }
            value = value * 3 / 2 + 1;
        }
    }

    #[test]
    fn quantiles_are_within_a_thirty_second_above_the_exact_value() {
        let mut state = 0x1234_5678_u64;
        let mut samples = Vec::new();
        let mut histogram = Histogram::new();
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // From 0 to about 10^12 ns (below the last bucket's 2^40), over many magnitudes.
            let value = (state % 1_000_000) << ((state >> 59) % 21);
            samples.push(value);
            histogram.record(value);
        }
        samples.sort_unstable();
        for (numerator, denominator) in [(1, 100), (1, 2), (9, 10), (99, 100), (999, 1000), (1, 1)] {
            let rank = (samples.len() as u64 * numerator).div_ceil(denominator) as usize;
            let exact = samples[rank - 1];
            let reported = histogram.quantile(numerator, denominator).unwrap();
            assert!(exact <= reported && reported <= exact + exact / 32, "{numerator}/{denominator}: exact {exact}, reported {reported}");
        }
        assert_eq!(histogram.quantile(1, 1), Some(samples[samples.len() - 1]), "the maximum is exact");
        assert_eq!(histogram.quantile(0, 100), None);
        assert_eq!(histogram.quantile(101, 100), None);
        assert_eq!(Histogram::new().quantile(99, 100), None);
    }

    #[test]
    fn a_quantile_in_the_last_bucket_is_the_maximum() {
        let mut histogram = Histogram::new();
        histogram.record(5);
        histogram.record(1 << 50);
        assert_eq!(histogram.quantile(99, 100), Some(1 << 50));
        assert_eq!(histogram.quantile(1, 2), Some(5));
    }

    fn request(arrival_ns: u64, write: bool) -> QueuedRequest {
        QueuedRequest { id: 1, start_block: 0, blocks: 2, write, arrival_ns, submitter: 0 }
    }

    #[test]
    fn stats_count_requests_seeks_busy_time_and_responses() {
        let mut stats = Stats::new();
        assert_eq!((stats.mean_response_ns(), stats.p99_response_ns()), (None, None));
        // Response 30 - 0 = 30 ns, busy 30 - 10 = 20 ns, 5 cylinders.
        stats.record(&request(0, false), &Timing { start_ns: 10, finish_ns: 30, cylinder_distance: 5, ..Timing::default() });
        // Response 100 - 20 = 80 ns, busy 100 - 30 = 70 ns, 7 cylinders.
        stats.record(&request(20, true), &Timing { start_ns: 30, finish_ns: 100, cylinder_distance: 7, ..Timing::default() });
        assert_eq!((stats.completed(), stats.writes(), stats.blocks()), (2, 1, 4));
        assert_eq!(stats.seek_cylinders(), 12);
        assert_eq!(stats.busy_ns(), 90);
        assert_eq!(stats.mean_response_ns(), Some(55));
        assert_eq!(stats.max_response_ns(), 80);
        // Nearest rank ⌈2 × 0.99⌉ = 2: the 80 ns response, whose bucket is 80..=81, capped at 80.
        assert_eq!(stats.p99_response_ns(), Some(80));
        assert_eq!(stats.responses().samples(), 2);
    }

    #[test]
    fn stats_are_bounded_in_size() {
        // The histogram dominates: 1152 counters of 8 bytes, whatever is recorded.
        assert!(core::mem::size_of::<Stats>() < 10 * 1024);
    }
}
