//! Host tests of the frame table, the clock and the `mm` decisions.

use alloc::collections::BTreeMap;
use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;

use crate::*;

const BASE: u64 = 0x8_0000;
const SPACE: Owner = Owner::AddressSpace(1);
const OTHER: Owner = Owner::AddressSpace(2);

fn table(frames: u64) -> FrameTable {
    FrameTable::new(BASE, frames).unwrap()
}

// ---- owners -------------------------------------------------------------------------

#[test]
fn configuration_is_checked() {
    assert_eq!(FrameTable::new(BASE, 0).err(), Some(ConfigError::BadLength(0)));
    assert_eq!(FrameTable::new(BASE, MAX_FRAMES + 1).err(), Some(ConfigError::BadLength(MAX_FRAMES + 1)));
    assert_eq!(FrameTable::new(0, 4).err(), Some(ConfigError::BadBase(0)));
    assert_eq!(FrameTable::new(u64::MAX - 1, 4).err(), Some(ConfigError::BadBase(u64::MAX - 1)));
    let table = table(65);
    assert_eq!((table.len(), table.free_frames(), table.base()), (65, 65, BASE));
    assert!(table.contains(BASE + 64) && !table.contains(BASE + 65) && !table.contains(BASE - 1));
    table.audit().unwrap();
}

#[test]
fn owners_encode_and_decode() {
    for owner in [Owner::Kernel, SPACE, Owner::ExtensionArena(MAX_OWNER_ID), Owner::BufferCache, Owner::Free] {
        assert_eq!(Owner::decode(owner.encode().unwrap()), Some(owner));
    }
    assert_eq!(Owner::Kernel.encode(), Some(0), "mm.Reclaim's owner 0 is the kernel");
    assert_eq!(Owner::AddressSpace(MAX_OWNER_ID + 1).encode(), None);
    assert_eq!(Owner::decode(5 << 56), None);
    assert_eq!(Owner::decode((3 << 56) | 1), None, "the buffer cache has no id");
    assert_eq!(SPACE.to_string(), "address space 1");
}

#[test]
fn allocation_counts_per_owner_and_frees() {
    let mut table = table(8);
    let a = table.allocate(SPACE).unwrap();
    let b = table.allocate(SPACE).unwrap();
    let k = table.allocate(Owner::Kernel).unwrap();
    assert_eq!((a, b, k), (BASE, BASE + 1, BASE + 2), "lowest free frame first");
    assert_eq!((table.held(SPACE), table.held(Owner::Kernel), table.held(Owner::Free)), (2, 1, 5));
    assert_eq!(table.owner(a), Some(SPACE));
    assert_eq!(table.owners().collect::<Vec<_>>(), [(Owner::Kernel, 1), (SPACE, 2)]);
    let freed = table.free(a).unwrap();
    assert_eq!(freed, Freed { frame: a, owner: SPACE, mapped: None, dirty: false });
    assert_eq!(table.free(a), Err(FrameError::FrameIsFree(a)));
    assert_eq!(table.free(BASE + 100), Err(FrameError::NotAFrame(BASE + 100)));
    assert_eq!(table.allocate(Owner::Free), Err(FrameError::NoOwner));
    assert_eq!(table.allocate(Owner::AddressSpace(u64::MAX)), Err(FrameError::OwnerIdTooLarge(u64::MAX)));
    assert_eq!(table.held(SPACE), 1);
    table.audit().unwrap();
}

#[test]
fn running_out_of_frames_is_an_error() {
    let mut table = table(3);
    for _ in 0..3 {
        table.allocate(Owner::BufferCache).unwrap();
    }
    assert_eq!(table.allocate(SPACE), Err(FrameError::OutOfFrames { asked: 1, free: 0 }));
    table.free(BASE + 1).unwrap();
    assert_eq!(table.allocate(SPACE), Ok(BASE + 1), "the freed frame is found again");
}

