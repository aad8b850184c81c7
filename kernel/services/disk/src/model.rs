//! The disk timing model: where a block lies on the platters, and how long reaching and
//! transferring it takes.
//!
//! # Design
//!
//! A disk is a [`Geometry`] — cylinders × heads (data surfaces) × sectors per track, the
//! sector size, and the block size the service addresses — and, unless its time is not
//! modelled, [`Mechanics`]: rotation speed, a [`SeekCurve`], head-switch time, controller
//! overhead and track/cylinder skew. Blocks map to sectors linearly, cylinder-major:
//! block 0 starts at cylinder 0, head 0, sector 0; a track fills before the next head, a
//! cylinder before the next cylinder. There is no zoning and no spare sector.
//!
//! [`DiskModel::service`] charges one request, in this order:
//!
//! 1. it starts when the disk is free: at `max(now, the previous request's finish)`;
//! 2. controller overhead (per request, for a read or a write);
//! 3. a seek to the first sector's cylinder ([`SeekCurve`]), or a head switch when only the
//!    head changes;
//! 4. rotational latency until the first sector comes under the head;
//! 5. the transfer, as the sectors pass under the head. Crossing to the next track costs a
//!    head switch (a one-cylinder seek at a cylinder boundary) plus the rotation until that
//!    track's first sector, which the skew places just after a switch ends, as on the
//!    real drive.
//!
//! The arm ends over the request's last sector. The platter's angle is a function of
//! time — it passed the unskewed origin (sector 0 of track 0) at the model's origin time
//! (t = 0 unless [`DiskModel::new_at`] says otherwise) and turns at a constant rate — so
//! waiting before a request changes its rotational latency, and the same inputs (relative
//! to the origin) always give the same timings.
//!
//! All arithmetic is integer. Times are nanoseconds (`u64`). Angles are exact: one sector
//! is [`NANOSECONDS_PER_MINUTE`] angle units, so `t` nanoseconds turn the platter by
//! `t × rpm × sectors_per_track` units. A time is derived from an angle (rounded up to the
//! next nanosecond) only where an event happens, so rounding never accumulates along a
//! transfer, and the components of a [`Timing`] add up exactly to its duration. The seek
//! curve's `b·√d` is computed as `⌊√(b²·d)⌋`, the exact floor in nanoseconds.
//!
//! # Known limitations
//!
//! No read-ahead or track buffer (the HP 97560 has a 128 KB buffer with read-ahead, so
//! back-to-back sequential requests are slower here than on the drive: each waits for
//! the next sector to come round again); no SCSI bus transfer time; no command queueing in
//! the drive; seeks cost the same in both directions; writes differ from reads only in
//! their controller overhead (equal for the HP 97560).

use alloc::string::String;
use core::fmt;

/// Nanoseconds in a minute: rotation speeds are revolutions per minute.
pub const NANOSECONDS_PER_MINUTE: u64 = 60_000_000_000;

/// Nanoseconds in a millisecond (the papers give drive times in milliseconds).
pub const NANOSECONDS_PER_MILLISECOND: u64 = 1_000_000;

/// The parameter set [`Parameters::default`] and the block service use unless told otherwise.
pub const DEFAULT_MODEL: &str = "hp97560";

/// Every name [`Parameters::by_name`] knows, the default first.
pub const MODEL_NAMES: [&str; 2] = ["hp97560", "none"];

/// The HP 97560 as Ruemmler & Wilkes model it ("An introduction to disk drive modeling",
/// IEEE Computer 27(3):17–29, March 1994, Table 1, the HP 97560 column).
///
/// The numbers were checked against two secondary sources, because the paper's own table
/// was not readable here: the HP97560Disk model in the HECIOS simulator
/// (`bws/HECIOS`, `src/physical/hard_disk.h`, adapted from the FSS simulator), which cites
/// the paper and lists every value below, and the TH99 drive sheet for the HP 97560
/// (idealine.info/th99, from HP's product description manual 5960-0116), which confirms
/// the geometry and the rotation speed. Each constant names its source; what is not from
/// the paper says so.
pub mod hp97560 {
    use super::NANOSECONDS_PER_MILLISECOND as MS;

    /// Cylinders: 1962 (Ruemmler & Wilkes, Table 1; TH99: 1962).
    pub const CYLINDERS: u32 = 1962;
    /// Data surfaces (heads): 19 (Ruemmler & Wilkes, Table 1; TH99: 19 heads).
    pub const HEADS: u32 = 19;
    /// Sectors per track: 72 (Ruemmler & Wilkes, Table 1; TH99: 72).
    pub const SECTORS_PER_TRACK: u32 = 72;
    /// Bytes per sector: 512 (Ruemmler & Wilkes, Table 1; TH99: 512).
    pub const SECTOR_BYTES: u32 = 512;
    /// Rotation speed: 4002 rpm, one revolution ≈ 14.99 ms (Ruemmler & Wilkes, Table 1;
    /// TH99: 4002).
    pub const RPM: u32 = 4002;
    /// Seeks shorter than 383 cylinders follow `3.24 + 0.400·√d` ms, longer ones
    /// `8.00 + 0.008·d` ms (Ruemmler & Wilkes, Table 1). HECIOS puts d = 383 in the short
    /// part; the two parts differ there by 4 µs (11.068 vs 11.064 ms).
    pub const SHORT_SEEK_LIMIT_CYLINDERS: u32 = 383;
    /// The constant of the short-seek part: 3.24 ms (Ruemmler & Wilkes, Table 1).
    pub const SHORT_SEEK_BASE_NS: u64 = 3_240_000;
    /// The √d coefficient of the short-seek part: 0.400 ms (Ruemmler & Wilkes, Table 1).
    pub const SHORT_SEEK_SQRT_NS: u64 = 400_000;
    /// The constant of the long-seek part: 8.00 ms (Ruemmler & Wilkes, Table 1).
    pub const LONG_SEEK_BASE_NS: u64 = 8 * MS;
    /// The per-cylinder coefficient of the long-seek part: 0.008 ms (Ruemmler & Wilkes,
    /// Table 1).
    pub const LONG_SEEK_PER_CYLINDER_NS: u64 = 8_000;
    /// Track (head) switch time: 1.6 ms (Ruemmler & Wilkes, Table 1; HECIOS: "Track Switch
    /// Time: 1.6 milliseconds").
    pub const HEAD_SWITCH_NS: u64 = 1_600_000;
    /// Controller overhead per read: 2.2 ms (Ruemmler & Wilkes, Table 1; HECIOS: 2.2 ms on
    /// reads).
    pub const READ_OVERHEAD_NS: u64 = 2_200_000;
    /// Controller overhead per write: 2.2 ms (HECIOS: 2.2 ms on writes; the paper gives one
    /// controller overhead, which is used for both).
    pub const WRITE_OVERHEAD_NS: u64 = 2_200_000;
    /// Track skew: 8 sectors ≈ 1.67 ms, just over a head switch (Ruemmler & Wilkes,
    /// Table 1; HECIOS lists it and does not model it; modelled here).
    pub const TRACK_SKEW_SECTORS: u32 = 8;
    /// Cylinder skew: 18 sectors ≈ 3.75 ms, just over a one-cylinder seek of 3.64 ms
    /// (Ruemmler & Wilkes, Table 1; HECIOS lists it and does not model it; modelled here).
    pub const CYLINDER_SKEW_SECTORS: u32 = 18;
}

