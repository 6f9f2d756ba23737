//! What a public request asks for, parsed from its query string (strictly,
//! naming every bad parameter: see [`crate::query`]), and the stored view
//! that answers it. The handlers and the gate share these: the gate reads
//! the view in the same Redis round trip that counts the request, so a
//! served request costs one round trip.

use ratewire_proto::{BankId, CurrencyCode};
use ratewire_readmodel::redis::Keys;
use ratewire_readmodel::views::RatesVariant;

use crate::error::{Error, Result};
use crate::query::{Checker, CurrencyArg, Params};

/// The stored list a conversion reads: every active bank, transactional.
pub const BOARDS: RatesVariant = RatesVariant {
    transactional: true,
    social_links: false,
};

/// `GET /api/v1/rates`: every active bank, or one, in one of four shapes.
#[derive(Debug, Clone, Copy)]
pub struct RatesRequest {
    pub bank_id: Option<BankId>,
    pub variant: RatesVariant,
}

impl RatesRequest {
    pub fn parse(query: Option<&str>) -> Result<Self> {
        let params = Params::parse(query)?;
        let mut check = Checker::new(&params);
        let bank_id = check.bank_id("bankId", false);
        let variant = RatesVariant {
            transactional: check.flag("transactional"),
            social_links: check.flag("socialLinks"),
        };
        check.finish()?;
        Ok(Self { bank_id, variant })
    }

    pub fn view(&self, views: &Keys) -> ViewRef {
        match self.bank_id {
            Some(id) => ViewRef::new(views, views.rates_bank(id, self.variant)),
            None => ViewRef::list(views, List::Rates(self.variant)),
        }
    }
}

/// `GET /api/v1/banks`: the active banks, with their current boards or not.
#[derive(Debug, Clone, Copy)]
pub struct BanksRequest {
    pub with_recent: bool,
}

impl BanksRequest {
    pub fn parse(query: Option<&str>) -> Result<Self> {
        let params = Params::parse(query)?;
        let mut check = Checker::new(&params);
        let with_recent = check.flag("withRecentEx");
        check.finish()?;
        Ok(Self { with_recent })
    }

    pub fn view(&self, views: &Keys) -> ViewRef {
        ViewRef::list(views, List::Banks(self.with_recent))
    }
}

/// `GET /api/v1/rates/best-rates`: one currency's best rates.
#[derive(Debug, Clone, Copy)]
pub struct BestRatesRequest {
    pub code: CurrencyCode,
}

impl BestRatesRequest {
    /// 404 for a well-formed code nobody quotes.
    pub fn parse(query: Option<&str>) -> Result<Self> {
        let params = Params::parse(query)?;
        let mut check = Checker::new(&params);
        let code = check.currency("currencyCode", None);
        check.finish()?;
        match code {
            Some(CurrencyArg::Known(code)) => Ok(Self { code }),
            _ => Err(Error::NotFound("Currency not found")),
        }
    }

    pub fn view(&self, views: &Keys) -> ViewRef {
        ViewRef::new(views, views.best(self.code))
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

/// A public route answered from a stored view: what its query names, and
/// how it is answered. The router, the gate's view lookup and the fast
/// path all read [`VIEW_ROUTES`]; the handlers declare these paths.
pub struct ViewRoute {
    pub path: &'static str,
    /// The view a valid query names (`None` for an invalid one: its
    /// handler refuses it).
    pub view: fn(&Keys, Option<&str>) -> Option<ViewRef>,
    /// The view is a list of elements, sent gzip-encoded to clients that
    /// take it.
    pub list: bool,
    /// Answered by the public listener's fast path, before the router.
    pub shortcut: bool,
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
        view: |views, query| RatesRequest::parse(query).ok().map(|r| r.view(views)),
        list: true,
        shortcut: true,
    },
    ViewRoute {
        path: BEST_RATES,
        view: |views, query| BestRatesRequest::parse(query).ok().map(|r| r.view(views)),
        list: false,
        shortcut: true,
    },
    ViewRoute {
        path: BANKS,
        view: |views, query| BanksRequest::parse(query).ok().map(|r| r.view(views)),
        list: true,
        shortcut: true,
    },
    ViewRoute {
        path: CURRENCIES,
        view: |views, _| Some(ViewRef::new(views, views.currencies())),
        list: false,
        shortcut: true,
    },
    ViewRoute {
        path: CONVERT,
        view: |views, _| Some(ViewRef::list(views, List::Rates(BOARDS))),
        list: true,
        // Computed from the view, not the view itself.
        shortcut: false,
    },
    ViewRoute {
        path: SPREADS,
        view: |views, _| Some(ViewRef::list(views, List::Rates(BOARDS))),
        list: true,
        shortcut: false,
    },
];

/// The view route at `path`.
pub fn view_route(path: &str) -> Option<&'static ViewRoute> {
    VIEW_ROUTES.iter().find(|route| route.path == path)
}

/// The stored view a public request is answered from, when its query is
/// valid (an invalid one is refused by its handler, view or not).
pub fn view_ref(views: &Keys, path: &str, query: Option<&str>) -> Option<ViewRef> {
    (view_route(path)?.view)(views, query)
}