#[test]
fn limits_refuse_allocations_above_them() {
    let mut table = table(16);
    table.set_limit(SPACE, Some(2)).unwrap();
    assert_eq!(table.limit(SPACE), Some(2));
    table.allocate(SPACE).unwrap();
    table.allocate(SPACE).unwrap();
    let error = table.allocate(SPACE).unwrap_err();
    assert_eq!(error, FrameError::OverLimit { owner: SPACE, limit: 2, held: 2, asked: 1 });
    assert_eq!(error.to_string(), "address space 1 holds 2 of its limit of 2 frames and asked for 1 more");
    assert!(table.allocate(OTHER).is_ok(), "limits are per owner");
    assert_eq!(table.check_allocation(SPACE, u64::MAX).unwrap_err(), FrameError::OverLimit { owner: SPACE, limit: 2, held: 2, asked: u64::MAX });
    table.set_limit(SPACE, Some(1)).unwrap();
    assert_eq!(table.over_limit(SPACE), 1, "a lowered limit leaves the owner above it");
    table.set_limit(SPACE, None).unwrap();
    assert_eq!(table.over_limit(SPACE), 0);
    assert!(table.allocate(SPACE).is_ok());
    assert_eq!(table.set_limit(Owner::Kernel, Some(1)), Err(FrameError::NotLimitable(Owner::Kernel)));
    assert_eq!(table.set_limit(Owner::Free, Some(1)), Err(FrameError::NotLimitable(Owner::Free)));
}

#[test]
fn low_water_mark_says_when_reclaim_runs() {
    let mut table = table(8);
    assert_eq!(table.set_low_water(9), Err(FrameError::LowWaterTooHigh { mark: 9, frames: 8 }));
    table.set_low_water(3).unwrap();
    for _ in 0..5 {
        table.allocate(SPACE).unwrap();
    }
    assert!(!table.below_low_water(), "exactly at the mark is fine");
    assert_eq!(table.reclaim_target(), 0);
    table.allocate(SPACE).unwrap();
    assert!(table.below_low_water());
    assert_eq!(table.reclaim_target(), 1);
    table.allocate(SPACE).unwrap();
    assert_eq!(table.reclaim_target(), 2);
    table.free(BASE).unwrap();
    assert_eq!(table.reclaim_target(), 1);
}

#[test]
fn claim_takes_a_specific_frame() {
    let mut table = table(4);
    table.claim(BASE + 2, Owner::Kernel).unwrap();
    assert_eq!(table.claim(BASE + 2, SPACE), Err(FrameError::FrameNotFree(BASE + 2)));
    assert_eq!(table.claim(BASE + 9, SPACE), Err(FrameError::NotAFrame(BASE + 9)));
    table.set_limit(SPACE, Some(0)).unwrap();
    assert!(matches!(table.claim(BASE, SPACE), Err(FrameError::OverLimit { .. })));
    let frames: Vec<u64> = (0..3).map(|_| table.allocate(OTHER).unwrap()).collect();
    assert_eq!(frames, [BASE, BASE + 1, BASE + 3], "a claimed frame is never allocated again");
    table.audit().unwrap();
}

#[test]
fn mappings_pins_and_bits() {
    let mut table = table(4);
    let frame = table.allocate(SPACE).unwrap();
    assert_eq!(table.map(frame, 1, 0x1001), Err(FrameError::Misaligned(0x1001)));
    table.map(frame, 1, 0x1000).unwrap();
    assert_eq!(table.map(frame, 1, 0x2000), Err(FrameError::AlreadyMapped(frame)));
    assert_eq!(table.map(BASE + 1, 1, 0x2000), Err(FrameError::FrameIsFree(BASE + 1)));
    assert_eq!(table.info(frame).unwrap().mapped, Some(Mapping { space: 1, page: 0x1000 }));
    table.pin(frame).unwrap();
    assert_eq!(table.pin(frame), Err(FrameError::Pinned(frame)));
    assert_eq!(table.free(frame), Err(FrameError::Pinned(frame)));
    table.unpin(frame).unwrap();
    assert_eq!(table.unpin(frame), Err(FrameError::NotPinned(frame)));
    table.sample(frame, false, true).unwrap();
    table.sample(frame, false, false).unwrap();
    assert!(table.info(frame).unwrap().dirty, "a sample never clears a bit");
    let freed = table.free(frame).unwrap();
    assert_eq!(freed.mapped, Some(Mapping { space: 1, page: 0x1000 }));
    assert!(freed.dirty);
    let frame = table.allocate(SPACE).unwrap();
    assert_eq!(table.info(frame).unwrap(), FrameInfo { owner: SPACE, mapped: None, accessed: false, dirty: false, pinned: false }, "state does not survive a free");
    table.sample(frame, true, true).unwrap();
    table.mark_clean(frame).unwrap();
    assert!(!table.info(frame).unwrap().dirty);
    assert_eq!(table.unmap(frame), Ok(None));
    assert_eq!(table.sample(BASE + 3, true, true), Err(FrameError::FrameIsFree(BASE + 3)));
}