/// Why a parameter set or geometry was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvalidParameters {
    /// A cylinder, head, sector-per-track or sector-size count is zero.
    EmptyGeometry,
    /// The block size is not a non-zero multiple of the sector size.
    BlockSize {
        /// The block size asked for, in bytes.
        block_bytes: u32,
        /// The disk's sector size, in bytes.
        sector_bytes: u32,
    },
    /// The disk's size in bytes does not fit in 64 bits.
    TooLarge,
    /// The rotation speed is zero.
    ZeroRotation,
}

impl InvalidParameters {
    /// The reason in words.
    pub fn reason(self) -> &'static str {
        match self {
            InvalidParameters::EmptyGeometry => "a cylinder, head, sector or sector-size count is zero",
            InvalidParameters::BlockSize { .. } => "the block size is not a non-zero multiple of the sector size",
            InvalidParameters::TooLarge => "the disk's size in bytes does not fit in 64 bits",
            InvalidParameters::ZeroRotation => "the rotation speed is zero",
        }
    }
}

impl fmt::Display for InvalidParameters {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidParameters::BlockSize { block_bytes, sector_bytes } => {
                write!(formatter, "block size {block_bytes} is not a non-zero multiple of the sector size {sector_bytes}")
            }
            other => formatter.write_str(other.reason()),
        }
    }
}

impl core::error::Error for InvalidParameters {}

/// A name [`Parameters::by_name`] does not know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownModel {
    /// The name asked for.
    pub requested: String,
}

impl fmt::Display for UnknownModel {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "unknown disk model `{}`; known models: ", self.requested)?;
        for (index, name) in MODEL_NAMES.iter().enumerate() {
            let separator = if index == 0 { "" } else { ", " };
            let default = if *name == DEFAULT_MODEL { " (default)" } else { "" };
            write!(formatter, "{separator}{name}{default}")?;
        }
        Ok(())
    }
}

impl core::error::Error for UnknownModel {}

/// Why a request cannot be served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// The request covers no block.
    Empty,
    /// The request ends past the disk's last block.
    PastEnd {
        /// The request's first block.
        start_block: u64,
        /// The request's length in blocks.
        blocks: u32,
        /// Blocks on the disk.
        capacity_blocks: u64,
    },
}

impl RequestError {
    /// The reason in words.
    pub fn reason(self) -> &'static str {
        match self {
            RequestError::Empty => "the request covers no block",
            RequestError::PastEnd { .. } => "the request ends past the disk's last block",
        }
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Empty => formatter.write_str(self.reason()),
            RequestError::PastEnd { start_block, blocks, capacity_blocks } => {
                write!(formatter, "blocks {start_block} + {blocks} end past the disk's {capacity_blocks} blocks")
            }
        }
    }
}

impl core::error::Error for RequestError {}

/// Where a sector is: cylinder, head (surface) and sector within the track, all from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// The cylinder (0 = outermost).
    pub cylinder: u32,
    /// The head, that is the surface.
    pub head: u32,
    /// The sector within the track (before skew).
    pub sector: u32,
}

/// A disk's layout: how many cylinders, heads and sectors, and the block size requests
/// are counted in. Valid by construction ([`Geometry::new`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    cylinders: u32,
    heads: u32,
    sectors_per_track: u32,
    sector_bytes: u32,
    block_bytes: u32,
}

impl Geometry {
    /// A geometry of `cylinders` × `heads` × `sectors_per_track` sectors of `sector_bytes`,
    /// addressed in blocks of `block_bytes` (a multiple of the sector size).
    ///
    /// Errors: [`InvalidParameters::EmptyGeometry`], [`InvalidParameters::BlockSize`],
    /// [`InvalidParameters::TooLarge`].
    pub fn new(
        cylinders: u32,
        heads: u32,
        sectors_per_track: u32,
        sector_bytes: u32,
        block_bytes: u32,
    ) -> Result<Geometry, InvalidParameters> {
        if cylinders == 0 || heads == 0 || sectors_per_track == 0 || sector_bytes == 0 {
            return Err(InvalidParameters::EmptyGeometry);
        }
        if block_bytes == 0 || !block_bytes.is_multiple_of(sector_bytes) {
            return Err(InvalidParameters::BlockSize { block_bytes, sector_bytes });
        }
        let bytes = u64::from(cylinders)
            .checked_mul(u64::from(heads))
            .and_then(|tracks| tracks.checked_mul(u64::from(sectors_per_track)))
            .and_then(|sectors| sectors.checked_mul(u64::from(sector_bytes)));
        if bytes.is_none() {
            return Err(InvalidParameters::TooLarge);
        }
        Ok(Geometry { cylinders, heads, sectors_per_track, sector_bytes, block_bytes })
    }

    /// The same disk addressed in blocks of `block_bytes`.
    ///
    /// Errors: [`InvalidParameters::BlockSize`].
    pub fn with_block_bytes(self, block_bytes: u32) -> Result<Geometry, InvalidParameters> {
        Geometry::new(self.cylinders, self.heads, self.sectors_per_track, self.sector_bytes, block_bytes)
    }

    /// Cylinders.
    pub fn cylinders(&self) -> u32 {
        self.cylinders
    }

    /// Heads (data surfaces), that is tracks per cylinder.
    pub fn heads(&self) -> u32 {
        self.heads
    }

    /// Sectors per track.
    pub fn sectors_per_track(&self) -> u32 {
        self.sectors_per_track
    }

