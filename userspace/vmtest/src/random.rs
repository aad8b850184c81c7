//! `vmtest random SEED STEPS [trap]`: random sequences of the translation service's calls
//! against a model of what every page must hold.
//!
//! The program keeps up to [`MAX_AREAS`] `vm_map` regions of up to [`MAX_PAGES`] pages and
//! takes STEPS steps drawn from SEED: map a region (read-write or read-only), unmap one,
//! store a word, load and check a page's words, `prot1`/`protN` to no access, read-only or
//! read-write, `unprotN`, `dirty`, a kernel copy into a page (`arguments`: refused unless
//! the page is writable), and `vm_limit` (0, or 12 to 32 frames, so pages go to swap and
//! come back while protected, clean or written; 64 to 128 with `trap`, whose trapped
//! region's pages are the pager's, pinned). The model says, for every page, its
//! protection, the value of three words and whether it was written; an access the model
//! says would fault is never made (that would end the process). With `trap` the first
//! region is read-write and trapped to `pager_fill` (built in; needs the
//! extension-loading capability), so its accesses are never refused: a protection fault is
//! answered by giving the page its region's protection back, and a first touch by a page
//! whose first word is its address — both in the model too.
//!
//! Exits 0 if every answer and every word was what the model says; otherwise prints the
//! step and exits with a code naming what differed: 3 a word, 4 a call's answer, 5
//! `dirty`, 6 a kernel copy, 2 setting up.

use spindle_runtime::{arch, println};

use super::raw;

/// Regions the model keeps at once.
const MAX_AREAS: usize = 6;
/// Pages of the largest region.
const MAX_PAGES: usize = 40;
/// The words of a page the model follows (first, one in the middle, last).
const WORDS: [usize; 3] = [0, 257, 511];

/// One page as the model has it.
#[derive(Clone, Copy)]
struct Page {
    /// `VM_READ`/`VM_WRITE` bits; 0 for no access.
    protection: usize,
    /// The values of [`WORDS`].
    words: [u64; 3],
    /// Written since it got its frame (Appel & Li's `dirty`).
    written: bool,
    /// Touched since the region was mapped (a trapped region's first touch is `pager_fill`'s).
    touched: bool,
}

const FRESH: Page = Page { protection: 0, words: [0; 3], written: false, touched: false };

/// One `vm_map` region as the model has it.
struct Area {
    base: usize,
    length: usize,
    /// The region's own protection (what `unprotN` gives back).
    protection: usize,
    trapped: bool,
    pages: [Page; MAX_PAGES],
}

/// A repeatable stream of numbers (xorshift).
struct Numbers(u64);

impl Numbers {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }
}

const READ: usize = arch::VM_READ;
const READ_WRITE: usize = arch::VM_READ | arch::VM_WRITE;

