//! A request weir will not decide on, and why: it cannot be read one way, its body is
//! one weir does not read, or it names a host no rule names. Every door answers it the
//! same way (400, 415, 421); nothing is consumed for it.

/// A request the engine will not decide on, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    /// What kind of request it is.
    pub reason: Refusal,
    /// What to tell the client.
    pub detail: String,
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// It cannot be read one way (400).
    Unreadable,
    /// Its body is one weir does not read, on a route keyed by one of its fields (415).
    UnsupportedBody,
    /// It names a host no rule names (421).
    UnknownHost,
    /// Its client is on a deny list (403).
    Listed,
}

impl Refused {
    /// 400: the request cannot be read one way.
    pub(crate) fn bad_request(detail: impl Into<String>) -> Self {
        Self {
            reason: Refusal::Unreadable,
            detail: detail.into(),
        }
    }

    /// 415: a body weir cannot read, on a route keyed by one of its fields.
    pub(crate) fn unsupported_media_type(detail: impl Into<String>) -> Self {
        Self {
            reason: Refusal::UnsupportedBody,
            detail: detail.into(),
        }
    }

    /// The HTTP status that answers it.
    #[cfg(test)]
    pub(crate) fn status(&self) -> u16 {
        match self.reason {
            Refusal::Unreadable => 400,
            Refusal::UnsupportedBody => 415,
            Refusal::UnknownHost => 421,
            Refusal::Listed => 403,
        }
    }

    /// 403: the client is on a deny list (`scope`: the global list, or a rule's).
    pub(crate) fn listed(scope: Option<&str>) -> Self {
        Self {
            reason: Refusal::Listed,
            detail: match scope {
                None => "this client is on the deny list".to_owned(),
                Some(rule) => format!("this client is on the deny list of rule `{rule}`"),
            },
        }
    }

    /// 421: a host none of the rules name.
    pub(crate) fn misdirected(host: &str) -> Self {
        Self {
            reason: Refusal::UnknownHost,
            detail: format!(
                "no rule here names the host `{}`; send the host the API is served under",
                host.escape_debug()
            ),
        }
    }
}
