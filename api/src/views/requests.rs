//! What a public read answered from a stored view asks for, and the view
//! that answers it ([`VIEW_ROUTES`]). The gate names the view, parsing the
//! query once for the handler too (see `views::ViewRead`), and reads it in
//! the same Redis round trip that counts the request, so a served request
//! costs one round trip.

use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

use axum::http::Uri;
use ratewire_proto::BankId;
use ratewire_readmodel::redis::Keys;
use ratewire_readmodel::views::RatesVariant;

use crate::query::{query, CurrencyArg, FromQuery, KnownAt};
use crate::views::known_at::asks_known_at;
use crate::views::read_model::{ReadModel, ReadModels};

/// The stored list a conversion reads: every active bank, transactional.
pub const BOARDS: RatesVariant = RatesVariant {
    transactional: true,
    social_links: false,
};

query! {
    /// `GET /api/v1/rates`: every active bank, or one, in one of four shapes.
    #[derive(Debug, Clone, Copy)]
    pub struct RatesQuery {
        /// Only this bank (a positive integer; one not active: 404)
        pub bank_id as "bankId": Option<BankId>,
        /// Include transactional rates: true, false, 1 or 0
        pub transactional as "transactional": bool,
        /// Include the banks' social links: true, false, 1 or 0
        pub social_links as "socialLinks": bool,
        /// An RFC 3339 instant, not in the future: the answer as it was known
        /// then (to the millisecond, named in the envelope); a final one is
        /// immutable
        pub as_known_at as "asKnownAt": Option<KnownAt>,
    }
}

impl RatesQuery {
    pub fn variant(&self) -> RatesVariant {
        RatesVariant {
            transactional: self.transactional,
            social_links: self.social_links,
        }
    }
}

query! {
    /// `GET /api/v1/banks`: the active banks, with their current boards or not.
    #[derive(Debug, Clone, Copy)]
    pub struct BanksQuery {
        /// Include each bank's current board: true, false, 1 or 0
        pub with_recent as "withRecentEx": bool,
        /// An RFC 3339 instant, not in the future: the answer as it was known
        /// then (to the millisecond, named in the envelope); a final one is
        /// immutable
        pub as_known_at as "asKnownAt": Option<KnownAt>,
    }
}

query! {
    /// `GET /api/v1/rates/best-rates`: one currency's best rates.
    #[derive(Debug, Clone, Copy)]
    pub struct BestRatesQuery {
        /// ISO 4217 code, three letters in any case (one no active bank quotes: 404)
        pub currency as "currencyCode": CurrencyArg,
        /// An RFC 3339 instant, not in the future: the answer as it was known
        /// then (to the millisecond, named in the envelope); a final one is
        /// immutable
        pub as_known_at as "asKnownAt": Option<KnownAt>,
    }
}

query! {
    /// `GET /api/v1/currencies`: the currencies active banks quote.
    #[derive(Debug, Clone, Copy)]
    pub struct CurrenciesQuery {
        /// An RFC 3339 instant, not in the future: the answer as it was known
        /// then (to the millisecond, named in the envelope); a final one is
        /// immutable
        pub as_known_at as "asKnownAt": Option<KnownAt>,
    }
}

/// A query that names the stored view answering it.
pub trait NamesView: FromQuery + Clone + Send + Sync + 'static {
    /// The view, of the generation whose keys are `views`; `None` when the
    /// query names nothing (an unknown currency), or asks for the answer
    /// as known at an instant (no stored view holds the past).
    fn view(&self, views: &Keys) -> Option<ViewRef>;
}

impl NamesView for RatesQuery {
    fn view(&self, views: &Keys) -> Option<ViewRef> {
        if self.as_known_at.is_some() {
            return None;
        }
        Some(match self.bank_id {
            Some(id) => ViewRef::new(views, views.rates_bank(id, self.variant())),
            None => ViewRef::list(views, List::Rates(self.variant())),
        })
    }
}

impl NamesView for BanksQuery {
    fn view(&self, views: &Keys) -> Option<ViewRef> {
        self.as_known_at
            .is_none()
            .then(|| ViewRef::list(views, List::Banks(self.with_recent)))
    }
}

impl NamesView for BestRatesQuery {
    fn view(&self, views: &Keys) -> Option<ViewRef> {
        match self.currency {
            CurrencyArg::Known(code) if self.as_known_at.is_none() => {
                Some(ViewRef::new(views, views.best(code)))
            }
            _ => None,
        }
    }
}

impl NamesView for CurrenciesQuery {
    fn view(&self, views: &Keys) -> Option<ViewRef> {
        self.as_known_at
            .is_none()
            .then(|| ViewRef::new(views, views.currencies()))
    }
}

/// What a request to a view route names: the view (`None` for a query its
/// handler refuses, or one that names nothing), and the query as parsed
/// (a `Result<Q, FieldErrors>` of the route's query type `Q`), when the
/// view depended on it.
#[derive(Clone, Default)]
pub struct Naming {
    pub view: Option<Arc<ViewRef>>,
    pub parsed: Option<Parsed>,
}

