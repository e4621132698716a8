//! A configuration built in code rather than read from a file: for weir inside a
//! service ([`WeirLayer`](crate::WeirLayer)), where the rules live with the code.
//!
//! Each limit is a [`Policy`], which exists only if it is valid (a limit of 0, a burst
//! out of range or a period of no length cannot be built), and the rest is checked by
//! the same validation a file goes through (names, paths, identities), so a built
//! configuration is one `weir check-config` would accept.

use std::path::Path;

use serde_json::{Map, Value, json};
use weir_core::Policy;

use super::{CalendarPeriod, Config, ConfigError};

/// What errors name as the configuration's source.
const SOURCE: &str = "<built in code>";

/// A configuration built in code: rules on a store (this process's memory unless
/// [`ConfigBuilder::redis`]), and the identities their keys use.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// use axum::{Router, routing::get};
/// use tower::{Layer, ServiceExt};
/// use weir::{ConfigBuilder, Engine, Reloadable, RuleBuilder, WeirLayer};
/// use weir_core::{Algorithm, ManualClock, Policy};
/// use weir_store::{MemoryStore, MemoryStoreConfig};
///
/// // One request a minute per API key on /books; a limit that cannot be enforced
/// // (0 a minute, say) is an error here, before anything is built.
/// let per_minute = Policy::new(Algorithm::Gcra, 1, Duration::from_secs(60), None)?;
/// let config = ConfigBuilder::new()
///     .identity_from_header("api_key", "x-api-key")
///     .rule(RuleBuilder::new("books", per_minute).path_prefix("/books").key(["api_key"]))
///     .build()?;
///
/// let clock = Arc::new(ManualClock::new(0));
/// let store = Arc::new(MemoryStore::new(MemoryStoreConfig::default(), clock.clone()));
/// let engine = Reloadable::new(Engine::new(&config.engine, store, clock));
/// let app = WeirLayer::new(&config, engine)
///     .layer(Router::new().route("/books", get(|| async { "a book" })));
///
/// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
/// let statuses = runtime.block_on(async {
///     let mut statuses = Vec::new();
///     for _ in 0..2 {
///         let request = axum::http::Request::get("/books")
///             .header("host", "api.example")
///             .header("x-api-key", "k-1")
///             .extension(axum::extract::ConnectInfo(std::net::SocketAddr::from(([192, 0, 2, 1], 5000))))
///             .body(axum::body::Body::empty())?;
///         statuses.push(app.clone().oneshot(request).await?.status().as_u16());
///     }
///     Ok::<_, Box<dyn std::error::Error>>(statuses)
/// })?;
/// assert_eq!(statuses, [200, 429]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct ConfigBuilder {
    redis: Option<String>,
    identities: Map<String, Value>,
    /// An identity named twice (refused by `build`, as a file's would be).
    twice: Option<String>,
    rules: Vec<RuleBuilder>,
}

impl ConfigBuilder {
    /// No rules yet, on this process's memory.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps the limits' state in the Redis at `url` (`redis://host:port`), shared by
    /// every instance pointed at it.
    #[must_use]
    pub fn redis(mut self, url: impl Into<String>) -> Self {
        self.redis = Some(url.into());
        self
    }

    /// Names a way to identify callers: the value of request header `header`. A rule's
    /// [`RuleBuilder::key`] lists such names (`client_ip` is built in).
    #[must_use]
    pub fn identity_from_header(mut self, name: impl Into<String>, header: &str) -> Self {
        let name = name.into();
        if self.identities.contains_key(&name) {
            self.twice.get_or_insert(name.clone());
        }
        self.identities.insert(name, json!({ "header": header }));
        self
    }

    /// Adds a rule (rules apply in the order added).
    #[must_use]
    pub fn rule(mut self, rule: RuleBuilder) -> Self {
        self.rules.push(rule);
        self
    }

