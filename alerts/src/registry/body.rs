//! Owners' JSON bodies, read a field at a time from the text sent: one 400
//! names every bad field at once (a value of the wrong type beside one out
//! of range, and beside those only the database can judge, such as a
//! webhook that is not the key's), and a number keeps the digits it was
//! written with (a threshold of 150.50 stays 150.50, which a parsed
//! `serde_json::Value` would make 150.5).

use std::collections::BTreeMap;
use std::marker::PhantomData;

use ratewire_service::body::{short, Fields};
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::error::{Error, FieldErrors, Result};

/// A body's fields as sent, and the problems found so far.
pub struct BodyFields {
    given: BTreeMap<String, Box<RawValue>>,
    problems: FieldErrors,
}

impl BodyFields {
    /// `text` as a body of `T`'s fields. Its shape is checked as every
    /// operator body's is (`ratewire_service::body::read`): an object, no
    /// field that is not `T`'s, none of `T`'s required ones missing, each
    /// problem under its field; the values are left to the reads.
    pub fn read<T: Fields>(text: &str) -> Result<Self> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| Error::validation("body", short(&e.to_string())))?;
        let problems = match ratewire_service::body::read::<Shape<T>>(value) {
            Ok(_) => FieldErrors::new(),
            Err(problems) => problems,
        };
        // An object, or its shape's problem names the body already.
        let given = serde_json::from_str(text).unwrap_or_default();
        Ok(Self { given, problems })
    }

    /// The field `name` as a `V`, when it is given and of `V`'s type (a
    /// value of another type is named).
    pub fn get<V: DeserializeOwned>(&mut self, name: &str) -> Option<V> {
        let raw = self.given.get(name)?;
        match serde_json::from_str(raw.get()) {
            Ok(value) => Some(value),
            Err(e) => {
                self.add(name, short(&e.to_string()));
                None
            }
        }
    }

    /// The string field `name` as `read` makes it, when it is given as a
    /// string that `read` takes (what `read` says of one it refuses is
    /// noted).
    pub fn string<T>(
        &mut self,
        name: &str,
        read: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let text = self.get::<String>(name)?;
        self.noted(name, read(&text))
    }

    /// The number field `name` as `read` makes it from its text as written
    /// (every digit), when it is given as a JSON number that `read` takes.
    pub fn number<T>(
        &mut self,
        name: &str,
        read: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        self.get::<serde_json::Number>(name)?;
        let text = self.given.get(name)?.get().trim().to_owned();
        self.noted(name, read(&text))
    }

    /// `read`'s value, or its problem noted under `name`.
    fn noted<T>(&mut self, name: &str, read: Result<T, String>) -> Option<T> {
        read.map_err(|problem| self.add(name, problem)).ok()
    }

    /// Notes a problem with the field `name`.
    pub fn add(&mut self, name: &str, message: impl Into<String>) {
        self.problems
            .entry(name.to_owned())
            .or_default()
            .push(message.into());
    }

    /// Whether the field `name` has a problem noted.
    pub fn refused(&self, name: &str) -> bool {
        self.problems.contains_key(name)
    }

    /// `read` (what the reads made of the body) when nothing was
    /// refused; otherwise every problem noted, as one answer naming each
    /// field.
    pub fn finish<T>(self, read: Option<T>) -> Result<T> {
        match read {
            Some(read) if self.problems.is_empty() => Ok(read),
            _ => Err(Error::Validation(self.problems)),
        }
    }
}

/// Any body with `T`'s fields: read with it, `body::read` checks only the
/// shape.
struct Shape<T>(PhantomData<T>);

impl<'de, T> Deserialize<'de> for Shape<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(deserializer).map(|_| Shape(PhantomData))
    }
}

impl<T: Fields> Fields for Shape<T> {
    const WHAT: &'static str = T::WHAT;
    const FIELDS: &'static [&'static str] = T::FIELDS;
    const REQUIRED: &'static [&'static str] = T::REQUIRED;
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Thing;

    impl Fields for Thing {
        const WHAT: &'static str = "a thing";
        const FIELDS: &'static [&'static str] = &["name", "count", "price"];
        const REQUIRED: &'static [&'static str] = &["name", "count"];
    }

    #[test]
    fn every_field_s_problem_is_named_with_the_shape_s() {
        let mut body =
            BodyFields::read::<Thing>(r#"{"count": "x", "price": 1.10, "colour": 1}"#).unwrap();
        assert_eq!(body.get::<u32>("count"), None);
        let price = body.number("price", |text| Err::<(), _>(format!("{text} is too dear")));
        assert_eq!(price, None);
        let Err(Error::Validation(problems)) = body.finish(Some(())) else {
            panic!("refused");
        };
        let fields: Vec<&str> = problems.keys().map(String::as_str).collect();
        assert_eq!(fields, ["colour", "count", "name", "price"], "{problems:?}");
        assert_eq!(problems["name"], ["is required"]);
        assert_eq!(
            problems["price"],
            ["1.10 is too dear"],
            "its digits as written"
        );
        assert!(!problems["count"][0].contains("line"), "{problems:?}");
    }

    #[test]
    fn a_number_is_its_text_and_nothing_else_is_a_number() {
        let mut body =
            BodyFields::read::<Thing>(r#"{"name": "a", "count": 1, "price": "1.10"}"#).unwrap();
        let text = |text: &str| Ok::<_, String>(text.to_owned());
        assert_eq!(body.number("price", text), None);
        assert!(body.refused("price"));
        assert_eq!(body.number("colour", text), None, "not given");
        assert_eq!(body.string("name", text).as_deref(), Some("a"));
    }

    #[test]
    fn a_body_that_is_not_an_object_is_named_so() {
        for text in ["[1]", "nope"] {
            let refused = BodyFields::read::<Thing>(text).and_then(|body| body.finish(Some(())));
            let Err(Error::Validation(problems)) = refused else {
                panic!("{text} refused");
            };
            assert!(problems.contains_key("body"), "{text}: {problems:?}");
        }
    }
}
