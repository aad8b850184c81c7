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
//! - `barrier PAGES TECHNOLOGY`: Appel & Li. Maps PAGES pages; `dirty` is 0 for a page only
//!   read, 1 once written; traps the region to `pager_fill` (`vm_trap`), loads it, protects
//!   every page read-only (`protN`) and stores to each: every store faults, the handler
//!   unprotects the page and the store runs again (PAGES protection faults). Then `protN`
//!   and `unprotN` (no faults), and `prot1` to no access and back (the page keeps its
//!   contents). Last, the region's one page more, made read-only before its first touch:
//!   the load gets the pager's page (mapped read-only, the page's own protection) and
//!   the store after it faults once more. Exits 0 if all is as expected.
//! - `chain PAGES [TECHNOLOGY]`: maps PAGES pages, touches them, traps the region for
//!   handlers assigned to nobody (`vm_trap`, no name) — or, with TECHNOLOGY, to the
//!   `scan_barrier` extension, which it loads in that technology — protects the first page
//!   read-only and stores to every page in order: with a handler that unprotects the
//!   faulting page and protects the next (`spindle_vm_protect`, Appel & Li from a handler),
//!   every store traps once. Exits 0 if every page holds what was stored.
//! - `wide`: `prot_n` over a 512-page region placed after a small one, so that it
//!   crosses a 2 MiB boundary (the kernel rewrites leaves one level-0 table at a time),
//!   trapped to `pager_fill` (built in), whose answer to a protection fault gives the page
//!   its access back: read-only keeps the data and the dirty bits (loads do not fault); no
//!   access takes every leaf (each load faults once); no access then read-only brings the
//!   leaves back (no load faults, each store faults once). Exits 0 if every word is right,
//!   else the number of the step that failed; the caller counts the faults (1,024).
//! - `errors`: every documented error of `vm_map`, `vm_manage`, `vm_trap`, `prot1`,
//!   `prot_n`, `unprot_n`, `dirty` and of `protect`/`unmap` on a `vm_map` region, and kernel
//!   copies from and to a managed region's missing page (refused); exits with the number of
//!   calls that got another answer.
//! - `bench`: Appel & Li's primitives without a handler (SPIN Table 4's `dirty`, `prot1`,
//!   `prot100`, `unprot100`, and `fault`: a demand-zero fault), as `bench row vm NAME
//!   ITERATIONS MILLI-INSTRUCTIONS` lines for `cargo xtask bench` (`rdinstret` in U-mode,
//!   which counts the kernel's instructions too; the cost of the two reads subtracted),
//!   each followed by `bench hw vm NAME TRAPS SATP SFENCE` (per operation ×1000, from
//!   `hw_counters` read around the operation).
//! - `bench-trap TECHNOLOGY LABEL`: with `pager_fill` loaded as TECHNOLOGY handling one
//!   region's protection faults: `trap-LABEL` (a store to a read-only page, delivered to the
//!   handler, which unprotects the page; the store runs again) and `appel2-LABEL` (`protN`
//!   of 100 pages, then a trapped store to each, per page); with `scan_barrier` loaded as
//!   TECHNOLOGY for a second region: `appel1-LABEL` (a store to a read-only page, whose
//!   handler unprotects it and protects another page — the page after it — as SPIN's Table
//!   4 defines Appel1; the program unprotects that page again outside the measurement).
//!
//! - `swap PAGES LIMIT PASSES`: paging to disk. Limits itself to LIMIT frames
//!   (`vm_limit`), maps PAGES read-write pages and a few read-only ones, and PASSES times
//!   fills every word of every page with a value of (pass, page, word), reads the
//!   read-only pages (zero: a clean page is dropped, not written, and comes back zero),
//!   then checks every word. A kernel write (the command line copied into page 0 while it
//!   is on swap) and a kernel read (a child spawned from a command line stored in a page
//!   that went to swap: `vmtest child swapped-ok` exits 0 only with that argument) go through
//!   swapped pages too. `dirty` must say every written page is dirty, on swap or not, and
//!   the read-only pages clean. Exits 0 if every word was right.
//! - `hotscan HOT SCAN ROUNDS LIMIT hot|plain`: the reclaim workload (Small & Seltzer's
//!   hot list on real pages). Under LIMIT frames, each of ROUNDS rounds writes a word of
//!   each of HOT hot pages, then of 2 × LIMIT pages of a SCAN-page region, in a cycle.
//!   With `hot`, the hot pages are named in hot-list slots (`vm_hot`), so a `hotlist`
//!   graft on `mm.Reclaim` keeps them resident; `plain` leaves them to the clock. The
//!   kernel counts the page-ins; the program checks every word it wrote.
//! - `checkpoint PAGES TECHNOLOGY`: a copy-on-write checkpoint with `vm_checkpoint`
//!   loaded as TECHNOLOGY. Maps 2 × PAGES pages (data, then snapshot), fills the data,
//!   traps the region to `vm_checkpoint` and protects the data read-only (the
//!   checkpoint); then writes every third data page twice. Each first store faults once
//!   and the handler saves the page into the snapshot half. Checks that the snapshot holds
//!   exactly the written pages as they were, rolls back from it and checks the data is as
//!   at the checkpoint. Exits 0 if all is as expected.
//! - `idle PAGES TICKS`: memory pressure across processes. Maps PAGES read-write pages,
//!   fills every word with a value of (page, word), sleeps TICKS ticks (another process
//!   may take its pages meanwhile: the global clock finds them unused), then checks every
//!   word. Exits 0 if every word was right.
//! - `swapkill`: writes 16 pages under a limit of 6, then loads from no region: killed
//!   with pages on swap (the kernel tests check that their slots come back).
//! - `image PASSES LIMIT`: the program's own image under its memory limit. Limits itself
//!   to LIMIT frames, checks the initial words of a 24-page `.data` array (bytes of the
//!   program file) and a 24-page `.bss` array (zero), then PASSES times writes every word of
//!   both and checks them all. The written image pages go to swap and come back like any
//!   other page; code pages are dropped and filled again from the image. Exits 0 if every
//!   word was right.
//! - `random SEED STEPS [trap]`: random sequences of `vm_map`, `unmap`, loads, stores,
//!   `prot1`/`protN`/`unprotN`, `dirty`, kernel copies and `vm_limit` against a model of
//!   what each page holds ([`random`]).
//! - `child WORD`: exits 0 if WORD is `swapped-ok`.
//!
//! The raw accesses need `unsafe`: the one place this crate allows it ([`raw`]).

