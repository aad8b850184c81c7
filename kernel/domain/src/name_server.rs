//! The name server: where domains are registered, and where principals look them up
//! through each domain's authorizer.
//!
//! As in SPIN, a module that exports an interface registers it with an authorization
//! procedure; the name server calls that procedure with the identity of every importer,
//! so the exporter decides who may link against it, at the cost of a procedure call.

use alloc::borrow::Cow;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use spin::RwLock;
use spindle_abi::{Fingerprint, fingerprint_of};
use spindle_capability::{Capability, CapabilityIssuer, KernelObject, ObjectKind, Rights};

use crate::domain::{Domain, DomainName};
use crate::error::NameServerError;

/// Who is asking.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PrincipalId {
    /// The kernel itself (boot code, core services).
    Kernel,
    /// An extension, by name.
    Extension(Cow<'static, str>),
    /// A user process, by process id.
    Process(u64),
}

impl fmt::Display for PrincipalId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrincipalId::Kernel => formatter.write_str("kernel"),
            PrincipalId::Extension(name) => write!(formatter, "extension `{name}`"),
            PrincipalId::Process(process_id) => write!(formatter, "process {process_id}"),
        }
    }
}

/// The right to import a domain, held by a principal as a capability.
#[derive(Debug)]
pub struct DomainGrant {
    /// The domain that may be imported.
    domain: DomainName,
}

impl DomainGrant {
    /// A grant for `domain` (it still has to be minted into a capability).
    pub fn new(domain: impl Into<DomainName>) -> DomainGrant {
        DomainGrant {
            domain: domain.into(),
        }
    }

    /// The domain that may be imported.
    pub fn domain(&self) -> &DomainName {
        &self.domain
    }
}

impl KernelObject for DomainGrant {
    const KIND: ObjectKind = ObjectKind::Domain;
}

/// An identified requester with the domain grants it holds.
///
/// Making a principal needs the [`CapabilityIssuer`]: who is asking is a fact the
/// kernel vouches for, not one a requester can claim. Grants are capabilities, so they
/// too can only come from trusted code.
pub struct Principal {
    /// Who this is.
    identity: PrincipalId,
    /// Domains this principal was granted.
    grants: Vec<Capability<DomainGrant>>,
}

impl Principal {
    /// A principal with `identity` and no grants.
    pub fn new(_issuer: &CapabilityIssuer, identity: PrincipalId) -> Principal {
        Principal {
            identity,
            grants: Vec::new(),
        }
    }

    /// The kernel principal.
    pub fn kernel(issuer: &CapabilityIssuer) -> Principal {
        Principal::new(issuer, PrincipalId::Kernel)
    }

    /// Who this is.
    pub fn identity(&self) -> &PrincipalId {
        &self.identity
    }

    /// Whether this is the kernel.
    pub fn is_kernel(&self) -> bool {
        self.identity == PrincipalId::Kernel
    }

    /// Adds a grant (moved in: the principal now holds it).
    pub fn add_grant(&mut self, grant: Capability<DomainGrant>) {
        self.grants.push(grant);
    }

    /// Whether this principal holds a grant for `domain`.
    pub fn holds_grant(&self, domain: &DomainName) -> bool {
        self.grants().any(|granted| granted == domain)
    }

    /// The domains this principal holds grants for.
    pub fn grants(&self) -> impl Iterator<Item = &DomainName> {
        // `NONE`: naming the granted domain needs no right.
        self.grants
            .iter()
            .filter_map(|grant| grant.access(Rights::NONE).ok())
            .map(DomainGrant::domain)
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Principal")
            .field("identity", &self.identity)
            .field("grants", &self.grants().collect::<Vec<_>>())
            .finish()
    }
}

/// An authorizer's "no", with its reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Why access was refused, for the requester and for logs.
    reason: Cow<'static, str>,
}

impl Refusal {
    /// A refusal because of `reason`.
    pub fn new(reason: impl Into<Cow<'static, str>>) -> Refusal {
        Refusal {
            reason: reason.into(),
        }
    }

    /// Why access was refused.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.reason)
    }
}

/// A domain's authorization procedure: decides whether a principal may import it.
pub type Authorizer = dyn Fn(&Principal, &DomainName) -> Result<(), Refusal> + Send + Sync;

/// Authorizer that admits everyone (for public interfaces).
pub fn allow_all(_principal: &Principal, _domain: &DomainName) -> Result<(), Refusal> {
    Ok(())
}