/// A query as parsed for naming its view, for its handler (see
/// `views::ViewRead`).
pub type Parsed = Arc<dyn Any + Send + Sync>;

/// What `query` names, parsed as `Q`.
fn named<Q: NamesView>(views: &Keys, query: Option<&str>) -> Naming {
    let parsed = Q::parse(query);
    let view = parsed.as_ref().ok().and_then(|q| q.view(views));
    Naming {
        view: view.map(Arc::new),
        parsed: Some(Arc::new(parsed)),
    }
}

/// A view everyone asking `path` names, whatever the rest of the query,
/// unless it asks for the answer as known at an instant (then none: see
/// [`NamesView::view`]); the handler parses the query.
fn fixed(view: ViewRef, query: Option<&str>) -> Naming {
    Naming {
        view: (!asks_known_at(query)).then(|| Arc::new(view)),
        parsed: None,
    }
}

/// An all-banks list: nothing stores it whole; it is joined in this
/// process from its banks' elements (see `views::lists`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    /// `/rates` in one of its four shapes.
    Rates(RatesVariant),
    /// `/banks`, with recent boards or not.
    Banks(bool),
}

impl List {
    /// What the list is kept under in this process.
    pub fn key(self, views: &Keys) -> String {
        match self {
            List::Rates(variant) => views.rates_all(variant),
            List::Banks(with_recent) => views.banks_all(with_recent),
        }
    }

    /// Where bank `id`'s element of it is stored.
    pub fn element(self, views: &Keys, id: BankId) -> String {
        match self {
            List::Rates(variant) => views.rates_bank(id, variant),
            List::Banks(with_recent) => views.banks_bank(id, with_recent),
        }
    }

    /// Every list: what a bank's change replaces.
    pub fn all() -> impl Iterator<Item = List> {
        RatesVariant::ALL
            .into_iter()
            .map(List::Rates)
            .chain([false, true].map(List::Banks))
    }
}

/// Where a stored view is: its key, and the hash its fingerprint is kept
/// in (see `ratewire_readmodel::redis`); for a list, the list and where its
/// elements are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewRef {
    pub key: String,
    pub etags: String,
    pub list: Option<(List, Keys)>,
}

impl ViewRef {
    pub fn new(views: &Keys, key: String) -> Self {
        Self {
            key,
            etags: views.view_etags(),
            list: None,
        }
    }

    pub fn list(views: &Keys, list: List) -> Self {
        Self {
            key: list.key(views),
            etags: views.view_etags(),
            list: Some((list, views.clone())),
        }
    }
}

/// A stored view as read: its bytes and, when the writer recorded one, its
/// fingerprint (the response's `ETag`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub body: axum::body::Bytes,
    pub etag: Option<String>,
}

/// A public route answered from a stored view, and the view its request
/// names. The router and the gate read [`VIEW_ROUTES`]; the handlers
/// declare these paths.
pub struct ViewRoute {
    pub path: &'static str,
    /// What a request with query string `query` names, in the generation
    /// whose keys are `views`.
    pub view: fn(views: &Keys, query: Option<&str>) -> Naming,
}

pub const RATES: &str = "/api/v1/rates";
pub const BEST_RATES: &str = "/api/v1/rates/best-rates";
pub const BANKS: &str = "/api/v1/banks";
pub const CURRENCIES: &str = "/api/v1/currencies";
pub const CONVERT: &str = "/api/v1/convert";
pub const SPREADS: &str = "/api/v1/rates/spreads";
pub const REFERENCE_RATES: &str = "/api/v1/reference-rates";
pub const REFERENCE_SERIES: &str = "/api/v1/reference-rates/series";

/// Every route answered from a stored view.
pub static VIEW_ROUTES: [ViewRoute; 6] = [
    ViewRoute {
        path: RATES,
        view: named::<RatesQuery>,
    },
    ViewRoute {
        path: BEST_RATES,
        view: named::<BestRatesQuery>,
    },
    ViewRoute {
        path: BANKS,
        view: named::<BanksQuery>,
    },
    ViewRoute {
        path: CURRENCIES,
        view: named::<CurrenciesQuery>,
    },
    // Computed from every bank's board, whatever their query asks.
    ViewRoute {
        path: CONVERT,
        view: |views, query| fixed(ViewRef::list(views, List::Rates(BOARDS)), query),
    },
    ViewRoute {
        path: SPREADS,
        view: |views, query| fixed(ViewRef::list(views, List::Rates(BOARDS)), query),
    },
];

/// The view route at `path`.
pub fn view_route(path: &str) -> Option<&'static ViewRoute> {
    VIEW_ROUTES.iter().find(|route| route.path == path)
}

/// What a request for `uri` names in the generation served now (which it
/// is read from), when `uri` is a view route's. Callers repeat the same
/// few requests: each worker thread remembers what it named, by target
/// (`path?query`), rather than parse the query and make the view's key
/// names again (docs/benchmarks.md).
pub fn naming(models: &ReadModels, uri: &Uri) -> Option<(Arc<ReadModel>, Naming)> {
    let route = view_route(uri.path())?;
    let read = models.current();
    let target = uri.path_and_query().map_or("", |target| target.as_str());
    if let Some(known) = NAMED.with_borrow(|named| named.get(&read, target)) {
        return Some((read, known));
    }
    let naming = (route.view)(&read.views, uri.query());
    // Only what names a view is remembered: a request as known at an
    // instant names none (and whether its instant is in the future
    // changes), nor does a refused one.
    if naming.view.is_some() {
        NAMED.with_borrow_mut(|named| named.put(&read, target, naming.clone()));
    }
    Some((read, naming))
}

