//! `spindle-service-disk`: the policy half of the block service — a deterministic disk
//! timing model, the request queue with its reference scheduling policies, and the
//! service's counters.
//!
//! A core service is split in two (docs/architecture.md): this crate holds the decisions —
//! plain data and rules, `no_std`, no `unsafe`, tested on the host — and the kernel wires
//! it to the device driver and to the disk-scheduling event. The three parts:
//!
//! - [`model`]: where each block lies on a disk (cylinder, head, sector) and how long a
//!   request takes — controller overhead, seek, rotation (a function of absolute time, so
//!   waiting changes it), transfer, track switches — so that the order and placement of
//!   requests change the time I/O takes, as on a real disk. Parameter sets are chosen by
//!   name ([`Parameters::by_name`]): `hp97560` (the default, Ruemmler & Wilkes' HP 97560)
//!   and `none` (no modelled delay).
//! - [`queue`]: the bounded queue of pending requests ([`Scheduler`]), the reference
//!   policies FIFO, SSTF and C-LOOK as pure functions ([`choose`]) — the answers the kernel
//!   compares an extension's answers with — the check of an answer
//!   ([`Scheduler::validate`]) and the starvation bound.
//! - [`stats`]: completed requests, seek distance, busy time, mean and p99 response time,
//!   in fixed-size counters.
//! - [`faults`]: a test hook — a plan of device errors ([`FaultPlan`]: the next N
//!   requests, reads, writes, or the request at a sector) the kernel consults before it
//!   sends a request to the device; a hit fails without touching the data.
//!
//! A request's life: [`Scheduler::submit`] queues it; when the disk is free the kernel asks
//! the policy (an extension, or nobody) and calls [`Scheduler::dispatch`] with the answer
//! and the arm's cylinder ([`DiskModel::head_cylinder`]); [`DiskModel::service`] says when
//! the request finishes; [`Stats::record`] counts it:
//!
//! ```
//! use spindle_service_disk::{DiskModel, Parameters, Policy, Scheduler, SchedulerConfig, Stats};
//!
//! let parameters = Parameters::by_name("hp97560").unwrap().with_block_bytes(4096).unwrap();
//! let mut disk = DiskModel::new(&parameters);
//! let config = SchedulerConfig { capacity: 64, max_wait_ns: Some(500_000_000), reference: Policy::CircularLook };
//! let mut queue = Scheduler::new(*parameters.geometry(), config).unwrap();
//! let mut stats = Stats::new();
//! let id = queue.submit(1_000, 1, false, 0, 7).unwrap();
//! // No extension answered: the reference policy (C-LOOK) chooses.
//! let dispatch = queue.dispatch(0, None, disk.head_cylinder()).unwrap();
//! assert_eq!(dispatch.request.id, id);
//! let request = dispatch.request;
//! let timing = disk.service(0, request.start_block, request.blocks, request.write).unwrap();
//! stats.record(&request, &timing);
//! assert_eq!(stats.mean_response_ns(), Some(timing.finish_ns));
//! ```
//!
//! Known limitations: one disk per model and queue (the kernel makes one of each per
//! device); the model has no read-ahead cache, zoning or bus time (see [`model`]); the
//! reference policies know cylinders, not rotational positions, so on the HP 97560 —
//! where half a revolution (7.5 ms) and the controller overhead (2.2 ms) do not shrink
//! with reordering — C-LOOK and SSTF serve uniform random 4 KiB reads about 1.25× as fast
//! as FIFO with 8 requests queued, 1.43× with 32, and 1.5× only from about 80 (the
//! simulation among the tests measures this).

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod faults;
pub mod model;
pub mod queue;
pub mod stats;

#[cfg(test)]
mod simulation;

pub use faults::{Fault, FaultPlan, FaultTarget, InjectError};
pub use model::{DiskModel, Geometry, InvalidParameters, Location, Mechanics, Parameters, RequestError, SeekCurve, Timing, UnknownModel};
pub use queue::{
    BadAnswer, Decision, Dispatch, InvalidCapacity, Policy, QueueCounters, QueuedRequest, Scheduler, SchedulerConfig, SubmitError,
    UnknownPolicy, choose,
};
pub use stats::{Histogram, Stats};