/// Authorizer that admits only the kernel.
pub fn kernel_only(principal: &Principal, _domain: &DomainName) -> Result<(), Refusal> {
    if principal.is_kernel() {
        Ok(())
    } else {
        Err(Refusal::new("only the kernel may import this domain"))
    }
}

/// Authorizer that admits the kernel and principals holding a grant for the domain.
pub fn require_grant(principal: &Principal, domain: &DomainName) -> Result<(), Refusal> {
    if principal.is_kernel() || principal.holds_grant(domain) {
        Ok(())
    } else {
        Err(Refusal::new("no grant for this domain"))
    }
}

/// A registered domain and its authorizer.
struct Registration {
    /// The domain.
    domain: Arc<Domain>,
    /// Its authorizer.
    authorizer: Arc<Authorizer>,
}

/// Registry of domains by name; every lookup goes through the domain's authorizer.
///
/// Internally locked; `const`-constructible so the kernel can keep one in a `static`.
/// Authorizers are called with no lock held, so they may use the name server themselves.
pub struct NameServer {
    /// Registered domains, by name (ordered, for a stable ABI fingerprint).
    registry: RwLock<BTreeMap<DomainName, Registration>>,
}

impl NameServer {
    /// An empty name server.
    pub const fn new() -> NameServer {
        NameServer {
            registry: RwLock::new(BTreeMap::new()),
        }
    }

    /// Registers `domain` under its own name, guarded by `authorizer`.
    ///
    /// Errors: [`NameServerError::AlreadyRegistered`].
    pub fn register(
        &self,
        domain: impl Into<Arc<Domain>>,
        authorizer: impl Fn(&Principal, &DomainName) -> Result<(), Refusal> + Send + Sync + 'static,
    ) -> Result<(), NameServerError> {
        let domain = domain.into();
        let mut registry = self.registry.write();
        if registry.contains_key(domain.name()) {
            return Err(NameServerError::AlreadyRegistered {
                domain: domain.name().clone(),
            });
        }
        let authorizer: Arc<Authorizer> = Arc::new(authorizer);
        registry.insert(domain.name().clone(), Registration { domain, authorizer });
        Ok(())
    }

    /// Removes the domain called `name` and returns it. Importers already linked keep
    /// their references; new lookups fail.
    ///
    /// Errors: [`NameServerError::NotRegistered`].
    pub fn unregister(&self, name: &str) -> Result<Arc<Domain>, NameServerError> {
        self.registry
            .write()
            .remove(name)
            .map(|registration| registration.domain)
            .ok_or_else(|| NameServerError::NotRegistered {
                domain: DomainName::from(String::from(name)),
            })
    }

    /// The domain called `name`, if its authorizer admits `principal`.
    ///
    /// Errors: [`NameServerError::NotRegistered`]; [`NameServerError::Refused`] with the
    /// authorizer's reason.
    pub fn lookup(
        &self,
        principal: &Principal,
        name: &str,
    ) -> Result<Arc<Domain>, NameServerError> {
        let (domain, authorizer) = {
            let registry = self.registry.read();
            let registration =
                registry
                    .get(name)
                    .ok_or_else(|| NameServerError::NotRegistered {
                        domain: DomainName::from(String::from(name)),
                    })?;
            (
                Arc::clone(&registration.domain),
                Arc::clone(&registration.authorizer),
            )
        };
        authorizer(principal, domain.name()).map_err(|refusal| NameServerError::Refused {
            domain: domain.name().clone(),
            principal: principal.identity().clone(),
            refusal,
        })?;
        Ok(domain)
    }

    /// Looks up every domain in `names` for `principal` and combines them into one
    /// domain called `combined_name` (SPIN's common Lookup-then-Combine idiom, which the
    /// loader uses before resolving an extension's imports).
    ///
    /// Errors: those of [`lookup`](NameServer::lookup) for the first failing name;
    /// [`NameServerError::Combine`] if two granted domains conflict.
    pub fn import(
        &self,
        principal: &Principal,
        names: &[&str],
        combined_name: impl Into<DomainName>,
    ) -> Result<Domain, NameServerError> {
        let domains = names
            .iter()
            .map(|name| self.lookup(principal, name))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Domain::combine(
            combined_name,
            domains.iter().map(|domain| &**domain),
        )?)
    }

    /// The names of all registered domains, in order (for introspection).
    pub fn domain_names(&self) -> Vec<DomainName> {
        self.registry.read().keys().cloned().collect()
    }

    /// The ABI-wide fingerprint: every registered domain's fingerprint (its name and all
    /// its symbols' fingerprints), combined in name order. Changes when any exported
    /// signature changes; independent of registration order and of addresses.
    pub fn abi_fingerprint(&self) -> Fingerprint {
        abi_fingerprint(
            self.registry
                .read()
                .values()
                .map(|registration| &*registration.domain),
        )
    }
}

