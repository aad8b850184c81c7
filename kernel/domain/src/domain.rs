//! Domains: named, typed export tables, with SPIN's `Create`, `Resolve` and `Combine`.
//!
//! A domain is immutable once made, so it can be shared (`Arc<Domain>`) by every hart
//! without a lock. Symbols are kept sorted by name, which gives the domain a stable
//! fingerprint and a stable introspection order.

use alloc::borrow::Cow;
use alloc::collections::BTreeMap;
use alloc::collections::btree_map::Entry;
use alloc::string::String;
use alloc::vec::Vec;
use core::borrow::Borrow;
use core::fmt;

use spindle_abi::{Fingerprint, fingerprint_of};

use crate::error::{DomainError, ResolveError};
use crate::symbol::{Import, Symbol};

/// The name of a domain (`"spindle.memory"`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DomainName(Cow<'static, str>);

impl DomainName {
    /// A name from a string literal, usable in `const` context.
    pub const fn from_static(name: &'static str) -> DomainName {
        DomainName(Cow::Borrowed(name))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&'static str> for DomainName {
    fn from(name: &'static str) -> DomainName {
        DomainName(Cow::Borrowed(name))
    }
}

impl From<String> for DomainName {
    fn from(name: String) -> DomainName {
        DomainName(Cow::Owned(name))
    }
}

impl Borrow<str> for DomainName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DomainName {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// A named set of exported, typed symbols.
#[derive(Clone, Debug)]
pub struct Domain {
    /// The domain's name.
    name: DomainName,
    /// The exports, by name.
    symbols: BTreeMap<String, Symbol>,
    /// Fingerprint of the name and every symbol, in name order (cached).
    fingerprint: Fingerprint,
}

impl Domain {
    /// `Domain.Create`: a domain called `name` exporting `symbols`.
    ///
    /// Errors: [`DomainError::DuplicateSymbol`] naming the first repeated symbol.
    pub fn create(
        name: impl Into<DomainName>,
        symbols: impl IntoIterator<Item = Symbol>,
    ) -> Result<Domain, DomainError> {
        let name = name.into();
        let mut table = BTreeMap::new();
        for symbol in symbols {
            match table.entry(String::from(symbol.name())) {
                Entry::Occupied(occupied) => {
                    return Err(DomainError::DuplicateSymbol {
                        domain: name,
                        name: occupied.key().clone(),
                    });
                }
                Entry::Vacant(vacant) => {
                    vacant.insert(symbol);
                }
            }
        }
        Ok(Domain::from_table(name, table))
    }

    /// `Domain.Combine`: a new domain called `name` exporting the union of `domains`.
    /// A symbol exported identically (same name, fingerprint and address) by several
    /// inputs appears once, so overlapping domains combine.
    ///
    /// Errors: [`DomainError::CombineConflict`] if two inputs export one name differently.
    pub fn combine<'domain>(
        name: impl Into<DomainName>,
        domains: impl IntoIterator<Item = &'domain Domain>,
    ) -> Result<Domain, DomainError> {
        // Remember which input each symbol came from, to name both sides of a conflict.
        let mut table: BTreeMap<String, (Symbol, &DomainName)> = BTreeMap::new();
        for domain in domains {
            for symbol in domain.symbols() {
                match table.entry(String::from(symbol.name())) {
                    Entry::Occupied(occupied) => {
                        let (existing, first) = occupied.get();
                        if !existing.same_export(symbol) {
                            return Err(DomainError::CombineConflict {
                                name: occupied.key().clone(),
                                first: (*first).clone(),
                                second: domain.name.clone(),
                            });
                        }
                    }
                    Entry::Vacant(vacant) => {
                        vacant.insert((symbol.clone(), &domain.name));
                    }
                }
            }
        }
        let table = table
            .into_iter()
            .map(|(name, (symbol, _))| (name, symbol))
            .collect();
        Ok(Domain::from_table(name.into(), table))
    }

