//! The lock-granting experiment of Seltzer et al. (1995, §4.4, Fig. 3), simulated in
//! modelled time (tests only).
//!
//! [`PROCESSES`] processes (the paper's multiprogramming level, 4) each run
//! [`ITERATIONS`] times (the paper's default): lock byte 0 of one file — a write lock with
//! probability `p`, else a read lock, from a seeded PRNG — read a random 8 KiB record of a
//! 32 MiB file, compute 15 ms, unlock, and start over at once. The machine has one disk and
//! one CPU, each serving one process at a time in arrival order: the record read is
//! modelled as [`IO_NS`] (12 ms: a random seek, half a rotation and an 8 KiB transfer on a
//! mid-1990s disk; the paper's file is far larger than any cache then, so every read goes
//! to the disk), the computation as [`COMPUTE_NS`] on the CPU. A process holds its lock
//! while it waits for and uses the disk and the CPU, so even readers that share the lock
//! queue for the machine — the system is saturated, as in the paper.
//!
//! The lock table decides who holds byte 0, with FRP or FIFO as the policy; an unlock's
//! grants start their I/O before the unlocking process asks again. The latency of an
//! operation is from its lock request to its unlock (the paper's "a read operation takes
//! 105 ms"). Everything is deterministic: one seed per run.

extern crate std;

use alloc::collections::{BinaryHeap, VecDeque};
use alloc::vec;
use alloc::vec::Vec;
use core::cmp::Reverse;
use std::println;

use crate::{GrantPolicy, LockConfig, LockKind, LockTable, Policy, Range, Requested};

/// Processes running the test program (the paper's multiprogramming level).
const PROCESSES: usize = 4;

/// Operations per process (the paper's default `i`).
const ITERATIONS: u32 = 1000;

/// Reading one random 8 KiB record, ns.
const IO_NS: u64 = 12_000_000;

/// Computing with the record, ns.
const COMPUTE_NS: u64 = 15_000_000;

/// The write percentages of Fig. 3.
const WRITE_PERCENTAGES: [u64; 6] = [5, 10, 20, 30, 40, 50];

/// The locked file.
const FILE: u32 = 1;

/// A deterministic pseudo-random sequence (a 64-bit LCG, high bits).
struct Random(u64);

impl Random {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound
    }
}

/// What finished at an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Finished {
    Io,
    Compute,
}

/// Mean latencies of one run.
#[derive(Clone, Copy, Debug)]
struct Outcome {
    /// Mean operation time (lock request to unlock) of reads and writes, ms.
    read_ms: f64,
    write_ms: f64,
    /// Mean lock wait of reads and writes, ms.
    read_wait_ms: f64,
    write_wait_ms: f64,
    /// Operations that had to wait for the lock, %.
    blocked_percent: f64,
    /// Operations completed per second.
    throughput: f64,
}

/// One server (the disk or the CPU): the process served and those waiting, in order.
#[derive(Default)]
struct Server {
    busy: Option<usize>,
    queue: VecDeque<usize>,
}

struct Machine {
    table: LockTable,
    policy: Policy,
    random: Random,
    write_percent: u64,
    events: BinaryHeap<Reverse<(u64, u64, usize, Finished)>>,
    sequence: u64,
    disk: Server,
    cpu: Server,
    /// Per process: when its current operation asked for the lock, and its kind.
    current: Vec<(u64, LockKind)>,
    done: Vec<u32>,
    /// Per kind: operations, summed latency and wait, ns.
    sums: [(u64, u64, u64); 2],
    blocked: u64,
}

impl Machine {
    fn schedule(&mut self, at: u64, process: usize, finished: Finished) {
        self.sequence += 1;
        self.events.push(Reverse((at, self.sequence, process, finished)));
    }

    /// Queues `process` at a server and starts it if the server is free.
    fn enter(&mut self, now: u64, process: usize, finished: Finished) {
        let (server, duration) = match finished {
            Finished::Io => (&mut self.disk, IO_NS),
            Finished::Compute => (&mut self.cpu, COMPUTE_NS),
        };
        if server.busy.is_none() {
            server.busy = Some(process);
            self.schedule(now + duration, process, finished);
        } else {
            server.queue.push_back(process);
        }
    }

