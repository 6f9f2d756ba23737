//! Where a board's numbers came from, as its publisher says: a type that
//! cannot hold a source that is not one.
//!
//! A board may carry a source (`{url?, method, capturedAt?, sha256?}`);
//! `method` is the one part every source has. Reading a source from the
//! log goes through the same constructor as building one in ingest, so a
//! message whose source breaks a rule is refused with [`Rule::Source`],
//! whoever wrote it. What relates a source to its envelope (captured not
//! later than the board's receipt plus [`MAX_FUTURE_SKEW`]) is checked
//! where both are known ([`Source::check_received`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::rules::{earliest_as_of, Rule, Violation, MAX_FUTURE_SKEW, MAX_SOURCE_URL_CHARS};

/// How the publisher got the numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// The bank's own API.
    Api,
    /// A web page, read.
    Page,
    /// A file (a PDF, a spreadsheet) the bank published.
    File,
    /// Typed in by a person.
    Manual,
}

impl Method {
    pub const ALL: [Method; 4] = [Method::Api, Method::Page, Method::File, Method::Manual];

    /// The method's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Api => "api",
            Method::Page => "page",
            Method::File => "file",
            Method::Manual => "manual",
        }
    }

    /// The method named `name`, exactly as written on the wire (lower case).
    pub fn parse(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A board's source. The URL is http or https and at most
/// [`MAX_SOURCE_URL_CHARS`] characters; the capture time is not before
/// 1990; the digest is a SHA-256, kept in lower case (a digest's case says
/// nothing, and tools print either).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WireSource", into = "WireSource")]
pub struct Source {
    method: Method,
    url: Option<String>,
    captured_at: Option<DateTime<Utc>>,
    sha256: Option<String>,
}

impl Source {
    /// The source, or every rule it breaks (fields relative to the source:
    /// `url`, `capturedAt`, `sha256`).
    pub fn new(
        method: Method,
        url: Option<&str>,
        captured_at: Option<DateTime<Utc>>,
        sha256: Option<&str>,
    ) -> Result<Source, Vec<Violation>> {
        let broken = |field: &str, message: String| Violation::new(Rule::Source, field, message);
        let mut problems = Vec::new();
        if let Some(Err(message)) = url.map(check_url) {
            problems.push(broken("url", message));
        }
        if captured_at.is_some_and(|at| at < earliest_as_of()) {
            problems.push(broken(
                "capturedAt",
                format!(
                    "must not be before {}",
                    earliest_as_of().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                ),
            ));
        }
        if let Some(Err(message)) = sha256.map(check_sha256) {
            problems.push(broken("sha256", message));
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Source {
            method,
            url: url.map(str::to_owned),
            captured_at,
            sha256: sha256.map(str::to_ascii_lowercase),
        })
    }

    pub fn method(&self) -> Method {
        self.method
    }

    pub fn url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    pub fn captured_at(&self) -> Option<DateTime<Utc>> {
        self.captured_at
    }

    /// The SHA-256 of what was captured, 64 lower-case hex digits.
    pub fn sha256(&self) -> Option<&str> {
        self.sha256.as_deref()
    }

    /// The rule between a source and the board's receipt (`occurred_at`,
    /// the envelope's): captured at most [`MAX_FUTURE_SKEW`] after it.
    pub fn check_received(&self, occurred_at: DateTime<Utc>) -> Result<(), Violation> {
        match self.captured_at {
            Some(at) => check_captured(at, occurred_at),
            None => Ok(()),
        }
    }
}

/// The rule between a capture time and its board's receipt.
pub fn check_captured(
    captured_at: DateTime<Utc>,
    occurred_at: DateTime<Utc>,
) -> Result<(), Violation> {
    if captured_at > occurred_at + MAX_FUTURE_SKEW {
        return Err(Violation::new(
            Rule::Source,
            "capturedAt",
            format!(
                "must not be more than {} minutes after the board was received",
                MAX_FUTURE_SKEW.num_minutes()
            ),
        ));
    }
    Ok(())
}

/// An http(s) URL naming a host, within the length, with no whitespace or
/// control character (nothing a URL holds unescaped).
fn check_url(url: &str) -> Result<(), String> {
    if url.chars().count() > MAX_SOURCE_URL_CHARS {
        return Err(format!("must be at most {MAX_SOURCE_URL_CHARS} characters"));
    }
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    let host = rest.and_then(|rest| rest.split(['/', '?', '#']).next());
    let clean = !url.chars().any(|c| c.is_whitespace() || c.is_control());
    if host.is_some_and(|host| !host.is_empty()) && clean {
        Ok(())
    } else {
        Err("must be an http or https URL, such as https://bank.example/rates".into())
    }
}

fn check_sha256(digest: &str) -> Result<(), String> {
    if digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err("must be 64 hex digits (a SHA-256)".into())
    }
}

