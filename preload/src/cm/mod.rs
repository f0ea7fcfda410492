//! librdmacm's connection manager: the wrappers of its calls (`wrap_*`) and their model, the
//! events the program holds and the lifecycles of its ids and channels.

pub mod judge;
pub mod objects;
pub mod readers;
pub mod record;
pub mod refuse;
pub mod track;
pub mod unacked;
pub mod watch;
pub mod wrap_events;
pub mod wrap_ids;