    /// Frees a server and starts the next process waiting for it.
    fn leave(&mut self, now: u64, finished: Finished) {
        let (server, duration) = match finished {
            Finished::Io => (&mut self.disk, IO_NS),
            Finished::Compute => (&mut self.cpu, COMPUTE_NS),
        };
        server.busy = server.queue.pop_front();
        if let Some(next) = server.busy {
            self.schedule(now + duration, next, finished);
        }
    }

    fn owner(process: usize) -> u32 {
        process as u32 + 1
    }

    /// The lock was granted to `owner` at `now` after `waited_ns`: its I/O starts.
    fn granted(&mut self, now: u64, owner: u32, waited_ns: u64) {
        let process = owner as usize - 1;
        let kind = self.current[process].1;
        self.sums[kind as usize].2 += waited_ns;
        self.enter(now, process, Finished::Io);
    }

    fn start_operation(&mut self, now: u64, process: usize) {
        let kind = if self.random.below(100) < self.write_percent { LockKind::Write } else { LockKind::Read };
        self.current[process] = (now, kind);
        let byte0 = Range::with_length(0, 1).unwrap();
        let outcome = self.table.request(FILE, Machine::owner(process), kind, byte0, true, now, &mut self.policy as &mut dyn GrantPolicy);
        for grant in outcome.granted {
            self.granted(now, grant.owner, grant.waited_ns);
        }
        match outcome.result {
            Ok(Requested::Granted(grant)) => self.granted(now, grant.owner, 0),
            Ok(Requested::Queued { .. }) => self.blocked += 1,
            Err(error) => panic!("the experiment's requests are never refused: {error}"),
        }
    }

    fn run(&mut self) -> u64 {
        for process in 0..PROCESSES {
            self.start_operation(0, process);
        }
        let mut now = 0;
        while let Some(Reverse((at, _, process, finished))) = self.events.pop() {
            now = at;
            self.leave(now, finished);
            match finished {
                Finished::Io => self.enter(now, process, Finished::Compute),
                Finished::Compute => {
                    let byte0 = Range::with_length(0, 1).unwrap();
                    let grants = self.table.unlock(FILE, Machine::owner(process), byte0, now, &mut self.policy).unwrap();
                    let (started, kind) = self.current[process];
                    let sums = &mut self.sums[kind as usize];
                    sums.0 += 1;
                    sums.1 += now - started;
                    for grant in grants {
                        self.granted(now, grant.owner, grant.waited_ns);
                    }
                    self.done[process] += 1;
                    if self.done[process] < ITERATIONS {
                        self.start_operation(now, process);
                    }
                }
            }
        }
        now
    }
}

fn simulate(policy: Policy, write_percent: u64, seed: u64) -> Outcome {
    let table = LockTable::new(LockConfig::DEFAULT).unwrap();
    let mut machine = Machine {
        table,
        policy,
        random: Random(seed),
        write_percent,
        events: BinaryHeap::new(),
        sequence: 0,
        disk: Server::default(),
        cpu: Server::default(),
        current: vec![(0, LockKind::Read); PROCESSES],
        done: vec![0; PROCESSES],
        sums: [(0, 0, 0); 2],
        blocked: 0,
    };
    let elapsed = machine.run();
    assert!(machine.done.iter().all(|&done| done == ITERATIONS));
    assert!(machine.table.file(FILE).is_none(), "every lock released, nobody waiting");
    let operations = machine.sums[0].0 + machine.sums[1].0;
    assert_eq!(operations, PROCESSES as u64 * u64::from(ITERATIONS));
    let mean_ms = |sum: u64, count: u64| if count == 0 { 0.0 } else { sum as f64 / count as f64 / 1e6 };
    let [read, write] = machine.sums;
    Outcome {
        read_ms: mean_ms(read.1, read.0),
        write_ms: mean_ms(write.1, write.0),
        read_wait_ms: mean_ms(read.2, read.0),
        write_wait_ms: mean_ms(write.2, write.0),
        blocked_percent: machine.blocked as f64 * 100.0 / operations as f64,
        throughput: operations as f64 * 1e9 / elapsed as f64,
    }
}