#[test]
fn releasing_an_owner_frees_all_its_frames() {
    let mut table = table(8);
    let frames: Vec<u64> = (0..3).map(|_| table.allocate(SPACE).unwrap()).collect();
    table.allocate(OTHER).unwrap();
    table.pin(frames[1]).unwrap();
    let freed = table.release_owner(SPACE).unwrap();
    assert_eq!(freed.iter().map(|freed| freed.frame).collect::<Vec<_>>(), frames, "queue order, pinned included");
    assert_eq!((table.held(SPACE), table.free_frames()), (0, 7));
    assert_eq!(table.queue(SPACE), []);
    assert_eq!(table.release_owner(Owner::Kernel), Err(FrameError::NotLimitable(Owner::Kernel)));
    table.audit().unwrap();
}

#[test]
fn transfer_moves_a_frame_between_owners() {
    let mut table = table(8);
    let arena = Owner::ExtensionArena(4);
    let frame = table.allocate(arena).unwrap();
    table.map(frame, 1, 0x4000).unwrap();
    table.set_limit(SPACE, Some(1)).unwrap();
    table.transfer(frame, SPACE).unwrap();
    assert_eq!((table.held(arena), table.held(SPACE)), (0, 1));
    assert_eq!(table.queue(SPACE), [frame]);
    assert_eq!(table.info(frame).unwrap().mapped, Some(Mapping { space: 1, page: 0x4000 }), "the mapping stays");
    let second = table.allocate(arena).unwrap();
    assert!(matches!(table.transfer(second, SPACE), Err(FrameError::OverLimit { .. })));
    assert_eq!(table.transfer(second, Owner::Kernel), Err(FrameError::NotLimitable(Owner::Kernel)));
    assert_eq!(table.transfer(second, Owner::Free), Err(FrameError::NoOwner));
    table.pin(second).unwrap();
    assert_eq!(table.transfer(second, OTHER), Err(FrameError::Pinned(second)));
    assert_eq!(table.transfer(BASE + 7, OTHER), Err(FrameError::FrameIsFree(BASE + 7)));
    table.transfer(frame, SPACE).unwrap();
    table.audit().unwrap();
}

// ---- clock --------------------------------------------------------------------------

#[test]
fn kernel_frames_are_never_queued() {
    let mut table = table(4);
    table.allocate(Owner::Kernel).unwrap();
    let frame = table.allocate(SPACE).unwrap();
    assert_eq!(table.global_queue(), [frame]);
    assert_eq!(table.next_victims(4).candidates, [frame]);
}

#[test]
fn second_chance_clears_the_bit_and_moves_to_the_tail() {
    let mut table = table(8);
    let f: Vec<u64> = (0..4).map(|_| table.allocate(SPACE).unwrap()).collect();
    table.sample(f[0], true, false).unwrap();
    table.sample(f[2], true, true).unwrap();
    let sweep = table.next_victims(1);
    assert_eq!(sweep.candidates, [f[1]]);
    assert_eq!(sweep.clear_accessed, [f[0]], "the hand stopped at the first candidate");
    assert_eq!(table.queue(SPACE), [f[1], f[2], f[3], f[0]]);
    assert!(!table.info(f[0]).unwrap().accessed);
    let sweep = table.next_victims(4);
    assert_eq!(sweep.candidates, [f[1], f[3], f[0], f[2]], "f2 got its second chance and came back at the tail");
    assert_eq!(sweep.clear_accessed, [f[2]]);
    assert!(table.info(f[2]).unwrap().dirty, "the hand consumes accessed bits only");
    assert_eq!(table.queue(SPACE), [f[1], f[3], f[0], f[2]]);
    // Nothing accessed: the same candidates, nothing moves.
    assert_eq!(table.next_victims(2), Sweep { candidates: vec![f[1], f[3]], clear_accessed: vec![] });
    table.audit().unwrap();
}