    /// Bytes per sector.
    pub fn sector_bytes(&self) -> u32 {
        self.sector_bytes
    }

    /// Bytes per block, the unit requests are counted in.
    pub fn block_bytes(&self) -> u32 {
        self.block_bytes
    }

    /// Sectors per block.
    pub fn sectors_per_block(&self) -> u64 {
        u64::from(self.block_bytes / self.sector_bytes)
    }

    /// Sectors per cylinder.
    pub fn sectors_per_cylinder(&self) -> u64 {
        u64::from(self.heads) * u64::from(self.sectors_per_track)
    }

    /// Sectors on the disk.
    pub fn capacity_sectors(&self) -> u64 {
        u64::from(self.cylinders) * self.sectors_per_cylinder()
    }

    /// Whole blocks on the disk (a partial block at the end is not addressable).
    pub fn capacity_blocks(&self) -> u64 {
        self.capacity_sectors() / self.sectors_per_block()
    }

    /// Bytes in the addressable blocks.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_blocks() * u64::from(self.block_bytes)
    }

    /// Checks that `blocks` blocks from `start_block` lie on the disk.
    ///
    /// Errors: [`RequestError::Empty`] for no block, [`RequestError::PastEnd`] when the
    /// request ends past the last block (overflow included).
    pub fn check(&self, start_block: u64, blocks: u32) -> Result<(), RequestError> {
        if blocks == 0 {
            return Err(RequestError::Empty);
        }
        let capacity_blocks = self.capacity_blocks();
        match start_block.checked_add(u64::from(blocks)) {
            Some(end) if end <= capacity_blocks => Ok(()),
            _ => Err(RequestError::PastEnd { start_block, blocks, capacity_blocks }),
        }
    }

    /// The cylinder holding the first sector of `block`. Blocks past the end give
    /// cylinders past the last (saturating at `u32::MAX`), so ordering by cylinder stays
    /// meaningful for any block number.
    pub fn cylinder_of_block(&self, block: u64) -> u32 {
        let cylinder = block.saturating_mul(self.sectors_per_block()) / self.sectors_per_cylinder();
        u32::try_from(cylinder).unwrap_or(u32::MAX)
    }

    /// Where the first sector of `block` is; `None` past the end.
    pub fn locate(&self, block: u64) -> Option<Location> {
        (block < self.capacity_blocks()).then(|| self.locate_sector(block * self.sectors_per_block()))
    }

    /// Where `sector` is (`sector` must be on the disk).
    fn locate_sector(&self, sector: u64) -> Location {
        let track = sector / u64::from(self.sectors_per_track);
        Location {
            cylinder: (track / u64::from(self.heads)) as u32,
            head: (track % u64::from(self.heads)) as u32,
            sector: (sector % u64::from(self.sectors_per_track)) as u32,
        }
    }
}

/// Seek time as a function of the distance `d` in cylinders, in Ruemmler & Wilkes' form:
/// `short_base + short_sqrt·√d` for `0 < d < short_limit`, `long_base + long_per_cylinder·d`
/// from `short_limit` on, and 0 for `d = 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeekCurve {
    /// Seeks shorter than this (in cylinders) follow the square-root part.
    pub short_limit_cylinders: u32,
    /// Constant of the square-root part, ns.
    pub short_base_ns: u64,
    /// Coefficient of `√d` in the square-root part, ns.
    pub short_sqrt_ns: u64,
    /// Constant of the linear part, ns.
    pub long_base_ns: u64,
    /// Coefficient of `d` in the linear part, ns per cylinder.
    pub long_per_cylinder_ns: u64,
}

impl SeekCurve {
    /// The time to move the arm `distance` cylinders, in ns (saturating, never panics).
    pub fn seek_ns(&self, distance: u32) -> u64 {
        if distance == 0 {
            0
        } else if distance < self.short_limit_cylinders {
            // b·√d = √(b²·d): the exact floor, with no float and no rounded √d.
            let coefficient = u128::from(self.short_sqrt_ns);
            let root = (coefficient * coefficient).saturating_mul(u128::from(distance)).isqrt();
            self.short_base_ns.saturating_add(u64::try_from(root).unwrap_or(u64::MAX))
        } else {
            self.long_base_ns.saturating_add(self.long_per_cylinder_ns.saturating_mul(u64::from(distance)))
        }
    }
}

/// The moving parts of a modelled disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mechanics {
    /// Rotation speed, revolutions per minute (non-zero; [`Parameters::new`] checks).
    pub rpm: u32,
    /// The seek curve.
    pub seek: SeekCurve,
    /// Time to switch to another head of the same cylinder, ns.
    pub head_switch_ns: u64,
    /// Controller overhead per read request, ns.
    pub read_overhead_ns: u64,
    /// Controller overhead per write request, ns.
    pub write_overhead_ns: u64,
    /// How many sectors each track's first sector is turned past the previous track's, within
    /// a cylinder, so that a sequential transfer does not miss it during a head switch.
    pub track_skew_sectors: u32,
    /// The same across a cylinder boundary (covers a one-cylinder seek).
    pub cylinder_skew_sectors: u32,
}

impl Mechanics {
    /// One revolution, in ns, rounded down (for reports; the model keeps it exact).
    pub fn revolution_ns(&self) -> u64 {
        NANOSECONDS_PER_MINUTE / u64::from(self.rpm.max(1))
    }

    /// Controller overhead of a read (`write == false`) or a write.
    pub fn overhead_ns(&self, write: bool) -> u64 {
        if write { self.write_overhead_ns } else { self.read_overhead_ns }
    }
}

/// A named disk: its [`Geometry`] and, unless its time is not modelled, its [`Mechanics`].
/// Valid by construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parameters {
    name: &'static str,
    geometry: Geometry,
    mechanics: Option<Mechanics>,
}

/// The HP 97560's layout in 512-byte blocks (sources: [`hp97560`]).
const HP97560_GEOMETRY: Geometry = Geometry {
    cylinders: hp97560::CYLINDERS,
    heads: hp97560::HEADS,
    sectors_per_track: hp97560::SECTORS_PER_TRACK,
    sector_bytes: hp97560::SECTOR_BYTES,
    block_bytes: hp97560::SECTOR_BYTES,
};

