//! Cross-address-space services: a process offers a named entry point
//! (`service_register`), another calls it (`service_call`) — SPIN's cross-address-space
//! call microbenchmark, and the user-level server of Small & Seltzer without a queue.
//!
//! A call migrates the caller's strand into the server's address space ([`migrate`]):
//! the kernel checks the name, switches `satp`, runs the server's entry with the
//! argument in `a0` on the server's stack until it calls `service_return(value)`, and
//! returns `value` to the caller. The call runs with preemption off and a deadline of
//! [`CALL_BUDGET_TICKS`]; a server that faults, exits or overruns is withdrawn (its
//! `service_register` returns `Contained`) and the caller gets `Contained`.
//!
//! The server's own strand stays blocked inside `service_register` while the service is
//! offered, which pins its address space; killing the server withdraws the service
//! before its space can be freed. Calls into one service are serialised (one context per
//! service); a service's handler cannot call services itself (`WrongState`).

use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};

use spindle_abi::syscall::{Error, MAX_NAME, Syscall};
use spindle_process::user_range;

use super::migrate::{self, CallFault};
use super::{AddressSpace, Process, SpaceView};
use crate::arch::csr;
use crate::arch::user::UserContext;
use crate::sched::{self, Strand};

/// Most services offered at once.
pub const MAX_SERVICES: usize = 16;
/// Timebase ticks one call may run (10 ms at 10 MHz) before the server is withdrawn.
pub const CALL_BUDGET_TICKS: u64 = 100_000;

/// One offered service.
pub struct Service {
    name: String,
    pid: u64,
    view: SpaceView,
    entry: usize,
    stack_top: usize,
    context: spin::Mutex<Box<UserContext>>,
    withdrawn: AtomicBool,
    server: Arc<Strand>,
}

impl Service {
    /// The service's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The serving process.
    pub fn pid(&self) -> u64 {
        self.pid
    }

    /// Withdraws the service (once): no new call starts; its server's strand wakes.
    fn withdraw(&self) {
        if self.withdrawn.swap(true, Ordering::AcqRel) {
            return;
        }
        csr::without_interrupts(|| SERVICES.lock().retain(|service| !core::ptr::eq(&**service, self)));
        sched::unblock(&self.server);
    }
}

static SERVICES: spin::Mutex<Vec<Arc<Service>>> = spin::Mutex::new(Vec::new());

/// The services offered now.
pub fn list() -> Vec<Arc<Service>> {
    csr::without_interrupts(|| SERVICES.lock().clone())
}

/// Reads a service name: BadLength (0, above `MAX_NAME`, wrapping), BadAddress,
/// BadArgument (not UTF-8).
fn read_name(space: &AddressSpace, pointer: usize, length: usize) -> Result<String, Error> {
    if length == 0 {
        return Err(Error::BadLength);
    }
    let range = user_range(pointer, length, MAX_NAME)?;
    let mut bytes = alloc::vec![0u8; range.len()];
    space.read(range.start, &mut bytes)?;
    String::from_utf8(bytes).map_err(|_| Error::BadArgument)
}

/// `service_register(pointer, length, entry, stack_top)` on the server's strand: offers
/// the service and blocks until the process is killed (`Err(None)`) or the service is
/// withdrawn after a faulty call (`Err(Some(Contained))`). Errors as documented.
pub fn register(process: &Arc<Process>, space: &AddressSpace, [pointer, length, entry, stack_top, ..]: [usize; 6]) -> Result<usize, Option<Error>> {
    let name = read_name(space, pointer, length).map_err(Some)?;
    migrate::check_target(space, entry, stack_top).map_err(Some)?;
    // Its code runs inside calls with preemption off, where its strand cannot wait for the
    // disk: memory pressure leaves its pages alone from now on (wired first, so none goes
    // while the rest comes in), and a file program's image is read in whole now.
    crate::services::vm::wire(process.pid());
    space.fill_whole_image().map_err(Some)?;
    let service = Arc::new(Service {
        name,
        pid: process.pid(),
        view: space.view(),
        entry,
        stack_top,
        context: spin::Mutex::new(Box::new(UserContext::new(entry, stack_top))),
        withdrawn: AtomicBool::new(false),
        server: sched::current(),
    });
    csr::without_interrupts(|| {
        let mut services = SERVICES.lock();
        if services.iter().any(|offered| offered.name == service.name) {
            return Err(Error::Refused);
        }
        if services.len() >= MAX_SERVICES {
            return Err(Error::TooMany);
        }
        services.push(service.clone());
        Ok(())
    })
    .map_err(Some)?;
    loop {
        if process.kill_requested() {
            service.withdraw();
            return Err(None);
        }
        if service.withdrawn.load(Ordering::Acquire) {
            return Err(Some(Error::Contained));
        }
        sched::block_current();
    }
}

/// `service_call(pointer, length, argument)` on the caller's strand. Errors: BadLength,
/// BadAddress, BadArgument, NotFound, Contained (the server faulted, exited or overran).
pub fn call(space: &AddressSpace, [pointer, length, argument, ..]: [usize; 6]) -> Result<usize, Error> {
    let name = read_name(space, pointer, length)?;
    let service = csr::without_interrupts(|| SERVICES.lock().iter().find(|service| service.name == name).cloned()).ok_or(Error::NotFound)?;
    call_service(&service, argument)
}

/// Calls `service` with `argument` on this strand (also used by benchmarks).
pub fn call_service(service: &Service, argument: usize) -> Result<usize, Error> {
    // No preemption: the server's strand must not run (and change its space) meanwhile.
    let _no_preemption = sched::no_preemption();
    let mut context = service.context.try_lock().ok_or(Error::WrongState)?;
    if service.withdrawn.load(Ordering::Acquire) {
        return Err(Error::NotFound);
    }
    context.prepare_call(service.entry, service.stack_top, [argument]);
    let deadline = crate::time::now() + CALL_BUDGET_TICKS;
    let returned = migrate::call(&service.view, &mut context, deadline, Syscall::ServiceReturn, &mut |_, _| None);
    drop(context);
    match returned {
        Ok([value, ..]) => Ok(value),
        Err(fault) => {
            let reason = match fault {
                CallFault::Overrun => alloc::format!("overran {CALL_BUDGET_TICKS} timebase ticks"),
                CallFault::Trapped(scause) => alloc::format!("trapped (scause {scause:#x})"),
                CallFault::Exited => String::from("exited during a call"),
            };
            crate::println!("[service] `{}` (pid {}) withdrawn: {reason}", service.name, service.pid);
            service.withdraw();
            Err(Error::Contained)
        }
    }
}

/// The offered service called `name`.
pub fn find(name: &str) -> Option<Arc<Service>> {
    csr::without_interrupts(|| SERVICES.lock().iter().find(|service| service.name == name).cloned())
}
