//! envoyproxy/ratelimit's `/json` endpoint on the HTTP port: `POST /json` with a
//! `RateLimitRequest` in the proto3 JSON mapping (`{"domain": "d", "descriptors":
//! [{"entries": [{"key": "k", "value": "v"}]}]}`; field names in lowerCamelCase or as
//! in the proto), answered with the `RateLimitResponse` in that mapping (enum names as
//! strings, default values left out, durations as `"1.5s"`): 200 when OK, 429 when
//! over the limit. A request that cannot be read or that the service refuses is a
//! 400, as there; a store that cannot decide a 503.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::google::protobuf::UInt64Value;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::RateLimitDoor;

/// `POST /json`, answered by `door`.
pub(crate) fn json_router(door: RateLimitDoor) -> Router {
    Router::new().route("/json", post(answer)).with_state(door)
}

async fn answer(State(door): State<RateLimitDoor>, body: Bytes) -> Response {
    let request = match serde_json::from_slice::<JsonRequest>(&body) {
        Ok(request) => request.into_proto(),
        Err(error) => return refused(StatusCode::BAD_REQUEST, &error.to_string()),
    };
    let request = match request {
        Ok(request) => request,
        Err(message) => return refused(StatusCode::BAD_REQUEST, &message),
    };
    let response = match door.decide(&request).await {
        Ok(response) => response,
        Err(status) if status.code() == tonic::Code::Unavailable => {
            return refused(StatusCode::SERVICE_UNAVAILABLE, status.message());
        }
        Err(status) => return refused(StatusCode::BAD_REQUEST, status.message()),
    };
    let over = response.overall_code == Code::OverLimit as i32;
    let mut out = Map::new();
    out.insert(
        "overallCode".into(),
        code_name(response.overall_code).into(),
    );
    let statuses: Vec<Value> = response
        .statuses
        .iter()
        .map(|status| {
            let mut s = Map::new();
            s.insert("code".into(), code_name(status.code).into());
            if let Some(limit) = &status.current_limit {
                let mut l = Map::new();
                if !limit.name.is_empty() {
                    l.insert("name".into(), limit.name.clone().into());
                }
                if limit.requests_per_unit != 0 {
                    l.insert("requestsPerUnit".into(), limit.requests_per_unit.into());
                }
                let unit = Unit::try_from(limit.unit).unwrap_or(Unit::Unknown);
                if unit != Unit::Unknown {
                    l.insert("unit".into(), unit.as_str_name().into());
                }
                s.insert("currentLimit".into(), Value::Object(l));
            }
            if status.limit_remaining != 0 {
                s.insert("limitRemaining".into(), status.limit_remaining.into());
            }
            if let Some(d) = &status.duration_until_reset {
                s.insert(
                    "durationUntilReset".into(),
                    duration(d.seconds, d.nanos).into(),
                );
            }
            Value::Object(s)
        })
        .collect();
    if !statuses.is_empty() {
        out.insert("statuses".into(), Value::Array(statuses));
    }
    if !response.response_headers_to_add.is_empty() {
        let headers: Vec<Value> = response
            .response_headers_to_add
            .iter()
            .map(|h| json!({"key": h.key, "value": h.value}))
            .collect();
        out.insert("responseHeadersToAdd".into(), Value::Array(headers));
    }
    let status = if over {
        StatusCode::TOO_MANY_REQUESTS
    } else {
        StatusCode::OK
    };
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        Value::Object(out).to_string(),
    )
        .into_response()
}

fn refused(status: StatusCode, message: &str) -> Response {
    (status, format!("{message}\n")).into_response()
}

fn code_name(code: i32) -> &'static str {
    Code::try_from(code).unwrap_or(Code::Unknown).as_str_name()
}

/// A duration as the proto3 JSON mapping writes it: seconds, and 3, 6 or 9 digits of
/// fraction when there is one.
fn duration(seconds: i64, nanos: i32) -> String {
    if nanos == 0 {
        return format!("{seconds}s");
    }
    let fraction = if nanos % 1_000_000 == 0 {
        format!("{:03}", nanos / 1_000_000)
    } else if nanos % 1_000 == 0 {
        format!("{:06}", nanos / 1_000)
    } else {
        format!("{nanos:09}")
    };
    format!("{seconds}.{fraction}s")
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRequest {
    #[serde(default)]
    domain: String,
    #[serde(default)]
    descriptors: Vec<JsonDescriptor>,
    #[serde(default, rename = "hitsAddend", alias = "hits_addend")]
    hits_addend: Option<Number>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonDescriptor {
    #[serde(default)]
    entries: Vec<JsonEntry>,
    limit: Option<JsonLimit>,
    #[serde(rename = "hitsAddend", alias = "hits_addend")]
    hits_addend: Option<Number>,
    #[serde(default, rename = "isNegativeHits", alias = "is_negative_hits")]
    is_negative_hits: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonEntry {
    #[serde(default)]
    key: String,
    #[serde(default)]
    value: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonLimit {
    #[serde(default, rename = "requestsPerUnit", alias = "requests_per_unit")]
    requests_per_unit: Option<Number>,
    #[serde(default)]
    unit: Option<UnitName>,
}

/// An integer as proto3 JSON writes one: a number, or (64-bit) a string of digits.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Number {
    Number(u64),
    Text(String),
}

impl Number {
    fn value(&self) -> Result<u64, String> {
        match self {
            Number::Number(n) => Ok(*n),
            Number::Text(text) => text
                .parse()
                .map_err(|_| format!("`{text}` is not a whole number")),
        }
    }

    fn value_u32(&self) -> Result<u32, String> {
        u32::try_from(self.value()?).map_err(|_| "a number past 2^32 - 1".to_owned())
    }
}

/// An enum as proto3 JSON writes one: its name, or its number.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum UnitName {
    Number(i32),
    Name(String),
}

impl JsonRequest {
    fn into_proto(self) -> Result<RateLimitRequest, String> {
        let descriptors = self
            .descriptors
            .into_iter()
            .map(|d| {
                let limit = match d.limit {
                    Some(limit) => Some(RateLimitOverride {
                        requests_per_unit: limit
                            .requests_per_unit
                            .as_ref()
                            .map_or(Ok(0), Number::value_u32)?,
                        unit: match limit.unit {
                            None => 0,
                            Some(UnitName::Number(n)) => n,
                            Some(UnitName::Name(name)) => Unit::from_str_name(&name)
                                .ok_or_else(|| format!("unknown unit `{name}`"))?
                                as i32,
                        },
                    }),
                    None => None,
                };
                let hits_addend = match &d.hits_addend {
                    Some(hits) => Some(UInt64Value {
                        value: hits.value()?,
                    }),
                    None => None,
                };
                Ok(RateLimitDescriptor {
                    entries: d
                        .entries
                        .into_iter()
                        .map(|e| Entry {
                            key: e.key,
                            value: e.value,
                        })
                        .collect(),
                    limit,
                    hits_addend,
                    is_negative_hits: d.is_negative_hits,
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(RateLimitRequest {
            domain: self.domain,
            descriptors,
            hits_addend: self.hits_addend.as_ref().map_or(Ok(0), Number::value_u32)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::duration;

    #[test]
    fn durations_as_proto3_json_writes_them() {
        assert_eq!(duration(3590, 0), "3590s");
        assert_eq!(duration(1, 500_000_000), "1.500s");
        assert_eq!(duration(0, 1_000), "0.000001s");
        assert_eq!(duration(0, 1), "0.000000001s");
    }
}