/// Runs the steps; see the module's documentation.
pub fn run(seed: u64, steps: usize, trap: bool, line: &str) -> i32 {
    let mut numbers = Numbers(seed.max(1));
    let mut areas: [Option<Area>; MAX_AREAS] = [const { None }; MAX_AREAS];
    // What a kernel copy of 8 bytes of the command line writes.
    let mut copied = [0u8; 8];
    let take = line.len().min(8);
    copied[..take].copy_from_slice(&line.as_bytes()[..take]);
    let copied = u64::from_le_bytes(copied);
    if trap {
        let Some(area) = map(&mut numbers, READ_WRITE) else { return 2 };
        if arch::vm_trap(area.base, Some("pager_fill")).is_err() || arch::ext_load("pager_fill", arch::Technology::BuiltIn).is_err() {
            println!("vmtest: random: trapping a region to pager_fill failed");
            return 2;
        }
        areas[0] = Some(Area { trapped: true, ..area });
    }
    let mut counts = [0usize; 10];
    for step in 0..steps {
        let action = numbers.below(counts.len());
        let status = match action {
            0 => {
                let free = areas.iter().position(Option::is_none);
                match free {
                    Some(index) => {
                        let protection = if numbers.below(4) == 0 { READ } else { READ_WRITE };
                        match map(&mut numbers, protection) {
                            Some(area) => {
                                areas[index] = Some(area);
                                0
                            }
                            None => 4,
                        }
                    }
                    None => 0,
                }
            }
            1 => {
                let index = numbers.below(MAX_AREAS);
                match areas[index].take() {
                    Some(area) if area.trapped => {
                        areas[index] = Some(area);
                        0
                    }
                    Some(area) => match raw::unmap(area.base, area.length) {
                        Ok(_) => 0,
                        Err(error) => {
                            println!("vmtest: random: step {step}: unmap {:#x}: {error:?}", area.base);
                            4
                        }
                    },
                    None => 0,
                }
            }
            _ => match pick(&mut numbers, &mut areas) {
                Some((area, page)) => act(action, step, &mut numbers, area, page, copied, trap),
                None => 0,
            },
        };
        if status != 0 {
            println!("vmtest: random: seed {seed}: step {step} (action {action}) failed with {status}");
            return status;
        }
        counts[action] += 1;
    }
    // Every page of every region is as the model says (`check` leaves out the ones an
    // access would end the process for), then every region goes.
    for area in areas.iter_mut().flatten() {
        for page in 0..area.length / arch::PAGE_SIZE {
            let status = check(area, page, steps);
            if status != 0 {
                return status;
            }
        }
        if !area.trapped && raw::unmap(area.base, area.length).is_err() {
            return 4;
        }
    }
    if trap {
        let _ = arch::ext_unload("pager_fill");
    }
    println!("vmtest: random: seed {seed}: {steps} steps right (per action {counts:?})");
    0
}

/// A new region of 1 to [`MAX_PAGES`] pages with `protection`.
fn map(numbers: &mut Numbers, protection: usize) -> Option<Area> {
    let pages = 1 + numbers.below(MAX_PAGES);
    let length = pages * arch::PAGE_SIZE;
    match arch::vm_map(length, protection) {
        Ok(base) => Some(Area { base, length, protection, trapped: false, pages: [Page { protection, ..FRESH }; MAX_PAGES] }),
        Err(error) => {
            println!("vmtest: random: vm_map({length}, {protection}): {error:?}");
            None
        }
    }
}

/// A page of some region, if there is a region.
fn pick<'a>(numbers: &mut Numbers, areas: &'a mut [Option<Area>; MAX_AREAS]) -> Option<(&'a mut Area, usize)> {
    let start = numbers.below(MAX_AREAS);
    let index = (0..MAX_AREAS).map(|offset| (start + offset) % MAX_AREAS).find(|&index| areas[index].is_some())?;
    let area = areas[index].as_mut()?;
    let page = numbers.below(area.length / arch::PAGE_SIZE);
    Some((area, page))
}

/// The address of `page` of `area`.
fn address(area: &Area, page: usize) -> usize {
    area.base + page * arch::PAGE_SIZE
}

/// What an access to `page` of `area` does to the model first: a trapped region's page is
/// filled by `pager_fill` on its first touch, and one the access would fault on gets its
/// region's protection back. `None` if the access would end the process (never made).
fn prepare(area: &mut Area, page: usize, write: bool) -> Option<()> {
    let allowed = if write { area.pages[page].protection & arch::VM_WRITE != 0 } else { area.pages[page].protection != 0 };
    if !area.trapped {
        return allowed.then_some(());
    }
    let address = address(area, page) as u64;
    let state = &mut area.pages[page];
    if !state.touched {
        state.words = [address, 0, 0];
    }
    if !allowed {
        state.protection = area.protection;
    }
    Some(())
}

