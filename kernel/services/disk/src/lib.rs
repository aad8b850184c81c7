//! `spindle-service-disk`: the policy half of the block service (host-tested, `no_std`,
//! no `unsafe`).
//!
//! A core service is split in two (docs/architecture.md): this crate holds the decisions,
//! the kernel wires them to the device driver and to the disk-scheduling event.
//!
//! - [`model`]: where each block lies on a disk and how long a request takes, so that the
//!   order and placement of requests change the time I/O takes. Parameter sets are chosen
//!   by name ([`Parameters::by_name`]): `hp97560` (the default) and `none`.
//! - [`queue`]: the bounded queue of pending requests ([`Scheduler`]), the reference
//!   policies FIFO, SSTF and C-LOOK as pure functions ([`choose`]) — the answers the kernel
//!   compares an extension's answers with — answer checks and the starvation bound.
//! - [`stats`]: completed requests, seek distance, busy time, mean and p99 response time,
//!   in fixed-size counters.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod model;
pub mod queue;
pub mod stats;

pub use model::{DiskModel, Geometry, InvalidParameters, Location, Mechanics, Parameters, RequestError, SeekCurve, Timing, UnknownModel};
pub use queue::{
    BadAnswer, Decision, Dispatch, InvalidCapacity, Policy, QueueCounters, QueuedRequest, Scheduler, SchedulerConfig, SubmitError,
    UnknownPolicy, choose,
};
pub use stats::{Histogram, Stats};