/// The mean of three seeds' runs.
fn averaged(policy: Policy, write_percent: u64) -> Outcome {
    let runs: Vec<Outcome> = [1, 2, 3].into_iter().map(|seed| simulate(policy, write_percent, seed)).collect();
    let mean = |field: fn(&Outcome) -> f64| runs.iter().map(field).sum::<f64>() / runs.len() as f64;
    Outcome {
        read_ms: mean(|run| run.read_ms),
        write_ms: mean(|run| run.write_ms),
        read_wait_ms: mean(|run| run.read_wait_ms),
        write_wait_ms: mean(|run| run.write_wait_ms),
        blocked_percent: mean(|run| run.blocked_percent),
        throughput: mean(|run| run.throughput),
    }
}

#[test]
fn simulation_reader_priority_starves_writers_and_fifo_equalises() {
    println!(
        "{PROCESSES} processes x {ITERATIONS} operations, lock byte 0, {} ms I/O (one disk), {} ms compute (one CPU); mean of 3 seeds",
        IO_NS / 1_000_000,
        COMPUTE_NS / 1_000_000
    );
    println!("write%  policy  read ms  write ms  write/read  read wait  write wait  blocked%  ops/s");
    let mut rows = Vec::new();
    for write_percent in WRITE_PERCENTAGES {
        for policy in Policy::ALL {
            let outcome = averaged(policy, write_percent);
            println!(
                "{write_percent:6}  {:6}  {:7.1}  {:8.1}  {:10.2}  {:9.1}  {:10.1}  {:8.1}  {:5.2}",
                policy.name(),
                outcome.read_ms,
                outcome.write_ms,
                outcome.write_ms / outcome.read_ms,
                outcome.read_wait_ms,
                outcome.write_wait_ms,
                outcome.blocked_percent,
                outcome.throughput
            );
            rows.push((write_percent, policy, outcome));
        }
    }
    let at = |write_percent, policy| rows.iter().find(|row| row.0 == write_percent && row.1 == policy).unwrap().2;
    // FRP at 5 % writes: writers starve behind the stream of readers (the paper: 667 ms
    // against 105 ms).
    let frp = at(5, Policy::Frp);
    assert!(frp.write_ms > 4.0 * frp.read_ms, "FRP at 5 %: write {:.1} ms, read {:.1} ms", frp.write_ms, frp.read_ms);
    // ... and the writers' penalty shrinks quickly as writes become common.
    let frp_ratio = |write_percent| at(write_percent, Policy::Frp).write_ms / at(write_percent, Policy::Frp).read_ms;
    assert!(frp_ratio(50) < frp_ratio(5) / 2.0);
    for write_percent in WRITE_PERCENTAGES {
        // FIFO: reads and writes take about as long at every mix.
        let fifo = at(write_percent, Policy::Fifo);
        let ratio = fifo.write_ms / fifo.read_ms;
        assert!((0.67..1.5).contains(&ratio), "FIFO at {write_percent} %: write {:.1} ms, read {:.1} ms", fifo.write_ms, fifo.read_ms);
        // Reader's priority buys readers lower latency than FIFO.
        let frp = at(write_percent, Policy::Frp);
        assert!(frp.read_ms <= fifo.read_ms * 1.01, "FRP reads at {write_percent} %: {:.1} ms vs FIFO {:.1} ms", frp.read_ms, fifo.read_ms);
        // Both policies keep the machine about equally busy (the paper: equal total throughput).
        let throughput_ratio = frp.throughput / fifo.throughput;
        assert!((0.8..1.25).contains(&throughput_ratio), "throughput at {write_percent} %: FRP/FIFO {throughput_ratio:.2}");
    }
}
