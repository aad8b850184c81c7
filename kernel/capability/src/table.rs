//! Per-process tables of externalized references (SPIN's "externalized index").
//!
//! User programs never see kernel pointers. The kernel keeps, per process, a
//! [`CapabilityTable`] and hands out [`Handle`]s: 64-bit integers that pack
//!
//! ```text
//!  63        48 47                      16 15         0
//! +------------+--------------------------+------------+
//! | table tag  |       generation         |   index    |
//! +------------+--------------------------+------------+
//! ```
//!
//! and every use re-validates the handle: the tag catches a handle from another table,
//! the generation catches a handle whose entry was removed (even if the slot was reused),
//! the entry's type and rights are checked against what the caller asks for.
//!
//! Limitations: tags come from a global counter scrambled by a bijection, so the first
//! 65,535 tables have distinct tags and later ones may collide (a colliding foreign
//! handle is then caught only by index/generation/type checks); tags are predictable
//! across boots (no entropy source yet). A slot whose generation reaches `u32::MAX` is
//! retired rather than wrapped, slowly shrinking usable capacity.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;
use core::fmt;
use core::sync::atomic::{AtomicU32, Ordering};

use spin::RwLock;

use crate::capability::Capability;
use crate::error::CapError;
use crate::object::{KernelObject, ObjectKind};
use crate::rights::Rights;

/// Bits of a handle holding the slot index.
const INDEX_BITS: u32 = 16;
/// Bits of a handle holding the slot generation.
const GENERATION_BITS: u32 = 32;
/// Shift of the generation field.
const GENERATION_SHIFT: u32 = INDEX_BITS;
/// Shift of the table-tag field.
const TAG_SHIFT: u32 = INDEX_BITS + GENERATION_BITS;
/// Mask of the index field (after shifting).
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
/// Mask of the generation field (after shifting).
const GENERATION_MASK: u64 = (1 << GENERATION_BITS) - 1;

/// The largest capacity a table can have: one slot per index value.
pub const MAX_CAPACITY: usize = 1 << INDEX_BITS;

/// Odd multiplier: `n * TAG_SCRAMBLE` is a bijection on `u16`, so distinct table numbers
/// give distinct tags while consecutive tables do not get consecutive tags.
const TAG_SCRAMBLE: u16 = 0x9e37;
/// Mixed into every tag so that early tables do not get small numbers.
const TAG_SALT: u16 = 0x5a3c;

/// Counts tables ever created; source of table tags.
static NEXT_TABLE_NUMBER: AtomicU32 = AtomicU32::new(0);

/// Returns a fresh non-zero table tag (zero is kept out so that handle 0 is never valid).
fn next_table_tag() -> u16 {
    loop {
        let number = NEXT_TABLE_NUMBER.fetch_add(1, Ordering::Relaxed) as u16;
        let tag = number.wrapping_mul(TAG_SCRAMBLE) ^ TAG_SALT;
        if tag != 0 {
            return tag;
        }
    }
}

/// An externalized reference: what user space holds instead of a kernel pointer.
///
/// Only meaningful to the table that issued it; validated on every use.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle(u64);

impl Handle {
    /// Packs the three fields.
    const fn new(tag: u16, generation: u32, index: usize) -> Handle {
        Handle(
            ((tag as u64) << TAG_SHIFT)
                | ((generation as u64) << GENERATION_SHIFT)
                | (index as u64 & INDEX_MASK),
        )
    }

    /// A handle from the raw integer user space passed in (any value is accepted here;
    /// validation happens when the table uses it).
    pub const fn from_raw(raw: u64) -> Handle {
        Handle(raw)
    }

    /// The raw integer to give to user space.
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// The slot index.
    pub const fn index(self) -> usize {
        (self.0 & INDEX_MASK) as usize
    }

    /// The slot generation the handle was issued for.
    pub const fn generation(self) -> u32 {
        ((self.0 >> GENERATION_SHIFT) & GENERATION_MASK) as u32
    }

    /// The tag of the table that issued the handle.
    pub const fn table_tag(self) -> u16 {
        (self.0 >> TAG_SHIFT) as u16
    }
}

impl fmt::Display for Handle {
    /// Formats as `index.generation@tag`, e.g. `3.1@5a3c`.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "{}.{}@{:04x}",
            self.index(),
            self.generation(),
            self.table_tag()
        )
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "Handle({self})")
    }
}

