//! /api/v1/currencies: what active banks quote, most quoted first.

use ratewire_proto::CurrencyCode;

use super::{CurrencyJson, Envelope, ViewStyle};

/// `counts` pairs each currency with how many active banks quote it now;
/// the order is most banks first, then code (decisions.md).
pub fn currencies_response(counts: &[(CurrencyCode, i64)], style: &ViewStyle) -> String {
    let mut sorted: Vec<_> = counts.iter().filter(|(_, banks)| *banks > 0).collect();
    sorted.sort_by(|(a, na), (b, nb)| nb.cmp(na).then(a.cmp(b)));
    let data: Vec<_> = sorted
        .into_iter()
        .map(|(code, _)| CurrencyJson { code: *code, style })
        .collect();
    serde_json::to_string(&Envelope {
        message: "success",
        status: 200,
        data,
    })
    .expect("views serialize to JSON")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn currencies_are_ordered_by_bank_count_then_code() {
        let code = |c| CurrencyCode::parse(c).unwrap();
        let style = ViewStyle {
            currency_image_base: "https://i.test".into(),
            outliers: crate::quality::OutlierRule::default(),
        };
        let body = currencies_response(
            &[
                (code("EUR"), 2),
                (code("USD"), 3),
                (code("AED"), 2),
                (code("JPY"), 0),
            ],
            &style,
        );
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(json["message"], "success");
        let symbols: Vec<_> = json["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["symbol"].as_str().unwrap())
            .collect();
        assert_eq!(symbols, ["USD", "AED", "EUR"]);
    }
}
