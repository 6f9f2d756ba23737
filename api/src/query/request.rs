//! A request's query declared once (`query!`): one struct gives the
//! OpenAPI document its parameters, and the parsing its values and 400s.
//! Its handler takes it as [`Query`].

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::Required;

use super::checker::{Checker, Params};
use super::params::QueryParam;
use crate::error::{Error, FieldErrors};

/// A request's query, read from its parameters (see `query!`).
pub trait FromQuery: Sized {
    /// Every parameter read in `check`: `None` only when a problem was
    /// noted there.
    fn read(check: &mut Checker<'_>) -> Option<Self>;

    /// The query string `query` read strictly: every bad parameter named,
    /// unknown ones ignored, the first of a repeated one taken.
    fn parse(query: Option<&str>) -> Result<Self, FieldErrors> {
        let params = Params::parse(query)?;
        let mut check = Checker::new(&params);
        let read = Self::read(&mut check);
        check.problems()?;
        Ok(read.expect("a parameter is missing only where a problem was noted"))
    }
}

/// The document's description of parameter `name` of type `T`, described
/// by the lines of `doc`.
pub fn parameter<T: QueryParam>(name: &str, doc: &[&str]) -> Parameter {
    let description: Vec<&str> = doc.iter().map(|line| line.trim()).collect();
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Query)
        .description(Some(description.join(" ")))
        .required(if T::REQUIRED {
            Required::True
        } else {
            Required::False
        })
        .schema(Some(T::schema()))
        .build()
}

/// Declares a request's query: the struct, and from its fields both its
/// parameters in the OpenAPI document (`utoipa::IntoParams`, for the
/// handler's `params(...)`) and its parsing ([`FromQuery`]). Each field is
/// `field as "name": Type`, its doc comment the parameter's description;
/// the type's [`QueryParam`] says how it is read, whether it is required
/// and its schema. A rule between parameters follows the struct as
/// `rules = function;`: called with the parameters read (when each was),
/// it notes what breaks it in the same 400 (`Checker::refuse`).
macro_rules! query {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $field_vis:vis $field:ident as $param:literal: $ty:ty
            ),* $(,)?
        }
        $(rules = $rules:path;)?
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[doc = $doc])* $field_vis $field: $ty, )*
        }

        impl ::utoipa::IntoParams for $name {
            fn into_params(
                _: impl Fn() -> Option<::utoipa::openapi::path::ParameterIn>,
            ) -> Vec<::utoipa::openapi::path::Parameter> {
                vec![$( $crate::query::parameter::<$ty>($param, &[$($doc),*]) ),*]
            }
        }

        impl $crate::query::FromQuery for $name {
            fn read(check: &mut $crate::query::Checker<'_>) -> Option<Self> {
                $( let $field = <$ty as $crate::query::QueryParam>::read(check, $param); )*
                let read = Self { $( $field: $field?, )* };
                $( $rules(&read, check); )?
                Some(read)
            }
        }
    };
}
pub(crate) use query;

/// A handler's query, parsed; a bad one is answered 400 naming every bad
/// parameter. (A read answered from a stored view takes its query with the
/// view, as the gate parsed it: `views::ViewRead`.)
#[derive(Debug, Clone)]
pub struct Query<T>(pub T);

impl<S, T> FromRequestParts<S> for Query<T>
where
    S: Send + Sync,
    T: FromQuery,
{
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        T::parse(parts.uri.query())
            .map(Query)
            .map_err(Error::Validation)
    }
}
