//! JSON request bodies read as the documents promise: a 400 names every
//! problem under its own field (a field the body should not have, a field
//! it lacks, a value of the wrong type), never serde's first complaint as
//! one line of text.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Each field's problems, as the validation answers list them.
pub type Problems = BTreeMap<String, Vec<String>>;

/// The fields a body type has, by their JSON names.
pub trait Fields {
    /// What the body is, in messages ("a bank").
    const WHAT: &'static str;
    const FIELDS: &'static [&'static str];
    const REQUIRED: &'static [&'static str];
}

fn add(problems: &mut Problems, field: impl Into<String>, message: impl Into<String>) {
    problems
        .entry(field.into())
        .or_default()
        .push(message.into());
}

/// `value` as a `T`, or every problem with it.
pub fn read<T: DeserializeOwned + Fields>(value: Value) -> Result<T, Problems> {
    let mut problems = Problems::new();
    let Value::Object(mut fields) = value else {
        add(
            &mut problems,
            "body",
            format!("must be a JSON object: {}", T::WHAT),
        );
        return Err(problems);
    };
    let unknown: Vec<String> = fields
        .keys()
        .filter(|name| !T::FIELDS.contains(&name.as_str()))
        .cloned()
        .collect();
    for name in unknown {
        fields.remove(&name);
        let known = T::FIELDS.join(", ");
        add(
            &mut problems,
            name,
            format!("is not a field of {} ({known})", T::WHAT),
        );
    }
    for name in T::REQUIRED
        .iter()
        .filter(|name| !fields.contains_key(**name))
    {
        add(&mut problems, *name, "is required");
    }
    // Values of the wrong type, one field at a time: each is named, then
    // left out so that the next comes to light.
    let mut body = Value::Object(fields);
    loop {
        let e = match serde_path_to_error::deserialize::<_, T>(&body) {
            Ok(read) if problems.is_empty() => return Ok(read),
            Ok(_) => return Err(problems),
            Err(e) => e,
        };
        let path = e.path().to_string();
        let message = short(&e.inner().to_string());
        let removed = top_level(&path).and_then(|field| body.as_object_mut()?.remove(&field));
        if removed.is_some() {
            add(&mut problems, path, message);
            continue;
        }
        // A field left out above is now missing: reported already.
        if problems.is_empty() || !message.starts_with("missing field") {
            add(&mut problems, "body", message);
        }
        return Err(problems);
    }
}

/// The top-level field of a serde path ("socialLinks[1].url": socialLinks).
fn top_level(path: &str) -> Option<String> {
    let field = path.split(['.', '[']).next()?;
    (!field.is_empty() && field != "?").then(|| field.to_owned())
}

/// serde's message without its position in the text (the body was parsed
/// already; the field says where).
pub fn short(message: &str) -> String {
    message
        .split(" at line ")
        .next()
        .unwrap_or(message)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)]
    struct Thing {
        name: String,
        count: u32,
        #[serde(default)]
        links: Vec<Link>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Link {
        url: String,
    }

    impl Fields for Thing {
        const WHAT: &'static str = "a thing";
        const FIELDS: &'static [&'static str] = &["name", "count", "links"];
        const REQUIRED: &'static [&'static str] = &["name", "count"];
    }

    #[test]
    fn a_good_body_reads() {
        assert!(read::<Thing>(json!({"name": "a", "count": 1})).is_ok());
    }

    #[test]
    fn every_problem_is_named_under_its_field() {
        let problems =
            read::<Thing>(json!({"nmae": "a", "count": "x", "links": [{"url": 1}]})).unwrap_err();
        let fields: Vec<&str> = problems.keys().map(String::as_str).collect();
        assert_eq!(
            fields,
            ["count", "links[0].url", "name", "nmae"],
            "{problems:?}"
        );
        assert_eq!(problems["name"], ["is required"]);
        assert!(problems["nmae"][0].starts_with("is not a field of a thing"));
        assert!(!problems["count"][0].contains("line"), "{problems:?}");
    }

    #[test]
    fn a_body_that_is_not_an_object_is_named_so() {
        let problems = read::<Thing>(json!([1])).unwrap_err();
        assert!(problems["body"][0].starts_with("must be a JSON object"));
    }
}
