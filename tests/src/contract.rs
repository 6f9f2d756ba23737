//! Checks responses against the OpenAPI document the API serves.
//!
//! Every object schema is made strict (`additionalProperties: false`) before
//! use, so a field the document does not describe fails a test just like a
//! missing or mistyped one.

use std::collections::HashMap;
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use serde_json::Value;

pub struct Contract {
    document: Value,
    validators: Mutex<HashMap<String, std::sync::Arc<jsonschema::Validator>>>,
}

fn make_strict(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.contains_key("properties") && !map.contains_key("additionalProperties") {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            map.values_mut().for_each(make_strict);
        }
        Value::Array(items) => items.iter_mut().for_each(make_strict),
        _ => {}
    }
}

impl Contract {
    pub fn new(mut document: Value) -> Self {
        make_strict(&mut document["components"]);
        Self {
            document,
            validators: Mutex::default(),
        }
    }

    /// The document checked against.
    pub fn document(&self) -> &Value {
        &self.document
    }

    /// Validates a JSON response of `GET path` with `status`. Paths the
    /// document does not describe are not checked; a status it does not list
    /// for a described path is an error.
    pub fn check(&self, path: &str, status: u16, body: &Value) -> Result<()> {
        self.check_method("get", path, status, body)
    }

    /// [`Contract::check`] for any method; `path` may fill a template's
    /// parameters (`/api/v1/webhooks/{id}/test`).
    pub fn check_method(&self, method: &str, path: &str, status: u16, body: &Value) -> Result<()> {
        let upper = method.to_uppercase();
        let Some(operation) = self.operation(method, path) else {
            return Ok(());
        };
        let answer = &operation["responses"][status.to_string()];
        if answer.is_object() && answer.get("content").is_none() && body.is_null() {
            return Ok(());
        }
        let Some(schema) = answer["content"]["application/json"]["schema"].as_object() else {
            bail!("{upper} {path} answered {status}, which the OpenAPI document does not list: {body}");
        };
        let key = format!("{upper} {path} {status}");
        let errors = self.violations(&key, &Value::Object(schema.clone()), body)?;
        if !errors.is_empty() {
            bail!(
                "{upper} {path} {status} does not match the OpenAPI document:\n  {}\nbody: {body}",
                errors.join("\n  ")
            );
        }
        Ok(())
    }

    /// The document's operation for `method` on `path`, by exact path or
    /// by a template whose `{parameters}` take the path's segments.
    fn operation(&self, method: &str, path: &str) -> Option<&Value> {
        let paths = self.document["paths"].as_object()?;
        if let Some(item) = paths.get(path) {
            return item.get(method);
        }
        let segments: Vec<&str> = path.split('/').collect();
        paths
            .iter()
            .find(|(template, _)| {
                let parts: Vec<&str> = template.split('/').collect();
                parts.len() == segments.len()
                    && parts
                        .iter()
                        .zip(&segments)
                        .all(|(t, s)| t == s || (t.starts_with('{') && t.ends_with('}')))
            })
            .and_then(|(_, item)| item.get(method))
    }