/// What introspection shows about one live entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandleInfo {
    /// The handle naming the entry.
    pub handle: Handle,
    /// The kind of object it refers to.
    pub kind: ObjectKind,
    /// The rights the handle carries.
    pub rights: Rights,
}

/// One live entry: a type-erased object plus what is needed to check uses of it.
struct Entry {
    /// The object; its concrete type is checked by downcasting on lookup.
    object: Arc<dyn Any + Send + Sync>,
    /// The object's kind, for errors and introspection.
    kind: ObjectKind,
    /// The rights this handle carries.
    rights: Rights,
}

/// One slot of the table.
struct Slot {
    /// Generation of the current occupant, or (when vacant) of the next one. Bumped on
    /// every removal so that old handles become stale.
    generation: u32,
    /// The occupant, if any.
    entry: Option<Entry>,
}

/// The lock-protected part of a table.
struct Slots {
    /// Slots ever used; grows up to the capacity, never shrinks.
    slots: Vec<Slot>,
    /// Indices of vacant slots, reused last-freed first.
    free: Vec<usize>,
    /// Number of occupied slots.
    live: usize,
}

/// A per-process table of externalized references, validated on every use.
///
/// All methods take `&self`; the table is internally locked (readers in parallel for
/// lookups, which are the common case), so it can be shared between harts.
pub struct CapabilityTable {
    /// This table's tag, embedded in every handle it issues.
    tag: u16,
    /// Maximum number of live entries.
    capacity: usize,
    /// The slots.
    inner: RwLock<Slots>,
}

impl CapabilityTable {
    /// An empty table holding at most `capacity` entries (clamped to [`MAX_CAPACITY`]).
    pub fn new(capacity: usize) -> CapabilityTable {
        CapabilityTable {
            tag: next_table_tag(),
            capacity: capacity.min(MAX_CAPACITY),
            inner: RwLock::new(Slots {
                slots: Vec::new(),
                free: Vec::new(),
                live: 0,
            }),
        }
    }

    /// The tag this table puts in its handles.
    pub fn tag(&self) -> u16 {
        self.tag
    }

    /// The maximum number of live entries.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The number of live entries.
    pub fn len(&self) -> usize {
        self.inner.read().live
    }

    /// Whether the table has no live entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stores `object` with `rights` and returns the handle naming it.
    ///
    /// Errors: [`CapError::TableFull`].
    pub fn insert<T: KernelObject>(
        &self,
        object: Arc<T>,
        rights: Rights,
    ) -> Result<Handle, CapError> {
        let entry = Entry {
            object,
            kind: T::KIND,
            rights,
        };
        self.store(&mut self.inner.write(), entry)
    }

    /// Externalizes an in-kernel capability: the entry gets the capability's object and
    /// rights, and the capability is consumed (moved, not copied, into the table).
    ///
    /// Errors: [`CapError::TableFull`].
    pub fn insert_capability<T: KernelObject>(
        &self,
        capability: Capability<T>,
    ) -> Result<Handle, CapError> {
        let (object, rights) = capability.into_parts();
        self.insert(object, rights)
    }

    /// The object `handle` names, if it is a `T` and the handle carries `needed`.
    ///
    /// Errors, in the order checked: [`CapError::Foreign`], [`CapError::Invalid`],
    /// [`CapError::Stale`], [`CapError::WrongType`], [`CapError::InsufficientRights`].
    pub fn lookup<T: KernelObject>(
        &self,
        handle: Handle,
        needed: Rights,
    ) -> Result<Arc<T>, CapError> {
        let slots = self.inner.read();
        let entry = self.validate(&slots, handle)?;
        let wrong_type = CapError::WrongType {
            expected: T::KIND,
            found: entry.kind,
        };
        if !(*entry.object).is::<T>() {
            return Err(wrong_type);
        }
        if !entry.rights.contains(needed) {
            return Err(CapError::InsufficientRights {
                needed,
                held: entry.rights,
            });
        }
        Arc::clone(&entry.object)
            .downcast::<T>()
            .map_err(|_| wrong_type)
    }