#[test]
fn every_frame_accessed_still_yields_candidates_in_the_old_order() {
    let mut table = table(4);
    let f: Vec<u64> = (0..4).map(|_| table.allocate(SPACE).unwrap()).collect();
    for &frame in &f {
        table.sample(frame, true, false).unwrap();
    }
    let sweep = table.next_victims(2);
    assert_eq!(sweep.clear_accessed, f);
    assert_eq!(sweep.candidates, [f[0], f[1]]);
    assert_eq!(table.global_queue(), f);
}

#[test]
fn last_frame_accessed_is_met_again() {
    let mut table = table(2);
    let a = table.allocate(SPACE).unwrap();
    table.sample(a, true, false).unwrap();
    let sweep = table.next_victims(1);
    assert_eq!((sweep.candidates, sweep.clear_accessed), (vec![a], vec![a]));
}

#[test]
fn pinned_frames_are_passed_over_in_place() {
    let mut table = table(4);
    let f: Vec<u64> = (0..3).map(|_| table.allocate(SPACE).unwrap()).collect();
    table.pin(f[0]).unwrap();
    table.sample(f[0], true, false).unwrap();
    let sweep = table.next_victims(3);
    assert_eq!(sweep.candidates, [f[1], f[2]]);
    assert!(sweep.clear_accessed.is_empty(), "a pinned frame keeps its bit and its place");
    assert_eq!(table.queue(SPACE), f);
    table.pin(f[1]).unwrap();
    table.pin(f[2]).unwrap();
    assert_eq!(table.next_victims(3), Sweep::default(), "all pinned: no candidate");
}

#[test]
fn owner_sweeps_stay_in_the_owner_and_move_globally() {
    let mut table = table(8);
    let a0 = table.allocate(SPACE).unwrap();
    let b0 = table.allocate(OTHER).unwrap();
    let a1 = table.allocate(SPACE).unwrap();
    let b1 = table.allocate(OTHER).unwrap();
    table.sample(a0, true, false).unwrap();
    let sweep = table.next_victims_of(SPACE, 1);
    assert_eq!((sweep.candidates, sweep.clear_accessed), (vec![a1], vec![a0]));
    assert_eq!(table.queue(SPACE), [a1, a0]);
    assert_eq!(table.queue(OTHER), [b0, b1]);
    assert_eq!(table.global_queue(), [b0, a1, b1, a0]);
    assert_eq!(table.next_victims_of(Owner::BufferCache, 4), Sweep::default());
    assert_eq!((table.queue_len(SPACE), table.queue_frame(SPACE, 1), table.queue_frame(SPACE, 2)), (2, Some(a0), None));
    assert_eq!(table.queue_frame(SPACE, u64::MAX), None);
    table.audit().unwrap();
}

#[test]
fn sweeps_are_bounded() {
    let mut table = table(2048);
    for _ in 0..2048 {
        table.allocate(SPACE).unwrap();
    }
    assert_eq!(table.next_victims(usize::MAX).candidates.len(), MAX_SWEEP);
}

// ---- decisions ----------------------------------------------------------------------

fn request(owner: Owner, count: u64) -> AllocateRequest {
    AllocateRequest { owner, count, purpose: Purpose::UserPage }
}

#[test]
fn purposes_encode_and_decode() {
    for purpose in Purpose::ALL {
        assert_eq!(Purpose::decode(purpose.encode()), Some(purpose));
    }
    assert_eq!(Purpose::decode(5), None);
    assert_eq!(Purpose::decode(u64::MAX), None);
}

#[test]
fn allocate_requests_and_defaults() {
    let mut table = table(8);
    table.set_limit(SPACE, Some(4)).unwrap();
    assert_eq!(check_request(&request(SPACE, 0)), Err(FrameError::BadCount(0)));
    assert_eq!(check_request(&request(SPACE, MAX_ALLOCATE + 1)), Err(FrameError::BadCount(MAX_ALLOCATE + 1)));
    assert_eq!(check_request(&request(Owner::Free, 1)), Err(FrameError::NoOwner));
    assert_eq!(default_allocate(&table, &request(SPACE, 4)), Ok(()));
    assert!(matches!(default_allocate(&table, &request(SPACE, 5)), Err(FrameError::OverLimit { .. })));
    assert_eq!(default_allocate(&table, &request(OTHER, 9)), Err(FrameError::OutOfFrames { asked: 9, free: 8 }));
}