    /// The configuration, validated as a file would be; the error names the rule and
    /// field at fault.
    pub fn build(self) -> Result<Config, ConfigError> {
        let source = Path::new(SOURCE);
        if let Some(name) = self.twice {
            let message = format!("identity `{name}` is named twice: give each identity once");
            return Err(ConfigError::new(source, message).field(format!("identities.{name}")));
        }
        let mut root = Map::new();
        if let Some(url) = self.redis {
            root.insert("store".into(), json!({ "type": "redis", "url": url }));
        }
        if !self.identities.is_empty() {
            root.insert("identities".into(), Value::Object(self.identities));
        }
        let rules = self
            .rules
            .iter()
            .enumerate()
            .map(|(i, rule)| {
                rule.to_json().map_err(|(field, message)| {
                    ConfigError::new(source, message).field(format!("rules[{i}].{field}"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        root.insert("rules".into(), Value::Array(rules));
        // JSON is YAML: the text is read by the file's own reader and validation.
        Config::parse(&Value::Object(root).to_string(), source)
    }
}

/// What a built rule admits.
#[derive(Debug, Clone)]
enum Limit {
    /// A policy, valid by construction.
    Policy(Policy),
    /// A fixed window's limit per window of a calendar (checked when built).
    Calendar(u64, CalendarPeriod),
}

/// One rule built in code: a name, a [`Policy`] (valid by construction) or a calendar
/// quota ([`RuleBuilder::per_calendar`]), the requests
/// it applies to (every request unless narrowed), and whose requests it counts
/// together (the client's address unless [`RuleBuilder::key`] says otherwise).
#[derive(Debug, Clone)]
pub struct RuleBuilder {
    name: String,
    limit: Limit,
    route: Map<String, Value>,
    key: Option<Vec<String>>,
    cost: Option<u64>,
    fail_closed: bool,
    shadow: bool,
}

impl RuleBuilder {
    /// A rule named `name` (1 to 64 of `A-Z a-z 0-9 _ . -`) enforcing `policy`.
    pub fn new(name: impl Into<String>, policy: Policy) -> Self {
        Self::with(name.into(), Limit::Policy(policy))
    }

    /// A rule named `name` admitting `limit` per window of the calendar `period` (a
    /// fixed window whose windows are the calendar's days, weeks, months or years in
    /// a time zone, as the guide's "Calendar quotas" describes). Its time zone
    /// and start are checked by [`ConfigBuilder::build`] as a file's are.
    ///
    /// ```
    /// use weir::{CalendarPeriod, ConfigBuilder, RuleBuilder};
    ///
    /// // 10 000 a month per API key, months starting on the 1st at 00:00 in Berlin.
    /// let monthly = CalendarPeriod::month().time_zone("Europe/Berlin");
    /// let config = ConfigBuilder::new()
    ///     .identity_from_header("api_key", "x-api-key")
    ///     .rule(RuleBuilder::per_calendar("monthly", 10_000, monthly).key(["api_key"]))
    ///     .build()?;
    /// assert_eq!(config.engine.rules[0].policy.limit(), 10_000);
    ///
    /// // What a file could not say is an error naming the field, never a panic.
    /// let nowhere = CalendarPeriod::week().time_zone("Europe/Berln");
    /// let error = ConfigBuilder::new()
    ///     .rule(RuleBuilder::per_calendar("weekly", 100, nowhere))
    ///     .build()
    ///     .unwrap_err();
    /// assert!(error.to_string().contains("rules[0].time_zone: unknown time zone"));
    /// # Ok::<(), weir::ConfigError>(())
    /// ```
    pub fn per_calendar(name: impl Into<String>, limit: u64, period: CalendarPeriod) -> Self {
        Self::with(name.into(), Limit::Calendar(limit, period))
    }

    fn with(name: String, limit: Limit) -> Self {
        Self {
            name,
            limit,
            route: Map::new(),
            key: None,
            cost: None,
            fail_closed: false,
            shadow: false,
        }
    }

    /// Applies to paths starting with `prefix`, as a rule's `path_prefix` does (a
    /// prefix of the text: `/books` matches `/bookshelf` too; end it with `/` for a
    /// directory).
    #[must_use]
    pub fn path_prefix(mut self, prefix: &str) -> Self {
        self.route.insert("path_prefix".into(), json!(prefix));
        self
    }

    /// Applies to the path `path` only.
    #[must_use]
    pub fn path(mut self, path: &str) -> Self {
        self.route.insert("path".into(), json!(path));
        self
    }

    /// Applies to these methods only (`GET`, `POST`...).
    #[must_use]
    pub fn methods<'a>(mut self, methods: impl IntoIterator<Item = &'a str>) -> Self {
        let methods: Vec<&str> = methods.into_iter().collect();
        self.route.insert("methods".into(), json!(methods));
        self
    }

    /// Applies to requests for this host only.
    #[must_use]
    pub fn host(mut self, host: &str) -> Self {
        self.route.insert("host".into(), json!(host));
        self
    }

    /// Counts requests together by these identities (names given to
    /// [`ConfigBuilder::identity_from_header`], or `client_ip`).
    #[must_use]
    pub fn key<'a>(mut self, identities: impl IntoIterator<Item = &'a str>) -> Self {
        self.key = Some(identities.into_iter().map(str::to_owned).collect());
        self
    }

    /// What each request costs (1 unless set).
    #[must_use]
    pub fn cost(mut self, cost: u64) -> Self {
        self.cost = Some(cost);
        self
    }

    /// When the store cannot decide, answers 503 rather than deciding on this
    /// instance's share of the limit.
    #[must_use]
    pub fn fail_closed(mut self) -> Self {
        self.fail_closed = true;
        self
    }

    /// Counts and reports, never denies.
    #[must_use]
    pub fn shadow(mut self) -> Self {
        self.shadow = true;
        self
    }

    /// The rule as the configuration file writes it; else the field at fault and why.
    fn to_json(&self) -> Result<Value, (&'static str, String)> {
        let mut rule = Map::new();
        rule.insert("name".into(), json!(self.name));
        match &self.limit {
            Limit::Policy(policy) => {
                let period = policy.period();
                if !period.subsec_nanos().is_multiple_of(1_000_000) {
                    let message = format!(
                        "a period built in code is a whole number of milliseconds, got {period:?}"
                    );
                    return Err(("period", message));
                }
                rule.insert("algorithm".into(), json!(policy.algorithm().name()));
                rule.insert("limit".into(), json!(policy.limit()));
                rule.insert("period".into(), json!(format!("{}ms", period.as_millis())));
                if let Some(burst) = policy.burst() {
                    rule.insert("burst".into(), json!(burst));
                }
            }
            Limit::Calendar(limit, period) => {
                rule.insert("algorithm".into(), json!("fixed_window"));
                rule.insert("limit".into(), json!(limit));
                period.write(&mut rule);
            }
        }
        rule.insert("match".into(), Value::Object(self.route.clone()));
        if let Some(key) = &self.key {
            rule.insert("key".into(), json!(key));
        }
        if let Some(cost) = self.cost {
            rule.insert("cost".into(), json!(cost));
        }
        if self.fail_closed {
            rule.insert("failure".into(), json!("closed"));
        }
        if self.shadow {
            rule.insert("shadow".into(), json!(true));
        }
        Ok(Value::Object(rule))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use weir_core::Algorithm;

    use super::*;

    fn per_minute(limit: u64) -> Policy {
        Policy::new(
            Algorithm::TokenBucket,
            limit,
            Duration::from_secs(60),
            Some(5),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_built_rule_is_the_rule_a_file_would_give() {
        let built = ConfigBuilder::new()
            .identity_from_header("user", "x-user")
            .rule(
                RuleBuilder::new("api", per_minute(100))
                    .path_prefix("/api")
                    .methods(["GET", "POST"])
                    .key(["user"])
                    .cost(2)
                    .fail_closed(),
            )
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let yaml = "identities:\n  user: { header: x-user }\nrules:\n  - name: api\n    algorithm: token_bucket\n    limit: 100\n    period: 1m\n    burst: 5\n    match: { path_prefix: /api, methods: [GET, POST] }\n    key: [user]\n    cost: 2\n    failure: closed\n";
        let read = Config::parse(yaml, Path::new("weir.yaml")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(built.engine.rules, read.engine.rules);
        assert_eq!(
            format!("{:?}", built.engine.routing.rules),
            format!("{:?}", read.engine.routing.rules)
        );
    }

    #[test]
    fn a_built_calendar_rule_is_the_rule_a_file_would_give() {
        let period = CalendarPeriod::year()
            .time_zone("Europe/London")
            .starts_in(4)
            .starts_on(6)
            .starts_at("06:30");
        let built = ConfigBuilder::new()
            .rule(RuleBuilder::per_calendar("tax", 7, period).path("/file"))
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let yaml = "rules:\n  - name: tax\n    algorithm: fixed_window\n    limit: 7\n    period: calendar_year\n    time_zone: Europe/London\n    starts: { month: 4, day: 6, at: \"06:30\" }\n    match: { path: /file }\n";
        let read = Config::parse(yaml, Path::new("weir.yaml")).unwrap_or_else(|e| panic!("{e}"));
        // The same calendar object: a calendar is one per distinct configuration.
        assert_eq!(built.engine.rules, read.engine.rules);
        assert!(built.engine.rules[0].policy.calendar().is_some());
    }

    #[test]
    fn what_a_policy_cannot_say_is_refused_with_the_field() {
        let bad_name = ConfigBuilder::new()
            .rule(RuleBuilder::new("no spaces", per_minute(1)))
            .build();
        let message = bad_name.map(|_| ()).unwrap_err().to_string();
        assert!(message.contains("rules[0].name"), "{message}");
        let unknown_identity = ConfigBuilder::new()
            .rule(RuleBuilder::new("api", per_minute(1)).key(["user"]))
            .build();
        let message = unknown_identity.map(|_| ()).unwrap_err().to_string();
        assert!(message.contains("rules[0].key"), "{message}");
        let odd = Policy::new(Algorithm::Gcra, 1, Duration::from_micros(1_500), None)
            .unwrap_or_else(|e| panic!("{e}"));
        let message = ConfigBuilder::new()
            .rule(RuleBuilder::new("odd", odd))
            .build()
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("whole number of milliseconds"),
            "{message}"
        );
    }
}
