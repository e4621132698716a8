//! What a new user tries weir with, from the binary alone: the example configurations
//! (`weir example`) and an app to put behind the gateway (`weir demo-upstream`).

mod examples;
mod upstream;

pub use self::examples::{EXAMPLES, Example, write_example};
pub use self::upstream::{PASSWORD, router};