    /// Validates one event of the live stream: its fields against the
    /// document's schema for its type, and its data against that type's
    /// `contentSchema` (which schema validators only annotate).
    pub fn check_event(&self, event: &str, id: &str, data: &str) -> Result<()> {
        let events = &self.document["paths"]["/api/v1/stream"]["get"]["responses"]["200"]
            ["content"]["text/event-stream"]["schema"]["oneOf"];
        let Some(schema) = events
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["properties"]["event"]["const"] == event)
        else {
            bail!("the OpenAPI document declares no `{event}` event");
        };
        let mut fields = serde_json::json!({"event": event, "data": data});
        if !id.is_empty() {
            fields["id"] = id.into();
        }
        let mut errors = self.violations(&format!("event {event}"), schema, &fields)?;
        let parsed: Value =
            serde_json::from_str(data).with_context(|| format!("`{event}` data is not JSON"))?;
        let content = &schema["properties"]["data"]["contentSchema"];
        errors.extend(self.violations(&format!("event {event} data"), content, &parsed)?);
        if !errors.is_empty() {
            bail!(
                "the `{event}` event does not match the OpenAPI document:\n  {}\ndata: {data}",
                errors.join("\n  ")
            );
        }
        Ok(())
    }

    /// What `instance` breaks of `schema` (resolved against the document),
    /// with the validator kept under `key`.
    fn violations(&self, key: &str, schema: &Value, instance: &Value) -> Result<Vec<String>> {
        let validator = {
            let mut cache = self.validators.lock().expect("validator cache");
            match cache.get(key) {
                Some(v) => v.clone(),
                None => {
                    // The whole document is the root, so `$ref`s into
                    // components resolve; the schema is the entry.
                    let mut root = self.document.clone();
                    root.as_object_mut()
                        .context("document is an object")?
                        .extend(schema.as_object().cloned().unwrap_or_default());
                    let validator = jsonschema::options()
                        .with_draft(jsonschema::Draft::Draft202012)
                        .should_validate_formats(true)
                        .build(&root)
                        .map_err(|e| anyhow::anyhow!("schema for {key}: {e}"))?;
                    let validator = std::sync::Arc::new(validator);
                    cache.insert(key.to_owned(), validator.clone());
                    validator
                }
            }
        };
        Ok(validator
            .iter_errors(instance)
            .map(|e| format!("{} at {}", e, e.instance_path))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn contract() -> Contract {
        Contract::new(json!({
            "openapi": "3.1.0",
            "paths": {"/x": {"get": {"responses": {"200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/X"}}}}}}}},
            "components": {"schemas": {"X": {"type": "object", "required": ["id"], "properties": {
                "id": {"type": "integer"}, "at": {"type": "string", "format": "date-time"}}}}}
        }))
    }

    #[test]
    fn conforming_bodies_pass_and_others_fail() {
        let c = contract();
        assert!(c
            .check(
                "/x",
                200,
                &json!({"id": 1, "at": "2026-11-20T08:00:00.000Z"})
            )
            .is_ok());
        assert!(
            c.check("/x", 200, &json!({"id": "1"})).is_err(),
            "wrong type"
        );
        assert!(c.check("/x", 200, &json!({})).is_err(), "missing field");
        assert!(
            c.check("/x", 200, &json!({"id": 1, "extra": true}))
                .is_err(),
            "undocumented field"
        );
        assert!(
            c.check("/x", 200, &json!({"id": 1, "at": "yesterday"}))
                .is_err(),
            "bad date-time"
        );
        assert!(
            c.check("/x", 404, &json!({})).is_err(),
            "undocumented status"
        );
        assert!(
            c.check("/elsewhere", 200, &json!(null)).is_ok(),
            "undocumented paths are not checked"
        );
    }

    #[test]
    fn stream_events_are_checked_by_type_and_their_data_by_its_schema() {
        let c = Contract::new(json!({
            "openapi": "3.1.0",
            "paths": {"/api/v1/stream": {"get": {"responses": {"200": {"content": {"text/event-stream": {"schema": {"oneOf": [
                {"type": "object", "required": ["event", "data", "id"], "properties": {
                    "event": {"const": "board"}, "id": {"type": "string"},
                    "data": {"type": "string", "contentSchema": {"$ref": "#/components/schemas/X"}}}}
            ]}}}}}}}},
            "components": {"schemas": {"X": {"type": "object", "required": ["id"], "properties": {
                "id": {"type": "integer"}}}}}
        }));
        assert!(c.check_event("board", "1-0", r#"{"id": 1}"#).is_ok());
        assert!(
            c.check_event("board", "1-0", r#"{"id": "1"}"#).is_err(),
            "data"
        );
        assert!(c.check_event("board", "", r#"{"id": 1}"#).is_err(), "no id");
        assert!(
            c.check_event("best", "1-0", r#"{"id": 1}"#).is_err(),
            "undeclared"
        );
    }
}
