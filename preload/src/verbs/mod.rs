//! libibverbs' completion events and async events: the wrappers of its calls (`wrap_*`) and
//! their models, each a table of counted events per object.

pub mod async_events;
pub mod counted;
pub mod cq;
pub mod family;
pub mod getters;
pub mod say;
pub mod wrap_async;
pub mod wrap_cq;