impl Default for NameServer {
    fn default() -> NameServer {
        NameServer::new()
    }
}

impl fmt::Debug for NameServer {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("NameServer")
            .field("domains", &self.domain_names())
            .finish()
    }
}

/// The ABI fingerprint of a set of domains: their fingerprints combined in name order,
/// whatever order they are given in.
pub fn abi_fingerprint<'domain>(domains: impl IntoIterator<Item = &'domain Domain>) -> Fingerprint {
    let mut sorted: Vec<&Domain> = domains.into_iter().collect();
    sorted.sort_by(|left, right| left.name().cmp(right.name()));
    sorted.iter().fold(fingerprint_of(""), |combined, domain| {
        combined.combine(domain.fingerprint())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Symbol, export};

    fn issuer() -> CapabilityIssuer {
        // SAFETY: trust marker only (no memory-safety precondition); test code is trusted.
        unsafe { CapabilityIssuer::new() }
    }

    fn add(left: u64, right: u64) -> u64 {
        left + right
    }

    fn arithmetic() -> Domain {
        Domain::create("arith", [export!("add", add, fn(u64, u64) -> u64)]).expect("one symbol")
    }

    fn files(read_signature: &'static str) -> Domain {
        Domain::create(
            "files",
            [Symbol::from_address("read", read_signature, 0x1000)],
        )
        .expect("one symbol")
    }

    fn extension(name: &'static str) -> Principal {
        Principal::new(&issuer(), PrincipalId::Extension(Cow::Borrowed(name)))
    }

    #[test]
    fn registered_domain_is_found_when_authorized() {
        let names = NameServer::new();
        names.register(arithmetic(), allow_all).expect("new name");
        let domain = names
            .lookup(&extension("hot-list"), "arith")
            .expect("allow_all admits everyone");
        assert_eq!(domain.name().as_str(), "arith");
        assert_eq!(names.domain_names(), [DomainName::from("arith")]);
    }

    #[test]
    fn duplicate_registration_and_unknown_names_are_errors() {
        let names = NameServer::new();
        names.register(arithmetic(), allow_all).expect("new name");
        assert_eq!(
            names.register(arithmetic(), allow_all).err(),
            Some(NameServerError::AlreadyRegistered {
                domain: DomainName::from("arith")
            })
        );
        assert_eq!(
            names.lookup(&Principal::kernel(&issuer()), "nope").err(),
            Some(NameServerError::NotRegistered {
                domain: DomainName::from("nope")
            })
        );
        names.unregister("arith").expect("registered");
        assert!(matches!(
            names.lookup(&Principal::kernel(&issuer()), "arith"),
            Err(NameServerError::NotRegistered { .. })
        ));
        assert!(names.unregister("arith").is_err());
    }

    #[test]
    fn refusal_carries_the_authorizers_reason() {
        let names = NameServer::new();
        names
            .register(
                arithmetic(),
                |principal: &Principal, _: &DomainName| match principal.identity() {
                    PrincipalId::Process(7) => Ok(()),
                    _ => Err(Refusal::new("arith is reserved for process 7")),
                },
            )
            .expect("new name");
        let stranger = Principal::new(&issuer(), PrincipalId::Process(8));
        let error = names
            .lookup(&stranger, "arith")
            .expect_err("process 8 is refused");
        assert_eq!(
            error,
            NameServerError::Refused {
                domain: DomainName::from("arith"),
                principal: PrincipalId::Process(8),
                refusal: Refusal::new("arith is reserved for process 7"),
            }
        );
        assert_eq!(
            error.to_string(),
            "process 8 refused access to domain `arith`: arith is reserved for process 7"
        );
        assert!(
            names
                .lookup(&Principal::new(&issuer(), PrincipalId::Process(7)), "arith")
                .is_ok()
        );
    }

    #[test]
    fn require_grant_admits_only_holders_of_a_grant_and_the_kernel() {
        let names = NameServer::new();
        names
            .register(arithmetic(), require_grant)
            .expect("new name");
        let mut holder = extension("holder");
        assert!(matches!(
            names.lookup(&holder, "arith"),
            Err(NameServerError::Refused { .. })
        ));

        holder.add_grant(issuer().mint(Arc::new(DomainGrant::new("arith")), Rights::NONE));
        assert!(holder.holds_grant(&DomainName::from("arith")));
        assert!(names.lookup(&holder, "arith").is_ok());
        assert!(names.lookup(&Principal::kernel(&issuer()), "arith").is_ok());

        let mut other = extension("other");
        other.add_grant(issuer().mint(Arc::new(DomainGrant::new("files")), Rights::NONE));
        assert!(matches!(
            names.lookup(&other, "arith"),
            Err(NameServerError::Refused { .. })
        ));
    }

    #[test]
    fn kernel_only_refuses_extensions() {
        let names = NameServer::new();
        names.register(arithmetic(), kernel_only).expect("new name");
        assert!(names.lookup(&Principal::kernel(&issuer()), "arith").is_ok());
        assert!(matches!(
            names.lookup(&extension("x"), "arith"),
            Err(NameServerError::Refused { .. })
        ));
    }

    #[test]
    fn import_combines_granted_domains_or_fails_whole() {
        let names = NameServer::new();
        names.register(arithmetic(), allow_all).expect("new name");
        names
            .register(files("fn(u64) -> u64"), kernel_only)
            .expect("new name");
        let kernel = Principal::kernel(&issuer());
        let combined = names
            .import(&kernel, &["arith", "files"], "kernel-view")
            .expect("kernel admitted to both");
        assert_eq!(
            combined.symbols().map(Symbol::name).collect::<Vec<_>>(),
            ["add", "read"]
        );
        assert!(matches!(
            names.import(&extension("x"), &["arith", "files"], "x-view"),
            Err(NameServerError::Refused { domain, .. }) if domain.as_str() == "files"
        ));
    }

    #[test]
    fn authorizers_may_use_the_name_server() {
        static NAMES: NameServer = NameServer::new();
        NAMES
            .register(arithmetic(), |_: &Principal, _: &DomainName| {
                // Would deadlock if the registry lock were held during the call.
                NAMES
                    .register(files("fn()"), allow_all)
                    .map_err(|_| Refusal::new("nested register failed"))
            })
            .expect("new name");
        assert!(NAMES.lookup(&Principal::kernel(&issuer()), "arith").is_ok());
        assert_eq!(NAMES.domain_names().len(), 2);
    }

    #[test]
    fn abi_fingerprint_is_stable_and_tracks_signatures() {
        let forwards = NameServer::new();
        forwards
            .register(arithmetic(), allow_all)
            .expect("new name");
        forwards
            .register(files("fn(u64) -> u64"), allow_all)
            .expect("new name");
        let backwards = NameServer::new();
        backwards
            .register(files("fn(u64) -> u64"), allow_all)
            .expect("new name");
        backwards
            .register(arithmetic(), allow_all)
            .expect("new name");
        assert_eq!(forwards.abi_fingerprint(), backwards.abi_fingerprint());
        assert_eq!(forwards.abi_fingerprint(), forwards.abi_fingerprint());

        let changed = NameServer::new();
        changed.register(arithmetic(), allow_all).expect("new name");
        changed
            .register(files("fn(u32) -> u64"), allow_all)
            .expect("new name");
        assert_ne!(forwards.abi_fingerprint(), changed.abi_fingerprint());

        let fewer = NameServer::new();
        fewer.register(arithmetic(), allow_all).expect("new name");
        assert_ne!(forwards.abi_fingerprint(), fewer.abi_fingerprint());
        assert_eq!(fewer.abi_fingerprint(), abi_fingerprint([&arithmetic()]));
        let (arith, files) = (arithmetic(), files("fn(u64) -> u64"));
        assert_eq!(
            abi_fingerprint([&files, &arith]),
            forwards.abi_fingerprint()
        );
        assert_eq!(
            abi_fingerprint([&arith, &files]),
            forwards.abi_fingerprint()
        );
    }

    #[test]
    fn shared_types_are_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<NameServer>();
        assert_send_sync::<Domain>();
        assert_send_sync::<Symbol>();
        assert_send_sync::<Principal>();
        assert_send_sync::<NameServerError>();
    }
}
