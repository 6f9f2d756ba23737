//! What a query parameter's type says: how its value is read (with the
//! problems [`Checker`] names), whether a request must give it, and how
//! the OpenAPI document describes it. A request struct's field type is all
//! a parameter needs besides its name and description (which the request
//! structs, one level up, declare).

use chrono::NaiveDate;
use ratewire_proto::{BankId, CurrencyCode};
use utoipa::openapi::schema::{
    AnyOfBuilder, KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type,
};

use super::checker::{Checker, CurrencyArg, KnownAt, When};

/// A query parameter's type.
pub trait QueryParam: Sized {
    /// Whether a request must give it.
    const REQUIRED: bool;

    /// Its value in `check`'s query under `name`: `None` only when a
    /// problem was noted there.
    fn read(check: &mut Checker<'_>, name: &str) -> Option<Self>;

    /// How the document describes its values.
    fn schema() -> Schema;
}

/// Given or not: absent is `None`; given, it is read as `T` is.
impl<T: QueryParam> QueryParam for Option<T> {
    const REQUIRED: bool = false;

    fn read(check: &mut Checker<'_>, name: &str) -> Option<Self> {
        if check.given(name) {
            T::read(check, name).map(Some)
        } else {
            Some(None)
        }
    }

    fn schema() -> Schema {
        T::schema()
    }
}

/// A word among a few (`interval=day`).
pub trait Choice: Copy + 'static {
    /// Every choice, in the order the document lists them.
    const ALL: &'static [Self];

    /// The word that names it.
    fn name(self) -> &'static str;
}

impl<T: Choice> QueryParam for T {
    const REQUIRED: bool = true;

    fn read(check: &mut Checker<'_>, name: &str) -> Option<Self> {
        check.one_of(name, T::ALL, T::name)
    }

    fn schema() -> Schema {
        let names: Vec<&str> = T::ALL.iter().map(|c| c.name()).collect();
        string(Some(&format!("^({})$", names.join("|"))))
    }
}

/// A positive integer.
impl QueryParam for BankId {
    const REQUIRED: bool = true;

    fn read(check: &mut Checker<'_>, name: &str) -> Option<Self> {
        check.bank_id(name, true)
    }

    fn schema() -> Schema {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
            .minimum(Some(1))
            .into()
    }
}

/// Three letters, any case; one ISO 4217 does not know names nothing.
impl QueryParam for CurrencyArg {
    const REQUIRED: bool = true;

    fn read(check: &mut Checker<'_>, name: &str) -> Option<Self> {
        check.currency(name, None)
    }

    fn schema() -> Schema {
        string(Some("^[A-Za-z]{3}$"))
    }
}

/// A code ISO 4217 knows (any other is a bad parameter).
impl QueryParam for CurrencyCode {
    const REQUIRED: bool = true;

    fn read(check: &mut Checker<'_>, name: &str) -> Option<Self> {
        check.known_currency(name)
    }

    fn schema() -> Schema {
        let codes = CurrencyCode::all();
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(codes.iter().map(|c| c.as_str().to_owned())))
            .into()
    }
}

/// A calendar date, YYYY-MM-DD.
impl QueryParam for NaiveDate {
    const REQUIRED: bool = true;

    fn read(check: &mut Checker<'_>, name: &str) -> Option<Self> {
        check.date(name)
    }

    fn schema() -> Schema {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Date)))
            .into()
    }
}

/// A date or an RFC 3339 time.
impl QueryParam for When {
    const REQUIRED: bool = true;

    fn read(check: &mut Checker<'_>, name: &str) -> Option<Self> {
        match check.when(name) {
            Some(when) => Some(when),
            None if check.given(name) => None,
            None => check.require(name),
        }
    }

    fn schema() -> Schema {
        let formatted = |format| {
            ObjectBuilder::new()
                .schema_type(Type::String)
                .format(Some(SchemaFormat::KnownFormat(format)))
        };
        AnyOfBuilder::new()
            .item(formatted(KnownFormat::Date))
            .item(formatted(KnownFormat::DateTime))
            .into()
    }
}

/// An RFC 3339 instant, not in the future (read at the moment the request
/// is parsed), truncated to the millisecond.
impl QueryParam for KnownAt {
    const REQUIRED: bool = true;

    fn read(check: &mut Checker<'_>, name: &str) -> Option<Self> {
        match check.known_at(name, chrono::Utc::now()) {
            Some(at) => Some(at),
            None if check.given(name) => None,
            None => check.require(name),
        }
    }

    fn schema() -> Schema {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .into()
    }
}

/// `true`, `false`, `1` or `0`; absent is false.
impl QueryParam for bool {
    const REQUIRED: bool = false;

    fn read(check: &mut Checker<'_>, name: &str) -> Option<Self> {
        Some(check.flag(name))
    }

    fn schema() -> Schema {
        ObjectBuilder::new().schema_type(Type::Boolean).into()
    }
}

/// Bank ids, repeated or comma-separated; absent is none.
impl QueryParam for Vec<BankId> {
    const REQUIRED: bool = false;

    fn read(check: &mut Checker<'_>, name: &str) -> Option<Self> {
        Some(check.bank_ids(name))
    }

    fn schema() -> Schema {
        string(Some("^[1-9][0-9]{0,17}(,[1-9][0-9]{0,17})*$"))
    }
}

/// ISO 4217 codes, repeated or comma-separated; absent is none.
impl QueryParam for Vec<CurrencyCode> {
    const REQUIRED: bool = false;

    fn read(check: &mut Checker<'_>, name: &str) -> Option<Self> {
        Some(check.currencies(name))
    }

    fn schema() -> Schema {
        string(None)
    }
}

/// Any text, as given.
impl QueryParam for String {
    const REQUIRED: bool = true;

    fn read(check: &mut Checker<'_>, name: &str) -> Option<Self> {
        match check.text(name) {
            Some(text) => Some(text.to_owned()),
            None => check.require(name),
        }
    }

    fn schema() -> Schema {
        string(None)
    }
}

/// A string, matching `pattern` when one is given.
pub fn string(pattern: Option<&str>) -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(pattern)
        .into()
}
