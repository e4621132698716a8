//! The pieces of the OpenAPI document every door shares: the answers that carry a
//! problem (`application/problem+json`) and the rate limit header fields. Each door
//! describes its own operations beside its handlers (`#[utoipa::path]`, naming these
//! answers with `response = ...`); the server puts the documents together.

use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response, ResponseBuilder};

/// An answer carrying a problem body, `description` saying when it is sent.
fn problem(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/problem+json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Problem")))
                .build(),
        )
        .build()
}

/// Declares a reusable problem answer: a unit type naming it in `#[utoipa::path]`.
macro_rules! problem_answers {
    ($($name:ident: $description:literal;)*) => {
        $(
            #[doc = $description]
            pub(crate) struct $name;

            impl<'s> utoipa::ToResponse<'s> for $name {
                fn response() -> (&'s str, RefOr<Response>) {
                    (stringify!($name), problem($description).into())
                }
            }
        )*

        /// Every problem answer, for the document's `components`.
        pub(crate) fn problem_answers() -> Vec<(String, RefOr<Response>)> {
            vec![$((stringify!($name).to_owned(), problem($description).into()),)*]
        }
    };
}

problem_answers! {
    InvalidRequest: "The request is malformed, or weir cannot read it one way (400); `detail` says what is wrong.";
    BodyTooLarge: "The body is larger than this endpoint reads (413).";
    BodyTimeout: "The body did not arrive within 10 s of the request's head (408).";
    UnknownRule: "No rule has the name asked for (404).";
    UnknownOverride: "No rule has the name asked for (`unknown-rule`), or the key has no override in force (`unknown-override`) (404).";
    UnknownListEntry: "No list entry set at runtime matches (`unknown-list-entry`) (404).";
    ListEntryConfigured: "The entry is in the configuration's lists, not set at runtime: remove it there (`configured-list-entry`) (409).";
    StoreUnavailable: "The rate limit store cannot decide right now and the rule's failure policy refuses (503); try again shortly.";
    Unauthorized: "The admin API needs `Authorization: Bearer <token>` with the configured admin token (401).";
    RateLimited: "Too many requests (429): `violated` names the rules that denied it; `Retry-After`, `Retry-After-Ms` and the RateLimit fields say when to come back.";
}