#[test]
fn allocate_answers_are_checked() {
    let mut table = table(8);
    table.set_limit(SPACE, Some(2)).unwrap();
    let fits = request(SPACE, 2);
    assert_eq!(check_allocate_answer(&table, &fits, AllocateAnswer::Grant), Ok(AllocateAnswer::Grant));
    assert_eq!(check_allocate_answer(&table, &fits, AllocateAnswer::Refuse), Ok(AllocateAnswer::Refuse), "a handler may refuse");
    assert_eq!(check_allocate_answer(&table, &request(SPACE, 3), AllocateAnswer::Grant), Err(Rejection::GrantOverLimit));
    assert_eq!(check_allocate_answer(&table, &request(OTHER, 9), AllocateAnswer::Grant), Err(Rejection::GrantWithoutFrames));
    assert_eq!(check_allocate_answer(&table, &request(OTHER, 0), AllocateAnswer::Grant), Err(Rejection::GrantWithoutFrames));
    let kernel = AllocateRequest { owner: Owner::Kernel, count: 1, purpose: Purpose::PageTable };
    assert_eq!(check_allocate_answer(&table, &kernel, AllocateAnswer::Refuse), Err(Rejection::RefusedKernel));
    assert_eq!(Rejection::GrantOverLimit.to_string(), "grant exceeds the owner's memory limit");
    for _ in 0..8 {
        table.allocate(Owner::BufferCache).unwrap();
    }
    assert_eq!(check_allocate_answer(&table, &kernel, AllocateAnswer::Grant), Err(Rejection::GrantWithoutFrames));
}

#[test]
fn allocate_decision_falls_back_to_the_default() {
    let mut table = table(8);
    table.set_limit(SPACE, Some(1)).unwrap();
    let one = request(SPACE, 1);
    let two = request(SPACE, 2);
    assert_eq!(decide_allocate(&table, &one, None), AllocateDecision { result: Ok(()), rejected: None });
    assert_eq!(decide_allocate(&table, &one, Some(AllocateAnswer::Refuse)).result, Err(AllocateRefusal::ByHandler));
    let decision = decide_allocate(&table, &two, Some(AllocateAnswer::Grant));
    assert_eq!(decision.rejected, Some(Rejection::GrantOverLimit));
    assert!(matches!(decision.result, Err(AllocateRefusal::Default(FrameError::OverLimit { .. }))));
    let kernel = request(Owner::Kernel, 1);
    assert_eq!(decide_allocate(&table, &kernel, Some(AllocateAnswer::Refuse)), AllocateDecision { result: Ok(()), rejected: Some(Rejection::RefusedKernel) });
    table.set_limit(SPACE, None).unwrap();
    assert_eq!(decide_allocate(&table, &two, None).result, Ok(()));
}

#[test]
fn reclaim_questions_need_a_reclaimable_candidate() {
    let mut table = table(8);
    let kernel = table.allocate(Owner::Kernel).unwrap();
    let frame = table.allocate(SPACE).unwrap();
    assert_eq!(reclaim_question(&table, frame), Ok(ReclaimQuestion { candidate: frame, owner: SPACE }));
    assert_eq!(reclaim_question(&table, kernel), Err(FrameError::NotLimitable(Owner::Kernel)));
    assert_eq!(reclaim_question(&table, BASE + 7), Err(FrameError::FrameIsFree(BASE + 7)));
    assert_eq!(reclaim_question(&table, 1), Err(FrameError::NotAFrame(1)));
    table.pin(frame).unwrap();
    assert_eq!(reclaim_question(&table, frame), Err(FrameError::Pinned(frame)));
}

