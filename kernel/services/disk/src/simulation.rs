//! A small closed-loop simulation (tests only): `streams` clients each keep one random
//! 4 KiB read outstanding, uniformly over the whole disk, so the queue depth is the number
//! of streams. Each time the disk is free the scheduler dispatches one request with the
//! policy under test (no extension answer), the model times it, and its stream submits
//! the next read at the finish time. Throughput is requests completed over modelled time.

extern crate std;

use std::println;
use std::vec::Vec;

use crate::model::{DiskModel, Parameters};
use crate::queue::{Policy, Scheduler, SchedulerConfig};
use crate::stats::Stats;

/// Bytes per block in the simulation (the block service's page-sized reads).
const BLOCK_BYTES: u32 = 4096;

/// Requests completed per run.
const COMPLETIONS: u64 = 4_000;

/// A deterministic pseudo-random sequence (SplitMix64).
struct Random(u64);

impl Random {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut mixed = self.0;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (mixed ^ (mixed >> 31)) % bound
    }
}

/// What one run measured.
struct Outcome {
    elapsed_ns: u64,
    max_service_ns: u64,
    stats: Stats,
    starvation_overrides: u64,
}

impl Outcome {
    /// Requests per second.
    fn throughput(&self) -> f64 {
        self.stats.completed() as f64 * 1e9 / self.elapsed_ns as f64
    }
}

fn simulate(parameters: &Parameters, policy: Policy, streams: usize, max_wait_ns: Option<u64>, seed: u64) -> Outcome {
    let parameters = parameters.with_block_bytes(BLOCK_BYTES).unwrap();
    let mut disk = DiskModel::new(&parameters);
    let config = SchedulerConfig { capacity: streams, max_wait_ns, reference: policy };
    let mut scheduler = Scheduler::new(*parameters.geometry(), config).unwrap();
    let mut random = Random(seed);
    let blocks = disk.capacity_blocks();
    for stream in 0..streams as u64 {
        scheduler.submit(random.below(blocks), 1, false, 0, stream).unwrap();
    }
    let mut stats = Stats::new();
    let mut now = 0;
    let mut max_service_ns = 0;
    while stats.completed() < COMPLETIONS {
        let dispatch = scheduler.dispatch(now, None, disk.head_cylinder()).expect("closed loop: a request per stream is always queued");
        let request = dispatch.request;
        let timing = disk.service(now, request.start_block, request.blocks, request.write).unwrap();
        now = timing.finish_ns;
        max_service_ns = max_service_ns.max(timing.service_ns());
        stats.record(&request, &timing);
        scheduler.submit(random.below(blocks), 1, false, now, request.submitter).unwrap();
    }
    let counters = scheduler.counters();
    assert_eq!(counters.submitted, counters.dispatched + streams as u64, "every stream has exactly one read outstanding");
    Outcome { elapsed_ns: now, max_service_ns, stats, starvation_overrides: counters.starvation_overrides }
}

/// C-LOOK's and SSTF's throughput over FIFO's at `streams`, averaged over three seeds.
fn ratios(parameters: &Parameters, streams: usize) -> (f64, f64) {
    let mut sums = (0.0, 0.0);
    for seed in [1, 2, 3] {
        let fifo = simulate(parameters, Policy::Fifo, streams, None, seed).throughput();
        sums.0 += simulate(parameters, Policy::CircularLook, streams, None, seed).throughput() / fifo;
        sums.1 += simulate(parameters, Policy::ShortestSeekFirst, streams, None, seed).throughput() / fifo;
    }
    (sums.0 / 3.0, sums.1 / 3.0)
}