/// The HP 97560's moving parts (sources: [`hp97560`]).
const HP97560_MECHANICS: Mechanics = Mechanics {
    rpm: hp97560::RPM,
    seek: SeekCurve {
        short_limit_cylinders: hp97560::SHORT_SEEK_LIMIT_CYLINDERS,
        short_base_ns: hp97560::SHORT_SEEK_BASE_NS,
        short_sqrt_ns: hp97560::SHORT_SEEK_SQRT_NS,
        long_base_ns: hp97560::LONG_SEEK_BASE_NS,
        long_per_cylinder_ns: hp97560::LONG_SEEK_PER_CYLINDER_NS,
    },
    head_switch_ns: hp97560::HEAD_SWITCH_NS,
    read_overhead_ns: hp97560::READ_OVERHEAD_NS,
    write_overhead_ns: hp97560::WRITE_OVERHEAD_NS,
    track_skew_sectors: hp97560::TRACK_SKEW_SECTORS,
    cylinder_skew_sectors: hp97560::CYLINDER_SKEW_SECTORS,
};

impl Default for Parameters {
    /// The [`DEFAULT_MODEL`], the HP 97560.
    fn default() -> Self {
        Parameters::hp97560()
    }
}

impl Parameters {
    /// A parameter set named `name`; `mechanics: None` means no modelled delay.
    ///
    /// Errors: [`InvalidParameters::ZeroRotation`] (the geometry is valid already).
    pub fn new(name: &'static str, geometry: Geometry, mechanics: Option<Mechanics>) -> Result<Parameters, InvalidParameters> {
        if mechanics.is_some_and(|mechanics| mechanics.rpm == 0) {
            return Err(InvalidParameters::ZeroRotation);
        }
        Ok(Parameters { name, geometry, mechanics })
    }

    /// The parameter set called `name` (one of [`MODEL_NAMES`], exactly), in blocks of one
    /// sector.
    ///
    /// Errors: [`UnknownModel`], whose message lists the known names.
    pub fn by_name(name: &str) -> Result<Parameters, UnknownModel> {
        match name {
            "hp97560" => Ok(Parameters::hp97560()),
            "none" => Ok(Parameters::none()),
            _ => Err(UnknownModel { requested: String::from(name) }),
        }
    }

    /// `hp97560`: the HP 97560 of Ruemmler & Wilkes (sources: [`hp97560`]).
    pub const fn hp97560() -> Parameters {
        Parameters { name: "hp97560", geometry: HP97560_GEOMETRY, mechanics: Some(HP97560_MECHANICS) }
    }

    /// `none`: no modelled delay — every request finishes when it starts. The layout is
    /// the HP 97560's, so capacity, cylinders and seek distances (and therefore the
    /// policies' choices) stay meaningful; only time is not modelled.
    pub const fn none() -> Parameters {
        Parameters { name: "none", geometry: HP97560_GEOMETRY, mechanics: None }
    }

    /// The same disk addressed in blocks of `block_bytes`.
    ///
    /// Errors: [`InvalidParameters::BlockSize`].
    pub fn with_block_bytes(self, block_bytes: u32) -> Result<Parameters, InvalidParameters> {
        Ok(Parameters { geometry: self.geometry.with_block_bytes(block_bytes)?, ..self })
    }

    /// The name the set was made or looked up with.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The layout.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// The moving parts; `None` when time is not modelled.
    pub fn mechanics(&self) -> Option<&Mechanics> {
        self.mechanics.as_ref()
    }
}

/// What one request cost, in ns. `finish_ns = start_ns + overhead_ns + seek_ns +
/// rotation_ns + switch_ns + transfer_ns`, exactly (unless times saturate at `u64::MAX`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timing {
    /// When the disk started on the request: `max(now, previous finish)`.
    pub start_ns: u64,
    /// Controller overhead.
    pub overhead_ns: u64,
    /// Moving the arm to the first sector's cylinder (or switching heads on the same one).
    pub seek_ns: u64,
    /// Waiting for sectors to come under the head: before the first sector and after each
    /// track switch.
    pub rotation_ns: u64,
    /// Head switches and one-cylinder seeks when the transfer crosses a track.
    pub switch_ns: u64,
    /// Sectors passing under the head.
    pub transfer_ns: u64,
    /// When the request completed.
    pub finish_ns: u64,
    /// Cylinders the arm moved: the seek plus cylinder boundaries crossed while transferring.
    pub cylinder_distance: u32,
}

impl Timing {
    /// The disk's time on the request: `finish_ns - start_ns`.
    pub fn service_ns(&self) -> u64 {
        self.finish_ns - self.start_ns
    }
}

/// The platter's exact angle: one sector is [`NANOSECONDS_PER_MINUTE`] units, so `t` ns turn
/// it `t × rpm × sectors_per_track` units. Angles are unwrapped (they count revolutions).
/// No product overflows `u128` (`u64 × u32 × u32` at most); sums saturate, as times do near
/// `u64::MAX`.
struct Platter {
    units_per_ns: u128,
    revolution_units: u128,
}

/// Angle units per sector.
const SECTOR_UNITS: u128 = NANOSECONDS_PER_MINUTE as u128;

impl Platter {
    fn new(geometry: &Geometry, mechanics: &Mechanics) -> Platter {
        let sectors = u128::from(geometry.sectors_per_track);
        Platter { units_per_ns: u128::from(mechanics.rpm) * sectors, revolution_units: sectors * SECTOR_UNITS }
    }

    fn angle_at(&self, time_ns: u64) -> u128 {
        u128::from(time_ns) * self.units_per_ns
    }

    /// The first nanosecond at which the platter has turned at least `angle`.
    fn time_at(&self, angle: u128) -> u64 {
        u64::try_from(angle.div_ceil(self.units_per_ns)).unwrap_or(u64::MAX)
    }

    /// The first angle from `angle` on at which sector position `position` (in sectors from
    /// the origin, below sectors per track) is under the head.
    fn next(&self, angle: u128, position: u64) -> u128 {
        let target = u128::from(position) * SECTOR_UNITS;
        angle.saturating_add((target + self.revolution_units - angle % self.revolution_units) % self.revolution_units)
    }
}

/// A disk whose head position and timing are modelled.
#[derive(Clone, Debug)]
pub struct DiskModel {
    parameters: Parameters,
    cylinder: u32,
    head: u32,
    free_at_ns: u64,
    /// When the platter passed its origin (sector 0 of track 0, unskewed).
    origin_ns: u64,
}

impl DiskModel {
    /// A disk of `parameters`, idle, its arm over cylinder 0, head 0.
    pub fn new(parameters: &Parameters) -> DiskModel {
        DiskModel::new_at(parameters, 0)
    }

