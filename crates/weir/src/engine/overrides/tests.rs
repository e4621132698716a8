//! The book's lookups on a clock the tests move.

use std::sync::Arc;
use std::time::Duration;

use weir_core::{Algorithm, ManualClock, Policy};

use super::{Backing, Kept, Override, Overrides, Stored};

fn entry(limit: u64, expires_at: Option<u64>) -> Override {
    Override {
        limit,
        period_ms: None,
        burst: None,
        expires_at,
        reason: "test".into(),
        set_at: 0,
    }
}

#[test]
fn an_override_applies_until_its_expiry_to_the_second() {
    let clock = Arc::new(ManualClock::new(1_000 * 1_000_000_000));
    let base = Policy::new(Algorithm::FixedWindow, 10, Duration::from_secs(60), None).unwrap();
    let book = Overrides::new(
        Backing::InProcess,
        Kept {
            overrides: vec![Stored {
                rule: "api".into(),
                key: "client_ip=192.0.2.1".into(),
                entry: entry(500, Some(1_060)),
            }],
            lists: Vec::new(),
        },
        clock.clone(),
    );
    let policy = book.policy("api", "client_ip=192.0.2.1", &base).unwrap();
    assert_eq!((policy.limit(), policy.period()), (500, base.period()));
    assert!(book.policy("api", "client_ip=192.0.2.2", &base).is_none());
    assert!(book.policy("other", "client_ip=192.0.2.1", &base).is_none());
    clock.advance(Duration::from_millis(59_999));
    assert!(book.policy("api", "client_ip=192.0.2.1", &base).is_some());
    clock.advance(Duration::from_millis(1));
    assert!(book.policy("api", "client_ip=192.0.2.1", &base).is_none());
    assert!(book.list(None).is_empty());
    assert_eq!(book.in_force_by_rule(), vec![("api".to_owned(), 0)]);
}

#[test]
fn an_override_the_rule_cannot_take_is_not_applied() {
    // Set for a window rule, then the rule became a sliding log by a reload.
    let clock = Arc::new(ManualClock::new(0));
    let log = Policy::new(Algorithm::SlidingLog, 10, Duration::from_secs(60), None).unwrap();
    let book = Overrides::new(
        Backing::InProcess,
        Kept {
            overrides: vec![Stored {
                rule: "api".into(),
                key: "k".into(),
                entry: entry(50_000, None),
            }],
            lists: Vec::new(),
        },
        clock,
    );
    assert!(book.policy("api", "k", &log).is_none());
}

#[tokio::test]
async fn a_file_keeps_overrides_across_restarts_and_drops_expired_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("overrides.json");
    let clock = Arc::new(ManualClock::new(100 * 1_000_000_000));
    let book = Overrides::open(Backing::File(path.clone()), clock.clone())
        .await
        .unwrap();
    book.put("api", "a", entry(5, Some(200))).await.unwrap();
    book.put("api", "b", entry(7, None)).await.unwrap();
    let replaced = book.put("api", "b", entry(8, None)).await.unwrap();
    assert_eq!(replaced.map(|o| o.limit), Some(7));
    assert_eq!(book.remove("api", "zz").await.unwrap(), None);
    let again = Overrides::open(Backing::File(path.clone()), clock.clone())
        .await
        .unwrap();
    let limits: Vec<_> = again.list(None).iter().map(|s| s.entry.limit).collect();
    assert_eq!(limits, [5, 8]);
    clock.advance(Duration::from_secs(100));
    again.remove("api", "b").await.unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("\"key\": \"a\""), "{text}");
    assert!(!text.contains("\"key\": \"b\""), "{text}");
}

/// Windows of 1,000 ns from 500: not what the rule's nominal period would cut.
#[derive(Debug)]
struct Offset;

impl weir_core::Calendar for Offset {
    fn window(&self, now: u64) -> weir_core::Window {
        let start = (now - 500) / 1_000 * 1_000 + 500;
        weir_core::Window {
            start,
            end: start + 1_000,
        }
    }
}

#[test]
fn an_override_of_a_calendar_rules_limit_keeps_its_calendar() {
    static OFFSET: Offset = Offset;
    let base = Policy::new(Algorithm::FixedWindow, 10, Duration::from_secs(60), None)
        .unwrap()
        .on_calendar(&OFFSET)
        .unwrap();
    let policy = entry(3, None).policy(&base).unwrap();
    assert_eq!(policy.limit(), 3);
    assert_eq!(policy.window(1_700).start, 1_500, "the calendar's window");
}

#[test]
fn a_list_entry_applies_until_its_expiry_to_the_second() {
    use super::{EntryKind, ListEntry, ListName, runtime_match};
    let clock = Arc::new(ManualClock::new(1_000 * 1_000_000_000));
    let entry = |kind, entry: &str, expires_at| ListEntry {
        list: ListName::Deny,
        kind,
        entry: entry.into(),
        reason: String::new(),
        expires_at,
        set_at: 1_000,
    };
    let book = Overrides::new(
        Backing::InProcess,
        Kept {
            overrides: Vec::new(),
            lists: vec![
                entry(EntryKind::ClientIp, "203.0.113.0/24", Some(1_060)),
                entry(EntryKind::ApiKey, "k-bad", None),
            ],
        },
        clock.clone(),
    );
    let denied = |ip: &str, key: &str| {
        let entries = book.entries().unwrap();
        let ip = ip.parse().unwrap();
        runtime_match(
            &entries,
            ListName::Deny,
            ip,
            || Some(key.to_owned()),
            book.now_secs(),
        )
    };
    assert!(denied("203.0.113.7", "k"));
    assert!(denied("::ffff:203.0.113.7", "k"));
    assert!(!denied("203.0.114.7", "k"));
    assert!(denied("192.0.2.1", "k-bad"));
    clock.advance(Duration::from_millis(59_999));
    assert!(denied("203.0.113.7", "k"));
    clock.advance(Duration::from_millis(1));
    assert!(!denied("203.0.113.7", "k"));
    assert_eq!(book.entry_list(None).len(), 1);
    assert!(
        book.entries()
            .is_some_and(|e| !e.names_any(ListName::Allow))
    );
}

#[test]
fn a_file_with_a_block_not_written_canonically_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("overrides.json");
    let file = |entry: &str| {
        format!(
            r#"{{"overrides": [], "lists": [{{"list": "deny", "kind": "client_ip", "entry": "{entry}", "reason": "", "expires_at": null, "set_at": 0}}]}}"#
        )
    };
    std::fs::write(&path, file("203.0.113.0/24")).unwrap();
    assert_eq!(super::read_file(&path).unwrap().lists.len(), 1);
    for bad in ["203.0.113.7/24", "::ffff:203.0.113.0/120", "nope"] {
        std::fs::write(&path, file(bad)).unwrap();
        let error = super::read_file(&path).unwrap_err();
        assert!(error.contains("lists[0]"), "{error}");
    }
}