/// What a worker thread named, by target and generation. A generation is
/// held weakly: a thread does not keep an old one's pools open (and its
/// allocation is not reused while it is named here).
#[derive(Default)]
struct Remembered {
    targets: HashMap<Box<str>, (Weak<ReadModel>, Naming)>,
}

/// Targets a thread remembers at most (then it forgets them all).
const TARGETS_MAX: usize = 1_024;

thread_local! {
    static NAMED: RefCell<Remembered> = RefCell::new(Remembered::default());
}

impl Remembered {
    fn get(&self, read: &Arc<ReadModel>, target: &str) -> Option<Naming> {
        let (generation, naming) = self.targets.get(target)?;
        std::ptr::eq(generation.as_ptr(), Arc::as_ptr(read)).then(|| naming.clone())
    }

    fn put(&mut self, read: &Arc<ReadModel>, target: &str, naming: Naming) {
        if self.targets.len() >= TARGETS_MAX {
            self.targets.clear();
        }
        self.targets
            .insert(target.into(), (Arc::downgrade(read), naming));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::FieldErrors;

    fn naming_of(path: &str, query: &str) -> Naming {
        (view_route(path).unwrap().view)(&Keys::new("t:"), Some(query))
    }

    #[test]
    fn a_view_route_names_its_view_and_hands_the_parsed_query_on() {
        let keys = Keys::new("t:");
        let naming = naming_of(RATES, "bankId=7&transactional=1&unknown=x");
        let parsed = naming.parsed.unwrap();
        let Some(Ok(query)) = parsed.downcast_ref::<Result<RatesQuery, FieldErrors>>() else {
            panic!("the rates query, parsed")
        };
        assert_eq!(query.bank_id.map(BankId::get), Some(7));
        let variant = RatesVariant {
            transactional: true,
            social_links: false,
        };
        let bank = BankId::new(7).unwrap();
        assert_eq!(naming.view.unwrap().key, keys.rates_bank(bank, variant));
    }

    #[test]
    fn a_refused_query_names_no_view_and_hands_its_problems_on() {
        let naming = naming_of(RATES, "bankId=zero&socialLinks=maybe");
        assert!(naming.view.is_none());
        let parsed = naming.parsed.unwrap();
        let Some(Err(problems)) = parsed.downcast_ref::<Result<RatesQuery, FieldErrors>>() else {
            panic!("the problems")
        };
        assert_eq!(
            problems.keys().collect::<Vec<_>>(),
            ["bankId", "socialLinks"]
        );
        // A well-formed code ISO 4217 does not know names nothing: a 404.
        let naming = naming_of(BEST_RATES, "currencyCode=QQQ");
        assert!(naming.view.is_none());
        let parsed = naming.parsed.unwrap();
        assert!(matches!(
            parsed.downcast_ref::<Result<BestRatesQuery, FieldErrors>>(),
            Some(Ok(_))
        ));
    }

    #[test]
    fn conversions_and_spreads_name_the_boards_whatever_they_ask() {
        for path in [CONVERT, SPREADS] {
            let naming = naming_of(path, "amount=nonsense");
            assert!(naming.parsed.is_none(), "parsed by its handler");
            let view = naming.view.unwrap();
            assert_eq!(view.key, List::Rates(BOARDS).key(&Keys::new("t:")));
        }
    }

    #[test]
    fn a_read_as_known_at_an_instant_names_no_stored_view() {
        let at = "asKnownAt=2026-01-01T00:00:00Z";
        for (path, query) in [
            (RATES, format!("bankId=1&{at}")),
            (RATES, at.to_owned()),
            (BANKS, at.to_owned()),
            (BEST_RATES, format!("currencyCode=USD&{at}")),
            (CURRENCIES, at.to_owned()),
            (CONVERT, format!("from=USD&to=ETB&amount=1&{at}")),
            (SPREADS, format!("currencyCode=USD&{at}")),
        ] {
            assert!(naming_of(path, &query).view.is_none(), "{path}?{query}");
        }
        // Without it, the same requests name their views.
        assert!(naming_of(CURRENCIES, "").view.is_some());
        assert!(naming_of(BEST_RATES, "currencyCode=USD").view.is_some());
        // A malformed instant names nothing either, and is handed on.
        let naming = naming_of(RATES, "asKnownAt=soon");
        assert!(naming.view.is_none());
        let parsed = naming.parsed.unwrap();
        let Some(Err(problems)) = parsed.downcast_ref::<Result<RatesQuery, FieldErrors>>() else {
            panic!("the problem")
        };
        assert_eq!(problems.keys().collect::<Vec<_>>(), ["asKnownAt"]);
    }
}