    /// [`DiskModel::new`] whose platter passes its origin at `origin_ns` instead of 0: a
    /// disk started at `origin_ns` then times the same requests, issued at the same times
    /// after its start, exactly as a disk started at 0 (the kernel starts one per run of a
    /// benchmark, so runs at different times of one boot are comparable).
    pub fn new_at(parameters: &Parameters, origin_ns: u64) -> DiskModel {
        DiskModel { parameters: *parameters, cylinder: 0, head: 0, free_at_ns: origin_ns, origin_ns }
    }

    /// The parameter set.
    pub fn parameters(&self) -> &Parameters {
        &self.parameters
    }

    /// The layout.
    pub fn geometry(&self) -> &Geometry {
        &self.parameters.geometry
    }

    /// Blocks on the disk.
    pub fn capacity_blocks(&self) -> u64 {
        self.parameters.geometry.capacity_blocks()
    }

    /// The cylinder the arm is over (where the last request ended).
    pub fn head_cylinder(&self) -> u32 {
        self.cylinder
    }

    /// When the last request finished (0 before any): the earliest a new one can start.
    pub fn free_at_ns(&self) -> u64 {
        self.free_at_ns
    }

    /// Serves `blocks` blocks from `start_block` (a write if `write`) arriving at `now_ns`:
    /// returns what it cost and moves the arm to the last sector transferred. A request
    /// arriving while the disk is busy starts when the previous one finishes.
    ///
    /// Errors: [`RequestError::Empty`], [`RequestError::PastEnd`]; the disk is unchanged.
    pub fn service(&mut self, now_ns: u64, start_block: u64, blocks: u32, write: bool) -> Result<Timing, RequestError> {
        let geometry = self.parameters.geometry;
        geometry.check(start_block, blocks)?;
        // In range, so neither product overflows: both are at most the disk's sectors.
        let first_sector = start_block * geometry.sectors_per_block();
        let sectors = u64::from(blocks) * geometry.sectors_per_block();
        let first = geometry.locate_sector(first_sector);
        let last = geometry.locate_sector(first_sector + sectors - 1);
        let start_ns = now_ns.max(self.free_at_ns);
        let timing = match &self.parameters.mechanics {
            None => Timing {
                start_ns,
                finish_ns: start_ns,
                cylinder_distance: first.cylinder.abs_diff(self.cylinder) + (last.cylinder - first.cylinder),
                ..Timing::default()
            },
            Some(mechanics) => self.mechanical(mechanics, start_ns, first, sectors, write),
        };
        self.cylinder = last.cylinder;
        self.head = last.head;
        self.free_at_ns = timing.finish_ns;
        Ok(timing)
    }

    /// The timing of `sectors` sectors from `first`, started at `start_ns` (steps 2–5 of the
    /// module's design note).
    fn mechanical(&self, mechanics: &Mechanics, start_ns: u64, first: Location, sectors: u64, write: bool) -> Timing {
        let geometry = &self.parameters.geometry;
        let platter = Platter::new(geometry, mechanics);
        let overhead_ns = mechanics.overhead_ns(write);
        let distance = first.cylinder.abs_diff(self.cylinder);
        let seek_ns = if distance > 0 {
            mechanics.seek.seek_ns(distance)
        } else if first.head != self.head {
            mechanics.head_switch_ns
        } else {
            0
        };
        let mut timing = Timing { start_ns, overhead_ns, seek_ns, cylinder_distance: distance, ..Timing::default() };
        // The exact angle is the clock from here on; times are read off it at each event.
        // Angles count from the origin; times are shifted back at the end.
        let relative_ns = start_ns.saturating_sub(self.origin_ns);
        let mut angle = platter.angle_at(relative_ns.saturating_add(overhead_ns).saturating_add(seek_ns));
        let mut location = first;
        let mut remaining = sectors;
        loop {
            let position = (skew(geometry, mechanics, location.cylinder, location.head) + u64::from(location.sector))
                % u64::from(geometry.sectors_per_track);
            let reached = platter.next(angle, position);
            let on_track = remaining.min(u64::from(geometry.sectors_per_track - location.sector));
            let done = reached.saturating_add(u128::from(on_track) * SECTOR_UNITS);
            timing.rotation_ns += platter.time_at(reached) - platter.time_at(angle);
            timing.transfer_ns += platter.time_at(done) - platter.time_at(reached);
            angle = done;
            remaining -= on_track;
            if remaining == 0 {
                break;
            }
            location.sector = 0;
            let switch_ns = if location.head + 1 < geometry.heads {
                location.head += 1;
                mechanics.head_switch_ns
            } else {
                location.head = 0;
                location.cylinder += 1;
                timing.cylinder_distance += 1;
                mechanics.seek.seek_ns(1)
            };
            timing.switch_ns = timing.switch_ns.saturating_add(switch_ns);
            angle = angle.saturating_add(u128::from(switch_ns) * platter.units_per_ns);
        }
        timing.finish_ns = self.origin_ns.saturating_add(platter.time_at(angle));
        timing
    }
}