#![no_std]
#![no_main]
#![deny(unsafe_code)]

use spindle_runtime::{Arguments, arch, println};

mod random;

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
        Some("barrier") => match (number(1), number(2)) {
            (Some(pages), Some(technology)) if pages > 0 => barrier(pages, technology),
            _ => usage(),
        },
        Some("errors") => errors(),
        Some("wide") => wide(),
        Some("chain") => match (number(1), arguments.get(2)) {
            (Some(pages), None) if pages > 0 => chain(pages, None),
            (Some(pages), Some(_)) if pages > 0 => match number(2).and_then(arch::Technology::from_number) {
                Some(technology) => chain(pages, Some(technology)),
                None => usage(),
            },
            _ => usage(),
        },
        Some("bench") => bench(),
        Some("swap") => match (number(1), number(2), number(3)) {
            (Some(pages), Some(limit), Some(passes)) if pages > 0 && passes > 0 => swap(pages, limit, passes, arguments.line()),
            _ => usage(),
        },
        Some("hotscan") => match (number(1), number(2), number(3), number(4), arguments.get(5)) {
            (Some(hot), Some(scan), Some(rounds), Some(limit), Some(mode @ ("hot" | "plain"))) if hot > 0 && hot <= 64 && scan > 0 => {
                hotscan(hot, scan, rounds, limit, mode == "hot")
            }
            _ => usage(),
        },
        Some("idle") => match (number(1), number(2)) {
            (Some(pages), Some(ticks)) if pages > 0 => idle(pages, ticks),
            _ => usage(),
        },
        Some("swapkill") => swapkill(),
        Some("image") => match (number(1), number(2)) {
            (Some(passes), Some(limit)) => image(passes, limit),
            _ => usage(),
        },
        Some("checkpoint") => match (number(1), number(2)) {
            (Some(pages), Some(technology)) if pages > 0 => checkpoint(pages, technology),
            _ => usage(),
        },
        Some("random") => match (arguments.get(1).and_then(|word| word.parse::<u64>().ok()), number(2), arguments.get(3)) {
            (Some(seed), Some(steps), None | Some("trap")) => random::run(seed, steps, arguments.get(3).is_some(), arguments.line()),
            _ => usage(),
        },
        Some("child") => i32::from(arguments.get(1) != Some("swapped-ok")),
        Some("bench-trap") => match (number(1), arguments.get(2)) {
            (Some(technology), Some(label)) => bench_trap(technology, label),
            _ => usage(),
        },
        Some("managed") => match (number(1), arguments.get(2), number(3)) {
            (Some(pages), Some(pager), Some(technology)) if pages > 0 => managed(pages, pager, technology, arguments.get(4) == Some("keep")),
            _ => usage(),
        },
        _ => usage(),
    }
}