/// A source's parts as texts, any of them possibly missing: what a reader
/// of a request body or of the log has before it knows the source is
/// whole.
#[derive(Debug, Clone, Copy, Default)]
pub struct SourceParts<'a> {
    pub url: Option<&'a str>,
    pub method: Option<&'a str>,
    pub captured_at: Option<&'a str>,
    pub sha256: Option<&'a str>,
}

impl SourceParts<'_> {
    /// The source, or every rule it breaks (fields relative to the source).
    pub fn check(&self) -> Result<Source, Vec<Violation>> {
        self.checked(None)
    }

    /// [`SourceParts::check`], and the rule between the source and its
    /// board's receipt at `occurred_at` ([`Source::check_received`]), every
    /// problem at once.
    pub fn check_received(&self, occurred_at: DateTime<Utc>) -> Result<Source, Vec<Violation>> {
        self.checked(Some(occurred_at))
    }

    fn checked(&self, occurred_at: Option<DateTime<Utc>>) -> Result<Source, Vec<Violation>> {
        let mut problems = Vec::new();
        let method = match self.method {
            None => {
                problems.push(Violation::new(Rule::Source, "method", "is required"));
                None
            }
            Some(name) => {
                let method = Method::parse(name);
                if method.is_none() {
                    let known: Vec<&str> = Method::ALL.iter().map(|m| m.as_str()).collect();
                    problems.push(Violation::new(
                        Rule::Source,
                        "method",
                        format!("must be one of {}", known.join(", ")),
                    ));
                }
                method
            }
        };
        let captured_at = match self.captured_at.map(DateTime::parse_from_rfc3339) {
            None => Some(None),
            Some(Ok(at)) => {
                let at = at.with_timezone(&Utc);
                if let Some(Err(v)) = occurred_at.map(|received| check_captured(at, received)) {
                    problems.push(v);
                }
                Some(Some(at))
            }
            Some(Err(_)) => {
                problems.push(Violation::new(
                    Rule::Source,
                    "capturedAt",
                    "must be an RFC 3339 timestamp such as 2026-11-23T08:00:00Z",
                ));
                None
            }
        };
        let built = Source::new(
            method.unwrap_or(Method::Manual),
            self.url,
            captured_at.flatten(),
            self.sha256,
        );
        match (built, method, captured_at) {
            (Ok(source), Some(_), Some(_)) if problems.is_empty() => Ok(source),
            (built, _, _) => {
                problems.extend(built.err().unwrap_or_default());
                Err(problems)
            }
        }
    }
}

/// A source's wire shape (version 1 of a board). Fields this build does
/// not know are ignored, as everywhere on the log.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// A text, so that a malformed one is named as the source's rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

impl WireSource {
    /// The source, or every rule it breaks (fields relative to the source).
    pub fn check(&self) -> Result<Source, Vec<Violation>> {
        SourceParts {
            url: self.url.as_deref(),
            method: self.method.as_deref(),
            captured_at: self.captured_at.as_deref(),
            sha256: self.sha256.as_deref(),
        }
        .check()
    }
}

impl TryFrom<WireSource> for Source {
    type Error = Violation;
    fn try_from(wire: WireSource) -> Result<Self, Self::Error> {
        wire.check().map_err(|mut problems| problems.swap_remove(0))
    }
}