    /// Kind and rights of the entry `handle` names, without using it.
    ///
    /// Errors: [`CapError::Foreign`], [`CapError::Invalid`], [`CapError::Stale`].
    pub fn info(&self, handle: Handle) -> Result<HandleInfo, CapError> {
        let slots = self.inner.read();
        let entry = self.validate(&slots, handle)?;
        Ok(HandleInfo {
            handle,
            kind: entry.kind,
            rights: entry.rights,
        })
    }

    /// Removes the entry `handle` names; the handle (and any copy of it) becomes stale.
    /// Returns what the entry was.
    ///
    /// Errors: [`CapError::Foreign`], [`CapError::Invalid`], [`CapError::Stale`].
    pub fn remove(&self, handle: Handle) -> Result<HandleInfo, CapError> {
        let mut guard = self.inner.write();
        let slots = &mut *guard;
        let info = {
            let entry = self.validate(slots, handle)?;
            HandleInfo {
                handle,
                kind: entry.kind,
                rights: entry.rights,
            }
        };
        let index = handle.index();
        let slot = &mut slots.slots[index];
        slot.entry = None;
        // A slot whose generation cannot advance is retired: reusing it would let a
        // handle from its first life match again after wrap-around.
        let reusable = slot.generation < u32::MAX;
        if reusable {
            slot.generation += 1;
            slots.free.push(index);
        }
        slots.live -= 1;
        Ok(info)
    }

    /// A new handle to the same object carrying exactly `rights`.
    ///
    /// Errors: [`CapError::Foreign`], [`CapError::Invalid`], [`CapError::Stale`];
    /// [`CapError::InsufficientRights`] if the handle lacks [`Rights::DUPLICATE`] or any
    /// right in `rights` (rights never grow); [`CapError::TableFull`].
    pub fn duplicate(&self, handle: Handle, rights: Rights) -> Result<Handle, CapError> {
        let mut slots = self.inner.write();
        let copy = {
            let entry = self.validate(&slots, handle)?;
            let needed = rights.union(Rights::DUPLICATE);
            if !entry.rights.contains(needed) {
                return Err(CapError::InsufficientRights {
                    needed,
                    held: entry.rights,
                });
            }
            Entry {
                object: Arc::clone(&entry.object),
                kind: entry.kind,
                rights,
            }
        };
        self.store(&mut slots, copy)
    }

    /// A snapshot of every live entry, in index order (for introspection).
    pub fn entries(&self) -> Vec<HandleInfo> {
        let slots = self.inner.read();
        slots
            .slots
            .iter()
            .enumerate()
            .filter_map(|(index, slot)| {
                slot.entry.as_ref().map(|entry| HandleInfo {
                    handle: Handle::new(self.tag, slot.generation, index),
                    kind: entry.kind,
                    rights: entry.rights,
                })
            })
            .collect()
    }

    /// Checks that `handle` names a live entry of this table and returns it.
    fn validate<'slots>(
        &self,
        slots: &'slots Slots,
        handle: Handle,
    ) -> Result<&'slots Entry, CapError> {
        if handle.table_tag() != self.tag {
            return Err(CapError::Foreign { handle });
        }
        let slot = slots
            .slots
            .get(handle.index())
            .ok_or(CapError::Invalid { handle })?;
        if handle.generation() > slot.generation {
            return Err(CapError::Invalid { handle });
        }
        match &slot.entry {
            Some(entry) if handle.generation() == slot.generation => Ok(entry),
            // Older generation, or the same generation in a retired (vacant) slot: the
            // entry this handle named has been removed.
            _ => Err(CapError::Stale { handle }),
        }
    }

    /// Puts `entry` in a vacant slot (reusing freed ones first).
    fn store(&self, slots: &mut Slots, entry: Entry) -> Result<Handle, CapError> {
        let index = match slots.free.pop() {
            Some(index) => index,
            None if slots.slots.len() < self.capacity => {
                slots.slots.push(Slot {
                    generation: 0,
                    entry: None,
                });
                slots.slots.len() - 1
            }
            // Every index below the capacity is in use or retired.
            None => {
                return Err(CapError::TableFull {
                    capacity: self.capacity,
                });
            }
        };
        let slot = &mut slots.slots[index];
        slot.entry = Some(entry);
        slots.live += 1;
        Ok(Handle::new(self.tag, slot.generation, index))
    }
}

