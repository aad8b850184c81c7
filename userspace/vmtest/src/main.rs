//! `vmtest MODE …`: drives the translation service (docs/virtual-memory.md); the kernel's
//! `vm::` tests run it and check its exit status, its kill cause and the service's counters.
//!
//! - `zero PAGES TOUCH`: maps a demand-zero read-write region of PAGES pages and touches
//!   pages 0, 2, 4, … (TOUCH of them): each reads zero, then holds what was written. Then
//!   the kernel copies the command line into the last page, which was never touched (a
//!   kernel copy faults a demand-zero page in). Exits 0 if all is as expected. The service
//!   maps exactly TOUCH + 1 pages.
//! - `bad`: maps one page and loads from the guard page after it (no region): killed.
//! - `readonly`: maps one read-only page, reads it, stores to it: killed.
//! - `managed PAGES PAGER TECHNOLOGY [keep]`: maps PAGES pages, marks the region managed and
//!   assigned to extension PAGER (`none`: no pager), loads PAGER as TECHNOLOGY (a number,
//!   `spindle_abi::syscall::Technology`), then reads the first word of every page: a pager
//!   such as `pager_fill` supplies pages whose first word is their address. Unloads PAGER
//!   unless `keep`. Without a pager the first touch kills the process (no pager).
//!
//! The raw accesses need `unsafe`: the one place this crate allows it ([`raw`]).

#![no_std]
#![no_main]
#![deny(unsafe_code)]

use spindle_runtime::{Arguments, arch, println};

spindle_runtime::entry!(main);

fn main(arguments: &Arguments) -> i32 {
    let number = |index: usize| arguments.get(index).and_then(|word| word.parse::<usize>().ok());
    match arguments.get(0) {
        Some("zero") => match (number(1), number(2)) {
            (Some(pages), Some(touch)) if pages > 0 && touch * 2 <= pages => zero(pages, touch, arguments.line()),
            _ => usage(),
        },
        Some("bad") => bad(),
        Some("readonly") => readonly(),
        Some("managed") => match (number(1), arguments.get(2), number(3)) {
            (Some(pages), Some(pager), Some(technology)) if pages > 0 => managed(pages, pager, technology, arguments.get(4) == Some("keep")),
            _ => usage(),
        },
        _ => usage(),
    }
}

fn usage() -> i32 {
    println!("vmtest: usage: vmtest zero PAGES TOUCH | bad | readonly | managed PAGES PAGER TECHNOLOGY [keep]");
    2
}

fn zero(pages: usize, touch: usize, line: &str) -> i32 {
    let Ok(base) = arch::vm_map(pages * arch::PAGE_SIZE, arch::VM_READ | arch::VM_WRITE) else {
        println!("vmtest: vm_map failed");
        return 2;
    };
    for index in 0..touch {
        let page = base + 2 * index * arch::PAGE_SIZE;
        if raw::load(page + 8) != 0 {
            println!("vmtest: page {index} is not zero");
            return 3;
        }
        raw::store(page, index as u64 + 1);
        if raw::load(page) != index as u64 + 1 {
            println!("vmtest: page {index} lost what was written");
            return 3;
        }
    }
    let last = base + (pages - 1) * arch::PAGE_SIZE;
    let Ok(length) = raw::arguments_into(last, 64) else {
        println!("vmtest: the kernel could not copy into an untouched page");
        return 4;
    };
    let copied = length.min(64).min(line.len());
    if (0..copied).any(|offset| raw::load_byte(last + offset) != line.as_bytes()[offset]) {
        println!("vmtest: the command line copied into the untouched page differs");
        return 4;
    }
    println!("vmtest: {touch} of {pages} pages touched, all zero");
    0
}

fn bad() -> i32 {
    let Ok(base) = arch::vm_map(arch::PAGE_SIZE, arch::VM_READ | arch::VM_WRITE) else { return 2 };
    println!("vmtest: pid {} loads from the guard page at {:#x}", arch::getpid(), base + arch::PAGE_SIZE);
    let value = raw::load(base + arch::PAGE_SIZE);
    println!("vmtest: the load returned {value:#x}");
    1
}

fn readonly() -> i32 {
    let Ok(base) = arch::vm_map(arch::PAGE_SIZE, arch::VM_READ) else { return 2 };
    if raw::load(base) != 0 {
        return 3;
    }
    println!("vmtest: pid {} stores to its read-only page at {base:#x}", arch::getpid());
    raw::store(base, 1);
    println!("vmtest: the store completed");
    1
}

fn managed(pages: usize, pager: &str, technology: usize, keep: bool) -> i32 {
    let Ok(base) = arch::vm_map(pages * arch::PAGE_SIZE, arch::VM_READ | arch::VM_WRITE) else { return 2 };
    let assigned = (pager != "none").then_some(pager);
    let region = match arch::vm_manage(base, assigned) {
        Ok(region) => region,
        Err(error) => {
            println!("vmtest: vm_manage failed: {error}");
            return 2;
        }
    };
    if let Some(pager) = assigned {
        let Some(technology) = arch::Technology::from_number(technology) else { return usage() };
        if let Err(error) = arch::ext_load(pager, technology) {
            println!("vmtest: loading {pager} failed: {error}");
            return 2;
        }
    }
    println!("vmtest: pid {} region {region} at {base:#x} managed by {pager}", arch::getpid());
    let mut wrong = 0;
    for index in 0..pages {
        let page = base + index * arch::PAGE_SIZE;
        if raw::load(page) != page as u64 {
            wrong += 1;
        }
        raw::store(page + 8, index as u64);
    }
    if let Some(pager) = assigned.filter(|_| !keep) {
        let _ = arch::ext_unload(pager);
    }
    if wrong > 0 {
        println!("vmtest: {wrong} of {pages} pages did not come from the pager");
        return 3;
    }
    println!("vmtest: {pages} pages from {pager}");
    0
}

#[allow(unsafe_code)]
mod raw {
    use spindle_runtime::arch;

    /// Reads the word at `address` (which may fault: the kernel decides).
    pub fn load(address: usize) -> u64 {
        // SAFETY: none in Rust's terms: the address is in a region the kernel manages for
        // this program (or deliberately in none); a page the program may not read ends the
        // process before the value is used. `read_volatile` keeps the access.
        unsafe { (address as *const u64).read_volatile() }
    }

    /// Reads the byte at `address`.
    pub fn load_byte(address: usize) -> u8 {
        // SAFETY: as for `load`.
        unsafe { (address as *const u8).read_volatile() }
    }

    /// Writes `value` at `address`.
    pub fn store(address: usize, value: u64) {
        // SAFETY: as for `load`: the program's own region, nothing else refers to it.
        unsafe { (address as *mut u64).write_volatile(value) }
    }

    /// `arguments` into `length` bytes at `address` (a `vm_map` region no reference
    /// points into).
    pub fn arguments_into(address: usize, length: usize) -> Result<usize, arch::Error> {
        // SAFETY: the kernel writes at most `length` bytes at `address`, in this program's
        // own region, which no Rust reference points into.
        unsafe { arch::call(arch::Syscall::Arguments, [address, length, 0, 0, 0, 0]) }
    }
}
