//! What a request that went on is owed once the app answers: the RateLimit fields of
//! its quotas, its settlement (rules counted by outcome, costs known at the end), and
//! its shedding ticket.

use std::time::Instant;

use axum::http::HeaderMap;
use axum::response::Response;

use super::holding;
use super::shed::Admitted;
use crate::edge;
use crate::engine::{Allowed, Engine, HeldSlots, Settlement};

/// What is owed to a request that went on, paid by [`Unsettled::finish`]. Dropped
/// unpaid (the client went away before the app answered), its settlement keeps the
/// reservation and its shedding ticket ends as cancelled.
#[derive(Debug)]
pub(crate) struct Unsettled<'s> {
    engine: &'s Engine,
    /// The verdict, when a rule applied.
    allowed: Option<Allowed<'s>>,
    /// The shedding ticket, when the door sheds, and when the request went on (read
    /// only then: the clock is not read for every request).
    admitted: Option<(Admitted<'s>, Instant)>,
}

impl<'s> Unsettled<'s> {
    pub(super) fn new(
        engine: &'s Engine,
        allowed: Option<Allowed<'s>>,
        admitted: Option<Admitted<'s>>,
    ) -> Self {
        Self {
            engine,
            allowed,
            admitted: admitted.map(|admitted| (admitted, Instant::now())),
        }
    }

    /// For a door that answers for the app without calling it (forward auth): adds
    /// the RateLimit fields and the shadow rules that would have denied the request to
    /// `headers`, and hands over the settlement unsettled (for the app to settle:
    /// the door's own answer says nothing of the app's).
    pub(crate) fn hand_over(self, headers: &mut HeaderMap) -> Option<Settlement> {
        let allowed = self.allowed?;
        edge::add_allowed_headers(headers, &allowed, self.engine.legacy_headers());
        allowed.settlement
    }

    /// Takes the request's slots of requests in flight out, for a door that holds
    /// them longer than the answer (an upgraded connection, until it closes).
    pub(crate) fn take_slots(&mut self) -> Option<HeldSlots> {
        self.allowed
            .as_mut()?
            .settlement
            .as_mut()
            .and_then(Settlement::take_slots)
    }

    /// The answer to send, from the app's answer (`Ok`), or weir's own when the app
    /// gave none (`Err`: a 502 or 504, which keeps every reservation: the attempt
    /// counts). Adds the RateLimit fields and the shadow rules that would have denied
    /// it, and settles with the app's status (at the body's end for costs stated
    /// there).
    pub(crate) async fn finish(self, answer: Result<Response, Response>) -> Response {
        if let Some(admitted) = self.admitted {
            let status = match &answer {
                Ok(response) | Err(response) => response.status().as_u16(),
            };
            let (admitted, started) = admitted;
            admitted.finish(started.elapsed(), status, self.engine.metrics());
        }
        let (mut response, answered) = match answer {
            Ok(response) => (response, true),
            Err(own) => (own, false),
        };
        let Some(allowed) = self.allowed else {
            return response;
        };
        let legacy = self.engine.legacy_headers();
        edge::add_allowed_headers(response.headers_mut(), &allowed, legacy);
        let mut settlement = allowed.settlement;
        // The slots of requests in flight are held until the answer has been sent.
        let slots = settlement.as_mut().and_then(Settlement::take_slots);
        let response = match settlement {
            Some(settlement) if answered => edge::settle(settlement, response).await,
            _ => response,
        };
        match slots {
            Some(slots) => holding::until_sent(response, slots),
            None => response,
        }
    }
}