fn usage() -> i32 {
    println!("vmtest: usage: vmtest zero PAGES TOUCH | bad | readonly | managed PAGES PAGER TECHNOLOGY [keep] | barrier PAGES TECHNOLOGY | errors | wide | chain PAGES [TECHNOLOGY] | bench | bench-trap TECHNOLOGY LABEL | swap PAGES LIMIT PASSES | idle PAGES TICKS | swapkill | image PASSES LIMIT | checkpoint PAGES TECHNOLOGY | hotscan HOT SCAN ROUNDS LIMIT hot|plain | random SEED STEPS [trap] | child WORD");
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

/// The value `swap` stores at `word` of `page` in `pass`.
fn pattern(pass: usize, page: usize, word: usize) -> u64 {
    ((pass as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((page as u64) << 20) ^ word as u64).rotate_left((page % 61) as u32)
}

const WORDS_PER_PAGE: usize = arch::PAGE_SIZE / 8;

fn swap(pages: usize, limit: usize, passes: usize, line: &str) -> i32 {
    if let Err(error) = arch::vm_limit(limit) {
        println!("vmtest: vm_limit({limit}): {error:?}");
        return 2;
    }
    let rw = arch::VM_READ | arch::VM_WRITE;
    let zero_pages = 4;
    let (Ok(base), Ok(zeros)) = (arch::vm_map(pages * arch::PAGE_SIZE, rw), arch::vm_map(zero_pages * arch::PAGE_SIZE, arch::VM_READ)) else {
        println!("vmtest: vm_map failed");
        return 2;
    };
    let word = |page: usize, word: usize| base + page * arch::PAGE_SIZE + word * 8;
    for pass in 0..passes {
        for page in 0..pages {
            for index in 0..WORDS_PER_PAGE {
                raw::store(word(page, index), pattern(pass, page, index));
            }
        }
        for page in 0..zero_pages {
            if (0..WORDS_PER_PAGE).step_by(64).any(|index| raw::load(zeros + page * arch::PAGE_SIZE + index * 8) != 0) {
                println!("vmtest: read-only page {page} is not zero in pass {pass}");
                return 3;
            }
        }
        for page in 0..pages {
            if let Some(index) = (0..WORDS_PER_PAGE).find(|&index| raw::load(word(page, index)) != pattern(pass, page, index)) {
                println!("vmtest: pass {pass}: page {page} word {index} is {:#x}, not {:#x}", raw::load(word(page, index)), pattern(pass, page, index));
                return 4;
            }
        }
    }
    // Appel & Li's `dirty` survives paging: every written page is dirty, most of them on
    // swap by now (PAGES > LIMIT); the read-only pages were only read: clean.
    if let Some(page) = (0..pages).find(|&page| arch::dirty(word(page, 0)) != Ok(true)) {
        println!("vmtest: written page {page} is not dirty: {:?}", arch::dirty(word(page, 0)));
        return 7;
    }
    if let Some(page) = (0..zero_pages).find(|&page| arch::dirty(zeros + page * arch::PAGE_SIZE) != Ok(false)) {
        println!("vmtest: read-only page {page} is dirty");
        return 7;
    }
    // Page 0 went to swap long ago (the last pass touched every later page after it):
    // the kernel writes the command line into it, and reads a child's command line from it.
    let Ok(length) = raw::arguments_into(word(0, 0), 64) else {
        println!("vmtest: the kernel could not copy into a page on swap");
        return 5;
    };
    let copied = length.min(64).min(line.len());
    if (0..copied).any(|offset| raw::load_byte(word(0, 0) + offset) != line.as_bytes()[offset]) {
        println!("vmtest: the command line copied into a page on swap differs");
        return 5;
    }
    let child = b"vmtest child swapped-ok";
    let target = word(pages - 1, 0);
    for (offset, chunk) in child.chunks(8).enumerate() {
        let mut bytes = [b' '; 8];
        bytes[..chunk.len()].copy_from_slice(chunk);
        raw::store(target + offset * 8, u64::from_le_bytes(bytes));
    }
    // Push the last page out: touch the first LIMIT pages again.
    for page in 0..limit.min(pages - 1) {
        raw::store(word(page, 1), 1);
    }
    let status = match arch::spawn_from_address(target, child.len()).map(arch::wait) {
        Ok(Ok(status)) => status,
        other => {
            println!("vmtest: spawning from a page on swap: {other:?}");
            return 6;
        }
    };
    if status != arch::ExitStatus::Exited(0) {
        println!("vmtest: the child spawned from a page on swap ended {status:?}");
        return 6;
    }
    println!("vmtest: swap: {pages} pages under a limit of {limit}, {passes} passes, every word right");
    0
}

/// What a snapshot page holds before anything is saved into it.
const SENTINEL: u64 = 0x5EE0_5EE0_5EE0_5EE0;

fn checkpoint(pages: usize, technology: usize) -> i32 {
    let Some(technology) = arch::Technology::from_number(technology) else { return usage() };
    let Ok(base) = arch::vm_map(2 * pages * arch::PAGE_SIZE, arch::VM_READ | arch::VM_WRITE) else { return 2 };
    let data = |page: usize, word: usize| base + page * arch::PAGE_SIZE + word * 8;
    let snapshot = |page: usize, word: usize| base + (pages + page) * arch::PAGE_SIZE + word * 8;
    for page in 0..pages {
        for word in 0..WORDS_PER_PAGE {
            raw::store(data(page, word), pattern(0, page, word));
            raw::store(snapshot(page, word), SENTINEL);
        }
    }
    if arch::vm_trap(base, Some("vm_checkpoint")).is_err() || arch::ext_load("vm_checkpoint", technology).is_err() {
        println!("vmtest: could not trap the region to vm_checkpoint");
        return 2;
    }
    // The checkpoint: the data half read-only.
    if raw::protect(base, pages, Some(arch::VM_READ)).is_err() {
        return 2;
    }
    let written = |page: usize| page.is_multiple_of(3);
    for _ in 0..2 {
        for page in (0..pages).filter(|&page| written(page)) {
            for word in 0..WORDS_PER_PAGE {
                raw::store(data(page, word), pattern(1, page, word));
            }
        }
    }
    let mut status = 0;
    for page in 0..pages {
        let (saved, now) = if written(page) { (None, 1) } else { (Some(SENTINEL), 0) };
        let snapshot_right = (0..WORDS_PER_PAGE).all(|word| raw::load(snapshot(page, word)) == saved.unwrap_or(pattern(0, page, word)));
        let data_right = (0..WORDS_PER_PAGE).all(|word| raw::load(data(page, word)) == pattern(now, page, word));
        if !snapshot_right || !data_right {
            println!("vmtest: checkpoint: page {page}: snapshot right {snapshot_right}, data right {data_right}");
            status = 3;
        }
    }
    // Roll back: every page the snapshot holds goes back.
    for page in (0..pages).filter(|&page| raw::load(snapshot(page, 0)) != SENTINEL) {
        for word in 0..WORDS_PER_PAGE {
            raw::store(data(page, word), raw::load(snapshot(page, word)));
        }
    }
    if (0..pages).any(|page| (0..WORDS_PER_PAGE).any(|word| raw::load(data(page, word)) != pattern(0, page, word))) {
        println!("vmtest: checkpoint: the rollback did not restore the data");
        status = 4;
    }
    let _ = arch::ext_unload("vm_checkpoint");
    let saved = (0..pages).filter(|&page| written(page)).count();
    println!("vmtest: checkpoint over {pages} pages: {saved} saved on their first store, rolled back; status {status}");
    status
}

/// Words in each of `image`'s arrays: 24 pages.
const IMAGE_WORDS: usize = 24 * 512;

/// The initial value of word `index` of [`IMAGE_DATA`] (never zero, so the array is
/// bytes of the program file, not `.bss`).
const fn image_initial(index: usize) -> u64 {
    (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
}

/// The initial contents of [`IMAGE_DATA`].
const fn initial_image_data() -> [u64; IMAGE_WORDS] {
    let mut words = [0; IMAGE_WORDS];
    let mut index = 0;
    while index < IMAGE_WORDS {
        words[index] = image_initial(index);
        index += 1;
    }
    words
}

/// `.data` for `image` (reached only through [`raw`], by address).
static mut IMAGE_DATA: [u64; IMAGE_WORDS] = initial_image_data();

/// `.bss` for `image` (reached only through [`raw`], by address).
static mut IMAGE_BSS: [u64; IMAGE_WORDS] = [0; IMAGE_WORDS];

fn image(passes: usize, limit: usize) -> i32 {
    if let Err(error) = arch::vm_limit(limit) {
        println!("vmtest: vm_limit({limit}): {error:?}");
        return 2;
    }
    let data = &raw const IMAGE_DATA as usize;
    let bss = &raw const IMAGE_BSS as usize;
    for index in 0..IMAGE_WORDS {
        let (initial, zero) = (raw::load(data + 8 * index), raw::load(bss + 8 * index));
        if initial != image_initial(index) || zero != 0 {
            println!("vmtest: image word {index}: .data {initial:#x} (expected {:#x}), .bss {zero:#x}", image_initial(index));
            return 3;
        }
    }
    let value = |pass: usize, index: usize| ((pass as u64) << 48) ^ (index as u64).wrapping_mul(0x2545_F491_4F6C_DD1D);
    for pass in 1..=passes {
        for index in 0..IMAGE_WORDS {
            raw::store(data + 8 * index, value(pass, index));
            raw::store(bss + 8 * index, !value(pass, index));
        }
        for index in 0..IMAGE_WORDS {
            let (written, inverted) = (raw::load(data + 8 * index), raw::load(bss + 8 * index));
            if written != value(pass, index) || inverted != !value(pass, index) {
                println!("vmtest: pass {pass}, image word {index}: .data {written:#x}, .bss {inverted:#x}");
                return 4;
            }
        }
    }
    println!("vmtest: image: 48 image pages written {passes} times under a limit of {limit}: every word right");
    0
}

fn idle(pages: usize, ticks: usize) -> i32 {
    let Ok(base) = arch::vm_map(pages * arch::PAGE_SIZE, arch::VM_READ | arch::VM_WRITE) else {
        println!("vmtest: vm_map failed");
        return 2;
    };
    let word = |page: usize, word: usize| base + page * arch::PAGE_SIZE + word * 8;
    for page in 0..pages {
        for index in 0..WORDS_PER_PAGE {
            raw::store(word(page, index), pattern(7, page, index));
        }
    }
    if let Err(error) = arch::sleep_ticks(ticks) {
        println!("vmtest: sleep_ticks({ticks}): {error:?}");
        return 2;
    }
    for page in 0..pages {
        if let Some(index) = (0..WORDS_PER_PAGE).find(|&index| raw::load(word(page, index)) != pattern(7, page, index)) {
            println!("vmtest: idle: page {page} word {index} is {:#x}, not {:#x}", raw::load(word(page, index)), pattern(7, page, index));
            return 4;
        }
    }
    0
}

fn swapkill() -> i32 {
    let pages = 16;
    let (Ok(()), Ok(base)) = (arch::vm_limit(6), arch::vm_map(pages * arch::PAGE_SIZE, arch::VM_READ | arch::VM_WRITE)) else { return 2 };
    for page in 0..pages {
        raw::store(base + page * arch::PAGE_SIZE, page as u64 + 1);
    }
    let value = raw::load(base + pages * arch::PAGE_SIZE);
    println!("vmtest: the load from no region returned {value:#x}");
    1
}

fn hotscan(hot: usize, scan: usize, rounds: usize, limit: usize, use_hot_list: bool) -> i32 {
    if let Err(error) = arch::vm_limit(limit) {
        println!("vmtest: vm_limit({limit}): {error:?}");
        return 2;
    }
    let rw = arch::VM_READ | arch::VM_WRITE;
    let (Ok(hot_base), Ok(scan_base)) = (arch::vm_map(hot * arch::PAGE_SIZE, rw), arch::vm_map(scan * arch::PAGE_SIZE, rw)) else {
        println!("vmtest: vm_map failed");
        return 2;
    };
    let hot_page = |index: usize| hot_base + index * arch::PAGE_SIZE;
    let scan_page = |index: usize| scan_base + (index % scan) * arch::PAGE_SIZE;
    for index in 0..hot {
        raw::store(hot_page(index), 0);
        if use_hot_list && arch::vm_hot(hot_page(index), index).is_err() {
            println!("vmtest: vm_hot failed");
            return 2;
        }
    }
    let per_round = 2 * limit;
    let mut next = 0;
    for round in 0..rounds {
        for index in 0..hot {
            if raw::load(hot_page(index)) != round as u64 {
                println!("vmtest: hot page {index} lost its count in round {round}");
                return 3;
            }
            raw::store(hot_page(index), round as u64 + 1);
        }
        for _ in 0..per_round {
            raw::store(scan_page(next) + 8, next as u64);
            next += 1;
        }
    }
    // Every scan page holds the last index written to it.
    for page in 0..scan.min(next) {
        let last = (next - 1 - page) / scan * scan + page;
        if raw::load(scan_page(page) + 8) != last as u64 {
            println!("vmtest: scan page {page} holds {}, not {last}", raw::load(scan_page(page) + 8));
            return 4;
        }
    }
    if use_hot_list {
        let _ = arch::vm_hot(0, 64);
    }
    println!("vmtest: hotscan: {hot} hot pages, {rounds} rounds of {per_round} scan pages under {limit} frames");
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

fn chain(pages: usize, scan_barrier: Option<arch::Technology>) -> i32 {
    let Ok(base) = arch::vm_map(pages * arch::PAGE_SIZE, arch::VM_READ | arch::VM_WRITE) else { return 2 };
    let page = |index: usize| base + index * arch::PAGE_SIZE;
    for index in 0..pages {
        raw::store(page(index), 0);
    }
    let handler = scan_barrier.map(|_| "scan_barrier");
    if arch::vm_trap(base, handler).is_err() || scan_barrier.is_some_and(|technology| arch::ext_load("scan_barrier", technology).is_err()) {
        println!("vmtest: trapping the region to its handler failed");
        return 2;
    }
    if raw::protect(base, 1, Some(arch::VM_READ)).is_err() {
        return 2;
    }
    for index in 0..pages {
        raw::store(page(index), index as u64 + 1);
    }
    if (0..pages).any(|index| raw::load(page(index)) != index as u64 + 1) {
        return 3;
    }
    if scan_barrier.is_some() {
        let _ = arch::ext_unload("scan_barrier");
    }
    println!("vmtest: chain over {pages} pages stored");
    0
}

fn errors() -> i32 {
    use arch::Error;
    let mut wrong = 0;
    let mut expect = |what: &str, got: Result<usize, Error>, expected: Error| {
        if got != Err(expected) {
            println!("vmtest: {what}: {got:?}, expected {expected:?}");
            wrong += 1;
        }
    };
    let page = arch::PAGE_SIZE;
    let rw = arch::VM_READ | arch::VM_WRITE;
    expect("vm_map(0)", arch::vm_map(0, rw), Error::BadLength);
    expect("vm_map(too long)", arch::vm_map(arch::MAX_MAP_LENGTH + 1, rw), Error::BadLength);
    expect("vm_map(bad bits)", arch::vm_map(page, 8), Error::BadArgument);
    expect("vm_map(write only)", arch::vm_map(page, arch::VM_WRITE), Error::BadArgument);
    expect("vm_map(no access)", arch::vm_map(page, 0), Error::BadArgument);
    expect("vm_map(write and execute)", arch::vm_map(page, rw | arch::VM_EXECUTE), Error::BadArgument);
    let Ok(base) = arch::vm_map(2 * page, rw) else { return 100 };
    let as_usize = |result: Result<u64, Error>| result.map(|value| value as usize);
    expect("vm_manage(unaligned)", as_usize(arch::vm_manage(base + 1, None)), Error::BadAddress);
    expect("vm_manage(inside)", as_usize(arch::vm_manage(base + page, None)), Error::BadAddress);
    expect("vm_manage(not a user address)", as_usize(arch::vm_manage(arch::PAGE_SIZE * 16, None)), Error::BadAddress);
    // The stack is not the program's to manage or protect.
    let local = 0u8;
    let stack_page = core::hint::black_box(&local as *const u8 as usize) & !(page - 1);
    expect("prot1(the stack)", raw::protect(stack_page, 1, Some(arch::VM_READ)).map(|()| 0), Error::BadAddress);
    expect("dirty(the stack)", arch::dirty(stack_page).map(usize::from), Error::BadAddress);
    expect("vm_trap(unaligned)", as_usize(arch::vm_trap(base + 8, None)), Error::BadAddress);
    let Ok(bytes) = core::str::from_utf8(&[b'x'; 65]) else { return 100 };
    expect("vm_manage(long name)", as_usize(arch::vm_manage(base, Some(bytes))), Error::BadLength);
    expect("prot1(unaligned)", raw::protect(base + 1, 1, Some(arch::VM_READ)).map(|()| 0), Error::BadAddress);
    expect("prot1(bad bits)", raw::protect(base, 1, Some(8)).map(|()| 0), Error::BadArgument);
    expect("prot1(write only)", raw::protect(base, 1, Some(arch::VM_WRITE)).map(|()| 0), Error::BadArgument);
    expect("prot1(above the region)", raw::protect(base, 1, Some(arch::VM_READ | arch::VM_EXECUTE)).map(|()| 0), Error::NotPermitted);
    expect("prot1(guard page)", raw::protect(base + 2 * page, 1, Some(arch::VM_READ)).map(|()| 0), Error::BadAddress);
    expect("prot_n(0 pages)", raw::protect(base, 0, Some(arch::VM_READ)).map(|()| 0), Error::BadLength);
    expect("prot_n(past the region)", raw::protect(base, 3, Some(arch::VM_READ)).map(|()| 0), Error::BadAddress);
    expect("unprot_n(past the region)", raw::protect(base + page, 2, None).map(|()| 0), Error::BadAddress);
    expect("dirty(unaligned)", arch::dirty(base + 1).map(usize::from), Error::BadAddress);
    expect("vm_limit(1)", arch::vm_limit(1).map(|()| 0), Error::BadArgument);
    expect("vm_limit(3)", arch::vm_limit(3).map(|()| 0), Error::BadArgument);
    expect("vm_hot(slot 65)", as_usize(arch::vm_hot(base, 65)), Error::BadArgument);
    expect("vm_hot(not a vm_map region)", as_usize(arch::vm_hot(0x10_0000_0000, 0)), Error::BadAddress);
    expect("dirty(not a vm_map region)", arch::dirty(0x10_0000_0000).map(usize::from), Error::BadAddress);
    expect("protect(a vm_map region, read)", raw::legacy_protect(base, 2 * page, arch::ACCESS_READ).and(Err(Error::Exists)), Error::Exists);
    let Ok(read_only) = arch::vm_map(page, arch::VM_READ) else { return 100 };
    expect("protect(a read-only vm_map region, write)", raw::legacy_protect(read_only, page, arch::ACCESS_WRITE), Error::NotPermitted);
    expect("vm_manage(first)", as_usize(arch::vm_manage(base, None)).and(Err(Error::Exists)), Error::Exists);
    expect("vm_manage(again)", as_usize(arch::vm_manage(base, None)), Error::Exists);
    // A kernel copy from a missing page of a managed region is refused (no pager runs for
    // the kernel's own copies), the process lives on.
    expect("write(a managed region's missing page)", arch::write_from_address(arch::CONSOLE, base, 8), Error::BadAddress);
    expect("arguments(into a managed region's missing page)", raw::arguments_into(base + page, 8), Error::BadAddress);
    expect("unmap(a vm_map region)", raw::unmap(base, 2 * page).and(Err(Error::Exists)), Error::Exists);
    expect("dirty(after unmap)", arch::dirty(base).map(usize::from), Error::BadAddress);
    println!("vmtest: errors: {wrong} wrong");
    wrong
}

/// Instructions `operation` takes, the cost of reading the counter twice subtracted.
fn instructions(operation: impl FnOnce()) -> u64 {
    let start = arch::instructions_retired();
    operation();
    let end = arch::instructions_retired();
    let empty_start = arch::instructions_retired();
    let empty_end = arch::instructions_retired();
    (end - start).saturating_sub(empty_end - empty_start)
}

/// A row's instructions and hardware events over its measured operations.
#[derive(Default)]
struct Meter {
    instructions: u64,
    /// Traps, `satp` writes and `sfence.vma`s (`arch::hw_counters`, in its field order).
    events: [u64; arch::HwCounters::WORDS],
    /// A read of the counters failed: the row gets no `bench hw` line.
    unread: bool,
}

impl Meter {
    /// Measures `operation` once: its instructions ([`instructions`]) and, read around
    /// that, the hart's hardware events (less the second read's own trap).
    fn add(&mut self, operation: impl FnOnce()) {
        let before = arch::hw_counters();
        self.instructions += instructions(operation);
        let after = arch::hw_counters();
        let (Ok(before), Ok(after)) = (before, after) else {
            self.unread = true;
            return;
        };
        let own = [1, 0, 0];
        for (((total, after), before), own) in self.events.iter_mut().zip(after.words()).zip(before.words()).zip(own) {
            *total += after.saturating_sub(before).saturating_sub(own);
        }
    }

    /// Prints the row and its hardware events, per operation (×1000), for `cargo xtask
    /// bench`: `bench row vm NAME ITERATIONS MILLI-INSTRUCTIONS` and `bench hw vm NAME
    /// TRAPS SATP SFENCE` (each ×1000).
    fn row(&self, name: &str, iterations: u64) {
        println!("bench row vm {name} {iterations} {}", self.instructions * 1000 / iterations);
        if !self.unread {
            let [traps, satp, sfence] = self.events.map(|count| count * 1000 / iterations);
            println!("bench hw vm {name} {traps} {satp} {sfence}");
        }
    }
}

/// Pages of the benchmark region (its first page is not protected by the `prot100` rows).
const BENCH_PAGES: usize = 256;

fn bench() -> i32 {
    let Ok(base) = arch::vm_map(BENCH_PAGES * arch::PAGE_SIZE, arch::VM_READ | arch::VM_WRITE) else { return 2 };
    let page = |index: usize| base + index * arch::PAGE_SIZE;
    // `fault`: a store to a page that has no frame yet (demand-zero).
    let mut fault = Meter::default();
    for index in 0..BENCH_PAGES {
        fault.add(|| raw::store(page(index), index as u64));
    }
    fault.row("fault", BENCH_PAGES as u64);
    let iterations = 1000;
    let mut dirty = Meter::default();
    for _ in 0..iterations {
        dirty.add(|| {
            let _ = arch::dirty(base);
        });
    }
    dirty.row("dirty", iterations);
    let mut prot1 = Meter::default();
    for round in 0..iterations {
        let protection = if round % 2 == 0 { arch::VM_READ } else { arch::VM_READ | arch::VM_WRITE };
        prot1.add(|| {
            let _ = raw::protect(page(1), 1, Some(protection));
        });
    }
    prot1.row("prot1", iterations);
    let rounds = 100;
    let (mut protect, mut unprotect) = (Meter::default(), Meter::default());
    for _ in 0..rounds {
        protect.add(|| {
            let _ = raw::protect(page(1), 100, Some(arch::VM_READ));
        });
        unprotect.add(|| {
            let _ = raw::protect(page(1), 100, None);
        });
    }
    protect.row("prot100", rounds);
    unprotect.row("unprot100", rounds);
    0
}

fn bench_trap(technology: usize, label: &str) -> i32 {
    let pages = 128;
    let Ok(base) = arch::vm_map(pages * arch::PAGE_SIZE, arch::VM_READ | arch::VM_WRITE) else { return 2 };
    let page = |index: usize| base + index * arch::PAGE_SIZE;
    for index in 0..pages {
        raw::store(page(index), 0);
    }
    let Some(technology) = arch::Technology::from_number(technology) else { return usage() };
    if arch::vm_trap(base, Some("pager_fill")).is_err() || arch::ext_load("pager_fill", technology).is_err() {
        println!("vmtest: trapping the region to pager_fill failed");
        return 2;
    }
    // Appel1's region: three pages, trapped to the scan barrier.
    let Ok(scan) = arch::vm_map(3 * arch::PAGE_SIZE, arch::VM_READ | arch::VM_WRITE) else { return 2 };
    let scan_page = |index: usize| scan + index * arch::PAGE_SIZE;
    for index in 0..3 {
        raw::store(scan_page(index), 0);
    }
    if arch::vm_trap(scan, Some("scan_barrier")).is_err() || arch::ext_load("scan_barrier", technology).is_err() {
        println!("vmtest: trapping the region to scan_barrier failed");
        return 2;
    }
    let iterations = 1000;
    let (mut trap, mut appel1, mut right) = (Meter::default(), Meter::default(), 0);
    for round in 0..iterations {
        let _ = raw::protect(page(0), 1, Some(arch::VM_READ));
        trap.add(|| raw::store(page(0), round));
        let _ = raw::protect(scan_page(1), 1, Some(arch::VM_READ));
        appel1.add(|| raw::store(scan_page(1), round));
        // The handler protected the page after it; unprotected again, outside the count.
        right += u64::from(raw::protect(scan_page(2), 1, None).is_ok() && raw::load(scan_page(1)) == round);
    }
    if right != iterations {
        println!("vmtest: the scan barrier's stores came back wrong in {} of {iterations} rounds", iterations - right);
        return 1;
    }
    let rounds = 10;
    let mut appel2 = Meter::default();
    for round in 0..rounds {
        appel2.add(|| {
            let _ = raw::protect(page(8), 100, Some(arch::VM_READ));
            for index in 8..108 {
                raw::store(page(index), round);
            }
        });
    }
    let _ = arch::ext_unload("pager_fill");
    let _ = arch::ext_unload("scan_barrier");
    trap.row(&alloc_name("trap", label), iterations);
    appel1.row(&alloc_name("appel1", label), iterations);
    appel2.row(&alloc_name("appel2", label), rounds * 100);
    0
}

/// `NAME-LABEL` in a fixed buffer (no allocator here).
fn alloc_name(name: &str, label: &str) -> Name {
    let mut buffer = Name { bytes: [0; 48], length: 0 };
    for byte in name.bytes().chain(core::iter::once(b'-')).chain(label.bytes()).take(48) {
        buffer.bytes[buffer.length] = byte;
        buffer.length += 1;
    }
    buffer
}

/// A short name ([`alloc_name`]).
struct Name {
    bytes: [u8; 48],
    length: usize,
}

impl core::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        core::str::from_utf8(&self.bytes[..self.length]).unwrap_or("?")
    }
}

fn wide() -> i32 {
    let pages = arch::MAX_MAP_LENGTH / arch::PAGE_SIZE;
    // A small region first: the big one starts a few pages into a 2 MiB window.
    let (Ok(_), Ok(base)) = (arch::vm_map(4 * arch::PAGE_SIZE, arch::VM_READ), arch::vm_map(pages * arch::PAGE_SIZE, arch::VM_READ | arch::VM_WRITE)) else { return 2 };
    if base.is_multiple_of(2 * 1024 * 1024) {
        println!("vmtest: wide: the region starts on a 2 MiB boundary");
        return 2;
    }
    let page = |index: usize| base + index * arch::PAGE_SIZE;
    for index in 0..pages {
        raw::store(page(index), index as u64 + 1);
    }
    if arch::vm_trap(base, Some("pager_fill")).is_err() || arch::ext_load("pager_fill", arch::Technology::BuiltIn).is_err() {
        println!("vmtest: wide: trapping the region to pager_fill failed");
        return 2;
    }
    let all = |check: &dyn Fn(usize) -> bool| (0..pages).all(check);
    let mut status = 0;
    // The first step that failed is the exit status.
    let fail = |status: &mut i32, step: i32| {
        if *status == 0 {
            *status = step;
        }
    };
    // Read-only: no fault on a load, the data and the dirty bits kept.
    if raw::protect(base, pages, Some(arch::VM_READ)).is_err() || !all(&|index| raw::load(page(index)) == index as u64 + 1 && arch::dirty(page(index)) == Ok(true)) {
        fail(&mut status, 3);
    }
    // No access: every leaf goes, so every load faults (the handler gives the page its
    // access back) and finds the data.
    if raw::protect(base, pages, Some(0)).is_err() || !all(&|index| raw::load(page(index)) == index as u64 + 1) {
        fail(&mut status, 4);
    }
    // No access, then read-only again: the leaves come back (no load faults), read-only
    // (every store faults once), dirty as before.
    let back = raw::protect(base, pages, Some(0)).is_ok() && raw::protect(base, pages, Some(arch::VM_READ)).is_ok();
    if !back || !all(&|index| raw::load(page(index)) == index as u64 + 1 && arch::dirty(page(index)) == Ok(true)) {
        fail(&mut status, 5);
    }
    for index in 0..pages {
        raw::store(page(index), index as u64 + 2);
    }
    if !all(&|index| raw::load(page(index)) == index as u64 + 2) {
        fail(&mut status, 6);
    }
    let _ = arch::ext_unload("pager_fill");
    println!("vmtest: wide: {pages} pages from {base:#x} read-only, no access and back; status {status}");
    status
}

fn barrier(pages: usize, technology: usize) -> i32 {
    // One page more than PAGES, left untouched until the end.
    let Ok(base) = arch::vm_map((pages + 1) * arch::PAGE_SIZE, arch::VM_READ | arch::VM_WRITE) else { return 2 };
    let page = |index: usize| base + index * arch::PAGE_SIZE;
    if raw::load(base) != 0 || arch::dirty(base) != Ok(false) {
        println!("vmtest: a page only read is not clean and zero");
        return 5;
    }
    for index in 0..pages {
        raw::store(page(index), index as u64);
    }
    if arch::dirty(base) != Ok(true) {
        println!("vmtest: a written page is not dirty");
        return 5;
    }
    let Some(technology) = arch::Technology::from_number(technology) else { return usage() };
    if arch::vm_trap(base, Some("pager_fill")).is_err() || arch::ext_load("pager_fill", technology).is_err() {
        println!("vmtest: trapping the region to pager_fill failed");
        return 2;
    }
    let mut status = 0;
    if raw::protect(base, pages, Some(arch::VM_READ)).is_err() {
        status = 6;
    }
    for index in 0..pages {
        if raw::load(page(index)) != index as u64 {
            status = 7;
        }
        // Faults: the handler unprotects the page, the store runs again.
        raw::store(page(index), index as u64 + 100);
        if raw::load(page(index)) != index as u64 + 100 {
            status = 7;
        }
    }
    if raw::protect(base, pages, Some(arch::VM_READ)).is_err() || raw::protect(base, pages, None).is_err() {
        status = 6;
    }
    for index in 0..pages {
        raw::store(page(index), index as u64 + 7);
    }
    if raw::protect(base, 1, Some(0)).is_err() || raw::protect(base, 1, None).is_err() || raw::load(base) != 7 {
        status = 8;
    }
    // A trapped page made read-only before its first touch: the pager's read-write page
    // comes mapped read-only, so the store after the load still reaches the handler.
    let fresh = page(pages);
    if raw::protect(fresh, 1, Some(arch::VM_READ)).is_err() {
        status = 6;
    }
    if raw::load(fresh) != fresh as u64 {
        println!("vmtest: the read-only page's first word is not the pager's");
        status = 9;
    }
    raw::store(fresh + 8, 5);
    if raw::load(fresh + 8) != 5 {
        status = 9;
    }
    let _ = arch::ext_unload("pager_fill");
    println!("vmtest: barrier over {pages} pages ended with {status}");
    status
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

    /// `prot1` / `protN` / `unprotN` of this program's own region.
    pub fn protect(address: usize, count: usize, protection: Option<usize>) -> Result<(), arch::Error> {
        // SAFETY: no Rust reference points into the region (it is reached only through
        // this module's raw accesses).
        unsafe { arch::protect_pages(address, count, protection) }
    }

    /// `protect(address, length, access)` (the `map_anonymous` call) on a `vm_map` region.
    pub fn legacy_protect(address: usize, length: usize, access: usize) -> Result<usize, arch::Error> {
        // SAFETY: the region is this program's own and no reference points into it.
        unsafe { arch::call(arch::Syscall::Protect, [address, length, access, 0, 0, 0]) }
    }

    /// `unmap(address, length)` of a `vm_map` region.
    pub fn unmap(address: usize, length: usize) -> Result<usize, arch::Error> {
        // SAFETY: no reference points into the region, and it is not used afterwards.
        unsafe { arch::call(arch::Syscall::Unmap, [address, length, 0, 0, 0, 0]) }
    }

    /// `arguments` into `length` bytes at `address` (a `vm_map` region no reference
    /// points into).
    pub fn arguments_into(address: usize, length: usize) -> Result<usize, arch::Error> {
        // SAFETY: the kernel writes at most `length` bytes at `address`, in this program's
        // own region, which no Rust reference points into.
        unsafe { arch::call(arch::Syscall::Arguments, [address, length, 0, 0, 0, 0]) }
    }
}