/// Loads `page`'s followed words and compares them with the model.
fn check(area: &mut Area, page: usize, step: usize) -> i32 {
    if prepare(area, page, false).is_none() {
        return 0;
    }
    let base = address(area, page);
    area.pages[page].touched = true;
    for (slot, &word) in WORDS.iter().enumerate() {
        let value = raw::load(base + word * 8);
        if value != area.pages[page].words[slot] {
            println!("vmtest: random: step {step}: page {base:#x} word {word} is {value:#x}, the model says {:#x}", area.pages[page].words[slot]);
            return 3;
        }
    }
    0
}

/// Step `action` (2 to 9) on `page` of `area`; `trapped`: the program has a trapped region.
fn act(action: usize, step: usize, numbers: &mut Numbers, area: &mut Area, page: usize, copied: u64, trapped: bool) -> i32 {
    let base = address(area, page);
    let pages = area.length / arch::PAGE_SIZE;
    match action {
        // Store a word.
        2 => {
            if prepare(area, page, true).is_none() {
                return 0;
            }
            let slot = numbers.below(WORDS.len());
            let value = numbers.next();
            raw::store(base + WORDS[slot] * 8, value);
            let state = &mut area.pages[page];
            state.words[slot] = value;
            state.written = true;
            state.touched = true;
            0
        }
        // Load and check.
        3 => check(area, page, step),
        // Protect a run of pages (prot1 for one).
        4 => {
            let count = 1 + numbers.below((pages - page).min(16));
            let protection = [0, READ, READ_WRITE][numbers.below(if area.protection == READ { 2 } else { 3 })];
            if let Err(error) = raw::protect(base, count, Some(protection)) {
                println!("vmtest: random: step {step}: prot {base:#x} {count} {protection}: {error:?}");
                return 4;
            }
            area.pages[page..page + count].iter_mut().for_each(|state| state.protection = protection);
            0
        }
        // Unprotect a run.
        5 => {
            let count = 1 + numbers.below((pages - page).min(16));
            if let Err(error) = raw::protect(base, count, None) {
                println!("vmtest: random: step {step}: unprot {base:#x} {count}: {error:?}");
                return 4;
            }
            let protection = area.protection;
            area.pages[page..page + count].iter_mut().for_each(|state| state.protection = protection);
            0
        }
        // `dirty` (a trapped page's first touch is the pager's write: not followed).
        6 if !area.trapped => {
            let answer = arch::dirty(base);
            if answer != Ok(area.pages[page].written) {
                println!("vmtest: random: step {step}: dirty({base:#x}) is {answer:?}, the model says {}", area.pages[page].written);
                return 5;
            }
            0
        }
        // A kernel copy of 8 bytes into a followed word: only into writable user memory.
        7 if !area.trapped => {
            let slot = numbers.below(WORDS.len());
            let answer = raw::arguments_into(base + WORDS[slot] * 8, 8);
            let writable = area.pages[page].protection & arch::VM_WRITE != 0;
            match (answer, writable) {
                (Ok(_), true) => {
                    let state = &mut area.pages[page];
                    state.words[slot] = copied;
                    state.written = true;
                    state.touched = true;
                    0
                }
                (Err(arch::Error::BadAddress), false) => 0,
                (answer, _) => {
                    println!("vmtest: random: step {step}: a kernel copy into {base:#x} (writable: {writable}) answered {answer:?}");
                    6
                }
            }
        }
        // A memory limit (0: none).
        8 => {
            // A trapped region's pages are the pager's, pinned while mapped: never paged out,
            // so a limit below them and what the program itself needs would leave nothing
            // to give up.
            let limits = if trapped { [0, 64, 64, 96, 128] } else { [0, 12, 16, 24, 32] };
            let limit = limits[numbers.below(limits.len())];
            match arch::vm_limit(limit) {
                Ok(()) => 0,
                Err(error) => {
                    println!("vmtest: random: step {step}: vm_limit({limit}): {error:?}");
                    4
                }
            }
        }
        // Every followed word of the page, again (loads are most of what programs do).
        _ => check(area, page, step),
    }
}