#[test]
fn clook_and_sstf_beat_fifo_on_random_reads() {
    let parameters = Parameters::hp97560();
    println!("streams  fifo req/s  clook req/s  sstf req/s  clook/fifo  sstf/fifo  fifo p99 ms  clook p99 ms  clook mean seek cyl");
    let mut measured = Vec::new();
    for streams in [1, 4, 8, 16, 32, 64, 128, 256, 512] {
        let fifo = simulate(&parameters, Policy::Fifo, streams, None, 1);
        let clook = simulate(&parameters, Policy::CircularLook, streams, None, 1);
        let sstf = simulate(&parameters, Policy::ShortestSeekFirst, streams, None, 1);
        let (clook_ratio, sstf_ratio) = ratios(&parameters, streams);
        println!(
            "{streams:7}  {:10.1}  {:11.1}  {:10.1}  {clook_ratio:10.3}  {sstf_ratio:9.3}  {:11.1}  {:12.1}  {:19.1}",
            fifo.throughput(),
            clook.throughput(),
            sstf.throughput(),
            fifo.stats.p99_response_ns().unwrap() as f64 / 1e6,
            clook.stats.p99_response_ns().unwrap() as f64 / 1e6,
            clook.stats.seek_cylinders() as f64 / clook.stats.completed() as f64,
        );
        measured.push((streams, clook_ratio, sstf_ratio));
    }
    let ratio_at = |streams| measured.iter().find(|row| row.0 == streams).unwrap();
    // One stream: nothing to reorder, every policy serves the same requests.
    assert!((ratio_at(1).1 - 1.0).abs() < 1e-9 && (ratio_at(1).2 - 1.0).abs() < 1e-9);
    // Several streams: reordering pays, more with a deeper queue.
    assert!(ratio_at(8).1 > 1.15, "C-LOOK/FIFO at 8 streams: {}", ratio_at(8).1);
    assert!(ratio_at(32).1 > 1.35, "C-LOOK/FIFO at 32 streams: {}", ratio_at(32).1);
    // The benchmark's goal, 1.5×, needs a deep queue on this 4002 rpm disk: rotation
    // (7.5 ms on average) and controller overhead (2.2 ms) do not shrink with reordering.
    assert!(ratio_at(128).1 >= 1.5, "C-LOOK/FIFO at 128 streams: {}", ratio_at(128).1);
    for window in measured.windows(2) {
        assert!(window[1].1 > window[0].1, "C-LOOK's gain grows with the queue: {window:?}");
    }
    // SSTF gains as much on this uniform workload (its cost is unfairness, not throughput).
    assert!(ratio_at(32).2 > 1.35, "SSTF/FIFO at 32 streams: {}", ratio_at(32).2);
}

#[test]
fn without_modelled_time_no_policy_wins() {
    // The `none` model finishes every request at once: throughput cannot be measured, but
    // the policies still cut the arm's travel (they work on cylinders, not time).
    let parameters = Parameters::none();
    let fifo = simulate(&parameters, Policy::Fifo, 32, None, 4);
    let clook = simulate(&parameters, Policy::CircularLook, 32, None, 4);
    assert_eq!((fifo.elapsed_ns, clook.elapsed_ns), (0, 0));
    assert!(clook.stats.seek_cylinders() * 5 < fifo.stats.seek_cylinders());
}

#[test]
fn the_starvation_bound_caps_sstf_response_times() {
    // SSTF with a deep queue leaves requests at the disk's edges waiting. With 16 streams
    // the mean response is about 16 / 57 req/s ≈ 280 ms (Little's law); a 500 ms bound
    // caps the worst. Once request R has waited the bound, only requests older than R (at
    // most streams - 1) go before it, after the one in progress: its response is at most
    // bound + (streams + 1) × the longest service time.
    const STREAMS: usize = 16;
    const MAX_WAIT_NS: u64 = 500_000_000;
    let parameters = Parameters::hp97560();
    let free = simulate(&parameters, Policy::ShortestSeekFirst, STREAMS, None, 5);
    let bounded = simulate(&parameters, Policy::ShortestSeekFirst, STREAMS, Some(MAX_WAIT_NS), 5);
    let cap = MAX_WAIT_NS + (STREAMS as u64 + 1) * bounded.max_service_ns;
    println!(
        "sstf, {STREAMS} streams: max response {:.1} ms unbounded, {:.1} ms with a {} ms bound ({} overrides, cap {:.1} ms); \
         throughput {:.1} vs {:.1} req/s",
        free.stats.max_response_ns() as f64 / 1e6,
        bounded.stats.max_response_ns() as f64 / 1e6,
        MAX_WAIT_NS / 1_000_000,
        bounded.starvation_overrides,
        cap as f64 / 1e6,
        free.throughput(),
        bounded.throughput()
    );
    assert_eq!(free.starvation_overrides, 0);
    assert!(bounded.starvation_overrides > 0);
    assert!(free.stats.max_response_ns() > cap, "the unbounded run starves someone past the cap");
    assert!(bounded.stats.max_response_ns() <= cap);
}