    /// `Domain.Resolve`: resolves `imports` against this domain, returning the exported
    /// symbol for each import, in import order. All or nothing: on error nothing may be
    /// linked.
    ///
    /// Errors (for the first failing import): [`ResolveError::UnknownSymbol`] if the name
    /// is not exported; [`ResolveError::FingerprintMismatch`] if it is exported with a
    /// different fingerprint.
    pub fn resolve(&self, imports: &[Import<'_>]) -> Result<Vec<&Symbol>, ResolveError> {
        imports
            .iter()
            .map(|import| {
                let symbol =
                    self.symbol(import.name)
                        .ok_or_else(|| ResolveError::UnknownSymbol {
                            name: String::from(import.name),
                            domain: self.name.clone(),
                        })?;
                if symbol.fingerprint() != import.fingerprint {
                    return Err(ResolveError::FingerprintMismatch {
                        name: String::from(import.name),
                        domain: self.name.clone(),
                        expected: import.fingerprint,
                        found: symbol.fingerprint(),
                    });
                }
                Ok(symbol)
            })
            .collect()
    }

    /// The domain's name.
    pub fn name(&self) -> &DomainName {
        &self.name
    }

    /// The export called `name`, if any.
    pub fn symbol(&self, name: &str) -> Option<&Symbol> {
        self.symbols.get(name)
    }

    /// Every export, in name order.
    pub fn symbols(&self) -> impl Iterator<Item = &Symbol> {
        self.symbols.values()
    }

    /// The number of exports.
    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    /// Whether the domain exports nothing.
    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    /// Fingerprint of the domain's name and of every symbol's fingerprint, in name order.
    /// Changes when any signature, name or the set of symbols changes; does not depend on
    /// addresses.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// Builds the domain and caches its fingerprint.
    fn from_table(name: DomainName, symbols: BTreeMap<String, Symbol>) -> Domain {
        let fingerprint = symbols
            .values()
            .fold(fingerprint_of(name.as_str()), |combined, symbol| {
                combined.combine(symbol.fingerprint())
            });
        Domain {
            name,
            symbols,
            fingerprint,
        }
    }
}

/// `Domain.Resolve` with SPIN's argument order: resolves the importer's `imports`
/// against `domain`. See [`Domain::resolve`].
pub fn resolve<'domain>(
    imports: &[Import<'_>],
    domain: &'domain Domain,
) -> Result<Vec<&'domain Symbol>, ResolveError> {
    domain.resolve(imports)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{export, import};

    fn add(left: u64, right: u64) -> u64 {
        left + right
    }

    fn negate(value: i64) -> i64 {
        -value
    }

    fn page_count() -> usize {
        4096
    }

    fn arithmetic() -> Domain {
        Domain::create(
            "arith",
            [
                export!("add", add, fn(u64, u64) -> u64),
                export!("negate", negate, fn(i64) -> i64),
            ],
        )
        .expect("distinct names")
    }

    fn memory() -> Domain {
        Domain::create("memory", [export!("page_count", page_count, fn() -> usize)])
            .expect("distinct names")
    }

    #[test]
    fn create_keeps_symbols_in_name_order() {
        let domain = Domain::create(
            "arith",
            [
                export!("negate", negate, fn(i64) -> i64),
                export!("add", add, fn(u64, u64) -> u64),
            ],
        )
        .expect("distinct names");
        assert_eq!(domain.name().as_str(), "arith");
        assert_eq!(domain.len(), 2);
        assert_eq!(
            domain.symbols().map(Symbol::name).collect::<Vec<_>>(),
            ["add", "negate"]
        );
        assert!(domain.symbol("add").is_some());
        assert!(domain.symbol("sub").is_none());
    }

    #[test]
    fn create_rejects_duplicate_names() {
        let result = Domain::create(
            "arith",
            [
                export!("add", add, fn(u64, u64) -> u64),
                Symbol::from_address("add", "fn(u64, u64) -> u64", 0x1000),
            ],
        );
        assert_eq!(
            result.err(),
            Some(DomainError::DuplicateSymbol {
                domain: DomainName::from("arith"),
                name: String::from("add")
            })
        );
    }

    #[test]
    fn resolve_returns_symbols_in_import_order() {
        let domain = arithmetic();
        let symbols = domain
            .resolve(&[
                import!("negate", fn(i64) -> i64),
                import!("add", fn(u64, u64) -> u64),
            ])
            .expect("both exported with these signatures");
        assert_eq!(
            symbols
                .iter()
                .map(|symbol| symbol.name())
                .collect::<Vec<_>>(),
            ["negate", "add"]
        );
        assert_eq!(symbols[1].address(), add as fn(u64, u64) -> u64 as usize);
        let add_function = crate::typed_fn!(symbols[1], fn(u64, u64) -> u64).expect("typed export");
        assert_eq!(add_function(1, 2), 3);
    }