#[test]
fn volunteered_frames_are_validated_with_each_reason() {
    let mut table = table(8);
    let candidate = table.allocate(SPACE).unwrap();
    let own = table.allocate(SPACE).unwrap();
    let pinned = table.allocate(SPACE).unwrap();
    let other = table.allocate(OTHER).unwrap();
    let kernel = table.allocate(Owner::Kernel).unwrap();
    table.pin(pinned).unwrap();
    let question = reclaim_question(&table, candidate).unwrap();
    assert_eq!(default_reclaim(&question), candidate);
    assert_eq!(check_reclaim_answer(&table, &question, candidate), Ok(candidate));
    assert_eq!(check_reclaim_answer(&table, &question, own), Ok(own));
    assert_eq!(check_reclaim_answer(&table, &question, pinned), Err(Rejection::Pinned));
    assert_eq!(check_reclaim_answer(&table, &question, other), Err(Rejection::OtherOwner));
    assert_eq!(check_reclaim_answer(&table, &question, kernel), Err(Rejection::KernelFrame));
    assert_eq!(check_reclaim_answer(&table, &question, BASE + 7), Err(Rejection::NotResident));
    assert_eq!(check_reclaim_answer(&table, &question, 0), Err(Rejection::NotAFrame));
    assert_eq!(check_reclaim_answer(&table, &question, u64::MAX), Err(Rejection::NotAFrame));
    assert_eq!(decide_reclaim(&table, &question, Some(own)), ReclaimDecision { frame: own, rejected: None });
    assert_eq!(decide_reclaim(&table, &question, Some(other)), ReclaimDecision { frame: candidate, rejected: Some(Rejection::OtherOwner) });
    assert_eq!(decide_reclaim(&table, &question, None), ReclaimDecision { frame: candidate, rejected: None });
    assert!(Rejection::OtherOwner.to_string().contains("another owner"));
}

#[test]
fn owner_state_is_exported() {
    let mut table = table(8);
    table.set_limit(SPACE, Some(6)).unwrap();
    let a = table.allocate(SPACE).unwrap();
    let b = table.allocate(SPACE).unwrap();
    table.allocate(SPACE).unwrap();
    table.map(a, 1, 0x1000).unwrap();
    table.pin(b).unwrap();
    table.sample(a, true, true).unwrap();
    let state = owner_state(&table, SPACE);
    assert_eq!(state, OwnerState { owner: SPACE, held: 3, limit: Some(6), queued: 3, pinned: 1, mapped: 1, accessed: 1, dirty: 1 });
    table.allocate(Owner::Kernel).unwrap();
    assert_eq!(owner_state(&table, Owner::Kernel).queued, 0);
}

// ---- model test -----------------------------------------------------------------------

/// xorshift64*: a fixed-seed generator, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