impl fmt::Debug for CapabilityTable {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("CapabilityTable")
            .field("tag", &format_args!("{:04x}", self.tag))
            .field("capacity", &self.capacity)
            .field("entries", &self.entries())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Page;
    impl KernelObject for Page {
        const KIND: ObjectKind = ObjectKind::PhysicalPage;
    }

    struct File {
        inode: u64,
    }
    impl KernelObject for File {
        const KIND: ObjectKind = ObjectKind::File;
    }

    fn file(inode: u64) -> Arc<File> {
        Arc::new(File { inode })
    }

    #[test]
    fn insert_then_lookup_returns_the_object() {
        let table = CapabilityTable::new(8);
        let handle = table
            .insert(file(42), Rights::READ)
            .expect("table has room");
        let found = table
            .lookup::<File>(handle, Rights::READ)
            .expect("valid handle, right type and rights");
        assert_eq!(found.inode, 42);
        assert_eq!(handle.table_tag(), table.tag());
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn wrong_type_is_reported_with_both_kinds() {
        let table = CapabilityTable::new(8);
        let handle = table.insert(file(1), Rights::ALL).expect("table has room");
        assert_eq!(
            table.lookup::<Page>(handle, Rights::READ).err(),
            Some(CapError::WrongType {
                expected: ObjectKind::PhysicalPage,
                found: ObjectKind::File
            })
        );
    }

    #[test]
    fn insufficient_rights_are_reported() {
        let table = CapabilityTable::new(8);
        let handle = table.insert(file(1), Rights::READ).expect("table has room");
        assert_eq!(
            table.lookup::<File>(handle, Rights::WRITE).err(),
            Some(CapError::InsufficientRights {
                needed: Rights::WRITE,
                held: Rights::READ
            })
        );
    }

    #[test]
    fn removed_handle_is_stale_even_after_slot_reuse() {
        let table = CapabilityTable::new(8);
        let old = table.insert(file(1), Rights::READ).expect("table has room");
        let removed = table.remove(old).expect("live handle");
        assert_eq!(removed.kind, ObjectKind::File);
        assert_eq!(
            table.lookup::<File>(old, Rights::READ).err(),
            Some(CapError::Stale { handle: old })
        );

        let new = table.insert(file(2), Rights::READ).expect("table has room");
        assert_eq!(new.index(), old.index(), "the freed slot is reused");
        assert_ne!(new, old);
        assert_eq!(
            table.lookup::<File>(old, Rights::READ).err(),
            Some(CapError::Stale { handle: old })
        );
        assert_eq!(
            table
                .lookup::<File>(new, Rights::READ)
                .map(|file| file.inode),
            Ok(2)
        );
        assert_eq!(
            table.remove(old).err(),
            Some(CapError::Stale { handle: old })
        );
    }

    #[test]
    fn handle_from_another_table_is_foreign() {
        let first = CapabilityTable::new(8);
        let second = CapabilityTable::new(8);
        assert_ne!(first.tag(), second.tag());
        let handle = first.insert(file(1), Rights::READ).expect("table has room");
        // Same index and generation exist in `second`, so only the tag can catch this.
        let _ = second
            .insert(file(2), Rights::READ)
            .expect("table has room");
        assert_eq!(
            second.lookup::<File>(handle, Rights::READ).err(),
            Some(CapError::Foreign { handle })
        );
        assert_eq!(
            second.remove(handle).err(),
            Some(CapError::Foreign { handle })
        );
    }

    #[test]
    fn never_issued_handles_are_invalid() {
        let table = CapabilityTable::new(8);
        let issued = table.insert(file(1), Rights::READ).expect("table has room");
        let beyond = Handle::new(table.tag(), 0, 5);
        assert_eq!(
            table.info(beyond).err(),
            Some(CapError::Invalid { handle: beyond })
        );
        let future = Handle::new(table.tag(), issued.generation() + 1, issued.index());
        assert_eq!(
            table.info(future).err(),
            Some(CapError::Invalid { handle: future })
        );
        assert!(matches!(
            table.info(Handle::from_raw(0)),
            Err(CapError::Foreign { .. })
        ));
    }

    #[test]
    fn full_table_refuses_and_recovers_after_remove() {
        let table = CapabilityTable::new(2);
        let first = table
            .insert(file(1), Rights::READ | Rights::DUPLICATE)
            .expect("room");
        let _second = table.insert(file(2), Rights::READ).expect("room");
        assert_eq!(
            table.insert(file(3), Rights::READ).err(),
            Some(CapError::TableFull { capacity: 2 })
        );
        assert_eq!(
            table.duplicate(first, Rights::READ).err(),
            Some(CapError::TableFull { capacity: 2 })
        );
        table.remove(first).expect("live handle");
        assert!(table.insert(file(3), Rights::READ).is_ok());
    }

    #[test]
    fn duplicate_with_reduced_rights() {
        let table = CapabilityTable::new(8);
        let original = table
            .insert(file(9), Rights::READ | Rights::WRITE | Rights::DUPLICATE)
            .expect("room");
        let read_only = table
            .duplicate(original, Rights::READ)
            .expect("subset of held rights");
        assert_ne!(read_only, original);
        assert_eq!(
            table.info(read_only).map(|info| info.rights),
            Ok(Rights::READ)
        );
        assert_eq!(
            table
                .lookup::<File>(read_only, Rights::READ)
                .map(|file| file.inode),
            Ok(9)
        );
        assert_eq!(
            table.lookup::<File>(read_only, Rights::WRITE).err(),
            Some(CapError::InsufficientRights {
                needed: Rights::WRITE,
                held: Rights::READ
            })
        );
        // Rights never grow, and the copy cannot itself be copied (no DUPLICATE).
        assert!(matches!(
            table.duplicate(read_only, Rights::READ),
            Err(CapError::InsufficientRights { .. })
        ));
        // Removing the original leaves the copy usable.
        table.remove(original).expect("live handle");
        assert!(table.lookup::<File>(read_only, Rights::READ).is_ok());
    }

    #[test]
    fn duplicate_needs_the_duplicate_right() {
        let table = CapabilityTable::new(8);
        let handle = table
            .insert(file(1), Rights::READ | Rights::WRITE)
            .expect("room");
        assert_eq!(
            table.duplicate(handle, Rights::READ).err(),
            Some(CapError::InsufficientRights {
                needed: Rights::READ | Rights::DUPLICATE,
                held: Rights::READ | Rights::WRITE
            })
        );
    }

    #[test]
    fn entries_lists_live_handles_for_introspection() {
        let table = CapabilityTable::new(8);
        let first = table.insert(file(1), Rights::READ).expect("room");
        let second = table.insert(Arc::new(Page), Rights::MAP).expect("room");
        table.remove(first).expect("live handle");
        assert_eq!(
            table.entries(),
            [HandleInfo {
                handle: second,
                kind: ObjectKind::PhysicalPage,
                rights: Rights::MAP
            }]
        );
    }

    #[test]
    fn exhausted_generation_retires_the_slot() {
        let table = CapabilityTable::new(1);
        let handle = table.insert(file(1), Rights::READ).expect("room");
        table.inner.write().slots[handle.index()].generation = u32::MAX;
        let last = Handle::new(table.tag(), u32::MAX, handle.index());
        table.remove(last).expect("live at the last generation");
        assert_eq!(
            table.info(last).err(),
            Some(CapError::Stale { handle: last })
        );
        assert_eq!(
            table.insert(file(2), Rights::READ).err(),
            Some(CapError::TableFull { capacity: 1 })
        );
    }

    #[test]
    fn externalized_capability_keeps_its_rights() {
        // SAFETY: trust marker only (no memory-safety precondition); test code is trusted.
        let issuer = unsafe { crate::CapabilityIssuer::new() };
        let capability = issuer.mint(file(5), Rights::READ);
        let table = CapabilityTable::new(4);
        let handle = table.insert_capability(capability).expect("room");
        assert_eq!(table.info(handle).map(|info| info.rights), Ok(Rights::READ));
    }

    #[test]
    fn handle_fields_round_trip() {
        let handle = Handle::new(0xbeef, 0x1234_5678, 0x9abc);
        assert_eq!(
            (handle.table_tag(), handle.generation(), handle.index()),
            (0xbeef, 0x1234_5678, 0x9abc)
        );
        assert_eq!(Handle::from_raw(handle.raw()), handle);
        assert_eq!(handle.to_string(), "39612.305419896@beef");
    }

    #[test]
    fn capacity_is_clamped_to_the_index_width() {
        assert_eq!(CapabilityTable::new(usize::MAX).capacity(), MAX_CAPACITY);
    }
}