/// Where sector 0 of the track at (`cylinder`, `head`) is, in sectors from the origin:
/// each head further in a cylinder adds the track skew, each cylinder further adds the
/// skews of its other heads and the cylinder skew.
fn skew(geometry: &Geometry, mechanics: &Mechanics, cylinder: u32, head: u32) -> u64 {
    let track_skew = u128::from(mechanics.track_skew_sectors);
    let per_cylinder = u128::from(geometry.heads - 1) * track_skew + u128::from(mechanics.cylinder_skew_sectors);
    let offset = u128::from(cylinder) * per_cylinder + u128::from(head) * track_skew;
    (offset % u128::from(geometry.sectors_per_track)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random sequence (SplitMix64) for the tests.
    struct Random(u64);

    impl Random {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut mixed = self.0;
            mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            mixed ^ (mixed >> 31)
        }

        fn below(&mut self, bound: u64) -> u64 {
            self.next() % bound
        }
    }

    fn hp() -> DiskModel {
        DiskModel::new(&Parameters::hp97560())
    }

    fn assert_adds_up(timing: &Timing) {
        assert_eq!(
            timing.finish_ns,
            timing.start_ns + timing.overhead_ns + timing.seek_ns + timing.rotation_ns + timing.switch_ns + timing.transfer_ns,
            "{timing:?}"
        );
    }

    #[test]
    fn the_hp97560_geometry_is_valid_and_sized_as_the_drive() {
        let geometry = Parameters::hp97560().geometry;
        assert_eq!(Geometry::new(1962, 19, 72, 512, 512), Ok(geometry));
        // 1962 × 19 × 72 = 2,684,016 sectors of 512 B = 1,374,216,192 B (the drive's 1.3 GB).
        assert_eq!(geometry.capacity_sectors(), 2_684_016);
        assert_eq!(geometry.capacity_bytes(), 1_374_216_192);
        assert_eq!(geometry.capacity_blocks(), 2_684_016);
        let four_k = geometry.with_block_bytes(4096).unwrap();
        assert_eq!(four_k.sectors_per_block(), 8);
        assert_eq!(four_k.capacity_blocks(), 335_502);
        // Block 9 of 4 KiB = sector 72 = cylinder 0, head 1, sector 0.
        assert_eq!(four_k.locate(9), Some(Location { cylinder: 0, head: 1, sector: 0 }));
        // Block 171 = sector 1368 = the first sector of cylinder 1 (19 × 72 = 1368).
        assert_eq!(four_k.locate(171), Some(Location { cylinder: 1, head: 0, sector: 0 }));
        assert_eq!(four_k.locate(335_502), None);
        assert_eq!(four_k.cylinder_of_block(335_501), 1961);
        assert_eq!(four_k.cylinder_of_block(u64::MAX), u32::MAX, "saturates, never panics");
    }

    #[test]
    fn invalid_parameters_are_refused() {
        assert_eq!(Geometry::new(0, 19, 72, 512, 512), Err(InvalidParameters::EmptyGeometry));
        assert_eq!(Geometry::new(10, 1, 1, 0, 512), Err(InvalidParameters::EmptyGeometry));
        assert_eq!(Geometry::new(10, 1, 1, 512, 1000), Err(InvalidParameters::BlockSize { block_bytes: 1000, sector_bytes: 512 }));
        assert_eq!(Geometry::new(10, 1, 1, 512, 0), Err(InvalidParameters::BlockSize { block_bytes: 0, sector_bytes: 512 }));
        assert_eq!(Geometry::new(u32::MAX, u32::MAX, u32::MAX, 512, 512), Err(InvalidParameters::TooLarge));
        let zero = Mechanics { rpm: 0, ..HP97560_MECHANICS };
        assert_eq!(Parameters::new("still", HP97560_GEOMETRY, Some(zero)), Err(InvalidParameters::ZeroRotation));
        assert_eq!(
            Parameters::hp97560().with_block_bytes(768).unwrap_err(),
            InvalidParameters::BlockSize { block_bytes: 768, sector_bytes: 512 }
        );
    }

    #[test]
    fn models_are_found_by_name_and_unknown_names_list_the_known_ones() {
        assert_eq!(Parameters::by_name("hp97560"), Ok(Parameters::hp97560()));
        assert_eq!(Parameters::by_name("none").map(|parameters| parameters.mechanics().is_none()), Ok(true));
        assert_eq!(Parameters::default().name(), DEFAULT_MODEL);
        for name in MODEL_NAMES {
            assert_eq!(Parameters::by_name(name).map(|parameters| parameters.name()), Ok(name));
        }
        let error = Parameters::by_name("HP97560").unwrap_err();
        assert_eq!(error.requested, "HP97560");
        assert_eq!(alloc::format!("{error}"), "unknown disk model `HP97560`; known models: hp97560 (default), none");
    }

    #[test]
    fn the_seek_curve_matches_hand_computed_values() {
        let seek = HP97560_MECHANICS.seek;
        assert_eq!(seek.seek_ns(0), 0);
        // d = 1: 3.24 ms + 0.400 ms × √1 = 3.64 ms.
        assert_eq!(seek.seek_ns(1), 3_640_000);
        // d = 100: 3.24 + 0.400 × 10 = 7.24 ms.
        assert_eq!(seek.seek_ns(100), 7_240_000);
        // d = 101: 0.400 ms × √101 = 400,000 × 10.0498756… = 4,019,950.2 ns → 4,019,950.
        assert_eq!(seek.seek_ns(101), 3_240_000 + 4_019_950);
        // d = 382, the last short seek: 400,000 × √382 = 400,000 × 19.5448203 = 7,817,928.1 ns.
        assert_eq!(seek.seek_ns(382), 3_240_000 + 7_817_928);
        // d = 383, the first long seek: 8.00 + 0.008 × 383 = 8 + 3.064 = 11.064 ms.
        assert_eq!(seek.seek_ns(383), 11_064_000);
        // d = 1961, the full stroke: 8.00 + 0.008 × 1961 = 23.688 ms.
        assert_eq!(seek.seek_ns(1961), 23_688_000);
        let monotone = (1..1962).all(|distance| seek.seek_ns(distance) >= seek.seek_ns(distance - 1));
        assert!(monotone, "longer seeks never cost less");
        let huge = SeekCurve {
            short_limit_cylinders: u32::MAX,
            short_base_ns: u64::MAX,
            short_sqrt_ns: u64::MAX,
            long_base_ns: 0,
            long_per_cylinder_ns: 0,
        };
        assert_eq!(huge.seek_ns(u32::MAX - 1), u64::MAX, "saturates, never panics");
    }

    #[test]
    fn rotation_and_transfer_match_hand_computed_values() {
        // 4002 rpm: one revolution = 60e9 / 4002 = 14,992,503.748 ns; a sector passes in
        // 14,992,503.748 / 72 = 208,229.219 ns. The platter turns 4002 × 72 = 288,144 angle
        // units per ns; a sector is 60e9 units, a revolution 72 × 60e9 = 4.32e12.
        assert_eq!(HP97560_MECHANICS.revolution_ns(), 14_992_503);
        let mut disk = hp();
        let timing = disk.service(0, 0, 1, false).unwrap();
        // Overhead 2.2 ms; the arm is already over cylinder 0, head 0: no seek. At 2.2 ms the
        // platter is at 2.2e6 × 288,144 = 6.339168e11 units = 10.565 sectors, so sector 0 comes
        // round at 4.32e12 units = 14,992,503.748 ns → 14,992,504 (rounded up):
        // rotation = 14,992,504 - 2,200,000 = 12,792,504 ns.
        // The sector ends at 4.38e12 units = 15,200,732.97 ns → 15,200,733: transfer 208,229.
        assert_eq!(
            timing,
            Timing {
                start_ns: 0,
                overhead_ns: 2_200_000,
                seek_ns: 0,
                rotation_ns: 12_792_504,
                switch_ns: 0,
                transfer_ns: 208_229,
                finish_ns: 15_200_733,
                cylinder_distance: 0
            }
        );
        assert_adds_up(&timing);
    }

    #[test]
    fn a_seek_lands_on_a_skewed_track() {
        let mut disk = hp();
        // Cylinder 101, head 0, sector 0 = block 101 × 19 × 72 = 138,168 (512 B blocks).
        let timing = disk.service(0, 138_168, 1, false).unwrap();
        // Seek 101 cylinders: 7,259,950 ns (above); the head is there at 2,200,000 + 7,259,950
        // = 9,459,950 ns = 2.72580… e12 units, 45.43 sectors into the first revolution.
        // Skew of cylinder 101, head 0: 101 × (18 × 8 + 18) = 16,362 ≡ 18 (mod 72), so its
        // sector 0 is at position 18: reached at 4.32e12 + 18 × 6e10 = 5.4e12 units
        // = 18,740,629.68 ns → 18,740,630; rotation = 18,740,630 - 9,459,950 = 9,280,680.
        // Ends at 5.46e12 units = 18,948,858.9 → 18,948,859: transfer 208,229.
        assert_eq!(timing.seek_ns, 7_259_950);
        assert_eq!(timing.rotation_ns, 9_280_680);
        assert_eq!(timing.transfer_ns, 208_229);
        assert_eq!(timing.finish_ns, 18_948_859);
        assert_eq!(timing.cylinder_distance, 101);
        assert_eq!(disk.head_cylinder(), 101);
        assert_adds_up(&timing);
    }

    #[test]
    fn a_transfer_across_tracks_pays_the_switch_and_the_skew_hides_the_rotation() {
        let mut disk = hp();
        // Blocks 71 and 72: cylinder 0 head 0 sector 71, then head 1 sector 0.
        let timing = disk.service(0, 71, 2, false).unwrap();
        // Sector 71 comes round at 71 × 6e10 = 4.26e12 units = 14,784,274.5 ns → 14,784,275:
        // rotation 14,784,275 - 2,200,000 = 12,584,275. It ends at 4.32e12 = 14,992,504
        // (transfer 208,229). Head switch 1.6 ms: 4.32e12 + 1.6e6 × 288,144 = 4.7810304e12
        // units (16,592,504 ns). Head 1's sector 0 is skewed 8 sectors: 4.8e12 units =
        // 16,658,337.1 → 16,658,338: rotation + 65,834 (less than a sector: the skew
        // worked). It ends at 4.86e12 = 16,866,566.3 → 16,866,567 (transfer 208,229).
        assert_eq!(timing.rotation_ns, 12_584_275 + 65_834);
        assert_eq!(timing.switch_ns, 1_600_000);
        assert_eq!(timing.transfer_ns, 2 * 208_229);
        assert_eq!(timing.finish_ns, 16_866_567);
        assert_eq!(timing.cylinder_distance, 0);
        assert_adds_up(&timing);
    }

    #[test]
    fn a_transfer_across_a_cylinder_pays_a_one_cylinder_seek() {
        let mut disk = hp();
        // The last sector of cylinder 0 (head 18, sector 71 = sector 1367) and the first of
        // cylinder 1: a one-cylinder seek (3.64 ms) under the 18-sector cylinder skew
        // (3.75 ms), so again less than a sector of rotation after it.
        let timing = disk.service(0, 1367, 2, false).unwrap();
        // The arm is over cylinder 0 already but on head 0: a head switch (1.6 ms) instead of
        // a seek, so the head is there at 3.8 ms. Track (0, 18) is skewed 18 × 8 = 144 ≡ 0
        // sectors, so sector 71 comes round as in the test above, at 14,784,275 ns: rotation
        // 14,784,275 - 3,800,000 = 10,984,275; it ends at 4.32e12 units = 14,992,504 ns. The seek
        // ends at 4.32e12 + 3.64e6 × 288,144 = 5.36884416e12 units (18,632,504 ns); track (1, 0)
        // is skewed 162 ≡ 18 sectors: 4.32e12 + 18 × 6e10 = 5.4e12 units = 18,740,629.7 →
        // 18,740,630, rotation + 108,126. It ends at 5.46e12 = 18,948,858.9 → 18,948,859.
        assert_eq!(timing.seek_ns, 1_600_000);
        assert_eq!(timing.switch_ns, 3_640_000);
        assert_eq!(timing.rotation_ns, 10_984_275 + 108_126);
        assert_eq!(timing.finish_ns, 18_948_859);
        assert_eq!(timing.cylinder_distance, 1);
        assert_eq!(disk.head_cylinder(), 1);
        assert_adds_up(&timing);
    }

    #[test]
    fn rotational_latency_depends_on_arrival_time() {
        // The same request arriving 1 ms later waits 1 ms less for the same sector.
        let early = hp().service(0, 0, 1, false).unwrap();
        let later = hp().service(1_000_000, 0, 1, false).unwrap();
        assert_eq!(later.rotation_ns, early.rotation_ns - 1_000_000);
        assert_eq!(later.finish_ns, early.finish_ns);
        // Arriving at 13 ms the head is there at 15.2 ms, just after sector 0 passed
        // (14.99 ms): it waits for the next revolution, 8.64e12 units = 29,985,007.5 → 29,985,008.
        let missed = hp().service(13_000_000, 0, 1, false).unwrap();
        assert_eq!(missed.rotation_ns, 29_985_008 - 15_200_000);
        assert_adds_up(&missed);
    }

    #[test]
    fn a_busy_disk_starts_the_next_request_when_it_is_free() {
        let mut disk = hp();
        let first = disk.service(0, 0, 1, false).unwrap();
        let second = disk.service(1_000, 5_000, 1, true).unwrap();
        assert_eq!(second.start_ns, first.finish_ns);
        assert_eq!(disk.free_at_ns(), second.finish_ns);
        assert_adds_up(&second);
    }

    #[test]
    fn requests_past_the_end_are_errors_and_change_nothing() {
        let mut disk = DiskModel::new(&Parameters::hp97560().with_block_bytes(4096).unwrap());
        assert_eq!(disk.capacity_blocks(), 335_502);
        let before = disk.service(0, 1000, 1, false).unwrap();
        let past = RequestError::PastEnd { start_block: 335_502, blocks: 1, capacity_blocks: 335_502 };
        assert_eq!(disk.service(0, 335_502, 1, false), Err(past));
        assert_eq!(
            disk.service(0, 335_501, 2, false),
            Err(RequestError::PastEnd { start_block: 335_501, blocks: 2, capacity_blocks: 335_502 })
        );
        assert!(matches!(disk.service(0, u64::MAX, u32::MAX, false), Err(RequestError::PastEnd { .. })), "no overflow");
        assert_eq!(disk.service(0, 0, 0, false), Err(RequestError::Empty));
        assert_eq!(disk.free_at_ns(), before.finish_ns, "a refused request changes nothing");
        assert_eq!(disk.head_cylinder(), 5);
        assert!(disk.service(0, 335_501, 1, false).is_ok(), "the last block is fine");
        assert_eq!(disk.head_cylinder(), 1961);
        assert_eq!(alloc::format!("{past}"), "blocks 335502 + 1 end past the disk's 335502 blocks");
    }

    #[test]
    fn extreme_values_saturate_instead_of_panicking() {
        let timing = hp().service(u64::MAX - 10, 0, 1, true).unwrap();
        assert_eq!((timing.start_ns, timing.finish_ns), (u64::MAX - 10, u64::MAX));
        let geometry = Geometry::new(3, 2, u32::MAX, 1, 1).unwrap();
        let seek = SeekCurve {
            short_limit_cylinders: 0,
            short_base_ns: 0,
            short_sqrt_ns: 0,
            long_base_ns: u64::MAX,
            long_per_cylinder_ns: u64::MAX,
        };
        let mechanics = Mechanics {
            rpm: u32::MAX,
            seek,
            head_switch_ns: u64::MAX,
            read_overhead_ns: u64::MAX,
            write_overhead_ns: 0,
            track_skew_sectors: u32::MAX,
            cylinder_skew_sectors: u32::MAX,
        };
        let mut disk = DiskModel::new(&Parameters::new("extreme", geometry, Some(mechanics)).unwrap());
        // Most of two tracks, then across the cylinder boundary (2 × (2^32 - 1) - 1 is the
        // last sector of cylinder 0).
        let timing = disk.service(u64::MAX / 2, 1, u32::MAX, false).unwrap();
        assert_eq!((timing.finish_ns, timing.switch_ns, timing.cylinder_distance), (u64::MAX, u64::MAX, 0));
        let timing = disk.service(0, 2 * u64::from(u32::MAX) - 1, 2, false).unwrap();
        assert_eq!((timing.finish_ns, timing.cylinder_distance), (u64::MAX, 1));
        assert!(disk.service(0, 0, 1, true).is_ok());
    }

    #[test]
    fn the_none_model_finishes_every_request_at_once() {
        let mut disk = DiskModel::new(&Parameters::none());
        let timing = disk.service(5_000, 138_168, 2, true).unwrap();
        assert_eq!(timing, Timing { start_ns: 5_000, finish_ns: 5_000, cylinder_distance: 101, ..Timing::default() });
        assert_eq!(disk.head_cylinder(), 101);
        assert_eq!(disk.service(7_000, 0, 1, false).unwrap().finish_ns, 7_000);
        assert_eq!(
            disk.service(0, 2_684_016, 1, false),
            Err(RequestError::PastEnd { start_block: 2_684_016, blocks: 1, capacity_blocks: 2_684_016 })
        );
    }

    #[test]
    fn the_same_inputs_give_the_same_timings() {
        let parameters = Parameters::hp97560().with_block_bytes(4096).unwrap();
        let run = || {
            let mut disk = DiskModel::new(&parameters);
            let mut random = Random(7);
            let mut now = 0;
            (0..500)
                .map(|_| {
                    now += random.below(20_000_000);
                    let timing = disk.service(now, random.below(335_500), 1 + random.below(8) as u32, random.below(2) == 0).unwrap();
                    assert_adds_up(&timing);
                    timing
                })
                .collect::<alloc::vec::Vec<_>>()
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn sequential_reads_are_faster_than_random_ones() {
        let parameters = Parameters::hp97560().with_block_bytes(4096).unwrap();
        let blocks = 64;
        // One 64-block (256 KiB) read against 64 random one-block reads.
        let mut disk = DiskModel::new(&parameters);
        let one_large = disk.service(0, 10_000, blocks, false).unwrap().service_ns();
        let mut random = Random(11);
        let mut disk = DiskModel::new(&parameters);
        let random_total: u64 = (0..blocks).map(|_| disk.service(0, random.below(335_502), 1, false).unwrap().service_ns()).sum();
        assert!(one_large * 5 < random_total, "one sequential read {one_large} ns vs random {random_total} ns");
        // 64 back-to-back one-block reads in order, against the same number at random: no
        // seek, and at most one revolution of rotation each.
        let mut disk = DiskModel::new(&parameters);
        let sequential_total: u64 =
            (0..u64::from(blocks)).map(|block| disk.service(0, 10_000 + block, 1, false).unwrap().service_ns()).sum();
        assert!(sequential_total < random_total, "sequential {sequential_total} ns vs random {random_total} ns");
    }

    #[test]
    fn a_model_started_later_times_the_same_requests_the_same() {
        let parameters = Parameters::hp97560().with_block_bytes(4096).unwrap();
        let requests = |origin: u64| {
            let mut disk = DiskModel::new_at(&parameters, origin);
            let mut random = Random(5);
            (0..200u64)
                .map(|index| {
                    let timing = disk.service(origin + index * 3_000_000, random.below(335_502), 1 + (index % 3) as u32, index % 4 == 0).unwrap();
                    (timing.start_ns - origin, timing.finish_ns - origin, timing.rotation_ns, timing.cylinder_distance)
                })
                .collect::<alloc::vec::Vec<_>>()
        };
        let at_zero = requests(0);
        assert_eq!(at_zero, requests(123_456_789));
        // Without the origin, the same requests later in time turn out differently (the
        // platter is elsewhere): the origin is what makes them comparable.
        let mut disk = DiskModel::new(&parameters);
        let mut random = Random(5);
        let shifted: alloc::vec::Vec<_> = (0..200u64)
            .map(|index| disk.service(123_456_789 + index * 3_000_000, random.below(335_502), 1 + (index % 3) as u32, index % 4 == 0).unwrap().rotation_ns)
            .collect();
        assert_ne!(shifted, at_zero.iter().map(|timing| timing.2).collect::<alloc::vec::Vec<_>>());
    }
}