impl From<Source> for WireSource {
    fn from(source: Source) -> Self {
        WireSource {
            url: source.url,
            method: Some(source.method.as_str().to_owned()),
            captured_at: source
                .captured_at
                .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)),
            sha256: source.sha256,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts<'a>(method: &'a str) -> SourceParts<'a> {
        SourceParts {
            method: Some(method),
            ..Default::default()
        }
    }

    fn fields(problems: Vec<Violation>) -> Vec<String> {
        problems.into_iter().map(|v| v.field).collect()
    }

    #[test]
    fn a_source_needs_a_known_method_and_nothing_else() {
        for method in ["api", "page", "file", "manual"] {
            let source = parts(method).check().unwrap();
            assert_eq!(source.method().as_str(), method);
            assert_eq!(source.url(), None);
        }
        let problems = parts("API").check().unwrap_err();
        assert_eq!(problems[0].rule, Rule::Source);
        assert_eq!(
            problems[0].to_string(),
            "method must be one of api, page, file, manual"
        );
        let problems = SourceParts::default().check().unwrap_err();
        assert_eq!(problems[0].to_string(), "method is required");
    }

    #[test]
    fn a_url_is_http_or_https_naming_a_host_within_2048_characters() {
        let with_url = |url: &str| {
            SourceParts {
                url: Some(url),
                ..parts("page")
            }
            .check()
        };
        assert!(with_url("https://bank.example/rates?day=1").is_ok());
        assert!(with_url("http://bank.example").is_ok());
        for bad in [
            "ftp://bank.example/rates",
            "https://",
            "https:///rates",
            "bank.example/rates",
            "https://bank.example/a b",
            "javascript:alert(1)",
        ] {
            assert_eq!(fields(with_url(bad).unwrap_err()), ["url"], "{bad}");
        }
        let long = format!("https://bank.example/{}", "a".repeat(2048));
        let problems = with_url(&long).unwrap_err();
        assert_eq!(problems[0].message, "must be at most 2048 characters");
        let longest = format!("https://b.example/{}", "a".repeat(2048 - 18));
        assert_eq!(longest.chars().count(), 2048);
        assert!(with_url(&longest).is_ok());
    }

    #[test]
    fn a_digest_is_64_hex_digits_kept_in_lower_case() {
        let upper = "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855";
        let source = SourceParts {
            sha256: Some(upper),
            ..parts("file")
        }
        .check()
        .unwrap();
        assert_eq!(source.sha256(), Some(upper.to_ascii_lowercase().as_str()));
        for bad in [&upper[1..], "z".repeat(64).as_str(), ""] {
            let problems = SourceParts {
                sha256: Some(bad),
                ..parts("file")
            }
            .check()
            .unwrap_err();
            assert_eq!(fields(problems), ["sha256"], "{bad}");
        }
    }

    #[test]
    fn a_capture_time_is_rfc_3339_after_1990_and_not_after_receipt_plus_five_minutes() {
        let at = |text: &str| {
            SourceParts {
                captured_at: Some(text),
                ..parts("api")
            }
            .check()
        };
        assert_eq!(fields(at("yesterday").unwrap_err()), ["capturedAt"]);
        assert_eq!(
            fields(at("1989-12-31T23:59:59Z").unwrap_err()),
            ["capturedAt"]
        );
        let source = at("2026-11-23T11:05:00+03:00").unwrap();
        let received: DateTime<Utc> = "2026-11-23T08:00:00Z".parse().unwrap();
        assert!(
            source.check_received(received).is_ok(),
            "five minutes of skew"
        );
        let late = at("2026-11-23T08:05:01Z").unwrap();
        let v = late.check_received(received).unwrap_err();
        assert_eq!((v.rule, v.field.as_str()), (Rule::Source, "capturedAt"));
    }

    #[test]
    fn every_problem_of_a_source_is_named_at_once() {
        let problems = SourceParts {
            url: Some("ftp://x"),
            method: Some("scrape"),
            captured_at: Some("soon"),
            sha256: Some("abc"),
        }
        .check()
        .unwrap_err();
        let mut named = fields(problems);
        named.sort();
        assert_eq!(named, ["capturedAt", "method", "sha256", "url"]);
    }

    #[test]
    fn a_source_round_trips_in_its_wire_shape() {
        let source = SourceParts {
            url: Some("https://bank.example/rates"),
            method: Some("api"),
            captured_at: Some("2026-11-23T10:59:30.250+03:00"),
            sha256: Some(&"ab".repeat(32)),
        }
        .check()
        .unwrap();
        let json = serde_json::to_value(&source).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"url":"https://bank.example/rates","method":"api",
                "capturedAt":"2026-11-23T07:59:30.250Z","sha256":"ab".repeat(32)})
        );
        assert_eq!(serde_json::from_value::<Source>(json).unwrap(), source);
    }
}