#[test]
fn random_sequences_keep_the_table_consistent() {
    const FRAMES: u64 = 200;
    let owners = [Owner::Kernel, SPACE, OTHER, Owner::AddressSpace(3), Owner::ExtensionArena(9), Owner::BufferCache];
    for seed in [1u64, 0x5eed, 0xdead_beef, 42] {
        let mut rng = Rng(seed);
        let mut table = table(FRAMES);
        table.set_low_water(20).unwrap();
        // The model: frame -> (owner, pinned).
        let mut model: BTreeMap<u64, (Owner, bool)> = BTreeMap::new();
        let mut limits: BTreeMap<Owner, u64> = BTreeMap::new();
        for step in 0..4000 {
            let owner = owners[rng.below(owners.len() as u64) as usize];
            let frame = BASE + rng.below(FRAMES + 4); // sometimes outside the table
            match rng.below(10) {
                0..=2 => {
                    let held = model.values().filter(|(o, _)| *o == owner).count() as u64;
                    let expected_ok = model.len() < FRAMES as usize && limits.get(&owner).is_none_or(|&limit| held < limit);
                    match table.allocate(owner) {
                        Ok(new) => {
                            assert!(expected_ok, "seed {seed} step {step}: allocation should fail");
                            assert!(model.insert(new, (owner, false)).is_none(), "seed {seed} step {step}: frame {new:#x} given twice");
                        }
                        Err(error) => assert!(!expected_ok, "seed {seed} step {step}: {error}"),
                    }
                }
                3 => match (table.free(frame), model.get(&frame).copied()) {
                    (Ok(freed), Some((owner, false))) => {
                        assert_eq!(freed.owner, owner);
                        model.remove(&frame);
                    }
                    (Err(FrameError::Pinned(_)), Some((_, true))) | (Err(FrameError::FrameIsFree(_) | FrameError::NotAFrame(_)), None) => {}
                    (result, expected) => panic!("seed {seed} step {step}: free {frame:#x}: {result:?}, model {expected:?}"),
                },
                4 | 5 => {
                    let result = table.sample(frame, rng.below(2) == 0, rng.below(4) == 0);
                    assert_eq!(result.is_ok(), model.contains_key(&frame), "seed {seed} step {step}");
                }
                6 => {
                    // Reclaim: the clock's first candidate, or one its owner volunteers.
                    let sweep = table.next_victims(4);
                    for &victim in sweep.candidates.iter().chain(&sweep.clear_accessed) {
                        let (owner, pinned) = model[&victim];
                        assert!(owner.is_reclaimable() && !pinned, "seed {seed} step {step}: bad victim");
                    }
                    if let Some(&candidate) = sweep.candidates.first() {
                        let question = reclaim_question(&table, candidate).unwrap();
                        let decision = decide_reclaim(&table, &question, Some(frame));
                        let expected_ok = frame == candidate || model.get(&frame).is_some_and(|&(owner, pinned)| owner == question.owner && !pinned);
                        assert_eq!(decision.rejected.is_none(), expected_ok, "seed {seed} step {step}");
                        table.free(decision.frame).unwrap();
                        model.remove(&decision.frame);
                    }
                }
                7 => match (table.pin(frame), model.get_mut(&frame)) {
                    (Ok(()), Some(entry)) if !entry.1 => entry.1 = true,
                    (Err(FrameError::Pinned(_)), Some((_, true))) | (Err(_), None) => {}
                    (result, expected) => panic!("seed {seed} step {step}: pin: {result:?}, model {expected:?}"),
                },
                8 if rng.below(2) == 0 => match (table.transfer(frame, owner), model.get_mut(&frame)) {
                    (Ok(()), Some(entry)) => {
                        assert!(!entry.1 && entry.0.is_reclaimable() && owner.is_reclaimable());
                        entry.0 = owner;
                    }
                    (Err(_), _) => {}
                    (result, expected) => panic!("seed {seed} step {step}: transfer: {result:?}, model {expected:?}"),
                },
                8 => match (table.unpin(frame), model.get_mut(&frame)) {
                    (Ok(()), Some(entry)) if entry.1 => entry.1 = false,
                    (Err(FrameError::NotPinned(_)), Some((_, false))) | (Err(_), None) => {}
                    (result, expected) => panic!("seed {seed} step {step}: unpin: {result:?}, model {expected:?}"),
                },
                _ => {
                    if rng.below(8) == 0 && owner.is_reclaimable() {
                        let freed = table.release_owner(owner).unwrap();
                        let expected: Vec<u64> = model.iter().filter(|(_, (o, _))| *o == owner).map(|(&f, _)| f).collect();
                        let mut got: Vec<u64> = freed.iter().map(|freed| freed.frame).collect();
                        got.sort_unstable();
                        assert_eq!(got, expected, "seed {seed} step {step}");
                        model.retain(|_, (o, _)| *o != owner);
                    } else if owner.is_limitable() {
                        let limit = (rng.below(3) != 0).then(|| rng.below(60));
                        table.set_limit(owner, limit).unwrap();
                        match limit {
                            Some(limit) => limits.insert(owner, limit),
                            None => limits.remove(&owner),
                        };
                    }
                }
            }
            table.audit().unwrap_or_else(|error| panic!("seed {seed} step {step}: {error}"));
            assert_eq!(table.free_frames() + model.len() as u64, FRAMES, "seed {seed} step {step}: a frame was lost");
            for owner in owners {
                let held = model.values().filter(|(o, _)| *o == owner).count() as u64;
                assert_eq!(table.held(owner), held, "seed {seed} step {step}: {owner}");
                if owner.is_reclaimable() {
                    assert_eq!(table.queue_len(owner), held);
                }
            }
            assert_eq!(table.reclaim_target(), 20u64.saturating_sub(table.free_frames()));
        }
    }
}