    #[test]
    fn resolve_names_an_unknown_symbol() {
        let domain = arithmetic();
        let error = resolve(
            &[
                import!("add", fn(u64, u64) -> u64),
                import!("subtract", fn(u64, u64) -> u64),
            ],
            &domain,
        )
        .expect_err("subtract is not exported");
        assert_eq!(
            error,
            ResolveError::UnknownSymbol {
                name: String::from("subtract"),
                domain: DomainName::from("arith")
            }
        );
        assert_eq!(
            error.to_string(),
            "unknown symbol `subtract`: domain `arith` does not export it"
        );
    }

    #[test]
    fn resolve_refuses_a_fingerprint_mismatch() {
        let domain = arithmetic();
        let stale_import = import!("add", fn(u32, u32) -> u32);
        let error = domain
            .resolve(&[stale_import])
            .expect_err("signature differs");
        assert_eq!(
            error,
            ResolveError::FingerprintMismatch {
                name: String::from("add"),
                domain: DomainName::from("arith"),
                expected: stale_import.fingerprint,
                found: fingerprint_of("addfn(u64, u64) -> u64"),
            }
        );
        assert!(
            error
                .to_string()
                .starts_with("fingerprint mismatch for `add` in domain `arith`")
        );
    }

    #[test]
    fn combine_makes_the_union_and_merges_identical_exports() {
        let arith = arithmetic();
        let memory = memory();
        let overlap = Domain::create("overlap", arith.symbol("add").cloned()).expect("one symbol");
        let combined =
            Domain::combine("kernel", [&arith, &memory, &overlap]).expect("no conflicts");
        assert_eq!(combined.name().as_str(), "kernel");
        assert_eq!(
            combined.symbols().map(Symbol::name).collect::<Vec<_>>(),
            ["add", "negate", "page_count"]
        );
        assert!(
            combined
                .resolve(&[
                    import!("page_count", fn() -> usize),
                    import!("add", fn(u64, u64) -> u64)
                ])
                .is_ok()
        );
    }

    #[test]
    fn combine_rejects_conflicting_exports() {
        let arith = arithmetic();
        let other = Domain::create(
            "other",
            [Symbol::from_address(
                "add",
                "fn(u64, u64) -> u64",
                0xdead_0000,
            )],
        )
        .expect("one symbol");
        assert_eq!(
            Domain::combine("kernel", [&arith, &other]).err(),
            Some(DomainError::CombineConflict {
                name: String::from("add"),
                first: DomainName::from("arith"),
                second: DomainName::from("other"),
            })
        );
        let retyped = Domain::create("retyped", [export!("add", add, fn(u64, u64) -> u64)])
            .expect("one symbol");
        let wider = Domain::create(
            "wider",
            [Symbol::from_address(
                "add",
                "fn(u128, u128) -> u128",
                add as fn(u64, u64) -> u64 as usize,
            )],
        )
        .expect("one symbol");
        assert!(matches!(
            Domain::combine("kernel", [&retyped, &wider]),
            Err(DomainError::CombineConflict { .. })
        ));
    }

    #[test]
    fn domain_fingerprint_tracks_signatures_not_addresses_or_order() {
        let first = Domain::create(
            "d",
            [
                Symbol::from_address("a", "fn()", 1),
                Symbol::from_address("b", "fn(u8)", 2),
            ],
        )
        .expect("distinct");
        let reordered_and_moved = Domain::create(
            "d",
            [
                Symbol::from_address("b", "fn(u8)", 20),
                Symbol::from_address("a", "fn()", 10),
            ],
        )
        .expect("distinct");
        let changed = Domain::create(
            "d",
            [
                Symbol::from_address("a", "fn()", 1),
                Symbol::from_address("b", "fn(u16)", 2),
            ],
        )
        .expect("distinct");
        let renamed_domain = Domain::create(
            "e",
            [
                Symbol::from_address("a", "fn()", 1),
                Symbol::from_address("b", "fn(u8)", 2),
            ],
        )
        .expect("distinct");
        assert_eq!(first.fingerprint(), reordered_and_moved.fingerprint());
        assert_ne!(first.fingerprint(), changed.fingerprint());
        assert_ne!(first.fingerprint(), renamed_domain.fingerprint());
    }
}
